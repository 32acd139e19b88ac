#include "compare.h"

#include <math.h>
#include <string.h>

#include "cast.h"

#ifndef __SIZEOF_INT128__
#error "compare.c needs a 128-bit integer type (gcc or clang on a 64-bit target)"
#endif
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#if defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

#define BLOCK 256 /* elements decoded at a time */

tc_cmp_class tc_cmp_class_of(tc_dtype t)
{
    switch (tc_dtype_get(t)->kind) {
    case TC_KIND_FLOAT: return TC_CMP_FLOAT;
    case TC_KIND_INT:
    case TC_KIND_BOOL: return TC_CMP_INT;
    case TC_KIND_COMPLEX: return TC_CMP_COMPLEX;
    default: return TC_CMP_RAW;
    }
}

bool tc_cmp_comparable(tc_dtype a, tc_dtype b)
{
    tc_cmp_class x = tc_cmp_class_of(a), y = tc_cmp_class_of(b);
    if (x == TC_CMP_RAW || y == TC_CMP_RAW)
        return a == b && tc_dtype_size(a) > 0;
    return true;
}

void tc_cmp_res_init(tc_cmp_res *r)
{
    memset(r, 0, sizeof *r);
    r->first = r->max_abs_at = r->max_rel_at = TC_CMP_NONE;
}

/* ---- element values --------------------------------------------------------------------- */

static bool is_unsigned(tc_dtype t) { return t == TC_DT_U8 || t == TC_DT_U16 || t == TC_DT_U32 || t == TC_DT_U64 || t == TC_DT_BOOL; }

static inline i128 load_int(tc_dtype t, const uint8_t *p)
{
    switch (t) {
    case TC_DT_BOOL: return p[0] != 0;
    case TC_DT_U8: return p[0];
    case TC_DT_I8: return (int8_t)p[0];
    case TC_DT_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case TC_DT_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case TC_DT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case TC_DT_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case TC_DT_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case TC_DT_U64: { uint64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

/* float8 formats the cast kernels do not take: sign, exponent and mantissa
 * bits, bias; NaN is 0x80 (fnuz) or 0xff (e8m0, which has no sign or zero). */
static double fnuz(uint8_t x, int mbits, int bias)
{
    if (x == 0x80)
        return NAN;
    int e = (x & 0x7f) >> mbits, m = x & ((1 << mbits) - 1);
    double v = e ? ldexp(1.0 + ldexp(m, -mbits), e - bias) : ldexp(m, 1 - bias - mbits);
    return x & 0x80 ? -v : v;
}

static double e8m0(uint8_t x) { return x == 0xff ? NAN : ldexp(1.0, x - 127); }

/* n elements of t at p as float64: real parts into re, imaginary parts into im (0 for reals). */
static void decode(tc_dtype t, const uint8_t *p, size_t n, double *re, double *im)
{
    double tmp[2 * BLOCK];
    for (size_t i = 0; i < n; i++)
        im[i] = 0;
    switch (t) {
    case TC_DT_F64: memcpy(re, p, n * 8); return;
    case TC_DT_F32:
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, p + 4 * i, 4);
            re[i] = f;
        }
        return;
    case TC_DT_F16:
    case TC_DT_BF16:
    case TC_DT_F8E5M2:
    case TC_DT_F8E4M3FN: tc_cast_cpu(TC_DT_F64, re, t, p, n); return; /* exact: every value is a float64 */
    case TC_DT_F8E5M2FNUZ:
        for (size_t i = 0; i < n; i++)
            re[i] = fnuz(p[i], 2, 16);
        return;
    case TC_DT_F8E4M3FNUZ:
        for (size_t i = 0; i < n; i++)
            re[i] = fnuz(p[i], 3, 8);
        return;
    case TC_DT_F8E8M0FNU:
        for (size_t i = 0; i < n; i++)
            re[i] = e8m0(p[i]);
        return;
    case TC_DT_C32:
    case TC_DT_C64:
    case TC_DT_C128:
        if (t == TC_DT_C128) {
            memcpy(tmp, p, n * 16);
        } else if (t == TC_DT_C64) {
            for (size_t i = 0; i < 2 * n; i++) {
                float f;
                memcpy(&f, p + 4 * i, 4);
                tmp[i] = f;
            }
        } else {
            tc_cast_cpu(TC_DT_F64, tmp, TC_DT_F16, p, 2 * n);
        }
        for (size_t i = 0; i < n; i++) {
            re[i] = tmp[2 * i];
            im[i] = tmp[2 * i + 1];
        }
        return;
    default: { /* integers and bool */
        size_t e = tc_dtype_size(t);
        for (size_t i = 0; i < n; i++)
            re[i] = (double)load_int(t, p + i * e);
        return;
    }
    }
}

static tc_cmp_val float_val(tc_dtype t, double re, double im)
{
    tc_cmp_val v = {.kind = tc_cmp_class_of(t) == TC_CMP_COMPLEX ? 'c' : 'f', .re = re, .im = im};
    return v;
}

static tc_cmp_val int_val(tc_dtype t, i128 x)
{
    tc_cmp_val v = {.kind = is_unsigned(t) ? 'u' : 'i'};
    if (v.kind == 'u')
        v.u = (uint64_t)x;
    else
        v.i = (int64_t)x;
    return v;
}

/* ---- non-finite counts of identical runs ------------------------------------------------- */

HOT static void nonfinite(tc_dtype t, const uint8_t *p, size_t n, uint64_t *nan, uint64_t *inf)
{
    uint64_t a = 0, b = 0;
    switch (t) {
    case TC_DT_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, p + 4 * i, 4);
            x &= 0x7fffffffu;
            a += x > 0x7f800000u;
            b += x == 0x7f800000u;
        }
        break;
    case TC_DT_F64:
        for (size_t i = 0; i < n; i++) {
            uint64_t x;
            memcpy(&x, p + 8 * i, 8);
            x &= 0x7fffffffffffffffull;
            a += x > 0x7ff0000000000000ull;
            b += x == 0x7ff0000000000000ull;
        }
        break;
    case TC_DT_F16:
    case TC_DT_BF16: {
        uint16_t e = t == TC_DT_F16 ? 0x7c00 : 0x7f80;
        for (size_t i = 0; i < n; i++) {
            uint16_t x;
            memcpy(&x, p + 2 * i, 2);
            x &= 0x7fff;
            a += x > e;
            b += x == e;
        }
        break;
    }
    case TC_DT_F8E5M2:
        for (size_t i = 0; i < n; i++) {
            a += (p[i] & 0x7f) > 0x7c;
            b += (p[i] & 0x7f) == 0x7c;
        }
        break;
    case TC_DT_F8E4M3FN:
        for (size_t i = 0; i < n; i++)
            a += (p[i] & 0x7f) == 0x7f;
        break;
    case TC_DT_F8E5M2FNUZ:
    case TC_DT_F8E4M3FNUZ:
        for (size_t i = 0; i < n; i++)
            a += p[i] == 0x80;
        break;
    case TC_DT_F8E8M0FNU:
        for (size_t i = 0; i < n; i++)
            a += p[i] == 0xff;
        break;
    case TC_DT_C32:
    case TC_DT_C64:
    case TC_DT_C128: {
        double re[BLOCK], im[BLOCK];
        size_t e = tc_dtype_size(t);
        for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
            size_t k = n - i0 < BLOCK ? n - i0 : BLOCK;
            decode(t, p + i0 * e, k, re, im);
            for (size_t i = 0; i < k; i++) {
                bool nn = isnan(re[i]) || isnan(im[i]);
                a += nn;
                b += !nn && (isinf(re[i]) || isinf(im[i]));
            }
        }
        break;
    }
    default: break; /* integers, bool, raw: none */
    }
    *nan += a;
    *inf += b;
}

/* ---- comparing ----------------------------------------------------------------------------- */

static inline void sum_add(tc_cmp_sum *s, double x)
{
    double t = s->s + x;
    if (fabs(s->s) >= fabs(x))
        s->c += (s->s - t) + x;
    else
        s->c += (x - t) + s->s;
    s->s = t;
}

static void sum_merge(tc_cmp_sum *r, const tc_cmp_sum *s)
{
    sum_add(r, s->s);
    r->c += s->c;
}

/* |a - b| and |a - b| / |b| of one part into the maxima, for element at. */
static inline void part_stats(tc_cmp_res *r, double x, double y, uint64_t at)
{
    double d = x == y ? 0 : fabs(x - y);
    double rel = d == 0 ? 0 : (y == 0 || isinf(y)) ? INFINITY : d / fabs(y);
    if (d > r->max_abs) {
        r->max_abs = d;
        r->max_abs_at = at;
    }
    if (rel > r->max_rel) {
        r->max_rel = rel;
        r->max_rel_at = at;
    }
}

static inline bool part_close(const tc_cmp_rule *rule, double x, double y)
{
    if (x == y)
        return true;
    double d = fabs(x - y);
    return isfinite(d) && d <= rule->atol + rule->rtol * fabs(y);
}

static void mismatch(tc_cmp_res *r, uint64_t at, tc_cmp_val a, tc_cmp_val b)
{
    r->mismatched++;
    if (r->first == TC_CMP_NONE) {
        r->first = at;
        r->first_a = a;
        r->first_b = b;
    }
}

/* The block's a·b, a·a and b·b: four partial sums each (so that the adds pipeline), added to
 * the compensated totals. Error: about 66 ulp of the block's sum of |terms|, then Neumaier. */
HOT static void block_sums(tc_cmp_res *r, const double *ra, const double *ia, const double *rb, const double *ib,
                           size_t k)
{
    double d[4] = {0}, x[4] = {0}, y[4] = {0};
    size_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (size_t l = 0; l < 4; l++) {
            d[l] += ra[i + l] * rb[i + l] + ia[i + l] * ib[i + l];
            x[l] += ra[i + l] * ra[i + l] + ia[i + l] * ia[i + l];
            y[l] += rb[i + l] * rb[i + l] + ib[i + l] * ib[i + l];
        }
    for (; i < k; i++) {
        d[0] += ra[i] * rb[i] + ia[i] * ib[i];
        x[0] += ra[i] * ra[i] + ia[i] * ia[i];
        y[0] += rb[i] * rb[i] + ib[i] * ib[i];
    }
    sum_add(&r->dot, (d[0] + d[1]) + (d[2] + d[3]));
    sum_add(&r->aa, (x[0] + x[1]) + (x[2] + x[3]));
    sum_add(&r->bb, (y[0] + y[1]) + (y[2] + y[3]));
}

static void count_same(tc_cmp_res *r, tc_dtype t, const uint8_t *p, size_t n)
{
    uint64_t nan = 0, inf = 0;
    nonfinite(t, p, n, &nan, &inf);
    r->nan_a += nan;
    r->nan_b += nan;
    r->inf_a += inf;
    r->inf_b += inf;
}

HOT static void run_float(tc_cmp_res *r, const tc_cmp_rule *rule, tc_dtype da, const uint8_t *a, tc_dtype db,
                          const uint8_t *b, size_t n, uint64_t base)
{
    size_t ea = tc_dtype_size(da), eb = tc_dtype_size(db);
    bool same = da == db;
    double ra[BLOCK], ia[BLOCK], rb[BLOCK], ib[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t k = n - i0 < BLOCK ? n - i0 : BLOCK;
        const uint8_t *pa = a + i0 * ea, *pb = b + i0 * eb;
        /* most blocks of a tensor that changed a little are the same bytes */
        bool same_block = same && !memcmp(pa, pb, k * ea);
        if (same_block && !rule->sums) {
            count_same(r, da, pa, k);
            continue;
        }
        decode(da, pa, k, ra, ia);
        if (!same_block)
            decode(db, pb, k, rb, ib);
        if (rule->sums)
            block_sums(r, ra, ia, same_block ? ra : rb, same_block ? ia : ib, k);
        if (same_block) {
            count_same(r, da, pa, k);
            continue;
        }
        for (size_t i = 0; i < k; i++) {
            uint64_t at = base + i0 + i;
            bool na = isnan(ra[i]) || isnan(ia[i]), nb = isnan(rb[i]) || isnan(ib[i]);
            r->nan_a += na;
            r->nan_b += nb;
            r->inf_a += !na && (isinf(ra[i]) || isinf(ia[i]));
            r->inf_b += !nb && (isinf(rb[i]) || isinf(ib[i]));
            if (same && !memcmp(pa + i * ea, pb + i * eb, ea))
                continue;
            r->bits_differ += same;
            if (!na && !nb && ra[i] == rb[i] && ia[i] == ib[i])
                continue; /* equal values: -0 and 0, or the same value in two dtypes */
            r->changed++;
            bool close;
            if (na || nb) {
                close = rule->equal_nan && na && nb;
            } else {
                part_stats(r, ra[i], rb[i], at);
                part_stats(r, ia[i], ib[i], at);
                close = part_close(rule, ra[i], rb[i]) && part_close(rule, ia[i], ib[i]);
            }
            if (!close)
                mismatch(r, at, float_val(da, ra[i], ia[i]), float_val(db, rb[i], ib[i]));
        }
    }
}

static void run_int(tc_cmp_res *r, const tc_cmp_rule *rule, tc_dtype da, const uint8_t *a, tc_dtype db,
                    const uint8_t *b, size_t n, uint64_t base)
{
    size_t ea = tc_dtype_size(da), eb = tc_dtype_size(db);
    bool same = da == db;
    for (size_t i = 0; i < n; i++) {
        i128 x = load_int(da, a + i * ea), y = load_int(db, b + i * eb);
        if (rule->sums) {
            double fx = (double)x, fy = (double)y;
            sum_add(&r->dot, fx * fy);
            sum_add(&r->aa, fx * fx);
            sum_add(&r->bb, fy * fy);
        }
        if (x == y) {
            r->bits_differ += same && memcmp(a + i * ea, b + i * eb, ea); /* bool bytes other than 0/1 */
            continue;
        }
        r->bits_differ += same;
        r->changed++;
        u128 diff = x > y ? (u128)(x - y) : (u128)(y - x);
        double d = (double)diff, by = (double)(y < 0 ? -y : y);
        double rel = y == 0 ? INFINITY : d / by;
        if (d > r->max_abs) {
            r->max_abs = d;
            r->max_abs_at = base + i;
        }
        if (rel > r->max_rel) {
            r->max_rel = rel;
            r->max_rel_at = base + i;
        }
        if (!(d <= rule->atol + rule->rtol * by))
            mismatch(r, base + i, int_val(da, x), int_val(db, y));
    }
}

static void run_raw(tc_cmp_res *r, tc_dtype t, const uint8_t *a, const uint8_t *b, size_t n, uint64_t base)
{
    size_t e = tc_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(a + i * e, b + i * e, e))
            continue;
        r->bits_differ++;
        r->changed++;
        tc_cmp_val va = {.kind = 'x'}, vb = {.kind = 'x'};
        memcpy(&va.u, a + i * e, e < 8 ? e : 8);
        memcpy(&vb.u, b + i * e, e < 8 ? e : 8);
        mismatch(r, base + i, va, vb);
    }
}

void tc_cmp_run(tc_cmp_res *r, const tc_cmp_rule *rule, tc_dtype da, const void *a, tc_dtype db, const void *b,
                size_t n, uint64_t base)
{
    r->n += n;
    tc_cmp_class ca = tc_cmp_class_of(da), cb = tc_cmp_class_of(db);
    if (da == db && !rule->sums && !memcmp(a, b, n * tc_dtype_size(da))) {
        uint64_t nan = 0, inf = 0;
        nonfinite(da, a, n, &nan, &inf);
        r->nan_a += nan;
        r->nan_b += nan;
        r->inf_a += inf;
        r->inf_b += inf;
    } else if (ca == TC_CMP_RAW) {
        run_raw(r, da, a, b, n, base);
    } else if (ca == TC_CMP_INT && cb == TC_CMP_INT) {
        run_int(r, rule, da, a, db, b, n, base);
    } else {
        run_float(r, rule, da, a, db, b, n, base);
    }
}

void tc_cmp_merge(tc_cmp_res *r, const tc_cmp_res *s)
{
    r->n += s->n;
    r->bits_differ += s->bits_differ;
    r->changed += s->changed;
    r->mismatched += s->mismatched;
    if (r->first == TC_CMP_NONE && s->first != TC_CMP_NONE) {
        r->first = s->first;
        r->first_a = s->first_a;
        r->first_b = s->first_b;
    }
    if (s->max_abs > r->max_abs) {
        r->max_abs = s->max_abs;
        r->max_abs_at = s->max_abs_at;
    }
    if (s->max_rel > r->max_rel) {
        r->max_rel = s->max_rel;
        r->max_rel_at = s->max_rel_at;
    }
    r->nan_a += s->nan_a;
    r->nan_b += s->nan_b;
    r->inf_a += s->inf_a;
    r->inf_b += s->inf_b;
    sum_merge(&r->dot, &s->dot);
    sum_merge(&r->aa, &s->aa);
    sum_merge(&r->bb, &s->bb);
}

double tc_cmp_cosine(const tc_cmp_res *r)
{
    double dot = r->dot.s + r->dot.c, aa = r->aa.s + r->aa.c, bb = r->bb.s + r->bb.c;
    if (!isfinite(dot) || !isfinite(aa) || !isfinite(bb) || aa <= 0 || bb <= 0)
        return NAN;
    return dot / (sqrt(aa) * sqrt(bb));
}
