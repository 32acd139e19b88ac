/* Helpers shared by quant_ref.c and quant_cpu.c. Internal to kernels/. */
#ifndef TC_QUANT_INTERNAL_H
#define TC_QUANT_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "quant.h"

static inline uint16_t tcq_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tcq_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void tcq_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline float tcq_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t tcq_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* IEEE half -> float32, exactly; a NaN keeps its payload and stays signalling
 * if it was (numpy's half -> float conversion). */
static inline float tcq_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return tcq_bits_f32(sign | 0x7f800000u | m << 13);
    if (e)
        return tcq_bits_f32(sign | (e + 112) << 23 | m << 13);
    if (!m)
        return tcq_bits_f32(sign);
    /* subnormal: m * 2^-24, normalised */
    int k = __builtin_clz(m) - 21; /* shifts that bring bit 10 up */
    m <<= k;
    return tcq_bits_f32(sign | (uint32_t)(113 - k) << 23 | (m & 0x3ffu) << 13);
}
static inline float tcq_half_at(const uint8_t *p) { return tcq_half(tcq_u16(p)); }

/* float32 -> IEEE half as numpy's astype(float16): round to nearest even,
 * overflow to inf, a NaN keeps the top of its payload (never becoming inf)
 * and is not quieted. */
static inline uint16_t tcq_to_half(float f)
{
    uint32_t x = tcq_f32_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a == 0x7f800000u)
            return (uint16_t)(sign | 0x7c00u);
        uint32_t r = 0x7c00u + ((a & 0x7fffffu) >> 13);
        return (uint16_t)(sign | (r == 0x7c00u ? 0x7c01u : r));
    }
    if (a >= 0x477ff000u) /* rounds to 65536 or more */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal: drop 13 bits, nearest even; a carry moves into the exponent */
        uint32_t h = (a - 0x38000000u) >> 13, rest = a & 0x1fffu;
        h += rest > 0x1000u || (rest == 0x1000u && (h & 1));
        return (uint16_t)(sign | h);
    }
    if (a < 0x33000000u) /* at most half the smallest subnormal: zero */
        return (uint16_t)sign;
    /* subnormal: the 24-bit significand shifted into place, nearest even */
    uint32_t e = a >> 23, sig = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
    uint32_t h = sig >> shift, rest = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    h += rest > half || (rest == half && (h & 1));
    return (uint16_t)(sign | h);
}

/* float32 -> bfloat16 as ggml (and gguf-py's BF16 quantiser): a NaN is
 * quieted, keeping its sign and top payload; others round to nearest even. */
static inline uint16_t tcq_to_bf16(float f)
{
    uint32_t n = tcq_f32_bits(f);
    if ((n & 0x7fffffffu) > 0x7f800000u)
        n = (n & 0xffff0000u) | 0x00400000u;
    return (uint16_t)(((uint64_t)n + 0x7fffu + ((n >> 16) & 1u)) >> 16);
}

/* numpy's float32 -> uint8/int8 cast on x86: the low byte of the value
 * truncated to an integer; NaN, infinities and magnitudes of 2^31 and more
 * (whose low byte is zero anyway) give 0. */
static inline uint8_t tcq_low_byte(float f)
{
    if (!(f > -2147483648.0f && f < 2147483648.0f))
        return 0;
    return (uint8_t)(uint32_t)(int32_t)f;
}

/* numpy's np_roundf of gguf-py: half away from zero, as floor(a) + floor(2(a - floor(a))). */
static inline float tcq_round_away(float n)
{
    float a = __builtin_fabsf(n), fl = __builtin_floorf(a), b = fl + __builtin_floorf(2.0f * (a - fl));
    float s = n > 0.0f ? 1.0f : n < 0.0f ? -1.0f : n; /* np.sign: NaN and zeros pass through */
    return s * b;
}

/* v * -1 as x86 computes it: a NaN keeps its sign (the compiler would turn the
 * multiplication into a sign flip, which changes a NaN's sign). */
static inline float tcq_negate(float v) { return v == v ? -v : v; }

/* A value of the sign byte of IQ2/IQ3 blocks: 7 sign bits and their parity as the eighth. */
static inline uint8_t tcq_ksign(unsigned i) { return (uint8_t)(i | (__builtin_parity(i) << 7)); }

#endif
