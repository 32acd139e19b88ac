/* Comparing two runs of elements by value: the rule that decides whether
 * two elements are equal, and the statistics diff reports about them.
 *
 * Element values:
 *   - integers and bool (0/1) compare exactly, as 128-bit integers, so
 *     int64 and uint64 (past 2^63 too) never round;
 *   - every other pair (floats of any width, a float against an integer)
 *     compares as float64, as torch would after casting both to float64:
 *     every float dtype converts to float64 exactly;
 *   - complex elements compare part by part, real with real and imaginary
 *     with imaginary (a real element has imaginary part 0); an element
 *     differs when either part does, and the statistics take the worse part;
 *   - quantized and bit types (qint8, bits16, ...) compare only with their
 *     own dtype, byte for byte, with no statistics.
 *
 * The rule is torch.isclose's: elements with identical bytes (same dtype)
 * are equal, NaN payloads included; otherwise a and b are equal when
 * |a - b| <= atol + rtol * |b| with |a - b| finite, or a == b (so inf
 * equals inf of the same sign); NaN equals nothing, or, with equal_nan,
 * only NaN. atol = rtol = 0 asks for equal values.
 *
 * Statistics over the elements where neither side is NaN: the largest
 * |a - b| and |a - b| / |b| (0 where a == b; inf where they differ and b is
 * 0 or infinite), each with the first index where it occurs; NaN and
 * infinity counts per side; with sums, a·b, a·a and b·b in float64 (blocks of
 * 256 terms in four partial sums each, the blocks added with Neumaier's
 * compensation), for the cosine similarity.
 *
 * A result covers a run of elements and is merged with the result of the
 * run that follows it (tc_cmp_merge), so a tensor's result does not depend
 * on how its runs were spread over threads, as long as the runs are the
 * same. */
#ifndef TC_COMPARE_H
#define TC_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

typedef enum tc_cmp_class {
    TC_CMP_RAW,      /* quantized, bit types: bytes only */
    TC_CMP_INT,      /* integers and bool */
    TC_CMP_FLOAT,
    TC_CMP_COMPLEX,
} tc_cmp_class;

tc_cmp_class tc_cmp_class_of(tc_dtype t);
/* True when tensors of these dtypes can be compared element by element. */
bool tc_cmp_comparable(tc_dtype a, tc_dtype b);

typedef struct tc_cmp_rule {
    double atol, rtol;
    bool equal_nan;
    bool sums;       /* accumulate the sums of the cosine similarity */
} tc_cmp_rule;

#define TC_CMP_NONE UINT64_MAX /* no such index */

/* One element's value, for reports. */
typedef struct tc_cmp_val {
    char kind;       /* 'f' real, 'c' complex, 'i' signed integer, 'u' unsigned integer or bool, 'x' raw bytes */
    double re, im;   /* 'f', 'c' */
    int64_t i;       /* 'i' */
    uint64_t u;      /* 'u'; 'x': the element's bytes, little-endian (the first 8) */
} tc_cmp_val;

/* A compensated sum: its value is s + c. */
typedef struct tc_cmp_sum {
    double s, c;
} tc_cmp_sum;

typedef struct tc_cmp_res {
    uint64_t n;              /* elements compared */
    uint64_t bits_differ;    /* same dtype: elements whose bytes differ */
    uint64_t changed;        /* elements whose values are not exactly equal (NaN never is, unless bytes match) */
    uint64_t mismatched;     /* elements the rule calls different */
    uint64_t first;          /* index of the first mismatched element */
    tc_cmp_val first_a, first_b;
    double max_abs, max_rel;
    uint64_t max_abs_at, max_rel_at;
    uint64_t nan_a, inf_a, nan_b, inf_b;
    tc_cmp_sum dot, aa, bb;
} tc_cmp_res;

void tc_cmp_res_init(tc_cmp_res *r);

/* Compare n elements a[i] (dtype da) and b[i] (db), which are elements
 * base + i of their tensors, adding into r. The pair must be comparable. */
void tc_cmp_run(tc_cmp_res *r, const tc_cmp_rule *rule, tc_dtype da, const void *a, tc_dtype db, const void *b,
                size_t n, uint64_t base);

/* r += s, where s covers the elements right after r's. */
void tc_cmp_merge(tc_cmp_res *r, const tc_cmp_res *s);

/* a·b / (|a| |b|) from r's sums; NaN when a norm is 0 or a sum is not finite. */
double tc_cmp_cosine(const tc_cmp_res *r);

#endif
