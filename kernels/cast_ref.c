#include "cast.h"
#include "cast_bits.h"
#include "cast_internal.h"

#include <assert.h>

static_assert((int)TCB_F64 == TC_DT_F64 && (int)TCB_F32 == TC_DT_F32 && (int)TCB_F16 == TC_DT_F16 &&
                  (int)TCB_BF16 == TC_DT_BF16 && (int)TCB_E5M2 == TC_DT_F8E5M2 &&
                  (int)TCB_E4M3 == TC_DT_F8E4M3FN,
              "cast_bits.h type codes must match tc_dtype");

bool tc_cast_supported(tc_dtype dst, tc_dtype src)
{
    return tc_cast_esize(dst) && tc_cast_esize(src);
}

int tc_cast_ref(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n)
{
    if (!tc_cast_supported(dst_t, src_t))
        return -1;
    size_t ds = tc_cast_esize(dst_t), ss = tc_cast_esize(src_t);
    if (dst_t == src_t) {
        if (n)
            memcpy(dst, src, n * ss);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        tc_cast_store(dst, ds, i, tcb_cast1(dst_t, src_t, tc_cast_load(src, ss, i)));
    return 0;
}

/* Counting works on the float32 value every cast goes through (float64 ->
 * float32 rounds, the narrower types widen exactly): a finite value overflows
 * when its float32 magnitude is at least the type's rounding threshold to inf
 * (for float8_e4m3fn, which saturates: 464, the tie with the missing 480),
 * and underflows when it is nonzero but at most half the smallest subnormal
 * (the tie rounds to even, zero). */
typedef struct limits {
    uint32_t ov, uf; /* float32 magnitude bits */
} limits;

static bool count_limits(tc_dtype dst, limits *l)
{
    switch (dst) {
    case TC_DT_F32: l->ov = 0x7f800000u, l->uf = 0; return true; /* only the float64 step can */
    case TC_DT_F16: l->ov = 0x477ff000u, l->uf = 0x33000000u; return true;
    case TC_DT_BF16: l->ov = 0x7f7f8000u, l->uf = 0x00008000u; return true;
    case TC_DT_F8E5M2: l->ov = 0x47700000u, l->uf = 0x37000000u; return true;
    case TC_DT_F8E4M3FN: l->ov = 0x43e80000u, l->uf = 0x3a800000u; return true;
    default: return false;
    }
}

/* The common case, a float32 source: branch-free so the compiler vectorises it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default"), optimize("O3")))
#endif
static void count_f32(tc_cast_stats *c, const uint8_t *src, size_t n, limits l)
{
    uint64_t ov = 0, uf = 0, nan = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a;
        memcpy(&a, src + 4 * i, 4);
        a &= 0x7fffffffu;
        nan += a > 0x7f800000u;
        ov += (a >= l.ov) & (a < 0x7f800000u);
        uf += (a != 0) & (a <= l.uf);
    }
    c->overflow += ov;
    c->underflow += uf;
    c->nan += nan;
}

int tc_cast_count(tc_cast_stats *stats, tc_dtype dst_t, tc_dtype src_t, const void *src, size_t n)
{
    if (!tc_cast_supported(dst_t, src_t))
        return -1;
    limits l = {0, 0};
    size_t ss = tc_cast_esize(src_t);
    bool narrows = dst_t != src_t && count_limits(dst_t, &l);
    if (src_t == TC_DT_F32) {
        if (!narrows)
            l.ov = 0x7f800000u, l.uf = 0;
        count_f32(stats, src, n, l);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t x = tc_cast_load(src, ss, i);
        uint32_t f = tcb_to_f32(src_t, x) & 0x7fffffffu;
        bool nonzero = src_t == TC_DT_F64 ? (x & 0x7fffffffffffffffull) != 0 : f != 0;
        if (f > 0x7f800000u) {
            stats->nan++;
            continue;
        }
        bool src_inf = src_t == TC_DT_F64 ? (x & 0x7fffffffffffffffull) == 0x7ff0000000000000ull
                                          : f == 0x7f800000u && src_t != TC_DT_F8E4M3FN;
        if (!narrows || src_inf)
            continue;
        if (f >= l.ov)
            stats->overflow++;
        else if (nonzero && f <= l.uf)
            stats->underflow++;
    }
    return 0;
}
