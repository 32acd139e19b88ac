/* tc_cuda_cast against tc_cast_ref on every pair. Exits 77 (meson's skip)
 * with the reason when no GPU is usable or CUDA is not built in. */
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

int main(void)
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
    for (int d = 0; d < info.count; d++) {
        tc_cuda_device dev;
        if (tc_cuda_device_get(&dev, d) == 0)
            printf("device %d: %s sm_%d%d, %" PRIu64 " MiB free of %" PRIu64 "\n", d, dev.name, dev.cc_major,
                   dev.cc_minor, dev.free_mem >> 20, dev.total_mem >> 20);
    }
    /* more than two 4 Mi chunks, so both streams get reused; odd length */
    const size_t sizes[] = {0, 1, 1000, ((size_t)9 << 20) + 12345};
    void *in = malloc(8 * sizes[3]), *want = malloc(8 * sizes[3]), *got = malloc(8 * sizes[3]);
    if (!in || !want || !got)
        return 1;
    int fails = 0;
    for (size_t a = 0; a < NT; a++)
        for (size_t b = 0; b < NT; b++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
                size_t n = sizes[k], ds = tc_dtype_size(types[b]);
                char why[256] = "";
                fill(types[a], in, n);
                tc_cast_ref(types[b], want, types[a], in, n);
                memset(got, 0xa5, n * ds);
                if (tc_cuda_cast(0, types[b], got, types[a], in, n, why, sizeof why)) {
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
    free(in);
    free(want);
    free(got);
    printf("%s: %d failures\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
