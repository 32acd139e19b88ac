/* The fast block codecs: the types the benchmarks and common files use
 * written as straight loops over whole blocks that the compiler vectorises
 * (AVX2 clones on x86), every other type through the reference. Large
 * inputs are split over two threads. Results equal the reference bit for
 * bit (tests/gguf/test_quant.c); the operations are the same, in the same
 * order, only batched. */
#include "quant_internal.h"

#include <pthread.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define TC_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static bool force_scalar;

void tc_quant_force_scalar(bool scalar) { force_scalar = scalar; }

static bool avx2_only; /* x86 only: never AVX-512 */

void tc_quant_force_avx2(bool avx2) { avx2_only = avx2; }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((target_clones("avx2", "default"), optimize("O3")))
#else
#define HOT
#endif

HOT static void dec_q8_0(float *restrict y, const uint8_t *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 34, y += 32) {
        float d = tcq_half_at(b);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)b[2 + j] * d;
    }
}

HOT static void dec_q4_0(float *restrict y, const uint8_t *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 18, y += 32) {
        float d = tcq_half_at(b);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)((b[2 + j] & 0xf) - 8);
            y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
        }
    }
}

HOT static void dec_q4_k(float *restrict y, const uint8_t *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 144, y += 256) {
        float d = tcq_half_at(b), dmin = tcq_half_at(b + 2);
        const uint8_t *s = b + 4, *qs = b + 16;
        for (int c = 0; c < 4; c++) { /* 32 bytes of qs: sub-blocks 2c (low nibbles) and 2c+1 (high) */
            int j0 = 2 * c, j1 = 2 * c + 1;
            int sc0 = j0 < 4 ? s[j0] & 0x3f : (s[8 + j0 - 4] & 0xf) | ((s[j0 - 4] >> 2) & 0x30);
            int mn0 = j0 < 4 ? s[4 + j0] & 0x3f : (s[8 + j0 - 4] >> 4) | ((s[4 + j0 - 4] >> 2) & 0x30);
            int sc1 = j1 < 4 ? s[j1] & 0x3f : (s[8 + j1 - 4] & 0xf) | ((s[j1 - 4] >> 2) & 0x30);
            int mn1 = j1 < 4 ? s[4 + j1] & 0x3f : (s[8 + j1 - 4] >> 4) | ((s[4 + j1 - 4] >> 2) & 0x30);
            float d0 = d * (float)sc0, m0 = dmin * (float)mn0, d1 = d * (float)sc1, m1 = dmin * (float)mn1;
            const uint8_t *q = qs + 32 * c;
            float *y0 = y + 64 * c, *y1 = y0 + 32;
            for (int l = 0; l < 32; l++) {
                y0[l] = d0 * (float)(q[l] & 0xf) - m0;
                y1[l] = d1 * (float)(q[l] >> 4) - m1;
            }
        }
    }
}

HOT static void dec_q6_k(float *restrict y, const uint8_t *restrict b, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 210, y += 256) {
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = tcq_half_at(b + 208);
        for (int a = 0; a < 2; a++) {
            const uint8_t *ql = b + 64 * a, *qh = b + 128 + 32 * a;
            float *ya = y + 128 * a;
            for (int r = 0; r < 128; r++) {
                int lo = (ql[r % 64] >> (4 * (r / 64))) & 0xf, hi = (qh[r % 32] >> (2 * (r / 32))) & 3;
                ya[r] = (d * (float)sc[(128 * a + r) / 16]) * (float)((int8_t)(lo | hi << 4) - 32);
            }
        }
    }
}

HOT static void enc_q8_0(uint8_t *restrict b, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 34, x += 32) {
        float amax = 0.0f;
        int nan = 0;
        for (int j = 0; j < 32; j++) {
            float a = __builtin_fabsf(x[j]);
            nan |= a != a;
            amax = a > amax ? a : amax;
        }
        for (int j = 0; nan && j < 32; j++) /* numpy's max is the first NaN's |x| */
            if (__builtin_fabsf(x[j]) != __builtin_fabsf(x[j])) {
                amax = __builtin_fabsf(x[j]);
                break;
            }
        float d = amax / 127.0f, id = d == 0.0f ? 0.0f : 1.0f / d;
        tcq_put16(b, tcq_to_half(d));
        for (int j = 0; j < 32; j++)
            b[2 + j] = tcq_low_byte(tcq_round_away(x[j] * id));
    }
}

HOT static void enc_q4_0(uint8_t *restrict b, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++, b += 18, x += 32) {
        int best = 0, nan = -1;
        for (int j = 0; j < 32; j++) {
            float a = __builtin_fabsf(x[j]);
            if (a != a && nan < 0)
                nan = j;
            best = a > __builtin_fabsf(x[best]) ? j : best;
        }
        float d = x[nan >= 0 ? nan : best] / -8.0f, id = d == 0.0f ? 0.0f : 1.0f / d;
        tcq_put16(b, tcq_to_half(d));
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            uint8_t v = tcq_low_byte(__builtin_truncf(x[j] * id + 8.5f));
            q[j] = v > 15 ? 15 : v;
        }
        for (int j = 0; j < 16; j++)
            b[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    }
}

#ifdef TC_X86
/* AVX2 (without FMA: numpy never fuses) versions of the two encoders the compiler does not vectorise:
 * the same float32 operations as the reference, eight lanes at a time. A block holding a NaN goes
 * through the reference (numpy's NaN choices are the reference's to keep); the others' scale is
 * finite or infinite, where F16C rounds to half exactly as numpy does. */
#define AVX2 __attribute__((target("avx2,f16c")))

static bool avx2_ok(void)
{
    static int ok = -1;
    if (ok < 0) {
        __builtin_cpu_init();
        unsigned a, b, c, d;
        ok = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)); /* F16C */
    }
    return ok;
}

/* The low byte of each lane of v[0..4) truncated to an integer, in order (cvttps2dq gives 0x80000000,
 * low byte 0, for NaN and out-of-range values: numpy's cast on x86). */
AVX2 static inline __m256i low_bytes(const __m256 *v)
{
    const __m256i ff = _mm256_set1_epi32(0xff);
    __m256i a = _mm256_and_si256(_mm256_cvttps_epi32(v[0]), ff), b = _mm256_and_si256(_mm256_cvttps_epi32(v[1]), ff);
    __m256i c = _mm256_and_si256(_mm256_cvttps_epi32(v[2]), ff), d = _mm256_and_si256(_mm256_cvttps_epi32(v[3]), ff);
    __m256i x = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
    return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Eight blocks' largest |x| at once: lane k of the result is the largest lane of m[k]. */
AVX2 static inline __m256 hmax8(const __m256 *m)
{
    __m256 s[4];
    for (int k = 0; k < 4; k++) /* within each 128-bit half: pairs of lanes of m[2k], m[2k + 1] */
        s[k] = _mm256_max_ps(_mm256_shuffle_ps(m[2 * k], m[2 * k + 1], 0x88), _mm256_shuffle_ps(m[2 * k], m[2 * k + 1], 0xdd));
    __m256 q0 = _mm256_max_ps(_mm256_shuffle_ps(s[0], s[1], 0x88), _mm256_shuffle_ps(s[0], s[1], 0xdd));
    __m256 q1 = _mm256_max_ps(_mm256_shuffle_ps(s[2], s[3], 0x88), _mm256_shuffle_ps(s[2], s[3], 0xdd));
    /* q0: blocks 0-3 of the lanes 0-3 in its low half, of the lanes 4-7 in its high half; q1: blocks 4-7 */
    __m256 lo = _mm256_permute2f128_ps(q0, q1, 0x20), hi = _mm256_permute2f128_ps(q0, q1, 0x31);
    return _mm256_max_ps(lo, hi);
}

/* Eight values from value i of x: float32, or bfloat16 widened (exactly: its bits are float32's high half). */
#define ALWAYS __attribute__((always_inline))
AVX2 ALWAYS static inline __m256 load8(const void *x, size_t i, bool bf16)
{
    if (!bf16)
        return _mm256_loadu_ps((const float *)x + i);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)x + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Block k of x through the reference, widened to float32 first where it is bfloat16. */
static void block_ref(tc_qtype q, uint8_t *out, const void *x, size_t k, bool bf16)
{
    float f[32];
    const float *v = (const float *)x + 32 * k;
    if (bf16) {
        const uint16_t *h = (const uint16_t *)x + 32 * k;
        for (int j = 0; j < 32; j++) {
            uint32_t u = (uint32_t)h[j] << 16;
            memcpy(&f[j], &u, 4);
        }
        v = f;
    }
    tc_quant_encode_ref(q, out, v, 1);
}

/* Block k of x loaded into v[0..4), its lanes' |x| largest in *m; whether it holds a NaN. */
AVX2 ALWAYS static inline bool block_load(const void *x, size_t k, __m256 *v, __m256 *m, bool bf16)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 a = _mm256_setzero_ps(), u = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        v[j] = load8(x, 32 * k + 8 * (size_t)j, bf16);
        a = _mm256_max_ps(a, _mm256_and_ps(v[j], absm));
        u = _mm256_or_ps(u, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
    }
    *m = a;
    return _mm256_movemask_ps(u) != 0;
}

/* 1 / d, and 0 where d is 0, in eight lanes (numpy: d == 0 gives 0). */
AVX2 static inline __m256 inverse(__m256 d)
{
    __m256 id = _mm256_div_ps(_mm256_set1_ps(1.0f), d);
    return _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ), id);
}

AVX2 static inline __m256 lane(__m256 v, int k) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(k)); }

/* Blocks of Q8_0, eight at a time: their scales computed together, each block's values then as
 * in the reference; a block holding a NaN through the reference itself. x: float32 or bfloat16. */
AVX2 ALWAYS static inline void q8_0_avx2(uint8_t *restrict b, const void *restrict x, size_t n, bool bf16)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), sgn = _mm256_set1_ps(-0.0f);
    const __m256 two = _mm256_set1_ps(2.0f);
    for (size_t i = 0; i < n; i += 8) {
        size_t nb = n - i < 8 ? n - i : 8;
        __m256 v[8][4], m[8];
        unsigned nan = 0;
        for (size_t k = 0; k < 8; k++) {
            if (k < nb)
                nan |= (unsigned)block_load(x, i + k, v[k], &m[k], bf16) << k;
            else
                m[k] = _mm256_setzero_ps();
        }
        __m256 d = _mm256_div_ps(hmax8(m), _mm256_set1_ps(127.0f)), id = inverse(d);
        uint16_t h[8];
        _mm_storeu_si128((__m128i *)(void *)h, _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (size_t k = 0; k < nb; k++) {
            uint8_t *o = b + 34 * (i + k);
            if (nan >> k & 1) {
                block_ref(TC_Q_Q8_0, o, x, i + k, bf16);
                continue;
            }
            tcq_put16(o, h[k]);
            __m256 vid = lane(id, (int)k), r[4];
            for (int j = 0; j < 4; j++) { /* sign(p) * (floor(a) + floor(2 (a - floor(a)))), a = |p| */
                __m256 p = _mm256_mul_ps(v[k][j], vid), a = _mm256_and_ps(p, absm), fl = _mm256_floor_ps(a);
                __m256 q = _mm256_add_ps(fl, _mm256_floor_ps(_mm256_mul_ps(two, _mm256_sub_ps(a, fl))));
                r[j] = _mm256_or_ps(q, _mm256_and_ps(p, sgn));
            }
            _mm256_storeu_si256((__m256i *)(void *)(o + 2), low_bytes(r));
        }
    }
}

/* Blocks of Q4_0, eight at a time as Q8_0's. The scale is the value of largest |x| (numpy's argmax:
 * the first such) over -8: the block's largest value when it is larger than minus the smallest, the
 * smallest when that is larger; when they are equal, whichever comes first. */
AVX2 ALWAYS static inline void q4_0_avx2(uint8_t *restrict b, const void *restrict x, size_t n, bool bf16)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), sgn = _mm256_set1_ps(-0.0f);
    const __m256 half8 = _mm256_set1_ps(8.5f);
    for (size_t i = 0; i < n; i += 8) {
        size_t nb = n - i < 8 ? n - i : 8;
        __m256 v[8][4], hi[8], lo[8];
        unsigned nan = 0;
        for (size_t k = 0; k < 8; k++) {
            __m256 h = _mm256_setzero_ps(), l = h, u = h;
            for (int j = 0; k < nb && j < 4; j++) {
                v[k][j] = load8(x, 32 * (i + k) + 8 * (size_t)j, bf16);
                h = _mm256_max_ps(h, v[k][j]);
                l = _mm256_min_ps(l, v[k][j]);
                u = _mm256_or_ps(u, _mm256_cmp_ps(v[k][j], v[k][j], _CMP_UNORD_Q));
            }
            hi[k] = h, lo[k] = _mm256_xor_ps(l, sgn); /* minus the smallest (at least 0, as the largest) */
            nan |= (unsigned)(_mm256_movemask_ps(u) != 0) << k;
        }
        /* (max takes its second operand between zeros: |x| is cleared of a sign it may carry so) */
        __m256 top = hmax8(hi), bot = hmax8(lo), amax = _mm256_and_ps(_mm256_max_ps(top, bot), absm);
        /* negative where minus the smallest is the larger; a tie (both there) decided block by block */
        unsigned neg = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(bot, top, _CMP_GT_OQ));
        unsigned tie = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(bot, top, _CMP_EQ_OQ)) & ~nan & ((1u << nb) - 1);
        for (; tie; tie &= tie - 1) {
            int k = __builtin_ctz(tie);
            __m256 big = lane(amax, k);
            uint32_t eq = 0, sign = 0;
            for (int j = 0; j < 4; j++) {
                eq |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(v[k][j], absm), big, _CMP_EQ_OQ)) << (8 * j);
                sign |= (uint32_t)_mm256_movemask_ps(v[k][j]) << (8 * j);
            }
            neg |= (sign >> __builtin_ctz(eq) & 1u) << k; /* eq has a bit: amax is some |x| */
        }
        /* the signed value: amax with the sign bit of lanes in neg */
        const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        __m256i negl = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)neg), bit), bit);
        __m256 xm = _mm256_or_ps(amax, _mm256_and_ps(_mm256_castsi256_ps(negl), sgn));
        __m256 d = _mm256_div_ps(xm, _mm256_set1_ps(-8.0f)), id = inverse(d);
        uint16_t h[8];
        _mm_storeu_si128((__m128i *)(void *)h, _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (size_t k = 0; k < nb; k++) {
            uint8_t *o = b + 18 * (i + k);
            if (nan >> k & 1) {
                block_ref(TC_Q_Q4_0, o, x, i + k, bf16);
                continue;
            }
            tcq_put16(o, h[k]);
            __m256 vid = lane(id, (int)k), r[4];
            for (int j = 0; j < 4; j++) /* low_bytes truncates, as the reference's truncf then cast */
                r[j] = _mm256_add_ps(_mm256_mul_ps(v[k][j], vid), half8);
            __m256i q = _mm256_min_epu8(low_bytes(r), _mm256_set1_epi8(15));
            __m128i l = _mm256_castsi256_si128(q), u = _mm256_extracti128_si256(q, 1);
            _mm_storeu_si128((__m128i *)(void *)(o + 2), _mm_or_si128(l, _mm_slli_epi16(u, 4)));
        }
    }
}

/* AVX-512F versions of the same two encoders, sixteen blocks at a time, for the whole groups of
 * sixteen; the blocks left over go through the AVX2 code. The operations are the AVX2 code's,
 * lane for lane (never fused into a multiply-add: the kernels build with -ffp-contract=off). */
#define AVX512 __attribute__((target("avx512f,avx2,f16c")))

static bool avx512_ok(void)
{
    static int ok = -1;
    if (ok < 0) {
        __builtin_cpu_init();
        ok = __builtin_cpu_supports("avx512f");
    }
    return ok && !avx2_only;
}

/* Sixteen values from value i of x: float32, or bfloat16 widened. */
AVX512 ALWAYS static inline __m512 load16(const void *x, size_t i, bool bf16)
{
    if (!bf16)
        return _mm512_loadu_ps((const float *)x + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)x + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

#define SHUF_MAX(a, b) _mm512_max_ps(_mm512_shuffle_ps((a), (b), 0x88), _mm512_shuffle_ps((a), (b), 0xdd))
#define LANES_MAX(a, b) _mm512_max_ps(_mm512_shuffle_f32x4((a), (b), 0x88), _mm512_shuffle_f32x4((a), (b), 0xdd))

/* Sixteen blocks' largest value at once: lane k of the result is the largest lane of m[k]. */
AVX512 ALWAYS static inline __m512 hmax16(const __m512 *m)
{
    __m512 s[8], t[4];
    for (int k = 0; k < 8; k++) /* each 128-bit lane: pairs of m[2k]'s, then m[2k + 1]'s */
        s[k] = SHUF_MAX(m[2 * k], m[2 * k + 1]);
    for (int k = 0; k < 4; k++) /* element i of each 128-bit lane of t[k]: m[4k + i]'s four there */
        t[k] = SHUF_MAX(s[2 * k], s[2 * k + 1]);
    __m512 u0 = LANES_MAX(t[0], t[1]), u1 = LANES_MAX(t[2], t[3]); /* 128-bit lanes paired */
    return LANES_MAX(u0, u1); /* 128-bit lane q: t[q] over all four lanes, so element 4q + i: m[4q + i] */
}

/* 1 / d, and 0 where d is 0. */
AVX512 ALWAYS static inline __m512 inverse16(__m512 d)
{
    __mmask16 z = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_maskz_div_ps((__mmask16)~z, _mm512_set1_ps(1.0f), d);
}

AVX512 ALWAYS static inline __m512 lane16(__m512 v, int k) { return _mm512_permutexvar_ps(_mm512_set1_epi32(k), v); }

AVX512 ALWAYS static inline __m512 and16(__m512 a, __m512i m) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), m)); }

/* The low byte of each lane truncated to an integer (as low_bytes). */
AVX512 ALWAYS static inline __m128i low16(__m512 v) { return _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)); }

/* Block k of x on: float32 or bfloat16 values. */
static inline const void *block_at(const void *x, size_t k, bool bf16)
{
    return bf16 ? (const void *)((const uint16_t *)x + 32 * k) : (const void *)((const float *)x + 32 * k);
}

AVX512 static void q8_0_avx512(uint8_t *restrict b, const void *restrict x, size_t n, bool bf16)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), sgn = _mm512_set1_epi32((int)0x80000000u);
    const __m512 two = _mm512_set1_ps(2.0f);
    size_t whole = n - n % 16;
    for (size_t i = 0; i < whole; i += 16) {
        __m512 v[16][2], m[16];
        unsigned nan = 0;
        for (size_t k = 0; k < 16; k++) {
            v[k][0] = load16(x, 32 * (i + k), bf16);
            v[k][1] = load16(x, 32 * (i + k) + 16, bf16);
            m[k] = _mm512_max_ps(and16(v[k][0], absm), and16(v[k][1], absm));
            nan |= (unsigned)(_mm512_cmp_ps_mask(v[k][0], v[k][1], _CMP_UNORD_Q) != 0) << k;
        }
        __m512 d = _mm512_div_ps(hmax16(m), _mm512_set1_ps(127.0f)), id = inverse16(d);
        uint16_t h[16];
        _mm256_storeu_si256((__m256i *)(void *)h, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (size_t k = 0; k < 16; k++) {
            uint8_t *o = b + 34 * (i + k);
            if (nan >> k & 1) {
                block_ref(TC_Q_Q8_0, o, x, i + k, bf16);
                continue;
            }
            tcq_put16(o, h[k]);
            __m512 vid = lane16(id, (int)k);
            for (int j = 0; j < 2; j++) { /* sign(p) * (floor(a) + floor(2 (a - floor(a)))), a = |p| */
                __m512 p = _mm512_mul_ps(v[k][j], vid), a = and16(p, absm), fl = _mm512_floor_ps(a);
                __m512 q = _mm512_add_ps(fl, _mm512_floor_ps(_mm512_mul_ps(two, _mm512_sub_ps(a, fl))));
                __m512 r = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(q), _mm512_castps_si512(and16(p, sgn))));
                _mm_storeu_si128((__m128i *)(void *)(o + 2 + 16 * j), low16(r));
            }
        }
    }
    if (whole < n)
        q8_0_avx2(b + 34 * whole, block_at(x, whole, bf16), n - whole, bf16);
}

AVX512 static void q4_0_avx512(uint8_t *restrict b, const void *restrict x, size_t n, bool bf16)
{
    const __m512i absm = _mm512_set1_epi32(0x7fffffff), sgn = _mm512_set1_epi32((int)0x80000000u);
    const __m512 half8 = _mm512_set1_ps(8.5f);
    size_t whole = n - n % 16;
    for (size_t i = 0; i < whole; i += 16) {
        __m512 v[16][2], hi[16], lo[16];
        unsigned nan = 0;
        for (size_t k = 0; k < 16; k++) {
            v[k][0] = load16(x, 32 * (i + k), bf16);
            v[k][1] = load16(x, 32 * (i + k) + 16, bf16);
            __m512 z = _mm512_setzero_ps();
            hi[k] = _mm512_max_ps(_mm512_max_ps(z, v[k][0]), v[k][1]);
            __m512 l = _mm512_min_ps(_mm512_min_ps(z, v[k][0]), v[k][1]);
            lo[k] = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(l), sgn));
            nan |= (unsigned)(_mm512_cmp_ps_mask(v[k][0], v[k][1], _CMP_UNORD_Q) != 0) << k;
        }
        __m512 top = hmax16(hi), bot = hmax16(lo), amax = and16(_mm512_max_ps(top, bot), absm);
        unsigned neg = _mm512_cmp_ps_mask(bot, top, _CMP_GT_OQ);
        unsigned tie = _mm512_cmp_ps_mask(bot, top, _CMP_EQ_OQ) & ~nan & 0xffffu;
        for (; tie; tie &= tie - 1) {
            int k = __builtin_ctz(tie);
            __m512 big = lane16(amax, k);
            uint32_t eq = 0, sign = 0;
            for (int j = 0; j < 2; j++) {
                eq |= (uint32_t)_mm512_cmp_ps_mask(and16(v[k][j], absm), big, _CMP_EQ_OQ) << (16 * j);
                sign |= (uint32_t)_mm512_cmplt_epi32_mask(_mm512_castps_si512(v[k][j]), _mm512_setzero_si512()) << (16 * j);
            }
            neg |= (sign >> __builtin_ctz(eq) & 1u) << k; /* eq has a bit: amax is some |x| */
        }
        __m512 xm = _mm512_castsi512_ps(_mm512_mask_or_epi32(_mm512_castps_si512(amax), (__mmask16)neg, _mm512_castps_si512(amax), sgn));
        __m512 d = _mm512_div_ps(xm, _mm512_set1_ps(-8.0f)), id = inverse16(d);
        uint16_t h[16];
        _mm256_storeu_si256((__m256i *)(void *)h, _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
        for (size_t k = 0; k < 16; k++) {
            uint8_t *o = b + 18 * (i + k);
            if (nan >> k & 1) {
                block_ref(TC_Q_Q4_0, o, x, i + k, bf16);
                continue;
            }
            tcq_put16(o, h[k]);
            __m512 vid = lane16(id, (int)k);
            const __m128i fifteen = _mm_set1_epi8(15);
            __m128i l = _mm_min_epu8(low16(_mm512_add_ps(_mm512_mul_ps(v[k][0], vid), half8)), fifteen);
            __m128i u = _mm_min_epu8(low16(_mm512_add_ps(_mm512_mul_ps(v[k][1], vid), half8)), fifteen);
            _mm_storeu_si128((__m128i *)(void *)(o + 2), _mm_or_si128(l, _mm_slli_epi16(u, 4)));
        }
    }
    if (whole < n)
        q4_0_avx2(b + 18 * whole, block_at(x, whole, bf16), n - whole, bf16);
}

AVX2 static void enc_q8_0_avx2(uint8_t *restrict b, const float *restrict x, size_t n) { q8_0_avx2(b, x, n, false); }
AVX2 static void enc_q4_0_avx2(uint8_t *restrict b, const float *restrict x, size_t n) { q4_0_avx2(b, x, n, false); }
AVX2 static void enc_q8_0_avx2_bf16(uint8_t *restrict b, const void *restrict x, size_t n) { q8_0_avx2(b, x, n, true); }
AVX2 static void enc_q4_0_avx2_bf16(uint8_t *restrict b, const void *restrict x, size_t n) { q4_0_avx2(b, x, n, true); }
static void enc_q8_0_avx512(uint8_t *restrict b, const float *restrict x, size_t n) { q8_0_avx512(b, x, n, false); }
static void enc_q4_0_avx512(uint8_t *restrict b, const float *restrict x, size_t n) { q4_0_avx512(b, x, n, false); }
#endif

HOT static void enc_f16(uint8_t *restrict b, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tcq_put16(b + 2 * i, tcq_to_half(x[i]));
}

HOT static void enc_bf16(uint8_t *restrict b, const float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tcq_put16(b + 2 * i, tcq_to_bf16(x[i]));
}

typedef struct job {
    bool enc;
    tc_qtype q;
    void *dst;
    const void *src;
    size_t n;
    int rc;
} job;

static void *run(void *arg)
{
    job *j = arg;
    j->rc = 0;
    if (j->enc) {
        switch (force_scalar ? TC_Q_NONE : j->q) {
#ifdef TC_X86
        case TC_Q_Q8_0: (avx512_ok() ? enc_q8_0_avx512 : avx2_ok() ? enc_q8_0_avx2 : enc_q8_0)(j->dst, j->src, j->n); return NULL;
        case TC_Q_Q4_0: (avx512_ok() ? enc_q4_0_avx512 : avx2_ok() ? enc_q4_0_avx2 : enc_q4_0)(j->dst, j->src, j->n); return NULL;
#else
        case TC_Q_Q8_0: enc_q8_0(j->dst, j->src, j->n); return NULL;
        case TC_Q_Q4_0: enc_q4_0(j->dst, j->src, j->n); return NULL;
#endif
        case TC_Q_F16: enc_f16(j->dst, j->src, j->n); return NULL;
        case TC_Q_BF16: enc_bf16(j->dst, j->src, j->n); return NULL;
        default: j->rc = tc_quant_encode_ref(j->q, j->dst, j->src, j->n); return NULL;
        }
    }
    switch (force_scalar ? TC_Q_NONE : j->q) {
    case TC_Q_Q8_0: dec_q8_0(j->dst, j->src, j->n); return NULL;
    case TC_Q_Q4_0: dec_q4_0(j->dst, j->src, j->n); return NULL;
    case TC_Q_Q4_K: dec_q4_k(j->dst, j->src, j->n); return NULL;
    case TC_Q_Q6_K: dec_q6_k(j->dst, j->src, j->n); return NULL;
    default: j->rc = tc_quant_decode_ref(j->q, j->dst, j->src, j->n); return NULL;
    }
}

/* Above this many values the work is split over two threads. */
#define THREAD_MIN ((size_t)1 << 20)

/* n blocks (encoding: n values for the element types) split in two at a block boundary. */
static int split(bool enc, tc_qtype q, void *dst, const void *src, size_t n)
{
    const tc_qtype_info *t = tc_qtype_get(q);
    size_t in = enc ? t->block * 4 : t->bytes, out = enc ? t->bytes : t->block * 4;
    if (enc && t->block == 1) /* element types: sizes per value */
        in = 4, out = t->bytes;
    job a = {enc, q, dst, src, n, 0};
    if (n * t->block <= THREAD_MIN) {
        run(&a);
        return a.rc;
    }
    size_t h = n / 2;
    job b = a;
    a.n = h;
    b.dst = (uint8_t *)dst + h * out;
    b.src = (const uint8_t *)src + h * in;
    b.n = n - h;
    pthread_t th;
    bool threaded = pthread_create(&th, NULL, run, &b) == 0;
    run(&a);
    if (threaded)
        pthread_join(th, NULL);
    else
        run(&b);
    return a.rc ? a.rc : b.rc;
}

int tc_quant_decode(tc_qtype q, float *dst, const void *src, size_t n)
{
    if (!tc_quant_can_decode(q))
        return -1;
    return split(false, q, dst, src, n);
}

int tc_quant_encode(tc_qtype q, void *dst, const float *src, size_t n)
{
    if (!tc_quant_can_encode(q))
        return -1;
    if (q == TC_Q_F32)
        return tc_quant_encode_ref(q, dst, src, n);
    return split(true, q, dst, src, n);
}

/* Values per step where bfloat16 is widened into a buffer for the other encoders. */
#define WIDEN 2048

int tc_quant_encode_bf16(tc_qtype q, void *dst, const void *src, size_t n)
{
    if (!tc_quant_can_encode(q))
        return -1;
#ifdef TC_X86
    if (!force_scalar && avx512_ok() && (q == TC_Q_Q8_0 || q == TC_Q_Q4_0)) {
        (q == TC_Q_Q8_0 ? q8_0_avx512 : q4_0_avx512)(dst, src, n, true);
        return 0;
    }
    if (!force_scalar && avx2_ok() && (q == TC_Q_Q8_0 || q == TC_Q_Q4_0)) {
        (q == TC_Q_Q8_0 ? enc_q8_0_avx2_bf16 : enc_q4_0_avx2_bf16)(dst, src, n);
        return 0;
    }
#endif
    const tc_qtype_info *t = tc_qtype_get(q);
    size_t step = WIDEN / t->block; /* blocks (values, for the element types) per step */
    float f[WIDEN];
    for (size_t k = 0; k < n; k += step) {
        size_t m = n - k < step ? n - k : step, nv = m * t->block;
        const uint16_t *h = (const uint16_t *)src + k * t->block;
        for (size_t j = 0; j < nv; j++) {
            uint32_t u = (uint32_t)h[j] << 16;
            memcpy(&f[j], &u, 4);
        }
        int rc = tc_quant_encode(q, (uint8_t *)dst + k * t->bytes, f, m);
        if (rc)
            return rc;
    }
    return 0;
}
