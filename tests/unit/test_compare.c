/* tc_cmp_run: the element rule and the statistics, on hand-made runs whose
 * answers are known; and a run split anywhere and merged in order gives the
 * answer of the whole run (which is why diff's results do not depend on how
 * chunks were spread over threads). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

static tc_cmp_res run(tc_dtype da, const void *a, tc_dtype db, const void *b, size_t n, tc_cmp_rule rule)
{
    tc_cmp_res r;
    tc_cmp_res_init(&r);
    tc_cmp_run(&r, &rule, da, a, db, b, n, 0);
    return r;
}

Test(compare, allclose_rule)
{
    float a[] = {1.0f, 2.0f, NAN, INFINITY, 0.0f, -0.0f, 100.0f};
    float b[] = {1.0f, 2.5f, NAN, INFINITY, -0.0f, 1.0f, 101.0f};
    tc_cmp_rule exact = {0};
    tc_cmp_res r = run(TC_DT_F32, a, TC_DT_F32, b, 7, exact);
    /* 2 vs 2.5, 0 vs 1, 100 vs 101 differ; NaN bytes are identical: equal; 0 vs -0: equal values */
    cr_assert_eq(r.mismatched, 3);
    cr_assert_eq(r.changed, 3);
    cr_assert_eq(r.bits_differ, 4);
    cr_assert_eq(r.first, 1);
    cr_assert_eq(r.first_a.kind, 'f');
    cr_assert_eq(r.first_a.re, 2.0);
    cr_assert_eq(r.first_b.re, 2.5);
    cr_assert_eq(r.max_abs, 1.0);
    cr_assert_eq(r.max_abs_at, 5); /* 0 vs 1 comes before 100 vs 101 */
    cr_assert(isinf(r.max_rel) == 0 && r.max_rel == 1.0, "max rel %g", r.max_rel);
    cr_assert_eq(r.nan_a, 1);
    cr_assert_eq(r.inf_b, 1);
    tc_cmp_rule tol = {.atol = 0.01, .rtol = 0.2};
    r = run(TC_DT_F32, a, TC_DT_F32, b, 7, tol);
    cr_assert_eq(r.mismatched, 1, "only -0 vs 1 is beyond 0.01 + 0.2 * |b|");
    cr_assert_eq(r.first, 5);
}

Test(compare, nan_payloads_and_equal_nan)
{
    uint32_t a[] = {0x7fc00000u}, b[] = {0x7fc00001u};
    tc_cmp_rule rule = {0};
    tc_cmp_res r = run(TC_DT_F32, a, TC_DT_F32, b, 1, rule);
    cr_assert_eq(r.mismatched, 1);
    cr_assert_eq(r.max_abs, 0, "NaN stays out of the statistics");
    cr_assert_eq(r.max_abs_at, TC_CMP_NONE);
    rule.equal_nan = true;
    r = run(TC_DT_F32, a, TC_DT_F32, b, 1, rule);
    cr_assert_eq(r.mismatched, 0);
    cr_assert_eq(r.changed, 1);
}

Test(compare, infinities)
{
    double a[] = {INFINITY, INFINITY, 1.0, 0.0};
    double b[] = {INFINITY, -INFINITY, INFINITY, 0.0};
    tc_cmp_rule rule = {.atol = 1e300, .rtol = 1};
    tc_cmp_res r = run(TC_DT_F64, a, TC_DT_F64, b, 4, rule);
    cr_assert_eq(r.mismatched, 2, "inf vs -inf and 1 vs inf are never close");
    cr_assert(isinf(r.max_abs) && isinf(r.max_rel));
    cr_assert_eq(r.max_abs_at, 1);
}

Test(compare, integers_exact)
{
    uint64_t a[] = {UINT64_MAX, 1ull << 63, 5};
    uint64_t b[] = {UINT64_MAX - 1, 1ull << 63, 5};
    tc_cmp_rule rule = {0};
    tc_cmp_res r = run(TC_DT_U64, a, TC_DT_U64, b, 3, rule);
    cr_assert_eq(r.mismatched, 1, "2^64-1 and 2^64-2 differ though their float64s do not");
    cr_assert_eq(r.first_a.kind, 'u');
    cr_assert_eq(r.first_a.u, UINT64_MAX);
    cr_assert_eq(r.max_abs, 1.0);
    int64_t c[] = {-1, 7, -3};
    r = run(TC_DT_U64, a, TC_DT_I64, c, 3, rule);
    cr_assert_eq(r.mismatched, 3, "uint64 2^64-1 is not int64 -1");
    cr_assert_eq(r.first_b.kind, 'i');
    cr_assert_eq(r.first_b.i, -1);
    uint8_t u[] = {0, 200, 255};
    int64_t v[] = {0, 200, 255};
    r = run(TC_DT_U8, u, TC_DT_I64, v, 3, rule);
    cr_assert_eq(r.mismatched, 0);
    cr_assert_eq(r.changed, 0);
    uint8_t t[] = {1, 0, 2}, f[] = {1, 0, 1};
    r = run(TC_DT_BOOL, t, TC_DT_BOOL, f, 3, rule);
    cr_assert_eq(r.mismatched, 0, "bool bytes 2 and 1 are both true");
    cr_assert_eq(r.bits_differ, 1);
}

Test(compare, complex_part_by_part)
{
    float a[] = {1, 2, 3, 4}, b[] = {1, 2.5f, 3, 4};
    float re[] = {1, 3};
    tc_cmp_rule rule = {0};
    tc_cmp_res r = run(TC_DT_C64, a, TC_DT_C64, b, 2, rule);
    cr_assert_eq(r.mismatched, 1);
    cr_assert_eq(r.first, 0);
    cr_assert_eq(r.first_b.kind, 'c');
    cr_assert_eq(r.first_b.im, 2.5);
    cr_assert_eq(r.max_abs, 0.5);
    r = run(TC_DT_C64, a, TC_DT_F32, re, 2, rule);
    cr_assert_eq(r.mismatched, 2, "a real element has imaginary part 0");
    cr_assert(tc_cmp_comparable(TC_DT_C64, TC_DT_I8));
    cr_assert(!tc_cmp_comparable(TC_DT_QINT8, TC_DT_I8));
    cr_assert(tc_cmp_comparable(TC_DT_QINT8, TC_DT_QINT8));
}

Test(compare, split_and_merged_is_whole)
{
    enum { N = 5000 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    srand(7);
    for (int i = 0; i < N; i++) {
        a[i] = (float)((double)rand() / RAND_MAX - 0.5);
        b[i] = i % 97 == 3 ? a[i] + (float)(i % 5) : a[i];
    }
    b[4000] = NAN;
    tc_cmp_rule rule = {.rtol = 1e-3, .sums = true};
    tc_cmp_res whole = run(TC_DT_F32, a, TC_DT_F32, b, N, rule);
    size_t cuts[] = {1, 255, 256, 257, 1000, 4999};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        tc_cmp_res x, y;
        tc_cmp_res_init(&x);
        tc_cmp_res_init(&y);
        tc_cmp_run(&x, &rule, TC_DT_F32, a, TC_DT_F32, b, cuts[c], 0);
        tc_cmp_run(&y, &rule, TC_DT_F32, a + cuts[c], TC_DT_F32, b + cuts[c], N - cuts[c], cuts[c]);
        tc_cmp_merge(&x, &y);
        cr_assert_eq(x.mismatched, whole.mismatched);
        cr_assert_eq(x.changed, whole.changed);
        cr_assert_eq(x.first, whole.first);
        cr_assert_eq(x.max_abs, whole.max_abs);
        cr_assert_eq(x.max_abs_at, whole.max_abs_at);
        cr_assert_eq(x.max_rel_at, whole.max_rel_at);
        cr_assert_eq(x.nan_b, 1);
        cr_assert(isnan(tc_cmp_cosine(&x)), "NaN leaves the cosine undefined");
    }
    free(a);
    free(b);
}

Test(compare, cosine)
{
    double a[] = {1, 2, 3}, b[] = {2, 4, 6}, c[] = {-3, 0, 1}, z[] = {0, 0, 0};
    tc_cmp_rule rule = {.sums = true};
    tc_cmp_res r = run(TC_DT_F64, a, TC_DT_F64, b, 3, rule);
    cr_assert_float_eq(tc_cmp_cosine(&r), 1.0, 1e-15);
    r = run(TC_DT_F64, a, TC_DT_F64, c, 3, rule);
    cr_assert_float_eq(tc_cmp_cosine(&r), 0.0, 1e-15);
    r = run(TC_DT_F64, a, TC_DT_F64, z, 3, rule);
    cr_assert(isnan(tc_cmp_cosine(&r)), "a zero vector has no direction");
}
