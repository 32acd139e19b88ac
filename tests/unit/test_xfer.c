/* tc_xfer: the parallel read / cast / CRC / pwrite of stored ranges. Every
 * result is checked against the plain sequential computation (tc_cast_ref,
 * tc_cast_count, zlib's crc32 over the whole output), and must not depend on
 * the number of threads: bytes, CRC, counts and error messages alike. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "cast.h"
#include "xfer.h"
#include "unit_util.h"

#define PRE 4096 /* bytes before the range, in and out, that must not move */

static const tc_dtype types[] = {TC_DT_F64, TC_DT_F32, TC_DT_F16, TC_DT_BF16, TC_DT_F8E4M3FN, TC_DT_F8E5M2};
#define NT (sizeof types / sizeof types[0])

typedef struct run_out {
    uint8_t *bytes; /* the output file, PRE bytes of 0xAB then the range */
    size_t n;
    tc_xfer x;
    int rc;
    char msg[1024];
    char subject[1024]; /* the file the failure names */
} run_out;

/* Whether the output is taken for one whose file system copies on its server
 * (tc_dst_offloads): copies then go through copy_file_range. */
static bool offload;

static uint64_t last_progress;
static void on_progress(void *ctx, uint64_t done)
{
    (void)ctx;
    cr_assert_geq(done, last_progress, "progress goes forward");
    last_progress = done;
}

/* Run one transfer of src[in_off, in_off + len) into a fresh file at PRE. */
static run_out run(tc_pool *pool, const tc_src *src, uint64_t in_off, uint64_t len, tc_dtype from, tc_dtype to,
                   bool crc, int out_fd)
{
    run_out r;
    memset(&r, 0, sizeof r);
    FILE *f = NULL;
    if (out_fd < 0) {
        f = tmpfile();
        cr_assert_not_null(f);
        out_fd = fileno(f);
        uint8_t pre[PRE];
        memset(pre, 0xAB, sizeof pre);
        cr_assert_eq(write(out_fd, pre, sizeof pre), (ssize_t)sizeof pre);
    }
    tc_dst dst = UNIT_DST(out_fd);
    dst.offload = offload;
    r.x = (tc_xfer){.src = src, .in_off = in_off, .in_bytes = len, .what = "range", .out = &dst,
                    .out_off = PRE, .from = from, .to = to, .want_crc = crc,
                    .progress = on_progress};
    last_progress = 0;
    tc_diag d = TC_DIAG_INIT;
    r.rc = tc_xfer_run(pool, &r.x, &d);
    memcpy(r.msg, d.msg, sizeof r.msg);
    memcpy(r.subject, d.file, sizeof r.subject);
    r.x.out = NULL;
    if (!r.rc && r.x.progress && len >= ((uint64_t)1 << 20))
        cr_assert_eq(last_progress, len, "progress ends at the input size");
    if (f) {
        off_t end = lseek(out_fd, 0, SEEK_END);
        r.n = (size_t)end;
        r.bytes = malloc(r.n ? r.n : 1);
        cr_assert_eq(pread(out_fd, r.bytes, r.n, 0), (ssize_t)r.n);
        cr_assert_eq(lseek(out_fd, 0, SEEK_CUR), end, "the file position is not the writer's to move");
        fclose(f);
    }
    return r;
}

static uint8_t *random_bytes(size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n);
    cr_assert_not_null(p);
    xorshift_bytes(p, n, seed);
    return p;
}

/* Sequential expectation for a cast (or copy) of n input bytes. */
static void expect(const uint8_t *in, size_t n, tc_dtype from, tc_dtype to, uint8_t **out, size_t *outn,
                   tc_cast_stats *st)
{
    memset(st, 0, sizeof *st);
    if (from == to) {
        *out = malloc(n ? n : 1);
        memcpy(*out, in, n);
        *outn = n;
        return;
    }
    size_t ne = n / tc_dtype_size(from);
    *outn = ne * tc_dtype_size(to);
    *out = malloc(*outn ? *outn : 1);
    cr_assert_eq(tc_cast_ref(to, *out, from, in, ne), 0);
    cr_assert_eq(tc_cast_count(st, to, from, in, ne), 0);
}

static void check(const run_out *r, const uint8_t *want, size_t wn, const tc_cast_stats *ws, bool crc,
                  const char *what)
{
    cr_assert_eq(r->rc, 0, "%s: %s", what, r->msg);
    cr_assert_eq(r->x.out_bytes, wn, "%s: out_bytes", what);
    cr_assert_eq(r->n, PRE + wn, "%s: file size %zu, want %zu", what, r->n, (size_t)PRE + wn);
    for (size_t i = 0; i < PRE; i++)
        cr_assert_eq(r->bytes[i], 0xAB, "%s: byte %zu before the range changed", what, i);
    cr_assert(!memcmp(r->bytes + PRE, want, wn), "%s: output differs", what);
    if (crc)
        cr_assert_eq(r->x.crc, (uint32_t)crc32(0, want, (uInt)wn), "%s: CRC", what);
    cr_assert(r->x.stats.overflow == ws->overflow && r->x.stats.underflow == ws->underflow &&
                  r->x.stats.nan == ws->nan,
              "%s: counts %llu/%llu/%llu, want %llu/%llu/%llu", what, (unsigned long long)r->x.stats.overflow,
              (unsigned long long)r->x.stats.underflow, (unsigned long long)r->x.stats.nan,
              (unsigned long long)ws->overflow, (unsigned long long)ws->underflow, (unsigned long long)ws->nan);
}

/* Every pair, lengths around the chunk size, through a file and from memory,
 * with pools of 1, 2 and 5 threads and none. */
Test(xfer, casts_equal_sequential_any_threads)
{
    const size_t big = (3u << 20) + 24; /* several chunks and a tail, for every element size */
    uint8_t *in = random_bytes(big + 100, 7);
    char *dir = tmpdir_new();
    spit(in_dir(dir, "in.bin"), in, big + 100);
    tc_diag d = {0};
    tc_src fsrc, msrc;
    cr_assert_eq(tc_src_open_file(&fsrc, in_dir(dir, "in.bin"), &d), 0, "%s", d.msg);
    tc_src_init_mem(&msrc, in, big + 100, "mem");
    tc_pool *pools[4] = {NULL, tc_pool_new(1), tc_pool_new(2), tc_pool_new(5)};
    static const size_t lens[] = {0, 8, 1000, (512u << 10) - 8, (512u << 10) + 8, (3u << 20) + 24};
    for (size_t a = 0; a < NT; a++)
        for (size_t b = 0; b < NT; b++)
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                tc_dtype from = types[a], to = types[b];
                size_t len = lens[l];
                uint8_t *want;
                size_t wn;
                tc_cast_stats ws;
                expect(in + 100, len, from, to, &want, &wn, &ws);
                for (int p = 0; p < 4; p++) {
                    /* the long length once per pair, on every pool; the rest from memory too */
                    const tc_src *srcs[2] = {&fsrc, &msrc};
                    for (int k = 0; k < (len == big ? 1 : 2); k++) {
                        char what[160];
                        snprintf(what, sizeof what, "%s->%s len %zu pool %d %s", tc_dtype_name(from),
                                 tc_dtype_name(to), len, p, k ? "mem" : "file");
                        run_out r = run(pools[p], srcs[k], 100, len, from, to, true, -1);
                        check(&r, want, wn, &ws, true, what);
                        free(r.bytes);
                    }
                }
                free(want);
            }
    for (int p = 0; p < 4; p++)
        tc_pool_free(pools[p]);
    tc_src_close(&fsrc);
    free(in);
    tmpdir_rm(dir);
}

/* Copies: with the CRC computed (read through), and without: read and
 * written, or, where the output's file system copies on its server,
 * copy_file_range where the kernel can, falling back to read/write where it
 * cannot (e.g. into a memfd). A trailing partial element of a cast is
 * dropped. */
Test(xfer, copies_and_partial_elements)
{
    const size_t n = (17u << 20) + 5;
    uint8_t *in = random_bytes(n, 11);
    char *dir = tmpdir_new();
    spit(in_dir(dir, "in.bin"), in, n);
    tc_diag d = {0};
    tc_src src;
    cr_assert_eq(tc_src_open_file(&src, in_dir(dir, "in.bin"), &d), 0, "%s", d.msg);
    tc_pool *pool = tc_pool_new(2);
    tc_cast_stats none = {0, 0, 0};
    static const char *const kinds[] = {"read and written", "copy with CRC", "kernel copy"};
    for (int k = 0; k < 3; k++) {
        offload = k == 2;
        run_out r = run(pool, &src, 3, n - 3, TC_DT_U8, TC_DT_U8, k == 1, -1);
        check(&r, in + 3, n - 3, &none, k == 1, kinds[k]);
        free(r.bytes);
    }
    offload = true; /* the kernel refuses: read and written */
    int mfd = memfd_create("out", 0);
    if (mfd >= 0) {
        uint8_t pre[PRE];
        memset(pre, 0xAB, sizeof pre);
        cr_assert_eq(write(mfd, pre, sizeof pre), (ssize_t)sizeof pre);
        run_out r = run(pool, &src, 0, n, TC_DT_U8, TC_DT_U8, false, mfd);
        cr_assert_eq(r.rc, 0, "%s", r.msg);
        r.n = PRE + n;
        r.bytes = malloc(r.n);
        cr_assert_eq(pread(mfd, r.bytes, r.n, 0), (ssize_t)r.n);
        check(&r, in, n, &none, false, "copy into a memfd");
        free(r.bytes);
        close(mfd);
    }
    /* 4 Mi + 1 float32 and 3 bytes: the 3 bytes are not an element */
    size_t len = (4u << 20) * 4 + 4 + 3;
    uint8_t *want;
    size_t wn;
    tc_cast_stats ws;
    expect(in, len, TC_DT_F32, TC_DT_BF16, &want, &wn, &ws);
    cr_assert_eq(wn, ((4u << 20) + 1) * 2);
    run_out r = run(pool, &src, 0, len, TC_DT_F32, TC_DT_BF16, true, -1);
    check(&r, want, wn, &ws, true, "partial element");
    tc_xfer x = {.in_bytes = len, .from = TC_DT_F32, .to = TC_DT_BF16};
    cr_assert_eq(tc_xfer_out_bytes(&x), wn);
    free(r.bytes);
    free(want);
    tc_pool_free(pool);
    tc_src_close(&src);
    free(in);
    tmpdir_rm(dir);
}

/* Failures: the input ends early (the message names the first offset that
 * is missing, whatever thread got there), the output cannot be written
 * (naming the output), an unsupported pair; the same messages from every pool. */
Test(xfer, errors_same_from_every_pool)
{
    const size_t n = 6u << 20;
    uint8_t *in = random_bytes(n, 5);
    tc_src short_src;
    tc_src_init_mem(&short_src, in, n / 2 + 1000, "short"); /* the later half of the chunks fail */
    char *dir = tmpdir_new();
    spit(in_dir(dir, "in.bin"), in, n);
    tc_diag d = {0};
    tc_src fsrc;
    cr_assert_eq(tc_src_open_file(&fsrc, in_dir(dir, "in.bin"), &d), 0, "%s", d.msg);
    int ro = open(in_dir(dir, "in.bin"), O_RDONLY);
    cr_assert_geq(ro, 0);
    char first[3][1024];
    for (int p = 0; p < 3; p++) {
        tc_pool *pool = p ? tc_pool_new((unsigned)p + 1) : NULL;
        run_out r = run(pool, &short_src, 0, n, TC_DT_F32, TC_DT_F16, true, -1);
        cr_assert_eq(r.rc, TC_ERR_FORMAT, "%s", r.msg);
        /* chunks are 512 KiB of float32 here: the first one cut short ends at 7 * 512 KiB */
        cr_assert(strstr(r.msg, "range") && strstr(r.msg, "truncated") && strstr(r.msg, "offset 3670016 "), "%s",
                  r.msg);
        cr_assert_str_eq(r.subject, "short", "a read failure is the input's");
        free(r.bytes);
        if (p)
            cr_assert_str_eq(r.msg, first[0], "pool %d", p);
        else
            memcpy(first[0], r.msg, sizeof first[0]);

        for (int kind = 0; kind < 2; kind++) { /* a cast, and a copy in the kernel */
            tc_dtype from = kind ? TC_DT_U8 : TC_DT_F32, to = kind ? TC_DT_U8 : TC_DT_BF16;
            offload = kind == 1;
            run_out w = run(pool, &fsrc, 0, n, from, to, !kind, ro);
            cr_assert_eq(w.rc, TC_ERR_IO, "%s", w.msg);
            cr_assert_str_eq(w.subject, "test output", "a write failure is the output's");
            cr_assert(strstr(w.msg, "write failed"), "%s", w.msg);
            if (p)
                cr_assert_str_eq(w.msg, first[1 + kind], "pool %d", p);
            else
                memcpy(first[1 + kind], w.msg, sizeof first[1 + kind]);
        }
        run_out u = run(pool, &fsrc, 0, 64, TC_DT_F32, TC_DT_I32, true, -1);
        cr_assert_eq(u.rc, TC_ERR_UNSUPPORTED, "%s", u.msg);
        free(u.bytes);
        tc_pool_free(pool);
    }
    close(ro);
    tc_src_close(&fsrc);
    free(in);
    tmpdir_rm(dir);
}

/* Does the file system under dir clone blocks (FICLONE of a small file)? */
static bool fs_clones(const char *dir)
{
    uint8_t b[8192] = {1};
    spit(in_dir(dir, "probe.a"), b, sizeof b);
    int a = open(in_dir(dir, "probe.a"), O_RDONLY), c = open(in_dir(dir, "probe.b"), O_RDWR | O_CREAT, 0600);
    cr_assert(a >= 0 && c >= 0);
    bool ok = ioctl(c, FICLONE, a) == 0;
    close(a);
    close(c);
    unlink(in_dir(dir, "probe.a"));
    unlink(in_dir(dir, "probe.b"));
    return ok;
}

/* Unchanged bytes at offsets that agree modulo TC_SHARE_BLOCK: the whole
 * blocks between the partial ones at either end are shared where the file
 * system clones ($TMPDIR on XFS or btrfs; TC_EXPECT_REFLINK=1 insists on
 * it) and copied elsewhere; bytes, CRC, progress and out_bytes are the same
 * either way, and shared + copied is every byte. Offsets that disagree are
 * copied as before. */
Test(xfer, shares_whole_blocks_where_the_file_system_clones)
{
    const size_t n = (9u << 20) + 12345;
    uint8_t *in = random_bytes(n, 23);
    char *dir = tmpdir_new();
    bool clones = fs_clones(dir);
    if (getenv("TC_EXPECT_REFLINK") && !strcmp(getenv("TC_EXPECT_REFLINK"), "1"))
        cr_assert(clones, "%s does not clone blocks", dir);
    spit(in_dir(dir, "in.bin"), in, n);
    tc_diag d = {0};
    tc_src src;
    cr_assert_eq(tc_src_open_file(&src, in_dir(dir, "in.bin"), &d), 0, "%s", d.msg);
    tc_pool *pool = tc_pool_new(3);
    static const uint64_t offs[][2] = {{64, 64},     {4032, 8128},   {4096, 8192}, {0, 4096},
                                       {192, 4096 + 192}, {100, 4196}, {64, 128} /* disagree */};
    static const uint64_t lens[] = {1, 4031, 4032, 4096, 3 * 4096 + 5, (5u << 20) + 17, (9u << 20)};
    for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
            for (int crc = 0; crc < 2; crc++) {
                uint64_t in_off = offs[o][0], out_off = offs[o][1], len = lens[l];
                if (in_off + len > n)
                    continue;
                int fd = open(in_dir(dir, "out.bin"), O_RDWR | O_CREAT | O_TRUNC, 0600);
                cr_assert_geq(fd, 0);
                uint8_t *pre = malloc(out_off + 1);
                memset(pre, 0xAB, out_off);
                cr_assert_eq(write(fd, pre, out_off), (ssize_t)out_off);
                tc_dst dst = UNIT_DST(fd);
                tc_xfer x = {.src = &src, .in_off = in_off, .in_bytes = len, .what = "range", .out = &dst,
                             .out_off = out_off, .from = TC_DT_U8, .to = TC_DT_U8, .want_crc = crc,
                             .progress = on_progress};
                last_progress = 0;
                char what[160];
                snprintf(what, sizeof what, "in %llu out %llu len %llu%s", (unsigned long long)in_off,
                         (unsigned long long)out_off, (unsigned long long)len, crc ? " crc" : "");
                cr_assert_eq(tc_xfer_run(pool, &x, &d), 0, "%s: %s", what, d.msg);
                uint64_t head = (TC_SHARE_BLOCK - in_off % TC_SHARE_BLOCK) % TC_SHARE_BLOCK;
                uint64_t whole = len < head ? 0 : (len - head) / TC_SHARE_BLOCK * TC_SHARE_BLOCK;
                if (!clones || (in_off - out_off) % TC_SHARE_BLOCK)
                    whole = 0;
                cr_assert_eq(x.shared, whole, "%s: shared %llu, want %llu", what, (unsigned long long)x.shared,
                             (unsigned long long)whole);
                cr_assert_eq(x.shared + x.copied, len, "%s: shared + copied", what);
                cr_assert_eq(x.out_bytes, len, "%s", what);
                if (len >= ((uint64_t)1 << 20))
                    cr_assert_eq(last_progress, len, "%s: progress ends at the input size", what);
                if (crc)
                    cr_assert_eq(x.crc, (uint32_t)crc32(0, in + in_off, (uInt)len), "%s: CRC", what);
                uint8_t *got = malloc(out_off + len + 1);
                cr_assert_eq(pread(fd, got, out_off + len + 1, 0), (ssize_t)(out_off + len), "%s: size", what);
                cr_assert(!memcmp(got, pre, out_off), "%s: bytes before the range changed", what);
                cr_assert(!memcmp(got + out_off, in + in_off, len), "%s: output differs", what);
                free(got);
                free(pre);
                close(fd);
            }
    tc_pool_free(pool);
    tc_src_close(&src);
    free(in);
    tmpdir_rm(dir);
}

Test(xfer, pool_sizes)
{
    cr_assert_eq(tc_pool_size(NULL), 1);
    tc_pool *p = tc_pool_new(1);
    cr_assert_eq(tc_pool_size(p), 1);
    tc_pool_free(p);
    p = tc_pool_new(100);
    cr_assert_eq(tc_pool_size(p), TC_POOL_MAX);
    tc_pool_free(p);
    p = tc_pool_new(0);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(tc_pool_size(p), cpus > TC_POOL_MAX ? TC_POOL_MAX : (unsigned)cpus);
    cr_assert_eq(tc_pool_size(p), tc_pool_default_size());
    tc_pool_free(p);
    tc_pool_free(NULL);
}
