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

/* 0 finite nonzero, 1 zero, 2 inf, 3 NaN. */
static int classify(tc_dtype t, uint64_t x)
{
    uint64_t a, inf;
    switch (t) {
    case TC_DT_F64: a = x & 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull; break;
    case TC_DT_F32: a = x & 0x7fffffffu, inf = 0x7f800000u; break;
    case TC_DT_F16: a = x & 0x7fff, inf = 0x7c00; break;
    case TC_DT_BF16: a = x & 0x7fff, inf = 0x7f80; break;
    case TC_DT_F8E5M2: a = x & 0x7f, inf = 0x7c; break;
    default: a = x & 0x7f; return a == 0x7f ? 3 : a == 0; /* e4m3fn: no inf */
    }
    return a > inf ? 3 : a == inf ? 2 : a == 0;
}

int tc_cast_count(tc_cast_stats *stats, tc_dtype dst_t, tc_dtype src_t, const void *src, size_t n)
{
    if (!tc_cast_supported(dst_t, src_t))
        return -1;
    size_t ss = tc_cast_esize(src_t);
    tc_cast_stats c = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t x = tc_cast_load(src, ss, i);
        int cs = classify(src_t, x);
        if (cs == 3) {
            c.nan++;
            continue;
        }
        if (cs != 0 || dst_t == src_t)
            continue;
        uint64_t y = tcb_cast1(dst_t, src_t, x);
        int cd = classify(dst_t, y);
        /* e4m3fn saturates instead: count what would round past 448 (>= 464,
         * the tie with the missing 480), judged after the float32 step. */
        if (cd >= 2 || (dst_t == TC_DT_F8E4M3FN &&
                        (tcb_to_f32(src_t, x) & 0x7fffffffu) >= 0x43e80000u))
            c.overflow++;
        else if (cd == 1)
            c.underflow++;
    }
    stats->overflow += c.overflow;
    stats->underflow += c.underflow;
    stats->nan += c.nan;
    return 0;
}
