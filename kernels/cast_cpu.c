/* SIMD casts. Every pair is a load that widens 8 elements to float32 and a
 * store that narrows them, the same model as cast_bits.h; the hardware
 * conversions used (cvtpd2ps, cvtps2pd, F16C) round to nearest even and treat
 * NaN payloads exactly as cast_bits.h does, given the default MXCSR (no
 * FTZ/DAZ), which is also what torch assumes. Tails go through cast_bits.h. */
#include "cast.h"
#include "cast_bits.h"
#include "cast_internal.h"

#include <pthread.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define TC_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static bool force_scalar;

void tc_cast_cpu_force_scalar(bool scalar) { force_scalar = scalar; }

#ifdef TC_X86
#define AVX2 __attribute__((target("avx2,f16c"), always_inline)) static inline

static bool have_avx2(void)
{
    /* F16C straight from CPUID leaf 1 (ECX bit 29): clang's
     * __builtin_cpu_supports does not know "f16c" */
    unsigned a, b, c, d;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

static bool cpu_avx2;
static void probe_cpu(void) { cpu_avx2 = have_avx2(); }

/* Loads: 8 elements -> float32. */
AVX2 __m256 ld_f64(const void *p)
{
    const double *d = p;
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_loadu_pd(d + 4)), _mm256_cvtpd_ps(_mm256_loadu_pd(d)));
}
AVX2 __m256 ld_f32(const void *p) { return _mm256_loadu_ps(p); }
AVX2 __m256 ld_f16(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }
AVX2 __m256 ld_bf16(const void *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
}
AVX2 __m256 ld_e5m2(const void *p) /* e5m2 is the top byte of a float16 */
{
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(p)), 8));
}
AVX2 __m256 ld_e4m3(const void *p)
{
    /* eeeemmm placed at float16 bits 13..7 is the same number times 2^-8,
     * subnormals included; the sign goes to bit 15. */
    __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(p));
    __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8),
                             _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7));
    __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p));
    __m256i nan = _mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7f)), _mm256_set1_epi32(0x7f));
    __m256i nanv = _mm256_or_si256(_mm256_set1_epi32(0x7ff00000), _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x80)), 24));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_castps_si256(f), nanv, nan));
}

/* Stores: float32 -> 8 elements. bnan: bfloat16 NaN bits for this source. */
AVX2 void st_f64(void *p, __m256 f, int bnan)
{
    (void)bnan;
    _mm256_storeu_pd((double *)p, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    _mm256_storeu_pd((double *)p + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
}
AVX2 void st_f32(void *p, __m256 f, int bnan) { (void)bnan; _mm256_storeu_ps(p, f); }
AVX2 void st_f16(void *p, __m256 f, int bnan)
{
    (void)bnan;
    _mm_storeu_si128(p, _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}
AVX2 void st_lo16(void *p, __m256i r) /* low 16 bits of each lane, r < 2^16 */
{
    r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(p, _mm256_castsi256_si128(r));
}
AVX2 void st_bf16(void *p, __m256 f, int bnan)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    st_lo16(p, _mm256_blendv_epi8(r, _mm256_set1_epi32(bnan), nan));
}
/* float32 -> float8 with m mantissa bits, smallest normal exponent emin:
 * normals round on the integer bits, the subnormal range by adding
 * 2^(emin - m + 23) in float32 so the FPU rounds at the right place. */
AVX2 __m256i f8_round(__m256 f, int m, int emin)
{
    __m256i a = _mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x7fffffff));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, 23 - m), _mm256_set1_epi32(1));
    __m256i nr = _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32((1 << (22 - m)) - 1)));
    nr = _mm256_sub_epi32(_mm256_srli_epi32(nr, 23 - m), _mm256_set1_epi32((127 + emin - 1) << m));
    __m256 c = _mm256_castsi256_ps(_mm256_set1_epi32((127 + emin - m + 23) << 23));
    __m256i sr = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), c)), _mm256_castps_si256(c));
    __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32((127 + emin) << 23), a);
    return _mm256_blendv_epi8(nr, sr, sub);
}
AVX2 void st_f8(void *p, __m256 f, __m256i r, int nanv)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i s = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    r = _mm256_or_si256(_mm256_blendv_epi8(r, _mm256_set1_epi32(nanv), nan), s);
    /* byte 0 of each lane -> 8 bytes */
    r = _mm256_shuffle_epi8(r, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    r = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    _mm_storel_epi64(p, _mm256_castsi256_si128(r));
}
AVX2 void st_e4m3(void *p, __m256 f, int bnan)
{
    (void)bnan;
    __m256i r = f8_round(f, 3, -6); /* inf and overflow saturate to 448 */
    st_f8(p, f, _mm256_min_epi32(r, _mm256_set1_epi32(0x7e)), 0x7f);
}
AVX2 void st_e5m2(void *p, __m256 f, int bnan)
{
    (void)bnan;
    __m256i r = f8_round(f, 2, -14);
    __m256i big = _mm256_cmpgt_epi32(r, _mm256_set1_epi32(0x7b));
    st_f8(p, f, _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7c), big), 0x7f);
}

/* One loop per pair: with constant function arguments gcc inlines both. */
#define LOOP(LD, ST)                                                  \
    for (; i + 8 <= n; i += 8)                                        \
        ST(d + i * ds, LD(s + i * ss), bnan);                          \
    break

__attribute__((target("avx2,f16c")))
static size_t run_avx2(tc_dtype dt, char *d, tc_dtype st, const char *s, size_t n)
{
    size_t i = 0, ds = tc_cast_esize(dt), ss = tc_cast_esize(st);
    int bnan = tcb_bf16_nan(st);
#define DSTS(LD)                                       \
    switch (dt) {                                      \
    case TC_DT_F64: LOOP(LD, st_f64);                  \
    case TC_DT_F32: LOOP(LD, st_f32);                  \
    case TC_DT_F16: LOOP(LD, st_f16);                  \
    case TC_DT_BF16: LOOP(LD, st_bf16);                \
    case TC_DT_F8E4M3FN: LOOP(LD, st_e4m3);            \
    case TC_DT_F8E5M2: LOOP(LD, st_e5m2);              \
    default: break;                                    \
    }                                                  \
    break
    switch (st) {
    case TC_DT_F64: DSTS(ld_f64);
    case TC_DT_F32: DSTS(ld_f32);
    case TC_DT_F16: DSTS(ld_f16);
    case TC_DT_BF16: DSTS(ld_bf16);
    case TC_DT_F8E4M3FN: DSTS(ld_e4m3);
    case TC_DT_F8E5M2: DSTS(ld_e5m2);
    default: break;
    }
    return i; /* elements done; the caller finishes the tail */
}

/* float32 sources with the counts of tc_cast_count taken on the way: the
 * magnitude bits compared as signed 32-bit lanes (all are below 2^31), the
 * comparison masks (-1) subtracted from per-lane counters. */
#define LOOPC(ST)                                                                           \
    for (; i + 8 <= end; i += 8) {                                                          \
        __m256 f = ld_f32(s + 4 * i);                                                       \
        __m256i a = _mm256_and_si256(_mm256_castps_si256(f), abs);                          \
        cn = _mm256_sub_epi32(cn, _mm256_cmpgt_epi32(a, inf));                              \
        co = _mm256_sub_epi32(co, _mm256_and_si256(_mm256_cmpgt_epi32(a, ovm1),             \
                                                   _mm256_cmpgt_epi32(inf, a)));            \
        cu = _mm256_sub_epi32(cu, _mm256_and_si256(_mm256_cmpgt_epi32(a, zero),             \
                                                   _mm256_cmpgt_epi32(ufp1, a)));           \
        ST(d + i * ds, f, bnan);                                                            \
    }                                                                                       \
    break

AVX2 uint64_t hsum(__m256i v)
{
    uint32_t x[8];
    uint64_t t = 0;
    _mm256_storeu_si256((__m256i *)x, v);
    for (int k = 0; k < 8; k++)
        t += x[k];
    return t;
}

__attribute__((target("avx2,f16c")))
static size_t run_avx2_f32_counted(tc_cast_stats *stats, tc_dtype dt, char *d, const char *s, size_t n)
{
    tc_cast_limits l;
    tc_cast_limits_of(dt, TC_DT_F32, &l);
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                  zero = _mm256_setzero_si256(), ovm1 = _mm256_set1_epi32((int)(l.ov - 1)),
                  ufp1 = _mm256_set1_epi32((int)(l.uf + 1));
    size_t done = 0, ds = tc_cast_esize(dt);
    int bnan = tcb_bf16_nan(TC_DT_F32);
    while (done + 8 <= n) {
        /* at most 2^28 elements per pass: a lane counts 2^25 at most */
        size_t i = done, end = n - done > ((size_t)1 << 28) ? done + ((size_t)1 << 28) : n;
        __m256i cn = zero, co = zero, cu = zero;
        switch (dt) {
        case TC_DT_F64: LOOPC(st_f64);
        case TC_DT_F16: LOOPC(st_f16);
        case TC_DT_BF16: LOOPC(st_bf16);
        case TC_DT_F8E4M3FN: LOOPC(st_e4m3);
        case TC_DT_F8E5M2: LOOPC(st_e5m2);
        default: break;
        }
        stats->nan += hsum(cn);
        stats->overflow += hsum(co);
        stats->underflow += hsum(cu);
        if (i == done)
            break; /* a pair without a loop here */
        done = i;
    }
    return done;
}
#endif

const char *tc_cast_cpu_path(void)
{
#ifdef TC_X86
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, probe_cpu);
    if (!force_scalar && cpu_avx2)
        return "avx2+f16c";
#endif
    return "scalar";
}

typedef struct job {
    tc_dtype dt, st;
    char *d;
    const char *s;
    size_t n;
    bool simd;
    tc_cast_stats *stats; /* count too (NULL: no) */
} job;

static void *run(void *arg)
{
    job *j = arg;
    size_t i = 0, counted = 0;
#ifdef TC_X86
    if (j->simd && j->stats && j->st == TC_DT_F32)
        counted = i = run_avx2_f32_counted(j->stats, j->dt, j->d, j->s, j->n);
    else if (j->simd)
        i = run_avx2(j->dt, j->d, j->st, j->s, j->n);
#endif
    size_t ds = tc_cast_esize(j->dt), ss = tc_cast_esize(j->st);
    if (j->stats) /* what the fused loop did not count */
        tc_cast_count(j->stats, j->dt, j->st, j->s + counted * ss, j->n - counted);
    tc_cast_ref(j->dt, j->d + i * ds, j->st, j->s + i * ss, j->n - i);
    return NULL;
}

/* Above this many elements the work is split over two threads. */
#define TC_CAST_THREAD_MIN ((size_t)4 << 20)

static int cast_cpu(tc_cast_stats *stats, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n)
{
    if (!tc_cast_supported(dst_t, src_t))
        return -1;
    if (dst_t == src_t || n == 0) {
        if (stats)
            tc_cast_count(stats, dst_t, src_t, src, n);
        return tc_cast_ref(dst_t, dst, src_t, src, n);
    }
    bool simd = tc_cast_cpu_path()[0] != 's';
    job a = {dst_t, src_t, dst, src, n, simd, stats};
    if (n <= TC_CAST_THREAD_MIN) {
        run(&a);
        return 0;
    }
    size_t h = n / 2 & ~(size_t)63;
    tc_cast_stats sb = {0, 0, 0};
    job b = a;
    a.n = h;
    b.d += h * tc_cast_esize(dst_t);
    b.s += h * tc_cast_esize(src_t);
    b.n = n - h;
    b.stats = stats ? &sb : NULL;
    pthread_t t;
    bool threaded = pthread_create(&t, NULL, run, &b) == 0;
    run(&a);
    if (threaded)
        pthread_join(t, NULL);
    else
        run(&b); /* no thread available: same result, just slower */
    if (stats) {
        stats->overflow += sb.overflow;
        stats->underflow += sb.underflow;
        stats->nan += sb.nan;
    }
    return 0;
}

int tc_cast_cpu(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n)
{
    return cast_cpu(NULL, dst_t, dst, src_t, src, n);
}

int tc_cast_cpu_counted(tc_cast_stats *stats, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n)
{
    return cast_cpu(stats, dst_t, dst, src_t, src, n);
}
