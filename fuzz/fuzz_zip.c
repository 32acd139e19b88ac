/* tc_zip_open on a memory source, then every record read whole and streamed
 * with its CRC checked. */
#include <string.h>

#include "zip.h"
#include "fuzz_common.h"

/* an absolute name, or one with a ".." component */
static bool escapes(const char *name)
{
    if (name[0] == '/' || name[0] == '\\')
        return true;
    for (const char *p = name; *p;) {
        size_t k = strcspn(p, "/\\");
        if (k == 2 && p[0] == '.' && p[1] == '.')
            return true;
        p += k + (p[k] != 0);
    }
    return false;
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
    for (size_t i = 0; i < z.n; i++) {
        const tc_zip_entry *e = &z.e[i];
        FZ_CHECK(e->data_off <= size && e->csize <= size - e->data_off, "entry %zu inside the file", i);
        FZ_CHECK(!escapes(e->name), "name '%s' escapes", e->name);
        FZ_CHECK(tc_zip_find(&z, e->name) == e, "names are unique");
        tc_diag d1 = {0};
        uint8_t *all = NULL;
        size_t len = 0;
        int rc1 = tc_zip_read_all(&z, e, 1u << 20, &all, &len, &d1);
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
    tc_zip_free(&z);
    tc_zip_free(&z);
    return 0;
}
