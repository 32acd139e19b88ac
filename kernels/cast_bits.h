/* Per-element float conversions on raw bits, shared by the C reference
 * (cast_ref.c), the SIMD tails (cast_cpu.c) and the CUDA kernels
 * (cast_cuda.cu), so all three agree by construction. Internal to kernels/.
 *
 * Model of torch >= 2.x CPU tensor.to(dtype) (measured on torch 2.15 with
 * AVX2/AVX512 kernels; see tests/cast/gen_vectors.py for the vectors):
 * every cast goes through float32 except float32 <-> float64 itself, so
 * float64 -> float16/bfloat16/float8 rounds twice (to float32, then on).
 * Rounding is to nearest even with subnormals; overflow gives inf, except
 * float8_e4m3fn, which has no inf and saturates to +-448 (inf too).
 * NaN bits, which torch does not canonicalise uniformly:
 *   to float32:  f64 keeps the top payload bits and sets the quiet bit (like
 *                x86 cvtsd2ss); f16 and e5m2 (a truncated f16) likewise
 *                (like F16C vcvtph2ps); bf16 is a plain shift (a signalling
 *                NaN stays signalling); e4m3fn NaN becomes sign|0x7ff00000.
 *   float32 -> float64 / float16: payload kept, quiet bit set, sign kept.
 *   -> bfloat16: 0xffff from float32/float64 sources (torch's vectorised
 *                rounding), 0x7fc0 from float16/float8 sources (c10's scalar
 *                BFloat16 conversion); the sign is lost either way.
 *   -> float8:   sign|0x7f.
 * All arithmetic is on integers so no FPU mode (FTZ/DAZ, rounding) leaks in. */
#ifndef TC_CAST_BITS_H
#define TC_CAST_BITS_H

#include <stdint.h>

#ifdef __CUDACC__
#define TCB_FN static inline __host__ __device__
#else
#define TCB_FN static inline
#endif

TCB_FN int tcb_lead(uint64_t x) /* index of the highest set bit, x != 0 */
{
#ifdef __CUDA_ARCH__
    return 63 - __clzll((long long)x);
#else
    return 63 - __builtin_clzll(x);
#endif
}

/* Round sig * 2^e (sig != 0) to a format with mbits stored mantissa bits and
 * smallest normal exponent emin, to nearest even. Returns the magnitude bits
 * (exponent field << mbits | mantissa), possibly past the largest finite
 * value: the caller decides between inf and saturation. */
TCB_FN uint64_t tcb_round(uint64_t sig, int e, int mbits, int emin)
{
    int E = e + tcb_lead(sig);
    int sh = (E < emin ? emin : E) - mbits - e; /* quantum exponent - e */
    uint64_t m;
    if (sh <= 0) {
        m = sig << -sh;
    } else if (sh >= 64) {
        m = 0; /* below half the smallest quantum: sig < 2^53 */
    } else {
        uint64_t rem = sig & ((1ull << sh) - 1), half = 1ull << (sh - 1);
        m = sig >> sh;
        if (rem > half || (rem == half && (m & 1)))
            m++;
    }
    /* A subnormal (or a carry into the first normal) encodes as m itself;
     * a normal as (E - emin) << mbits plus m with its implicit bit, which
     * also absorbs a rounding carry into the next binade. */
    return E < emin ? m : ((uint64_t)(E - emin) << mbits) + m;
}

/* Split finite float32 bits into sig * 2^e. */
TCB_FN uint64_t tcb_f32_sig(uint32_t a, int *e)
{
    uint32_t ex = a >> 23, m = a & 0x7fffff;
    *e = ex ? (int)ex - 150 : -149;
    return ex ? (m | 0x800000u) : m;
}

TCB_FN uint32_t tcb_f64_to_f32(uint64_t x)
{
    uint32_t s = (uint32_t)(x >> 32) & 0x80000000u;
    uint64_t a = x & 0x7fffffffffffffffull, m = a & 0xfffffffffffffull;
    uint32_t ex = (uint32_t)(a >> 52);
    if (a > 0x7ff0000000000000ull)
        return s | 0x7fc00000u | (uint32_t)(m >> 29);
    if (a == 0x7ff0000000000000ull)
        return s | 0x7f800000u;
    if (a == 0)
        return s;
    uint64_t r = ex ? tcb_round(m | (1ull << 52), (int)ex - 1075, 23, -126)
                    : tcb_round(m, -1074, 23, -126);
    return s | (r >= 0x7f800000u ? 0x7f800000u : (uint32_t)r);
}

TCB_FN uint64_t tcb_f32_to_f64(uint32_t x)
{
    uint64_t s = (uint64_t)(x & 0x80000000u) << 32;
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return s | 0x7ff8000000000000ull | ((uint64_t)(a & 0x7fffff) << 29);
    if (a == 0x7f800000u)
        return s | 0x7ff0000000000000ull;
    if (a == 0)
        return s;
    int e;
    uint64_t sig = tcb_f32_sig(a, &e);
    return s | tcb_round(sig, e, 52, -1022); /* exact */
}

/* Half-like widening (f16, and e5m2 as its top byte): exact, NaN quieted. */
TCB_FN uint32_t tcb_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, ex = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (ex == 0x1f)
        return s | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0);
    if (ex == 0 && m == 0)
        return s;
    return s | (uint32_t)(ex ? tcb_round(m | 0x400, (int)ex - 25, 23, -126)
                             : tcb_round(m, -24, 23, -126));
}

TCB_FN uint32_t tcb_bf16_to_f32(uint16_t h) { return (uint32_t)h << 16; }

TCB_FN uint32_t tcb_e5m2_to_f32(uint8_t v) { return tcb_f16_to_f32((uint16_t)(v << 8)); }

TCB_FN uint32_t tcb_e4m3_to_f32(uint8_t v)
{
    uint32_t s = (uint32_t)(v & 0x80) << 24, ex = (v >> 3) & 0xf, m = v & 7;
    if ((v & 0x7f) == 0x7f)
        return s | 0x7ff00000u; /* c10's bit trick: NaN exponent | mantissa 111 */
    if (ex == 0 && m == 0)
        return s;
    return s | (uint32_t)(ex ? tcb_round(m | 8, (int)ex - 10, 23, -126)
                             : tcb_round(m, -9, 23, -126));
}

TCB_FN uint16_t tcb_f32_to_f16(uint32_t x)
{
    uint16_t s = (uint16_t)((x >> 16) & 0x8000);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(s | 0x7e00 | ((a & 0x7fffff) >> 13));
    if (a == 0x7f800000u)
        return s | 0x7c00;
    if (a == 0)
        return s;
    int e;
    uint64_t sig = tcb_f32_sig(a, &e), r = tcb_round(sig, e, 10, -14);
    return (uint16_t)(s | (r >= 0x7c00 ? 0x7c00 : r));
}

/* nan: the bits torch gives a NaN, which depend on the source type. */
TCB_FN uint16_t tcb_f32_to_bf16(uint32_t x, uint16_t nan)
{
    uint16_t s = (uint16_t)((x >> 16) & 0x8000);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return nan;
    if (a == 0x7f800000u)
        return s | 0x7f80;
    if (a == 0)
        return s;
    int e;
    uint64_t sig = tcb_f32_sig(a, &e), r = tcb_round(sig, e, 7, -126);
    return (uint16_t)(s | (r >= 0x7f80 ? 0x7f80 : r));
}

TCB_FN uint8_t tcb_f32_to_e4m3(uint32_t x)
{
    uint8_t s = (uint8_t)((x >> 24) & 0x80);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return s | 0x7f;
    if (a >= 0x43e00000u) /* >= 448, inf included: saturate */
        return s | 0x7e;
    if (a == 0)
        return s;
    int e;
    uint64_t sig = tcb_f32_sig(a, &e), r = tcb_round(sig, e, 3, -6);
    return (uint8_t)(s | (r > 0x7e ? 0x7e : r));
}

TCB_FN uint8_t tcb_f32_to_e5m2(uint32_t x)
{
    uint8_t s = (uint8_t)((x >> 24) & 0x80);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return s | 0x7f;
    if (a >= 0x7f800000u)
        return s | 0x7c;
    if (a == 0)
        return s;
    int e;
    uint64_t sig = tcb_f32_sig(a, &e), r = tcb_round(sig, e, 2, -14);
    return (uint8_t)(s | (r >= 0x7c ? 0x7c : r));
}

/* Type codes below are tc_dtype values; kept as ints so this header needs no
 * other include and works in device code. */
enum { TCB_F64 = 1, TCB_F32 = 2, TCB_F16 = 3, TCB_BF16 = 4, TCB_E5M2 = 19, TCB_E4M3 = 20 };

TCB_FN uint32_t tcb_to_f32(int src, uint64_t x)
{
    switch (src) {
    case TCB_F64: return tcb_f64_to_f32(x);
    case TCB_F16: return tcb_f16_to_f32((uint16_t)x);
    case TCB_BF16: return tcb_bf16_to_f32((uint16_t)x);
    case TCB_E5M2: return tcb_e5m2_to_f32((uint8_t)x);
    case TCB_E4M3: return tcb_e4m3_to_f32((uint8_t)x);
    default: return (uint32_t)x;
    }
}

TCB_FN uint16_t tcb_bf16_nan(int src)
{
    return (src == TCB_F32 || src == TCB_F64) ? 0xffff : 0x7fc0;
}

/* One element, src != dst, both supported; bits in the low end of x. */
TCB_FN uint64_t tcb_cast1(int dst, int src, uint64_t x)
{
    uint32_t f = tcb_to_f32(src, x);
    switch (dst) {
    case TCB_F64: return tcb_f32_to_f64(f);
    case TCB_F16: return tcb_f32_to_f16(f);
    case TCB_BF16: return tcb_f32_to_bf16(f, tcb_bf16_nan(src));
    case TCB_E5M2: return tcb_f32_to_e5m2(f);
    case TCB_E4M3: return tcb_f32_to_e4m3(f);
    default: return f;
    }
}

#endif
