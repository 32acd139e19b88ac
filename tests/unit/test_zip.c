/* Zip writer (torch's layout) and reader (bounds, names, overlaps, CRCs,
 * deflate), on archives made by tc_zipw and by CPython's zipfile. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "buf.h"
#include "zip.h"
#include "xfer.h"
#include "unit_util.h"

static uint32_t rd32(const uint8_t *p) { return tc_le32(p); }
static uint16_t rd16(const uint8_t *p) { return tc_le16(p); }

/* ---- making archives with tc_zipw ---------------------------------------------- */

typedef struct rec {
    char name[128];
    size_t size;
    uint32_t seed;
} rec;

static uint8_t *content(const rec *r)
{
    uint8_t *p = malloc(r->size ? r->size : 1);
    xorshift_bytes(p, r->size, r->seed);
    return p;
}

static uint8_t *fd_bytes(int fd, size_t *n)
{
    off_t end = lseek(fd, 0, SEEK_END);
    cr_assert_geq(end, 0);
    uint8_t *p = malloc((size_t)end + 1);
    cr_assert_eq(pread(fd, p, (size_t)end, 0), end);
    *n = (size_t)end;
    return p;
}

/* Where a record's data goes: at phase modulo mod (tc_zipw_begin_at); mod 0:
 * torch's 64-byte alignment (tc_zipw_begin). */
typedef struct phased {
    uint32_t mod, phase;
} phased;

static const phased *phase_of(const phased *ph, size_t i)
{
    static const phased torch = {64, 0};
    return ph && ph[i].mod ? &ph[i] : &torch;
}

/* Write recs with tc_zipw under folder `archive`, record i at phase ph[i] (ph
 * may be NULL); chunk > 0 feeds the data in pieces of that size. Returns the
 * file's bytes. */
static uint8_t *make_zip_at(const char *archive, const rec *recs, const phased *ph, size_t nrec, size_t chunk,
                            size_t *n)
{
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fileno(f));
    cr_assert_eq(tc_zipw_init(&w, &wd_, archive, &d), 0, "%s", d.msg);
    for (size_t i = 0; i < nrec; i++) {
        uint8_t *c = content(&recs[i]);
        if (!chunk && !(ph && ph[i].mod)) {
            cr_assert_eq(tc_zipw_add(&w, recs[i].name, c, recs[i].size, &d), 0, "%s", d.msg);
        } else {
            if (ph && ph[i].mod)
                cr_assert_eq(tc_zipw_begin_at(&w, recs[i].name, recs[i].size, ph[i].mod, ph[i].phase, &d), 0, "%s",
                             d.msg);
            else
                cr_assert_eq(tc_zipw_begin(&w, recs[i].name, recs[i].size, &d), 0, "%s", d.msg);
            if (!chunk)
                cr_assert_eq(tc_zipw_write(&w, c, recs[i].size, &d), 0, "%s", d.msg);
            for (size_t o = 0; chunk && o < recs[i].size; o += chunk) {
                size_t k = recs[i].size - o < chunk ? recs[i].size - o : chunk;
                cr_assert_eq(tc_zipw_write(&w, c + o, k, &d), 0, "%s", d.msg);
            }
            cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
        }
        free(c);
    }
    cr_assert_eq(tc_zipw_finish(&w, &d), 0, "%s", d.msg);
    tc_zipw_free(&w);
    uint8_t *p = fd_bytes(fileno(f), n);
    fclose(f);
    return p;
}

static uint8_t *make_zip(const char *archive, const rec *recs, size_t nrec, size_t chunk, size_t *n)
{
    return make_zip_at(archive, recs, NULL, nrec, chunk, n);
}

/* Check, with a parser independent of zip_read.c, that the bytes are laid out
 * as PyTorchStreamWriter lays them out (torch-format.md §2.3), record i's
 * data at ph[i] (NULL: all torch-aligned). */
static void check_layout_at(const uint8_t *f, size_t n, const char *archive, const rec *recs, const phased *ph,
                            size_t nrec)
{
    size_t off = 0, pl = strlen(archive) + 1;
    uint64_t *lfh = calloc(nrec + 1, sizeof *lfh);
    uint32_t *crcs = calloc(nrec + 1, sizeof *crcs);
    for (size_t i = 0; i < nrec; i++) {
        const rec *r = &recs[i];
        char full[300];
        snprintf(full, sizeof full, "%s/%s", archive, r->name);
        size_t nl = strlen(full);
        cr_assert_leq(off + 30, n);
        const uint8_t *h = f + off;
        lfh[i] = off;
        cr_assert_eq(rd32(h), 0x04034b50u, "record %zu: no local header at %zu", i, off);
        cr_assert_eq(rd16(h + 4), 0, "version needed");
        cr_assert_eq(rd16(h + 6), r->size ? 0x0808 : 0x0800, "record %zu flags %04x", i, rd16(h + 6));
        cr_assert_eq(rd16(h + 8), 0, "method");
        cr_assert_eq(rd32(h + 10), 0, "time/date");
        cr_assert_eq(rd32(h + 14), 0, "crc in the local header");
        cr_assert_eq(rd32(h + 18), 0, "csize in the local header");
        cr_assert_eq(rd32(h + 22), 0, "usize in the local header");
        cr_assert_eq(rd16(h + 26), nl);
        cr_assert(!memcmp(h + 30, full, nl), "record %zu name", i);
        size_t xl = rd16(h + 28);
        const uint8_t *x = h + 30 + nl;
        /* only the FB padding extra for small records */
        cr_assert_eq(rd16(x), 0x4246, "record %zu: extra field is not FB padding", i);
        size_t pad = rd16(x + 2), mod = phase_of(ph, i)->mod, phase = phase_of(ph, i)->phase;
        cr_assert_eq(xl, 4 + pad);
        cr_assert_lt(pad, mod);
        for (size_t k = 0; k < pad; k++)
            cr_assert_eq(x[4 + k], 'Z');
        size_t data = off + 30 + nl + xl;
        cr_assert_eq(data % 64, 0, "record %zu (%s): data at %zu is not 64-byte aligned", i, full, data);
        cr_assert_eq(data % mod, phase, "record %zu (%s): data at %zu, not at %zu modulo %zu", i, full, data, phase,
                     mod);
        /* torch's padding formula (with mod for 64) */
        size_t start = off + 30 + nl + 4;
        cr_assert_eq(pad, (phase + mod - start % mod) % mod);
        uint8_t *c = content(r);
        cr_assert_leq(data + r->size, n);
        cr_assert(!memcmp(f + data, c, r->size), "record %zu data", i);
        uint32_t crc = (uint32_t)crc32(0, c, (uInt)r->size);
        crcs[i] = crc;
        free(c);
        off = data + r->size;
        if (r->size) {
            cr_assert_eq(rd32(f + off), 0x08074b50u, "record %zu: no data descriptor", i);
            cr_assert_eq(rd32(f + off + 4), crc, "record %zu: descriptor CRC", i);
            cr_assert_eq(rd32(f + off + 8), r->size);
            cr_assert_eq(rd32(f + off + 12), r->size);
            off += 16;
        }
    }
    /* central directory */
    size_t cd = off;
    for (size_t i = 0; i < nrec; i++) {
        const uint8_t *h = f + off;
        char full[300];
        snprintf(full, sizeof full, "%s/%s", archive, recs[i].name);
        size_t nl = strlen(full);
        cr_assert_eq(rd32(h), 0x02014b50u, "central directory entry %zu", i);
        cr_assert_eq(rd16(h + 4), 0);
        cr_assert_eq(rd16(h + 6), 0);
        cr_assert_eq(rd16(h + 8), recs[i].size ? 0x0808 : 0x0800);
        cr_assert_eq(rd16(h + 10), 0);
        cr_assert_eq(rd32(h + 12), 0);
        cr_assert_eq(rd32(h + 16), crcs[i], "entry %zu CRC %08x, expected %08x", i, rd32(h + 16), crcs[i]);
        cr_assert_eq(rd32(h + 20), recs[i].size);
        cr_assert_eq(rd32(h + 24), recs[i].size);
        cr_assert_eq(rd16(h + 28), nl);
        cr_assert_eq(rd16(h + 30), 0, "extra field in the central directory");
        cr_assert_eq(rd16(h + 32), 0);
        cr_assert_eq(rd16(h + 34), 0);
        cr_assert_eq(rd16(h + 36), 0);
        cr_assert_eq(rd32(h + 38), 0);
        cr_assert_eq(rd32(h + 42), lfh[i]);
        cr_assert(!memcmp(h + 46, full, nl));
        off += 46 + nl;
    }
    (void)pl;
    /* ZIP64 end record, locator, classic end record: always */
    const uint8_t *z = f + off;
    cr_assert_eq(rd32(z), 0x06064b50u, "no ZIP64 end record");
    cr_assert_eq(tc_le64(z + 4), 44);
    cr_assert_eq(rd16(z + 12), 0x031E);
    cr_assert_eq(rd16(z + 14), 0x002D);
    cr_assert_eq(tc_le64(z + 24), nrec);
    cr_assert_eq(tc_le64(z + 32), nrec);
    cr_assert_eq(tc_le64(z + 40), off - cd);
    cr_assert_eq(tc_le64(z + 48), cd);
    const uint8_t *l = z + 56;
    cr_assert_eq(rd32(l), 0x07064b50u, "no ZIP64 locator");
    cr_assert_eq(rd32(l + 4), 0);
    cr_assert_eq(tc_le64(l + 8), off);
    cr_assert_eq(rd32(l + 16), 1);
    const uint8_t *e = l + 20;
    cr_assert_eq(rd32(e), 0x06054b50u);
    cr_assert_eq(rd16(e + 8), nrec);
    cr_assert_eq(rd16(e + 10), nrec);
    cr_assert_eq(rd32(e + 12), off - cd);
    cr_assert_eq(rd32(e + 16), cd);
    cr_assert_eq(rd16(e + 20), 0);
    cr_assert_eq((size_t)(e + 22 - f), n, "bytes after the end record");
    free(lfh);
    free(crcs);
}

static void check_torch_layout(const uint8_t *f, size_t n, const char *archive, const rec *recs, size_t nrec)
{
    check_layout_at(f, n, archive, recs, NULL, nrec);
}

/* Open from memory; every record reads back equal, CRC checked. */
static void check_reads_back(const uint8_t *f, size_t n, const char *archive, const rec *recs, size_t nrec)
{
    tc_src src;
    tc_src_init_mem(&src, f, n, "mem.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 100000};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert_eq(z.n, nrec);
    cr_assert(z.zip64);
    for (size_t i = 0; i < nrec; i++) {
        tc_buf fb = TC_BUF_INIT(0); /* the archive's name is the caller's, of any length */
        tc_buf_printf(&fb, "%s/%s", archive, recs[i].name);
        cr_assert(!tc_buf_oom(&fb));
        const char *full = tc_buf_str(&fb);
        const tc_zip_entry *e = tc_zip_find(&z, full);
        cr_assert_not_null(e, "%s not found", full);
        cr_assert_eq(e->data_off % 64, 0);
        cr_assert_eq(e->usize, recs[i].size);
        uint8_t *buf;
        size_t len;
        cr_assert_eq(tc_zip_read_all(&z, e, 1u << 30, true, &buf, &len, &d), 0, "%s: %s", full, d.msg);
        uint8_t *c = content(&recs[i]);
        cr_assert_eq(len, recs[i].size);
        cr_assert(!memcmp(buf, c, len), "%s reads back different", full);
        free(c);
        free(buf);
        tc_buf_free(&fb);
    }
    cr_assert_null(tc_zip_find(&z, "nope"));
    tc_zip_free(&z);
}

/* ---- writer -------------------------------------------------------------------------- */

Test(zip_write, torch_layout_every_padding)
{
    /* names of 1..64 characters walk the padding through all 64 values */
    rec recs[70];
    size_t nrec = 0;
    static const size_t sizes[] = {0, 1, 63, 64, 65, 100, 4096, 3};
    for (size_t i = 0; i < 64; i++, nrec++) {
        memset(recs[i].name, 'a' + (int)(i % 26), i + 1);
        recs[i].name[i + 1] = 0;
        recs[i].size = sizes[i % 8];
        recs[i].seed = (uint32_t)i + 1;
    }
    size_t n;
    uint8_t *f = make_zip("model", recs, nrec, 0, &n);
    check_torch_layout(f, n, "model", recs, nrec);
    check_reads_back(f, n, "model", recs, nrec);
    free(f);
}

Test(zip_write, torch_record_set_and_big_record)
{
    rec recs[] = {{"data.pkl", 731, 1},     {".format_version", 1, 2}, {".storage_alignment", 2, 3},
                  {"byteorder", 6, 4},      {"data/0", 1572865, 5},    {"data/1", 0, 6},
                  {"data/2", 1048576, 7},   {"version", 2, 8},         {".data/serialization_id", 40, 9}};
    size_t nrec = sizeof recs / sizeof *recs;
    for (size_t chunk = 0; chunk < 3; chunk++) {
        static const size_t chunks[] = {0, 4093, 1 << 20};
        size_t n;
        uint8_t *f = make_zip("archive", recs, nrec, chunks[chunk], &n);
        check_torch_layout(f, n, "archive", recs, nrec);
        check_reads_back(f, n, "archive", recs, nrec);
        free(f);
    }
}

/* Records placed at a phase modulo 4096 (to share file system blocks with
 * an input), among torch-aligned ones: every phase that is a multiple of 64
 * lands, whatever comes before, and the rest of the layout is torch's. */
Test(zip_write, phase_padding)
{
    rec recs[100];
    phased ph[100];
    size_t nrec = 0;
    memset(recs, 0, sizeof recs);
    memset(ph, 0, sizeof ph);
    static const size_t sizes[] = {0, 1, 4096, 100000, 63, 8193};
    for (size_t i = 0; i < 64; i++) {
        snprintf(recs[nrec].name, sizeof recs[nrec].name, "data/%zu", i * 37);
        recs[nrec].size = sizes[i % 6];
        recs[nrec].seed = (uint32_t)i + 1;
        ph[nrec++] = (phased){4096, (uint32_t)(i * 64)};
        if (i % 3 == 0) { /* a torch-aligned record, its name of another length */
            memset(recs[nrec].name, 'a' + (int)(i % 26), i % 40 + 1);
            recs[nrec].size = 100 + i;
            recs[nrec++].seed = 1000 + (uint32_t)i;
        }
    }
    snprintf(recs[nrec].name, sizeof recs[nrec].name, "last");
    recs[nrec].size = 5;
    recs[nrec].seed = 7;
    ph[nrec++] = (phased){TC_ZIP_MAX_PHASE_MOD, TC_ZIP_MAX_PHASE_MOD - 64};
    for (size_t chunk = 0; chunk < 2; chunk++) {
        size_t n;
        uint8_t *f = make_zip_at("model", recs, ph, nrec, chunk ? 4093 : 0, &n);
        check_layout_at(f, n, "model", recs, ph, nrec);
        check_reads_back(f, n, "model", recs, nrec);
        free(f);
    }
    /* what cannot keep the 64-byte alignment, or would not fit the extra field */
    FILE *out = tmpfile();
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fileno(out));
    cr_assert_eq(tc_zipw_init(&w, &wd_, "p", &d), 0);
    static const uint32_t bad[][2] = {{4096, 100}, {4096, 4096}, {4000, 64}, {65536, 0}, {32, 0}, {0, 0}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tc_diag_clear(&d);
        cr_assert_eq(tc_zipw_begin_at(&w, "r", 1, bad[k][0], bad[k][1], &d), TC_ERR_USAGE, "%u mod %u", bad[k][1],
                     bad[k][0]);
        cr_assert(strstr(d.msg, "multiples of 64"), "%s", d.msg);
    }
    cr_assert_eq(w.n, 0, "a refused record is not begun");
    tc_zipw_free(&w);
    fclose(out);
}

/* A small reserved record is staged in the writer's buffer: filled by tc_xfer as any other, it
 * reaches the file with the headers around it (nothing is written at reserve), and reads back
 * whole; a writer freed with a record still open leaves its destination unstaged. */
Test(zip_write, small_reserved_record_is_staged)
{
    uint8_t small[100];
    xorshift_bytes(small, sizeof small, 7);
    tc_src in;
    tc_src_init_mem(&in, small, sizeof small, "small");
    FILE *out = tmpfile();
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fileno(out));
    cr_assert_eq(tc_zipw_init(&w, &wd_, "st", &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "before", "xyz", 3, &d), 0);
    cr_assert_eq(tc_zipw_begin(&w, "small", sizeof small, &d), 0);
    tc_xfer x = {.src = &in, .in_bytes = sizeof small, .what = "small", .out = &wd_, .from = TC_DT_U8,
                 .to = TC_DT_U8, .want_crc = true};
    cr_assert_eq(tc_zipw_reserve(&w, sizeof small, &x.out_off, &d), 0, "%s", d.msg);
    cr_assert_eq(wd_.pos, 0, "nothing is written at reserve: the record is staged");
    cr_assert(wd_.stage != NULL);
    cr_assert_eq(tc_xfer_run(NULL, &x, &d), 0, "%s", d.msg);
    cr_assert_eq(tc_zipw_commit(&w, x.out_bytes, x.crc, &d), 0, "%s", d.msg);
    cr_assert(wd_.stage == NULL, "commit ends the staging");
    cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
    /* an empty reserved record between buffered ones */
    uint64_t eoff;
    cr_assert_eq(tc_zipw_begin(&w, "empty", 0, &d), 0);
    cr_assert_eq(tc_zipw_reserve(&w, 0, &eoff, &d), 0, "%s", d.msg);
    cr_assert_eq(tc_zipw_commit(&w, 0, (uint32_t)crc32(0, NULL, 0), &d), 0, "%s", d.msg);
    cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
    cr_assert_eq(tc_zipw_add(&w, "after", "abc", 3, &d), 0);
    cr_assert_eq(tc_zipw_finish(&w, &d), 0);
    uint64_t counted = w.off;
    tc_zipw_free(&w);
    size_t n;
    uint8_t *f = fd_bytes(fileno(out), &n);
    cr_assert_eq(n, counted, "the file is as long as the writer counted");
    cr_assert_eq(tc_le32(f), 0x04034b50u, "the first record starts the file");
    tc_src s;
    tc_src_init_mem(&s, f, n, "st.zip");
    tc_zip z;
    cr_assert_eq(tc_zip_open(&z, &s, &(tc_zip_limits){.max_entries = 100}, &d), 0, "%s", d.msg);
    const tc_zip_entry *e = tc_zip_find(&z, "st/small");
    cr_assert(e && !e->bad && e->usize == sizeof small && e->crc == (uint32_t)crc32(0, small, sizeof small));
    cr_assert_eq(memcmp(f + e->data_off, small, sizeof small), 0);
    cr_assert_eq(e->data_off % 64, 0);
    const tc_zip_entry *a = tc_zip_find(&z, "st/after");
    cr_assert(a && !a->bad && a->usize == 3 && !memcmp(f + a->data_off, "abc", 3));
    tc_zip_free(&z);
    free(f);
    fclose(out);

    /* left open by a failure */
    out = tmpfile();
    tc_dst wd2 = UNIT_DST(fileno(out));
    cr_assert_eq(tc_zipw_init(&w, &wd2, "st", &d), 0);
    cr_assert_eq(tc_zipw_begin(&w, "small", sizeof small, &d), 0);
    uint64_t off;
    cr_assert_eq(tc_zipw_reserve(&w, sizeof small, &off, &d), 0, "%s", d.msg);
    cr_assert(wd2.stage != NULL);
    tc_zipw_free(&w);
    cr_assert(wd2.stage == NULL);
    fclose(out);
}

/* A record filled by someone else at a reserved offset (what tc_xfer does),
 * in two parts: copied in the kernel with the CRC supplied, or read through
 * on a pool of threads with the CRC computed; the CRCs of the parts join. */
Test(zip_write, reserved_range_from_file)
{
    FILE *src = tmpfile();
    uint8_t big[300000];
    xorshift_bytes(big, sizeof big, 99);
    cr_assert_eq(fwrite(big, 1, sizeof big, src), sizeof big);
    fflush(src);
    tc_src in = {.fd = fileno(src), .size = sizeof big, .what = "src"};
    tc_pool *pool = tc_pool_new(3);
    for (int mode = 0; mode < 2; mode++) {
        FILE *out = tmpfile();
        tc_zipw w;
        tc_diag d = {0};
        tc_dst wd_ = UNIT_DST(fileno(out));
        cr_assert_eq(tc_zipw_init(&w, &wd_, "cp", &d), 0);
        cr_assert_eq(tc_zipw_add(&w, "before", "xyz", 3, &d), 0);
        cr_assert_eq(tc_zipw_begin(&w, "copied", 200000, &d), 0);
        static const uint64_t part[2][2] = {{1000, 50000}, {51000, 150000}};
        for (int k = 0; k < 2; k++) {
            tc_xfer x = {.src = &in, .in_off = part[k][0], .in_bytes = part[k][1], .what = "src",
                         .out = &wd_, .from = TC_DT_U8, .to = TC_DT_U8, .want_crc = mode == 0};
            cr_assert_eq(tc_zipw_reserve(&w, part[k][1], &x.out_off, &d), 0, "%s", d.msg);
            cr_assert_eq(x.out_off, wd_.pos, "reserve flushes the buffer");
            cr_assert_eq(tc_xfer_run(pool, &x, &d), 0, "mode %d: %s", mode, d.msg);
            cr_assert_eq(x.out_bytes, part[k][1]);
            uint32_t crc = mode == 0 ? x.crc : (uint32_t)crc32(0, big + part[k][0], (uInt)part[k][1]);
            cr_assert_eq(tc_zipw_commit(&w, x.out_bytes, crc, &d), 0, "%s", d.msg);
            cr_assert_eq(wd_.pos, w.off, "commit moves the write position");
        }
        /* more than declared is refused */
        uint64_t off;
        cr_assert_eq(tc_zipw_reserve(&w, 1, &off, &d), TC_ERR_USAGE);
        tc_diag_clear(&d);
        cr_assert_eq(tc_zipw_commit(&w, 1, 0, &d), TC_ERR_USAGE);
        tc_diag_clear(&d);
        cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
        cr_assert_eq(tc_zipw_add(&w, "after", "", 0, &d), 0);
        cr_assert_eq(tc_zipw_finish(&w, &d), 0);
        tc_zipw_free(&w);
        size_t n;
        uint8_t *f = fd_bytes(fileno(out), &n);
        fclose(out);
        tc_src s;
        tc_src_init_mem(&s, f, n, "cp.zip");
        tc_zip z;
        tc_zip_limits lim = {.max_entries = 10};
        cr_assert_eq(tc_zip_open(&z, &s, &lim, &d), 0, "%s", d.msg);
        const tc_zip_entry *e = tc_zip_find(&z, "cp/copied");
        cr_assert_not_null(e);
        cr_assert_eq(e->data_off % 64, 0);
        uint8_t *buf;
        size_t len;
        cr_assert_eq(tc_zip_read_all(&z, e, 1 << 20, true, &buf, &len, &d), 0, "mode %d: %s", mode, d.msg);
        cr_assert_eq(len, 200000);
        cr_assert(!memcmp(buf, big + 1000, len));
        free(buf);
        cr_assert_eq(tc_zip_read_all(&z, tc_zip_find(&z, "cp/after"), 10, true, &buf, &len, &d), 0);
        free(buf);
        tc_zip_free(&z);
        free(f);
    }
    tc_pool_free(pool);
    fclose(src);
}

Test(zip_write, usage_errors)
{
    FILE *out = tmpfile();
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fileno(out));
    cr_assert_eq(tc_zipw_init(&w, &wd_, "u", &d), 0);
    cr_assert_eq(tc_zipw_begin(&w, "r", 4, &d), 0);
    cr_assert_eq(tc_zipw_write(&w, "abc", 3, &d), 0);
    cr_assert_eq(tc_zipw_write(&w, "de", 2, &d), TC_ERR_USAGE);
    cr_assert(strstr(d.msg, "more data than its declared size"), "%s", d.msg);
    tc_diag_clear(&d);
    cr_assert_eq(tc_zipw_end(&w, &d), TC_ERR_USAGE);
    cr_assert(strstr(d.msg, "wrote 3 of 4 bytes"), "%s", d.msg);
    tc_diag_clear(&d);
    char longname[70000];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cr_assert_eq(tc_zipw_begin(&w, longname, 1, &d), TC_ERR_USAGE);
    tc_zipw_free(&w);
    tc_zipw_free(NULL);
    fclose(out);
    /* a full disk is an error */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        tc_diag d2 = {0};
        tc_dst wd_ = UNIT_DST(fileno(full));
        cr_assert_eq(tc_zipw_init(&w, &wd_, "f", &d2), 0);
        int rc = tc_zipw_add(&w, "x", "abc", 3, &d2);
        if (!rc)
            rc = tc_zipw_finish(&w, &d2);
        cr_assert_eq(rc, TC_ERR_IO, "writing to /dev/full succeeded");
        cr_assert(strstr(d2.msg, "write failed"), "%s", d2.msg);
        tc_zipw_free(&w);
        fclose(full);
    }
}

Test(zip_write, archive_name)
{
    static const char *const cases[][2] = {
        {"model.pt", "model"}, {"a/b/ckpt.tar.gz", "ckpt.tar"}, {"noext", "noext"}, {"dir.d/file", "file"},
        {"x/.pt", "archive"}, {"caf\xc3\xa9.pt", "archive"}, {"a\\b\\win.pt", "win"}, {"", "archive"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[64];
        tc_zip_archive_name(cases[i][0], out, sizeof out);
        cr_assert_str_eq(out, cases[i][1], "'%s' -> '%s', expected '%s'", cases[i][0], out, cases[i][1]);
    }
    char small[4];
    tc_zip_archive_name("longname.pt", small, sizeof small);
    cr_assert_str_eq(small, "arc");
}

/* ---- reading CPython's zips -------------------------------------------------------------- */

typedef struct pyrec {
    const char *name;
    size_t size;
    int kind; /* 0 text, 1 xorshift(seed), 2 zeros, 3 abc */
    uint32_t seed;
    int method;
} pyrec;

static const pyrec py_records[] = {
    {"arch/text", 20, 0, 0, 0},        {"arch/empty", 0, 2, 0, 8},         {"arch/rand", 80000, 1, 0x12345678, 8},
    {"arch/zeros", 1u << 20, 2, 0, 8}, {"arch/small", 180, 3, 0, 8},
};

static void open_fails(const uint8_t *f, size_t n, int code, const char *frag);
static void read_fails(const tc_zip *z, const tc_zip_entry *e, int code, const char *frag);

static uint8_t *py_content(const pyrec *r)
{
    uint8_t *p = calloc(1, r->size + 1);
    if (r->kind == 0)
        memcpy(p, "hello, stored world\n", 20);
    else if (r->kind == 1)
        xorshift_bytes(p, r->size, r->seed);
    else if (r->kind == 3)
        for (size_t i = 0; i < r->size; i++)
            p[i] = (uint8_t)("abc"[i % 3]);
    return p;
}

static void open_fixture(const char *name, uint8_t **file, size_t *n, tc_src *src, tc_zip *z)
{
    *file = slurp(data_path(name), n);
    cr_assert_not_null(*file, "missing fixture %s", data_path(name));
    tc_src_init_mem(src, *file, *n, name);
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 100};
    cr_assert_eq(tc_zip_open(z, src, &lim, &d), 0, "%s: %s", name, d.msg);
}

static void check_py_zip(const char *fixture, uint16_t flag)
{
    uint8_t *file;
    size_t n;
    tc_src src;
    tc_zip z;
    open_fixture(fixture, &file, &n, &src, &z);
    cr_assert_eq(z.n, 5);
    for (size_t i = 0; i < 5; i++) {
        const pyrec *r = &py_records[i];
        const tc_zip_entry *e = tc_zip_find(&z, r->name);
        cr_assert_not_null(e, "%s: no %s", fixture, r->name);
        cr_assert_eq(e->method, r->method);
        cr_assert_eq(e->flags & 8, flag, "%s: %s flags %04x", fixture, r->name, e->flags);
        cr_assert_eq(e->usize, r->size);
        uint8_t *want = py_content(r), *buf;
        size_t len;
        tc_diag d = {0};
        cr_assert_eq(tc_zip_read_all(&z, e, 1u << 30, true, &buf, &len, &d), 0, "%s: %s: %s", fixture, r->name, d.msg);
        cr_assert_eq(len, r->size);
        cr_assert(!memcmp(buf, want, len), "%s: %s reads back different", fixture, r->name);
        free(buf);
        /* streaming in odd small pieces gives the same bytes */
        tc_zip_rd rd;
        cr_assert_eq(tc_zip_rd_open(&rd, &z, e, &d), 0);
        size_t total = 0, got;
        uint8_t piece[777];
        for (;;) {
            cr_assert_eq(tc_zip_rd_read(&rd, piece, sizeof piece, &got, true, &d), 0, "%s", d.msg);
            if (!got)
                break;
            cr_assert(!memcmp(piece, want + total, got));
            total += got;
        }
        cr_assert_eq(total, r->size);
        tc_zip_rd_close(&rd);
        free(want);
    }
    tc_zip_free(&z);
    free(file);
}

Test(zip_read, cpython_deflated)
{
    check_py_zip("deflated.zip", 0);
}

Test(zip_read, cpython_data_descriptors)
{
    check_py_zip("descriptor.zip", 8);
}

Test(zip_read, cpython_zip64)
{
    /* CPython writes a local header offset of 0xFFFFFFFF (the real one in
     * the ZIP64 extra) with a 32-bit size. torch 1.13's miniz checks offset
     * + 30 + size against the file's size with the 32-bit field and refuses
     * the archive; torch 2.x's (as torch patched it) checks with the ZIP64
     * values and opens it (checked: torch 1.13 "invalid header or archive is
     * corrupted", 2.15 opens it and asks for its version record) */
    size_t n;
    uint8_t *file = slurp(data_path("zip64.zip"), &n);
    cr_assert_not_null(file);
    tc_src src;
    tc_src_init_mem(&src, file, n, "zip64.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits one = {.max_entries = 100, .readers = TC_ZIP_TORCH1};
    cr_assert_neq(tc_zip_open(&z, &src, &one, &d), 0);
    cr_assert(strstr(d.msg, "runs past the end of the file"), "%s", d.msg);
    tc_zip_limits any = {.max_entries = 100};
    cr_assert_eq(tc_zip_open(&z, &src, &any, &d), 0, "%s", d.msg);
    cr_assert_eq(z.readers, TC_ZIP_TORCH2);
    cr_assert(z.zip64, "ZIP64 end record not used");
    cr_assert_eq(z.n, 3);
    static const struct {
        const char *name;
        size_t size;
        uint64_t lfh;
    } want[] = {{"z64/a", 50, 0}, {"z64/b", 4, 105}, {"z64/c", 3000, 164}};
    for (size_t i = 0; i < 3; i++) {
        const tc_zip_entry *e = tc_zip_find(&z, want[i].name);
        cr_assert_not_null(e);
        cr_assert_eq(e->usize, want[i].size, "%s usize %llu", want[i].name, (unsigned long long)e->usize);
        cr_assert_eq(e->lfh_off, want[i].lfh, "%s at %llu", want[i].name, (unsigned long long)e->lfh_off);
        uint8_t *buf;
        size_t len;
        cr_assert_eq(tc_zip_read_all(&z, e, 1 << 20, true, &buf, &len, &d), 0, "%s: %s", want[i].name, d.msg);
        cr_assert_eq(len, want[i].size);
        free(buf);
    }
    tc_zip_free(&z);
    free(file);
}

/* ---- reader errors ---------------------------------------------------------------------- */

static const rec base_recs[] = {{"a", 100, 1}, {"b", 0, 2}, {"c", 200, 3}};

static uint8_t *base_zip(size_t *n) { return make_zip("arc", base_recs, 3, 0, n); }

/* Open must fail with code (0: any) and a one-line message holding frag. */
static void open_fails(const uint8_t *f, size_t n, int code, const char *frag)
{
    tc_src src;
    tc_src_init_mem(&src, f, n, "bad.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 1000};
    int rc = tc_zip_open(&z, &src, &lim, &d);
    cr_assert_neq(rc, 0, "a bad zip opened (expected '%s')", frag);
    if (code)
        cr_assert_eq(rc, code, "code %d, expected %d: %s", rc, code, d.msg);
    cr_assert(strstr(d.msg, frag), "message '%s' lacks '%s'", d.msg, frag);
    cr_assert_null(strchr(d.msg, '\n'));
    cr_assert_null(z.e, "entry table left behind after a failure");
}

/* Offset of central directory entry i. */
static size_t cd_entry(const uint8_t *f, size_t n, size_t i)
{
    zip_ends e;
    cr_assert(zip_find_ends(f, n, &e));
    size_t p = (size_t)e.cd_off;
    while (i--)
        p += 46 + rd16(f + p + 28) + rd16(f + p + 30) + rd16(f + p + 32);
    return p;
}

/* One archive of the four records named, in this order. */
static void named_zip(const char *const names[4], tc_zip *z, tc_src *src, uint8_t **f, size_t *n)
{
    rec recs[4];
    for (int i = 0; i < 4; i++) {
        snprintf(recs[i].name, sizeof recs[i].name, "%s", names[i]);
        recs[i].size = 10 + (size_t)i;
        recs[i].seed = (uint32_t)i + 1;
    }
    *f = make_zip("archive", recs, 4, 0, n);
    tc_src_init_mem(src, *f, *n, "case.zip");
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(z, src, &lim, &d), 0, "%s", d.msg);
}

Test(zip_read, names_equal_but_for_case)
{
    /* torch's reader finds names ignoring case, and of two equal ones the
     * one its heap sort and binary search land on: for these three layouts
     * torch 1.13 and 2.15 read the second entry (checked with torch.load) */
    static const char *const layouts[3][4] = {{"data.pkl", "DATA.pkl", "data/0", "version"},
                                              {"DATA.pkl", "data.pkl", "data/0", "version"},
                                              {"data.pkl", "data.pkl", "data/0", "version"}};
    for (int k = 0; k < 3; k++) {
        tc_zip z;
        tc_src src;
        uint8_t *f;
        size_t n, a, b;
        named_zip(layouts[k], &z, &src, &f, &n);
        cr_assert_eq(tc_zip_find(&z, "archive/data.pkl"), &z.e[1], "layout %d", k);
        cr_assert_eq(tc_zip_find(&z, "ARCHIVE/Data.PKL"), &z.e[1], "layout %d", k);
        cr_assert_eq(tc_zip_find(&z, "archive/DATA/0"), &z.e[2]);
        cr_assert_null(tc_zip_find(&z, "archive/data"));
        cr_assert_eq(tc_zip_confusable(&z, &a, &b), 1);
        cr_assert(a == 0 && b == 1, "%zu %zu", a, b);
        tc_zip_free(&z);
        free(f);
    }
    /* a name listed cut at a NUL byte, equal to another's as torch lists them */
    const char *const cut[4] = {"data.pkl", "data/0", "data.pklZx", "version"};
    tc_zip z;
    tc_src src;
    uint8_t *f;
    size_t n, a, b;
    named_zip(cut, &z, &src, &f, &n);
    tc_zip_free(&z);
    for (size_t i = 0; i + 10 <= n; i++)
        if (!memcmp(f + i, "data.pklZx", 10))
            f[i + 8] = 0;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert_eq(tc_zip_confusable(&z, &a, &b), 1);
    cr_assert(a == 0 && b == 2, "%zu %zu", a, b);
    char listed[512];
    tc_zip_listed_name(&z.e[2], listed);
    cr_assert_str_eq(listed, "archive/data.pkl");
    cr_assert_eq(tc_zip_find(&z, "archive/data.pkl"), &z.e[0]);
    tc_zip_free(&z);
    free(f);
    /* different names: none */
    const char *const fine[4] = {"data.pkl", "data/0", "data/1", "version"};
    named_zip(fine, &z, &src, &f, &n);
    cr_assert_eq(tc_zip_confusable(&z, &a, &b), 0);
    tc_zip_free(&z);
    free(f);
}

Test(zip_read, overlapping_entries)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    /* entry c claims a's local header */
    size_t c = cd_entry(f, n, 2);
    tc_put32(f + c + 42, 0);
    open_fails(f, n, TC_ERR_FORMAT, "overlap");
    free(f);
    /* entry a claims more data than it has: runs over b's header (b reads nothing) into c */
    f = base_zip(&n);
    size_t a = cd_entry(f, n, 0);
    tc_put32(f + a + 20, 300);
    tc_put32(f + a + 24, 300);
    open_fails(f, n, TC_ERR_FORMAT, "overlap");
    free(f);
}

Test(zip_read, names_torch_takes_as_they_are)
{
    /* torch's reader never makes a path of a name: '..' and leading
     * slashes are names like any other (torch 2.15 lists 'archive/../x') */
    rec recs[] = {{"../evil", 1, 1}, {"x/../../evil", 1, 2}, {"..", 1, 3}, {"x/..\\evil", 1, 4}, {"...", 1, 5},
                  {"a/./b", 1, 6}};
    size_t n;
    uint8_t *f = make_zip("arc", recs, 6, 0, &n);
    check_reads_back(f, n, "arc", recs, 6);
    free(f);
}

Test(zip_read, nul_in_name)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    size_t a = cd_entry(f, n, 0);
    f[a + 46 + 1] = 0; /* "arc/a" -> "a\0c/a": listed as "a", found by no name */
    tc_src src;
    tc_src_init_mem(&src, f, n, "nul.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert_eq(z.e[0].nlen, 5);
    char listed[512];
    tc_zip_listed_name(&z.e[0], listed);
    cr_assert_str_eq(listed, "a");
    cr_assert_null(tc_zip_find(&z, "a"));
    cr_assert_null(tc_zip_find(&z, "arc/a"));
    tc_zip_free(&z);
    free(f);
}

Test(zip_read, central_directory_past_the_end)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    zip_ends e;
    cr_assert(zip_find_ends(f, n, &e));
    tc_put64(f + e.z64_off + 48, n + 100);
    open_fails(f, n, TC_ERR_FORMAT, "lies outside the file");
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.z64_off + 40, 1ull << 40);
    open_fails(f, n, TC_ERR_FORMAT, "a central directory of 4 GiB or more");
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.z64_off + 48, UINT64_MAX - 10);
    open_fails(f, n, TC_ERR_FORMAT, "lies outside the file");
    free(f);
    /* the ZIP64 locator points past the end; at no ZIP64 record, miniz
     * ignores it and reads the classic end record */
    f = base_zip(&n);
    tc_put64(f + e.loc_off + 8, UINT64_MAX - 3);
    open_fails(f, n, TC_ERR_FORMAT, "zip64 locator points to offset");
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.loc_off + 8, 3);
    tc_src src;
    tc_src_init_mem(&src, f, n, "loc.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert(!z.zip64 && z.n == 3);
    tc_zip_free(&z);
    free(f);
    /* an entry's local header offset past the end */
    f = base_zip(&n);
    tc_put32(f + cd_entry(f, n, 1) + 42, 0xFFFFFFF0u);
    open_fails(f, n, TC_ERR_FORMAT, "runs past the end of the file");
    free(f);
}

/* The archive opens (torch's reader looks at a local header only to read
 * its record); reading entry i fails with frag. */
static void entry_read_fails(uint8_t *f, size_t n, size_t i, int code, const char *frag)
{
    tc_src src;
    tc_src_init_mem(&src, f, n, "bad.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 1000};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    read_fails(&z, &z.e[i], code, frag);
    tc_zip_free(&z);
}

Test(zip_read, local_header_missing)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    size_t c = cd_entry(f, n, 2);
    size_t lfh = rd32(f + c + 42);
    f[lfh] = 'X';
    entry_read_fails(f, n, 2, TC_ERR_FORMAT, "no local header where it points");
    free(f);
    /* pointing into another record's data */
    f = base_zip(&n);
    tc_put32(f + cd_entry(f, n, 2) + 42, 64);
    entry_read_fails(f, n, 2, TC_ERR_FORMAT, "no local header");
    free(f);
}

Test(zip_read, entry_count_and_limits)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    zip_ends e;
    cr_assert(zip_find_ends(f, n, &e));
    tc_put64(f + e.z64_off + 32, 1000000);
    open_fails(f, n, 0, "entries");
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.z64_off + 32, 50);
    open_fails(f, n, TC_ERR_UNSUPPORTED, "split archive"); /* 50 entries, 3 of them on this disk */
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.z64_off + 24, 50);
    tc_put64(f + e.z64_off + 32, 50);
    open_fails(f, n, TC_ERR_FORMAT, "cannot fit");
    free(f);
    f = base_zip(&n);
    tc_put64(f + e.z64_off + 24, 4);
    tc_put64(f + e.z64_off + 32, 4);
    open_fails(f, n, TC_ERR_FORMAT, "4 entries cannot fit");
    free(f);
    f = base_zip(&n);
    tc_put16(f + cd_entry(f, n, 2) + 28, 60000);
    open_fails(f, n, TC_ERR_FORMAT, "runs past the directory's end");
    free(f);
    /* a configured limit */
    f = base_zip(&n);
    tc_src src;
    tc_src_init_mem(&src, f, n, "lim.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 2};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), TC_ERR_LIMIT);
    cr_assert(strstr(d.msg, "more than the limit of 2"), "%s", d.msg);
    free(f);
}

Test(zip_read, not_a_zip)
{
    open_fails((const uint8_t *)"", 0, TC_ERR_FORMAT, "too small");
    open_fails((const uint8_t *)"PK\x03\x04 short", 10, TC_ERR_FORMAT, "too small");
    uint8_t junk[5000];
    xorshift_bytes(junk, sizeof junk, 5);
    for (size_t i = 0; i + 4 <= sizeof junk; i++)
        if (!memcmp(junk + i, "PK\x05\x06", 4))
            junk[i] = 0;
    open_fails(junk, sizeof junk, TC_ERR_FORMAT, "no end-of-central-directory record");
    /* an empty archive opens, with no entries */
    uint8_t empty[22] = "PK\x05\x06";
    tc_src src;
    tc_src_init_mem(&src, empty, sizeof empty, "empty.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert_eq(z.n, 0);
    tc_zip_free(&z);
    tc_zip_free(NULL);
}

Test(zip_read, unsupported_entries)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    tc_put16(f + cd_entry(f, n, 0) + 10, 12); /* bzip2: miniz fails when it reads the record */
    entry_read_fails(f, n, 0, TC_ERR_FORMAT, "neither stored nor deflate");
    free(f);
    f = base_zip(&n);
    tc_put16(f + cd_entry(f, n, 0) + 8, 0x0809);
    entry_read_fails(f, n, 0, TC_ERR_FORMAT, "encrypted");
    free(f);
    f = base_zip(&n);
    tc_put16(f + cd_entry(f, n, 0) + 8, 0x2808); /* the local directory masked: refused at once */
    open_fails(f, n, TC_ERR_UNSUPPORTED, "encrypted");
    free(f);
    f = base_zip(&n);
    tc_put32(f + cd_entry(f, n, 0) + 20, 50); /* csize != usize, stored */
    open_fails(f, n, TC_ERR_FORMAT, "sizes that contradict its method");
    free(f);
    f = base_zip(&n);
    tc_put32(f + cd_entry(f, n, 0) + 20, 50); /* the same with a time stamp: miniz reads method and time as one */
    tc_put16(f + cd_entry(f, n, 0) + 12, 1);
    tc_src src;
    tc_src_init_mem(&src, f, n, "time.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(tc_zip_read_all(&z, &z.e[0], 1000, true, &buf, &len, &d), 0, "%s", d.msg); /* its 100 bytes */
    cr_assert_eq(len, 100);
    free(buf);
    tc_zip_free(&z);
    free(f);
}

/* Every strict prefix, and every cut that keeps the central directory. */
static void truncations_fail(const uint8_t *f, size_t n, const char *what)
{
    uint64_t bounds[4096];
    size_t nb = zip_boundaries(f, n, bounds, 4096);
    cr_assert_gt(nb, 8);
    for (size_t i = 0; i < nb; i++) {
        if (bounds[i] >= n)
            continue;
        tc_src src;
        uint8_t *cp = malloc(bounds[i] + 1);
        memcpy(cp, f, bounds[i]);
        tc_src_init_mem(&src, cp, bounds[i], what);
        tc_zip z;
        tc_diag d = {0};
        tc_zip_limits lim = {.max_entries = 1000};
        cr_assert_neq(tc_zip_open(&z, &src, &lim, &d), 0, "%s truncated at %llu opened", what,
                      (unsigned long long)bounds[i]);
        cr_assert(d.msg[0] && !strchr(d.msg, '\n'));
        free(cp);
    }
    zip_ends e;
    cr_assert(zip_find_ends(f, n, &e));
    for (size_t i = 0; i < nb; i++) {
        if (bounds[i] >= e.cd_off)
            continue;
        size_t cn;
        uint8_t *cut = zip_cut(f, n, bounds[i], &cn);
        cr_assert_not_null(cut);
        tc_src src;
        tc_src_init_mem(&src, cut, cn, what);
        tc_zip z;
        tc_diag d = {0};
        tc_zip_limits lim = {.max_entries = 1000};
        int rc = tc_zip_open(&z, &src, &lim, &d);
        if (rc == 0) {
            /* torch's reader opens it too (it reads local headers only for their records): every record
             * either reads back whole, its CRC-32 right, or fails saying why */
            for (size_t k = 0; k < z.n; k++) {
                uint8_t *b = NULL;
                size_t bl;
                tc_diag d2 = {0};
                if (tc_zip_read_all(&z, &z.e[k], 1u << 30, true, &b, &bl, &d2) == 0)
                    cr_assert(z.e[k].csize == 0 || z.e[k].data_off + z.e[k].csize <= bounds[i],
                              "%s cut at %llu: %s read from bytes that are gone", what,
                              (unsigned long long)bounds[i], z.e[k].name);
                else
                    cr_assert(d2.msg[0] && !strchr(d2.msg, '\n'), "%s", d2.msg);
                free(b);
            }
            tc_zip_free(&z);
        } else {
            cr_assert(d.msg[0] && !strchr(d.msg, '\n'), "%s", d.msg);
        }
        free(cut);
    }
}

Test(zip_read, truncated_at_every_boundary)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    truncations_fail(f, n, "base");
    /* small enough for every byte */
    for (size_t k = 0; k < n; k++) {
        tc_src src;
        tc_src_init_mem(&src, f, k, "prefix");
        tc_zip z;
        tc_diag d = {0};
        tc_zip_limits lim = {.max_entries = 1000};
        cr_assert_neq(tc_zip_open(&z, &src, &lim, &d), 0, "prefix of %zu bytes opened", k);
    }
    free(f);
    static const char *const fx[] = {"deflated.zip", "descriptor.zip"};
    for (size_t i = 0; i < 2; i++) {
        uint8_t *p = slurp(data_path(fx[i]), &n);
        cr_assert_not_null(p);
        uint64_t bounds[256];
        size_t nb = zip_boundaries(p, n, bounds, 256);
        (void)nb; /* no ZIP64 end records: plain prefixes only */
        for (size_t k = 0; k + 1 < n; k += 397) {
            tc_src src;
            tc_src_init_mem(&src, p, k, fx[i]);
            tc_zip z;
            tc_diag d = {0};
            tc_zip_limits lim = {.max_entries = 1000};
            cr_assert_neq(tc_zip_open(&z, &src, &lim, &d), 0, "%s prefix of %zu bytes opened", fx[i], k);
        }
        free(p);
    }
}

static const tc_zip_entry *fixture_entry(const char *fixture, const char *name, uint8_t **file, size_t *n,
                                         tc_src *src, tc_zip *z)
{
    open_fixture(fixture, file, n, src, z);
    const tc_zip_entry *e = tc_zip_find(z, name);
    cr_assert_not_null(e);
    return e;
}

static void read_fails(const tc_zip *z, const tc_zip_entry *e, int code, const char *frag)
{
    uint8_t *buf = NULL;
    size_t len;
    tc_diag d = {0};
    int rc = tc_zip_read_all(z, e, 1u << 30, true, &buf, &len, &d);
    cr_assert_neq(rc, 0, "%s read despite '%s'", e->name, frag);
    if (code)
        cr_assert_eq(rc, code, "%d: %s", rc, d.msg);
    cr_assert(strstr(d.msg, frag), "message '%s' lacks '%s'", d.msg, frag);
    cr_assert_null(buf);
}

Test(zip_read, deflate_bomb_and_lying_sizes)
{
    uint8_t *file;
    size_t n;
    tc_src src;
    tc_zip z;
    /* 8 compressed bytes cannot inflate to 100 MB */
    tc_zip_entry *e = (tc_zip_entry *)fixture_entry("deflated.zip", "arch/small", &file, &n, &src, &z);
    e->usize = 100u << 20;
    read_fails(&z, e, TC_ERR_FORMAT, "beyond deflate's limit");
    e->usize = 1ull << 62;
    read_fails(&z, e, 0, "");
    /* within the ratio, but the stream ends first */
    e->usize = 5000;
    read_fails(&z, e, TC_ERR_FORMAT, "inflates to fewer bytes");
    /* claims fewer bytes: the CRC of what was read does not match */
    e->usize = 100;
    read_fails(&z, e, TC_ERR_FORMAT, "CRC-32"); /* torch takes the first 100 bytes and stops */
    /* a real high-ratio record (1 MiB of zeros in ~1 KB) is not a bomb */
    const tc_zip_entry *zeros = tc_zip_find(&z, "arch/zeros");
    uint8_t *buf;
    size_t len;
    tc_diag d = {0};
    cr_assert_eq(tc_zip_read_all(&z, zeros, 1u << 30, true, &buf, &len, &d), 0, "%s", d.msg);
    free(buf);
    /* the caller's limit */
    tc_diag d2 = {0};
    cr_assert_eq(tc_zip_read_all(&z, zeros, 1000, true, &buf, &len, &d2), TC_ERR_LIMIT);
    cr_assert(strstr(d2.msg, "more than the limit of 1000"), "%s", d2.msg);
    tc_zip_free(&z);
    free(file);
}

Test(zip_read, corrupt_deflate_stream)
{
    uint8_t *file;
    size_t n;
    tc_src src;
    tc_zip z;
    const tc_zip_entry *e = fixture_entry("deflated.zip", "arch/rand", &file, &n, &src, &z);
    /* garbage in place of the deflate stream */
    memset(file + e->data_off, 0xff, 64);
    read_fails(&z, e, TC_ERR_FORMAT, "");
    tc_zip_free(&z);
    free(file);
    e = fixture_entry("deflated.zip", "arch/rand", &file, &n, &src, &z);
    ((tc_zip_entry *)e)->csize = 100; /* the stream is cut short */
    read_fails(&z, e, TC_ERR_FORMAT, "");
    tc_zip_free(&z);
    free(file);
}

Test(zip_read, crc_mismatch)
{
    size_t n;
    uint8_t *f = base_zip(&n);
    tc_src src;
    tc_src_init_mem(&src, f, n, "crc.zip");
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0);
    const tc_zip_entry *c = tc_zip_find(&z, "arc/c");
    f[c->data_off + 17] ^= 0x20;
    read_fails(&z, c, TC_ERR_FORMAT, "CRC-32");
    /* streaming without the check reads the damaged bytes as they are */
    tc_zip_rd rd;
    cr_assert_eq(tc_zip_rd_open(&rd, &z, c, &d), 0);
    uint8_t buf[300];
    size_t got, total = 0;
    do {
        cr_assert_eq(tc_zip_rd_read(&rd, buf + total, sizeof buf - total, &got, false, &d), 0, "%s", d.msg);
        total += got;
    } while (got);
    cr_assert_eq(total, 200);
    tc_zip_rd_close(&rd);
    f[c->data_off + 17] ^= 0x20;
    uint8_t *out;
    size_t len;
    cr_assert_eq(tc_zip_read_all(&z, c, 1000, true, &out, &len, &d), 0, "%s", d.msg);
    free(out);
    /* a wrong CRC in the directory, deflated record */
    tc_zip_free(&z);
    free(f);
    uint8_t *file;
    tc_src s2;
    tc_zip z2;
    tc_zip_entry *e = (tc_zip_entry *)fixture_entry("deflated.zip", "arch/rand", &file, &n, &s2, &z2);
    e->crc ^= 1;
    read_fails(&z2, e, TC_ERR_FORMAT, "CRC-32");
    tc_zip_free(&z2);
    free(file);
}

/* ZIP64 without writing 4 GiB: a 5 GiB record that is a hole in a sparse
 * file, and a record after it whose local header lies past 4 GiB; torch's
 * 64-byte alignment, or (phased) the two records at phases modulo 4096, the
 * ZIP64 extras counted before the padding. */
static void sparse_zip64(bool phased)
{
    char *dir = tmpdir_new();
    char path[4096];
    snprintf(path, sizeof path, "%s/sparse.zip", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    const uint64_t huge = (5ull << 30) + 100;
    tc_zipw w;
    tc_diag d = {0};
    uint8_t first[100], after[200];
    xorshift_bytes(first, sizeof first, 11);
    xorshift_bytes(after, sizeof after, 12);
    tc_dst wd_ = UNIT_DST(fd);
    cr_assert_eq(tc_zipw_init(&w, &wd_, "big", &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "first", first, sizeof first, &d), 0);
    if (phased)
        cr_assert_eq(tc_zipw_begin_at(&w, "huge", huge, 4096, 1088, &d), 0, "%s", d.msg);
    else
        cr_assert_eq(tc_zipw_begin(&w, "huge", huge, &d), 0);
    uint64_t at;
    cr_assert_eq(tc_zipw_reserve(&w, huge, &at, &d), 0); /* flushes the header */
    cr_assert_eq(at, w.off);
    /* the record's bytes: a hole of zeros */
    static uint8_t zeros[1 << 20];
    uint32_t mib = (uint32_t)crc32(0, zeros, sizeof zeros), crc = (uint32_t)crc32(0, NULL, 0);
    for (uint64_t k = 0; k < huge / sizeof zeros; k++)
        crc = (uint32_t)crc32_combine(crc, mib, sizeof zeros);
    crc = (uint32_t)crc32(crc, zeros, (uInt)(huge % sizeof zeros));
    cr_assert_eq(tc_zipw_commit(&w, huge, crc, &d), 0, "%s", d.msg);
    cr_assert_eq(wd_.pos, at + huge);
    cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
    uint64_t after_lfh = w.off;
    cr_assert_gt(after_lfh, 0xFFFFFFFFull);
    if (phased) {
        cr_assert_eq(tc_zipw_begin_at(&w, "after", sizeof after, 4096, 4032, &d), 0, "%s", d.msg);
        cr_assert_eq(tc_zipw_write(&w, after, sizeof after, &d), 0, "%s", d.msg);
        cr_assert_eq(tc_zipw_end(&w, &d), 0, "%s", d.msg);
    } else {
        cr_assert_eq(tc_zipw_add(&w, "after", after, sizeof after, &d), 0, "%s", d.msg);
    }
    cr_assert_eq(tc_zipw_finish(&w, &d), 0, "%s", d.msg);
    tc_zipw_free(&w);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    if ((uint64_t)st.st_blocks * 512 > (64u << 20)) {
        close(fd);
        tmpdir_rm(dir);
        cr_skip_test("no sparse files here");
    }
    /* the writer's ZIP64 fields, read by hand */
    uint8_t h[128];
    const uint64_t huge_lfh = 180; /* first: data at 64, 100 bytes, a 16-byte descriptor */
    cr_assert_eq(pread(fd, h, sizeof h, (off_t)huge_lfh), (ssize_t)sizeof h);
    cr_assert_eq(rd32(h), 0x04034b50u);
    size_t nl = rd16(h + 26);
    cr_assert_eq(rd16(h + 30 + nl), 1, "no ZIP64 extra in the local header of a 5 GiB record");
    cr_assert_eq(rd16(h + 30 + nl + 2), 16);
    cr_assert_eq(tc_le64(h + 30 + nl + 4), huge);
    cr_assert_eq(tc_le64(h + 30 + nl + 12), huge);
    cr_assert_eq(rd16(h + 30 + nl + 20), 0x4246, "FB padding after the ZIP64 extra");
    cr_assert_eq(rd16(h + 28), 20 + 4 + rd16(h + 30 + nl + 22));
    uint64_t huge_data = huge_lfh + 30 + nl + rd16(h + 28);
    cr_assert_eq(huge_data % (phased ? 4096 : 64), phased ? 1088 : 0);
    uint8_t dd[24];
    cr_assert_eq(pread(fd, dd, 24, (off_t)(huge_data + huge)), 24);
    cr_assert_eq(rd32(dd), 0x08074b50u);
    cr_assert_eq(rd32(dd + 4), crc);
    cr_assert_eq(tc_le64(dd + 8), huge, "the descriptor of a 5 GiB record is not 24 bytes");
    cr_assert_eq(tc_le64(dd + 16), huge);
    cr_assert_eq(after_lfh, huge_data + huge + 24);
    cr_assert_eq(pread(fd, h, sizeof h, (off_t)after_lfh), (ssize_t)sizeof h);
    nl = rd16(h + 26);
    cr_assert_eq(rd16(h + 30 + nl), 1, "no ZIP64 extra for a local header past 4 GiB");
    cr_assert_eq(rd16(h + 30 + nl + 2), 8);
    cr_assert_eq(tc_le64(h + 30 + nl + 4), after_lfh);
    /* and the reader takes sizes and offsets from the ZIP64 fields */
    tc_src src;
    cr_assert_eq(tc_src_open_file(&src, path, &d), 0);
    tc_zip z;
    tc_zip_limits lim = {.max_entries = 10};
    cr_assert_eq(tc_zip_open(&z, &src, &lim, &d), 0, "%s", d.msg);
    cr_assert(z.zip64);
    cr_assert_gt(z.cd_off, 0xFFFFFFFFull);
    const tc_zip_entry *e = tc_zip_find(&z, "big/huge");
    cr_assert_not_null(e);
    cr_assert_eq(e->usize, huge);
    cr_assert_eq(e->csize, huge);
    cr_assert_eq(e->crc, crc);
    cr_assert_eq(e->data_off, huge_data);
    const tc_zip_entry *a = tc_zip_find(&z, "big/after");
    cr_assert_not_null(a);
    cr_assert_eq(a->lfh_off, after_lfh);
    cr_assert_eq(a->data_off % (phased ? 4096 : 64), phased ? 4032 : 0);
    cr_assert_eq(a->data_off, after_lfh + 30 + strlen("big/after") + 12 + 4 + rd16(h + 30 + nl + 14));
    uint8_t *buf;
    size_t len;
    cr_assert_eq(tc_zip_read_all(&z, a, 1000, true, &buf, &len, &d), 0, "%s", d.msg);
    cr_assert(len == sizeof after && !memcmp(buf, after, len));
    free(buf);
    cr_assert_eq(tc_zip_read_all(&z, tc_zip_find(&z, "big/first"), 1000, true, &buf, &len, &d), 0);
    cr_assert(len == sizeof first && !memcmp(buf, first, len));
    free(buf);
    tc_diag d2 = {0};
    cr_assert_eq(tc_zip_read_all(&z, e, 1 << 20, true, &buf, &len, &d2), TC_ERR_LIMIT);
    tc_zip_rd rd;
    cr_assert_eq(tc_zip_rd_open(&rd, &z, e, &d), 0);
    uint8_t piece[4096];
    size_t got;
    cr_assert_eq(tc_zip_rd_read(&rd, piece, sizeof piece, &got, false, &d), 0);
    cr_assert_eq(got, sizeof piece);
    for (size_t i = 0; i < got; i++)
        cr_assert_eq(piece[i], 0);
    tc_zip_rd_close(&rd);
    tc_zip_free(&z);
    tc_src_close(&src);
    close(fd);
    tmpdir_rm(dir);
}

Test(zip_write, zip64_sizes_and_offsets_sparse) { sparse_zip64(false); }
Test(zip_write, zip64_phased_sparse) { sparse_zip64(true); }
