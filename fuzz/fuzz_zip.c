/* tc_zip_open on a memory source, then every record read whole and streamed
 * with its CRC checked; names found as torch's reader finds them. */
#include <string.h>

#include "zip.h"
#include "fuzz_common.h"

/* a and b equal ignoring ASCII letter case */
static bool same_name(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return false;
    for (size_t i = 0; i < an; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != (y >= 'A' && y <= 'Z' ? y + 32 : y))
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tc_src src;
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10000};
    tc_src_init_mem(&src, data, size, "fuzz.zip");
    if (tc_zip_open(&z, &src, &lim, &d)) {
        FZ_CHECK(d.code && d.msg[0], "a failure says why");
        FZ_CHECK(z.n == 0 && z.e == NULL, "a failed open leaves nothing to free");
        return 0;
    }
    static uint8_t buf[4096];
    size_t ca, cb;
    int confusable = tc_zip_confusable(&z, &ca, &cb);
    FZ_CHECK(confusable >= 0, "out of memory");
    if (confusable)
        FZ_CHECK(ca < cb && cb < z.n, "a confusable pair names two entries");
    for (size_t i = 0; i < z.n; i++) {
        const tc_zip_entry *e = &z.e[i];
        if (!tc_zip_unreadable(e))
            FZ_CHECK(e->data_off <= size && e->csize <= size - e->data_off, "entry %zu inside the file", i);
        const tc_zip_entry *f = tc_zip_find(&z, e->name);
        if (strlen(e->name) == e->nlen)
            FZ_CHECK(f && same_name(f->name, f->nlen, e->name, e->nlen), "entry %zu is found by its name", i);
        if (!confusable)
            FZ_CHECK(strlen(e->name) != e->nlen || f == e, "entry %zu is the one found by its name", i);
        tc_diag d1 = {0};
        uint8_t *all = NULL;
        size_t len = 0;
        int rc1 = tc_zip_read_all(&z, e, 1u << 20, true, &all, &len, &d1);
        if (!rc1)
            FZ_CHECK(len == e->usize, "read_all gave %zu of %llu", len, (unsigned long long)e->usize);
        tc_zip_rd r;
        tc_diag d2 = {0};
        uint64_t total = 0;
        int rc2 = tc_zip_rd_open(&r, &z, e, &d2);
        while (!rc2 && total < (8u << 20)) {
            size_t got = 0;
            rc2 = tc_zip_rd_read(&r, buf, sizeof buf, &got, true, &d2);
            if (rc2 || !got)
                break;
            if (!rc1)
                FZ_CHECK(!memcmp(buf, all + total, got), "streamed and whole reads agree");
            total += got;
        }
        tc_zip_rd_close(&r);
        if (!rc1)
            FZ_CHECK(!rc2 && total == len, "streaming fails where a whole read succeeded: %s", d2.msg);
        free(all);
    }
    /* torch's layer: its archive folder and version, its record list, each record found again */
    tc_zip_torch t;
    tc_diag d3 = {0};
    if (!tc_zip_torch_init(&t, &z, 1u << 20, &d3)) {
        FZ_CHECK(t.version >= 1 && t.version <= 10 && t.readers, "version %llu read", (unsigned long long)t.version);
        if (!tc_zip_torch_records(&t, &z, &d3))
            for (size_t i = 0; i < z.n; i++) {
                char name[512];
                tc_zip_listed_name(&z.e[i], name);
                FZ_CHECK(strlen(name) > t.alen && name[t.alen] == '/', "a listed record is inside the folder");
                const tc_zip_entry *f = tc_zip_torch_find(&t, &z, name + t.alen + 1);
                if (strlen(z.e[i].name) == z.e[i].nlen && z.e[i].nlen < 512)
                    FZ_CHECK(f && same_name(f->name, f->nlen, z.e[i].name, z.e[i].nlen), "record %zu found", i);
            }
        else
            FZ_CHECK(d3.msg[0], "a refused record list says why");
        tc_zip_torch_free(&t);
    } else {
        FZ_CHECK(d3.code && d3.msg[0], "a refused archive says why");
    }
    tc_zip_free(&z);
    tc_zip_free(&z);
    return 0;
}
