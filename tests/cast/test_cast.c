/* tc_cast_ref against torch's golden output (gen_vectors.py), tc_cast_cpu
 * against tc_cast_ref, tc_cast_count on known values. Data dir: $CAST_DATA. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"

static const tc_dtype types[] = {TC_DT_F64, TC_DT_F32, TC_DT_F16, TC_DT_BF16, TC_DT_F8E4M3FN, TC_DT_F8E5M2};
#define NT (sizeof types / sizeof types[0])

static void *slurp(const char *name, size_t *len)
{
    const char *dir = getenv("CAST_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "data", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (set CAST_DATA)", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    rewind(f);
    void *p = malloc(sz ? (size_t)sz : 1);
    cr_assert(p && fread(p, 1, (size_t)sz, f) == (size_t)sz, "cannot read %s", path);
    fclose(f);
    *len = (size_t)sz;
    return p;
}

static uint64_t elem(const void *p, size_t sz, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * sz, sz);
    return v;
}

/* Fail with the first differing element, its input and both outputs. */
static void same(const char *what, tc_dtype dt, tc_dtype st, const void *src, const void *want,
                 const void *got, size_t n)
{
    size_t ds = tc_dtype_size(dt), ss = tc_dtype_size(st);
    if (!memcmp(want, got, n * ds))
        return;
    for (size_t i = 0; i < n; i++)
        if (elem(want, ds, i) != elem(got, ds, i)) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s %s->%s: element %zu of %zu: in 0x%" PRIx64 " want 0x%" PRIx64
                     " got 0x%" PRIx64, what, tc_dtype_name(st), tc_dtype_name(dt), i, n, elem(src, ss, i),
                     elem(want, ds, i), elem(got, ds, i));
            cr_assert_fail("%s", msg);
        }
}

Test(cast, golden_ref)
{
    for (size_t a = 0; a < NT; a++) {
        char name[128];
        size_t len, olen;
        snprintf(name, sizeof name, "in_%s.bin", tc_dtype_name(types[a]));
        void *in = slurp(name, &len);
        size_t n = len / tc_dtype_size(types[a]);
        cr_assert(n > 0);
        for (size_t b = 0; b < NT; b++) {
            if (a == b)
                continue;
            snprintf(name, sizeof name, "%s_to_%s.bin", tc_dtype_name(types[a]), tc_dtype_name(types[b]));
            void *want = slurp(name, &olen);
            cr_assert_eq(olen, n * tc_dtype_size(types[b]), "%s: wrong size", name);
            void *got = malloc(olen);
            cr_assert_eq(tc_cast_ref(types[b], got, types[a], in, n), 0);
            same("golden", types[b], types[a], in, want, got, n);
            /* the fast path on the same torch data */
            memset(got, 0xa5, olen);
            cr_assert_eq(tc_cast_cpu(types[b], got, types[a], in, n), 0);
            same("golden cpu", types[b], types[a], in, want, got, n);
            free(want);
            free(got);
        }
        free(in);
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* n elements of type t: every bit pattern for 8/16-bit types (repeated),
 * otherwise random bits, random exponents near the narrow types' ranges,
 * and the golden inputs' special values. */
static void *fill(tc_dtype t, size_t n)
{
    size_t sz = tc_dtype_size(t);
    uint8_t *p = malloc(n * sz);
    size_t i = 0;
    if (sz <= 2) {
        for (; i < n; i++)
            memcpy(p + i * sz, &(uint16_t){(uint16_t)i}, sz);
        return p;
    }
    char name[64];
    size_t len;
    snprintf(name, sizeof name, "in_%s.bin", tc_dtype_name(t));
    void *g = slurp(name, &len);
    memcpy(p, g, len < n * sz ? len : n * sz);
    i = len < n * sz ? len / sz : n;
    free(g);
    for (; i < n; i++) {
        uint64_t r = next();
        if (i % 2 && sz == 4) /* exponent within 2^-40..2^20 */
            r = (r & 0x807fffffu) | (uint64_t)(87 + (r >> 40) % 60) << 23;
        else if (i % 2) /* exponent within 2^-160..2^140 */
            r = (r & 0x800fffffffffffffull) | (uint64_t)(863 + (r >> 54) % 300) << 52;
        memcpy(p + i * sz, &r, sz);
    }
    return p;
}

static void cpu_vs_ref(size_t n)
{
    for (size_t a = 0; a < NT; a++) {
        void *in = fill(types[a], n);
        for (size_t b = 0; b < NT; b++) {
            size_t ds = tc_dtype_size(types[b]);
            void *want = malloc(n * ds), *got = malloc(n * ds);
            cr_assert_eq(tc_cast_ref(types[b], want, types[a], in, n), 0);
            for (int scalar = 1; scalar >= 0; scalar--) {
                tc_cast_cpu_force_scalar(scalar);
                memset(got, 0x5a, n * ds);
                cr_assert_eq(tc_cast_cpu(types[b], got, types[a], in, n), 0);
                same(tc_cast_cpu_path(), types[b], types[a], in, want, got, n);
            }
            free(want);
            free(got);
        }
        free(in);
    }
    tc_cast_cpu_force_scalar(false);
}

Test(cast, cpu_matches_ref) { cpu_vs_ref(65536 + 1000 + 7); }

Test(cast, cpu_threaded_large) { cpu_vs_ref(((size_t)4 << 20) + 4099); }

Test(cast, cpu_path_names)
{
    tc_cast_cpu_force_scalar(true);
    cr_assert_str_eq(tc_cast_cpu_path(), "scalar");
    tc_cast_cpu_force_scalar(false);
    cr_log_info("cpu path: %s", tc_cast_cpu_path());
}

Test(cast, unsupported)
{
    char buf[16] = {0};
    cr_assert(!tc_cast_supported(TC_DT_I32, TC_DT_F32));
    cr_assert(!tc_cast_supported(TC_DT_F32, TC_DT_F8E8M0FNU));
    cr_assert(tc_cast_supported(TC_DT_F8E4M3FN, TC_DT_F8E5M2));
    cr_assert_eq(tc_cast_ref(TC_DT_I32, buf, TC_DT_F32, buf, 1), -1);
    cr_assert_eq(tc_cast_cpu(TC_DT_F32, buf, TC_DT_C64, buf, 1), -1);
    tc_cast_stats s = {0, 0, 0};
    cr_assert_eq(tc_cast_count(&s, TC_DT_BOOL, TC_DT_F32, buf, 1), -1);
    cr_assert_eq(tc_cast_ref(TC_DT_F32, buf, TC_DT_F16, buf, 0), 0);
}

static tc_cast_stats count_f32(tc_dtype dt, const float *v, size_t n)
{
    tc_cast_stats s = {1, 2, 3}; /* adds to what is there */
    cr_assert_eq(tc_cast_count(&s, dt, TC_DT_F32, v, n), 0);
    s.overflow -= 1, s.underflow -= 2, s.nan -= 3;
    return s;
}

#define EXPECT(s, o, u, nn)                                                                    \
    cr_expect((s).overflow == (o) && (s).underflow == (u) && (s).nan == (nn),                   \
              "line %d: got overflow %llu underflow %llu nan %llu", __LINE__,                   \
              (unsigned long long)(s).overflow, (unsigned long long)(s).underflow,            \
              (unsigned long long)(s).nan)

Test(cast, count)
{
    const float inf = __builtin_inff(), nan = __builtin_nanf("");
    /* f16: 65519 rounds to 65504, 65520 (the tie) to inf; 2^-25 ties to 0,
     * 2^-25 plus a bit rounds up to the smallest subnormal. */
    const float h[] = {65519.0f, 65520.0f, -1e10f, inf, nan, -nan, 0x1p-25f, 0x1.000002p-25f, -1e-30f, 0.0f, -0.0f, 1.0f};
    tc_cast_stats s = count_f32(TC_DT_F16, h, 12);
    EXPECT(s, 2, 2, 2);
    /* bf16 has float32's exponents but rounds 3.4e38 past its max (3.3895e38)
     * to inf; 2^-133 is its smallest subnormal, 2^-135 and below vanish. */
    const float b[] = {3.4e38f, 3.39e38f, 0x1p-133f, 0x1p-135f, 1e-45f, nan};
    s = count_f32(TC_DT_BF16, b, 6);
    EXPECT(s, 1, 2, 1);
    /* e4m3fn saturates: 463 is plain rounding to 448, 464 and up overflow,
     * inf is not finite so not counted; below 2^-10 (the tie) is zero. */
    const float e4[] = {448.0f, 463.0f, 464.0f, -1e6f, inf, 0x1p-10f, 0x1.1p-10f, nan};
    s = count_f32(TC_DT_F8E4M3FN, e4, 8);
    EXPECT(s, 2, 1, 1);
    /* e5m2: max 57344, the tie 61440 rounds to inf */
    const float e5[] = {57344.0f, 61439.0f, 61440.0f, 0x1p-17f, 0x1.8p-17f};
    s = count_f32(TC_DT_F8E5M2, e5, 5);
    EXPECT(s, 1, 1, 0);
    /* widening never overflows; NaN counted in every direction */
    const uint16_t hh[] = {0x7c00, 0x7e00, 0xfc01, 0x0001, 0x7bff};
    s = (tc_cast_stats){0, 0, 0};
    cr_assert_eq(tc_cast_count(&s, TC_DT_F32, TC_DT_F16, hh, 5), 0);
    EXPECT(s, 0, 0, 2);
    /* float64 rounds through float32: 1e-46 is nonzero in float64 and
     * becomes zero; 1e39 overflows float32 already. */
    const double d[] = {1e-46, 1e39, 1e300, 1.0, -0.0};
    s = (tc_cast_stats){0, 0, 0};
    cr_assert_eq(tc_cast_count(&s, TC_DT_F32, TC_DT_F64, d, 5), 0);
    EXPECT(s, 2, 1, 0);
    s = (tc_cast_stats){0, 0, 0};
    cr_assert_eq(tc_cast_count(&s, TC_DT_F16, TC_DT_F64, d, 5), 0);
    EXPECT(s, 2, 1, 0);
}

/* A few hand-checked results that pin torch's behaviour independent of the
 * golden files (see cast_bits.h). */
Test(cast, torch_rules)
{
    uint16_t h;
    uint8_t q;
    uint32_t f;
    /* float64 rounds twice: 1 + 2^-11 + 2^-40 -> float32 tie -> even 1.0 */
    double d = 1.0 + 0x1p-11 + 0x1p-40;
    tc_cast_ref(TC_DT_F16, &h, TC_DT_F64, &d, 1);
    cr_expect_eq(h, 0x3c00);
    /* f32 -> bf16 NaN is 0xffff whatever its sign; f16 -> bf16 NaN 0x7fc0 */
    f = 0xff800001u;
    tc_cast_ref(TC_DT_BF16, &h, TC_DT_F32, &f, 1);
    cr_expect_eq(h, 0xffff);
    uint16_t hn = 0xfd23;
    tc_cast_ref(TC_DT_BF16, &h, TC_DT_F16, &hn, 1);
    cr_expect_eq(h, 0x7fc0);
    /* f32 -> f16 keeps sign and top payload bits, sets the quiet bit */
    f = 0xff802000u;
    tc_cast_ref(TC_DT_F16, &h, TC_DT_F32, &f, 1);
    cr_expect_eq(h, 0xfe01);
    /* e4m3fn: inf saturates to 448, NaN keeps its sign */
    float fi = -__builtin_inff();
    tc_cast_ref(TC_DT_F8E4M3FN, &q, TC_DT_F32, &fi, 1);
    cr_expect_eq(q, 0xfe);
    q = 0xff;
    tc_cast_ref(TC_DT_F32, &f, TC_DT_F8E4M3FN, &q, 1);
    cr_expect_eq(f, 0xfff00000u);
}

/* The definition tc_cast_count implements with thresholds: cast each element
 * and look at what it became. */
static int slow_class(tc_dtype t, uint64_t x)
{
    uint64_t a, inf;
    switch (t) {
    case TC_DT_F64: a = x & 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull; break;
    case TC_DT_F32: a = x & 0x7fffffffu, inf = 0x7f800000u; break;
    case TC_DT_F16: a = x & 0x7fff, inf = 0x7c00; break;
    case TC_DT_BF16: a = x & 0x7fff, inf = 0x7f80; break;
    case TC_DT_F8E5M2: a = x & 0x7f, inf = 0x7c; break;
    default: a = x & 0x7f; return a == 0x7f ? 3 : a == 0;
    }
    return a > inf ? 3 : a == inf ? 2 : a == 0;
}

Test(cast, count_matches_casting)
{
    static const tc_dtype ts[] = {TC_DT_F64, TC_DT_F32, TC_DT_F16, TC_DT_BF16, TC_DT_F8E4M3FN, TC_DT_F8E5M2};
    enum { N = 1 << 16 };
    static uint8_t src[N * 8], dst[N * 8];
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof src; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        src[i] = (uint8_t)r;
    }
    for (size_t a = 0; a < 6; a++)
        for (size_t b = 0; b < 6; b++) {
            tc_dtype st = ts[a], dt = ts[b];
            size_t ss = tc_dtype_size(st), ds = tc_dtype_size(dt);
            tc_cast_stats got = {0, 0, 0}, want = {0, 0, 0};
            cr_assert_eq(tc_cast_count(&got, dt, st, src, N), 0);
            cr_assert_eq(tc_cast_ref(dt, dst, st, src, N), 0);
            for (size_t i = 0; i < N; i++) {
                uint64_t x = 0, y = 0;
                memcpy(&x, src + i * ss, ss);
                memcpy(&y, dst + i * ds, ds);
                int cs = slow_class(st, x), cd = slow_class(dt, y);
                if (cs == 3) {
                    want.nan++;
                    continue;
                }
                if (cs != 0 || st == dt)
                    continue;
                if (cd >= 2)
                    want.overflow++;
                else if (cd == 1)
                    want.underflow++;
            }
            if (dt == TC_DT_F8E4M3FN)
                want.overflow = got.overflow; /* saturation: checked by Test(cast, count) */
            cr_expect(got.overflow == want.overflow && got.underflow == want.underflow && got.nan == want.nan,
                      "%s -> %s: got %llu/%llu/%llu want %llu/%llu/%llu", tc_dtype_name(st), tc_dtype_name(dt),
                      (unsigned long long)got.overflow, (unsigned long long)got.underflow,
                      (unsigned long long)got.nan, (unsigned long long)want.overflow,
                      (unsigned long long)want.underflow, (unsigned long long)want.nan);
        }
}

/* tc_cast_cpu_counted is tc_cast_count followed by tc_cast_cpu: the same
 * bytes and the same counts, on every pair, on both CPU paths, at lengths
 * around the 8-element SIMD step and across the two-thread split. Random bits
 * hit NaN payloads, infinities and subnormals; the float32 sources also get
 * values placed on each type's overflow and underflow thresholds. */
Test(cast, counted_equals_count_then_cast)
{
    static const size_t lens[] = {0, 1, 7, 8, 9, 63, 1000, 65537, ((size_t)4 << 20) + 13};
    size_t maxn = ((size_t)4 << 20) + 13;
    uint8_t *src = malloc(maxn * 8), *want = malloc(maxn * 8), *got = malloc(maxn * 8);
    cr_assert(src && want && got);
    uint64_t r = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < maxn * 8; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        src[i] = (uint8_t)r;
    }
    static const uint32_t edges[] = {0x477ff000u, 0x477fefffu, 0x7f7f8000u, 0x7f7f7fffu, 0x47700000u,
                                     0x476fffffu, 0x43e80000u, 0x43e7ffffu, 0x33000000u, 0x33000001u,
                                     0x00008000u, 0x00008001u, 0x37000000u, 0x37000001u, 0x3a800000u,
                                     0x3a800001u, 0x7f800000u, 0x7fc00001u, 0x00000000u, 0x00000001u};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        for (size_t k = 0; k < 64; k++) { /* both signs, spread over the buffer */
            uint32_t v = edges[i] | (k & 1 ? 0x80000000u : 0);
            memcpy(src + 4 * ((i * 64 + k) * 977 % maxn), &v, 4);
        }
    for (int scalar = 0; scalar < 2; scalar++) {
        tc_cast_cpu_force_scalar(scalar);
        for (size_t a = 0; a < NT; a++)
            for (size_t b = 0; b < NT; b++)
                for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                    tc_dtype st = types[a], dt = types[b];
                    size_t n = lens[l];
                    if (n > 70000 && st != TC_DT_F32 && dt != TC_DT_F32)
                        continue; /* the long length is for the fused float32 loop */
                    tc_cast_stats ws = {0, 0, 0}, gs = {0, 0, 0};
                    cr_assert_eq(tc_cast_count(&ws, dt, st, src, n), 0);
                    cr_assert_eq(tc_cast_cpu(dt, want, st, src, n), 0);
                    cr_assert_eq(tc_cast_cpu_counted(&gs, dt, got, st, src, n), 0);
                    same("counted", dt, st, src, want, got, n);
                    cr_assert(ws.overflow == gs.overflow && ws.underflow == gs.underflow && ws.nan == gs.nan,
                              "%s -> %s, n=%zu, %s: counted %llu/%llu/%llu, count %llu/%llu/%llu",
                              tc_dtype_name(st), tc_dtype_name(dt), n, scalar ? "scalar" : "simd",
                              (unsigned long long)gs.overflow, (unsigned long long)gs.underflow,
                              (unsigned long long)gs.nan, (unsigned long long)ws.overflow,
                              (unsigned long long)ws.underflow, (unsigned long long)ws.nan);
                    if (st == TC_DT_F32 && dt != TC_DT_F32 && n > 70000)
                        cr_assert(gs.nan > 0 && (dt == TC_DT_F64 || gs.overflow > 0),
                                  "%s -> %s: the data should hit NaN and overflow", tc_dtype_name(st),
                                  tc_dtype_name(dt));
                }
    }
    tc_cast_cpu_force_scalar(false);
    cr_assert_eq(tc_cast_cpu_counted(NULL, TC_DT_F32, got, TC_DT_C64, src, 1), -1);
    free(src);
    free(want);
    free(got);
}
