/* The CUDA casts against tc_cast_ref on every pair: one caster reused for
 * every pair and length (its streams and buffers reused), and the one-shot
 * tc_cuda_cast. Exits 77 (meson's skip) with the reason when no GPU is
 * usable or CUDA is not built in.
 *
 * With --bench: instead, the kernel's bandwidth against the device's own
 * copy bandwidth for every pair (bench/bench.sh runs this on GPU machines). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "cast_cuda.h"

static const tc_dtype types[] = {TC_DT_F64, TC_DT_F32, TC_DT_F16, TC_DT_BF16, TC_DT_F8E4M3FN, TC_DT_F8E5M2};
#define NT (sizeof types / sizeof types[0])

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Every 8/16-bit pattern in turn; random bits (half with exponents near the
 * narrow types' ranges) for float32/float64, after a few specials. */
static void fill(tc_dtype t, void *p, size_t n)
{
    size_t sz = tc_dtype_size(t);
    static const uint64_t sp64[] = {0x7ff0000000000001ull, 0xfff8000000000000ull, 0x7ff0000000000000ull,
                                    0x8000000000000000ull, 0x0000000000000001ull, 0x3ff0010000000001ull};
    static const uint32_t sp32[] = {0x7f800001u, 0xffc01234u, 0xff800000u, 0x80000000u, 0x00000001u,
                                    0x477ff000u, 0x43e80000u, 0x47700000u};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next();
        if (sz <= 2)
            r = i;
        else if (sz == 4 && i < sizeof sp32 / sizeof sp32[0])
            r = sp32[i];
        else if (sz == 8 && i < sizeof sp64 / sizeof sp64[0])
            r = sp64[i];
        else if (i % 2 && sz == 4)
            r = (r & 0x807fffffu) | (uint64_t)(87 + (r >> 40) % 60) << 23;
        else if (i % 2)
            r = (r & 0x800fffffffffffffull) | (uint64_t)(863 + (r >> 54) % 300) << 52;
        memcpy((char *)p + i * sz, &r, sz);
    }
}

static int bench(void)
{
    const size_t n = (size_t)64 << 20;
    printf("| cast | kernel GB/s | device copy GB/s | kernel / copy |\n|---|---|---|---|\n");
    for (size_t a = 0; a < NT; a++)
        for (size_t b = 0; b < NT; b++) {
            if (a == b)
                continue;
            double ks = 0, cs = 0;
            char why[256] = "";
            if (tc_cuda_measure(0, types[b], types[a], n, 20, &ks, &cs, why, sizeof why)) {
                printf("FAIL %s->%s: %s\n", tc_dtype_name(types[a]), tc_dtype_name(types[b]), why);
                return 1;
            }
            double bytes = (double)n * (double)(tc_dtype_size(types[a]) + tc_dtype_size(types[b]));
            printf("| %s -> %s | %.0f | %.0f | %.2f |\n", tc_dtype_name(types[a]), tc_dtype_name(types[b]),
                   bytes / ks / 1e9, bytes / cs / 1e9, cs / ks);
        }
    return 0;
}

int main(int argc, char **argv)
{
    tc_cuda_info info;
    tc_cuda_query(&info);
    printf("cuda: compiled=%d available=%d count=%d runtime=%d driver=%d%s%s\n", info.compiled, info.available,
           info.count, info.runtime_version, info.driver_version, info.available ? "" : " why=", info.why);
    if (!info.available) {
        printf("SKIP: %s\n", info.why);
        char why[256] = "";
        char b[8] = {0};
        if (tc_cuda_cast(0, TC_DT_F16, b, TC_DT_F32, b, 1, why, sizeof why) != -1 || !why[0]) {
            printf("FAIL: tc_cuda_cast must fail with a reason without a device\n");
            return 1;
        }
        return 77;
    }
    if (argc > 1 && !strcmp(argv[1], "--bench"))
        return bench();
    for (int d = 0; d < info.count; d++) {
        tc_cuda_device dev;
        if (tc_cuda_device_get(&dev, d) == 0)
            printf("device %d: %s sm_%d%d, %" PRIu64 " MiB free of %" PRIu64 "\n", d, dev.name, dev.cc_major,
                   dev.cc_minor, dev.free_mem >> 20, dev.total_mem >> 20);
    }
    /* many sub-chunks of the caster, so both streams get reused; odd length */
    const size_t sizes[] = {0, 1, 1000, ((size_t)9 << 20) + 12345};
    void *in = malloc(8 * sizes[3]), *want = malloc(8 * sizes[3]), *got = malloc(8 * sizes[3]);
    if (!in || !want || !got)
        return 1;
    int fails = 0;
    char why[256] = "";
    if (tc_cuda_caster_new(info.count, why, sizeof why) || !why[0]) {
        printf("FAIL: a caster on device %d (there is none) must fail with a reason\n", info.count);
        fails++;
    }
    tc_cuda_caster *caster = tc_cuda_caster_new(0, why, sizeof why);
    if (!caster) {
        printf("FAIL: no caster on device 0: %s\n", why);
        return 1;
    }
    for (size_t a = 0; a < NT; a++)
        for (size_t b = 0; b < NT; b++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                size_t n = sizes[k], ds = tc_dtype_size(types[b]);
                fill(types[a], in, n);
                tc_cast_ref(types[b], want, types[a], in, n);
                memset(got, 0xa5, n * ds);
                /* the one-shot call for the long length, the shared caster for the rest */
                int rc = k == 3 && a == 1 ? tc_cuda_cast(0, types[b], got, types[a], in, n, why, sizeof why)
                                          : tc_cuda_caster_run(caster, types[b], got, types[a], in, n, why, sizeof why);
                if (rc) {
                    printf("FAIL %s->%s n=%zu: %s\n", tc_dtype_name(types[a]), tc_dtype_name(types[b]), n, why);
                    fails++;
                    continue;
                }
                if (n && memcmp(want, got, n * ds)) {
                    size_t i = 0;
                    while (!memcmp((char *)want + i * ds, (char *)got + i * ds, ds))
                        i++;
                    uint64_t x = 0, w = 0, g = 0;
                    memcpy(&x, (char *)in + i * tc_dtype_size(types[a]), tc_dtype_size(types[a]));
                    memcpy(&w, (char *)want + i * ds, ds);
                    memcpy(&g, (char *)got + i * ds, ds);
                    printf("FAIL %s->%s n=%zu: element %zu in 0x%" PRIx64 " ref 0x%" PRIx64 " cuda 0x%" PRIx64 "\n",
                           tc_dtype_name(types[a]), tc_dtype_name(types[b]), n, i, x, w, g);
                    fails++;
                }
            }
    tc_cuda_caster_free(caster);
    free(in);
    free(want);
    free(got);
    printf("%s: %d failures\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
