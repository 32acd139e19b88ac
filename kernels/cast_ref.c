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

/* The common case, a float32 source: branch-free so the compiler vectorises it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default"), optimize("O3")))
#endif
static void count_f32(tc_cast_stats *c, const uint8_t *src, size_t n, tc_cast_limits l)
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
    tc_cast_limits l;
    size_t ss = tc_cast_esize(src_t);
    bool narrows = tc_cast_limits_of(dst_t, src_t, &l);
    if (src_t == TC_DT_F32) {
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
