/* The block codecs: the reference against gguf-py's stored output
 * (gen_quant_vectors.py, in $QUANT_DATA), the fast path against the
 * reference on random blocks of every type, and the type table. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

static void *slurp(const char *name, size_t *len)
{
    const char *dir = getenv("QUANT_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "data", name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (set QUANT_DATA)", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    rewind(f);
    void *p = malloc(sz ? (size_t)sz : 1);
    cr_assert(p && fread(p, 1, (size_t)sz, f) == (size_t)sz, "cannot read %s", path);
    fclose(f);
    *len = (size_t)sz;
    return p;
}

/* The first differing 4-byte word (float32 values) or byte, with its block. */
static void same(const char *what, const char *type, const void *want, const void *got, size_t n, size_t unit,
                 size_t per_block)
{
    if (!memcmp(want, got, n))
        return;
    for (size_t i = 0; i + unit <= n; i += unit)
        if (memcmp((const char *)want + i, (const char *)got + i, unit)) {
            uint32_t w = 0, g = 0;
            memcpy(&w, (const char *)want + i, unit);
            memcpy(&g, (const char *)got + i, unit);
            cr_assert_fail("%s %s: value %zu (block %zu) is 0x%08" PRIx32 ", want 0x%08" PRIx32, what, type, i / unit,
                           i / unit / per_block, g, w);
        }
}

static bool decodable(tc_qtype q) { return tc_qtype_is_block(q) && tc_qtype_get(q)->decodes; }

Test(quant, table)
{
    for (int q = 1; q < TC_Q_COUNT; q++) {
        const tc_qtype_info *t = tc_qtype_get((tc_qtype)q);
        cr_assert_eq(tc_qtype_from_ggml(t->ggml), (tc_qtype)q, "%s", t->name);
        cr_assert_eq(tc_qtype_from_name(t->name), (tc_qtype)q, "%s", t->name);
        cr_assert_eq(decodable((tc_qtype)q), tc_qtype_is_block((tc_qtype)q) && tc_quant_can_decode((tc_qtype)q),
                     "%s: the table and the codecs disagree on decoding", t->name);
        cr_assert_eq(t->encodes, tc_quant_can_encode((tc_qtype)q), "%s: encoding", t->name);
    }
    cr_assert_eq(tc_qtype_from_ggml(4), TC_Q_NONE, "a removed type");
    cr_assert_eq(tc_qtype_from_name("q8_0"), TC_Q_Q8_0);
    cr_assert_eq(tc_qtype_of_dtype(TC_DT_BF16), TC_Q_BF16);
    cr_assert_eq(tc_qtype_of_dtype(TC_DT_U8), TC_Q_NONE);
    uint64_t b;
    cr_assert(tc_qtype_bytes(TC_Q_Q4_K, 512, &b) && b == 288);
    cr_assert(!tc_qtype_bytes(TC_Q_Q4_K, 100, &b), "not whole blocks");
    cr_assert(!tc_qtype_bytes(TC_Q_Q8_0, UINT64_MAX / 32 * 32, &b), "overflow");
}

Test(quant, decode_matches_gguf_py)
{
    for (int q = 1; q < TC_Q_COUNT; q++) {
        if (!decodable((tc_qtype)q))
            continue;
        const tc_qtype_info *t = tc_qtype_get((tc_qtype)q);
        char name[64];
        size_t n, m;
        snprintf(name, sizeof name, "dec_%s.in", t->name);
        uint8_t *in = slurp(name, &n);
        snprintf(name, sizeof name, "dec_%s.out", t->name);
        float *want = slurp(name, &m);
        size_t nb = n / t->bytes;
        cr_assert(nb > 0 && m == nb * t->block * 4, "%s: vector sizes", t->name);
        float *got = malloc(m);
        cr_assert_eq(tc_quant_decode_ref((tc_qtype)q, got, in, nb), 0);
        same("reference decode vs gguf-py", t->name, want, got, m, 4, t->block);
        memset(got, 0x5a, m);
        cr_assert_eq(tc_quant_decode((tc_qtype)q, got, in, nb), 0);
        same("fast decode vs gguf-py", t->name, want, got, m, 4, t->block);
        free(in);
        free(want);
        free(got);
    }
}

Test(quant, encode_matches_gguf_py)
{
    static const tc_qtype types[] = {TC_Q_F16, TC_Q_BF16, TC_Q_Q8_0, TC_Q_Q4_0, TC_Q_Q4_1, TC_Q_Q5_0, TC_Q_Q5_1};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const tc_qtype_info *t = tc_qtype_get(types[k]);
        char name[64];
        size_t n, m;
        snprintf(name, sizeof name, "enc_%s.in", t->name);
        float *in = slurp(name, &n);
        snprintf(name, sizeof name, "enc_%s.out", t->name);
        uint8_t *want = slurp(name, &m);
        size_t nb = n / 4 / t->block;
        cr_assert(nb > 0 && m == nb * t->bytes, "%s: vector sizes", t->name);
        uint8_t *got = malloc(m);
        cr_assert_eq(tc_quant_encode_ref(types[k], got, in, nb), 0);
        same("reference encode vs gguf-py", t->name, want, got, m, 1, t->bytes);
        memset(got, 0x5a, m);
        cr_assert_eq(tc_quant_encode(types[k], got, in, nb), 0);
        same("fast encode vs gguf-py", t->name, want, got, m, 1, t->bytes);
        free(in);
        free(want);
        free(got);
    }
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The fast path against the reference: random bytes (every bit pattern of the quant fields, any f16 scale),
 * enough blocks that the work is split over two threads. */
/* x's values as bfloat16 in h (their high halves), and x cut to those values. */
static void to_bf16(uint16_t *h, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        h[i] = (uint16_t)(u >> 16);
        u &= 0xffff0000u;
        memcpy(&x[i], &u, 4);
    }
}

/* n blocks of x (n values for the element types) encoded by the fast path against the reference,
 * from float32, then from bfloat16 (x cut to its high halves); on x86 with AVX-512 the fast path
 * runs twice, at its best and held to AVX2, so that both vector encoders are judged. */
static void encode_both(tc_qtype q, float *x, size_t n, const char *what)
{
    const tc_qtype_info *t = tc_qtype_get(q);
    size_t nv = n * t->block;
    uint8_t *a = malloc(n * t->bytes), *b = malloc(n * t->bytes);
    uint16_t *h = malloc(nv * 2);
    float *xc = malloc(nv * 4);
    char name[128];
    for (int avx2 = 0; avx2 < 2; avx2++) {
        const char *path = avx2 ? " (held to AVX2)" : "";
        tc_quant_force_avx2(avx2);
        memcpy(xc, x, nv * 4);
        cr_assert_eq(tc_quant_encode_ref(q, a, xc, n), 0);
        cr_assert_eq(tc_quant_encode(q, b, xc, n), 0);
        snprintf(name, sizeof name, "fast vs reference encode%s%s", what, path);
        same(name, t->name, a, b, n * t->bytes, 1, t->bytes);
        to_bf16(h, xc, nv);
        cr_assert_eq(tc_quant_encode_ref(q, a, xc, n), 0);
        cr_assert_eq(tc_quant_encode_bf16(q, b, h, n), 0);
        snprintf(name, sizeof name, "bfloat16 vs reference encode%s%s", what, path);
        same(name, t->name, a, b, n * t->bytes, 1, t->bytes);
    }
    tc_quant_force_avx2(false);
    free(xc);
    free(h);
    free(a);
    free(b);
}

Test(quant, fast_equals_reference)
{
    for (int q = 1; q < TC_Q_COUNT; q++) {
        if (!decodable((tc_qtype)q))
            continue;
        const tc_qtype_info *t = tc_qtype_get((tc_qtype)q);
        size_t nb = ((size_t)3 << 20) / t->block + 3, in_n = nb * t->bytes, out_n = nb * t->block * 4;
        uint8_t *in = malloc(in_n);
        for (size_t i = 0; i < in_n; i++)
            in[i] = (uint8_t)(next() >> 56);
        float *a = malloc(out_n), *b = malloc(out_n);
        cr_assert_eq(tc_quant_decode_ref((tc_qtype)q, a, in, nb), 0);
        cr_assert_eq(tc_quant_decode((tc_qtype)q, b, in, nb), 0);
        same("fast vs reference decode", t->name, a, b, out_n, 4, t->block);
        free(in);
        free(a);
        free(b);
    }
    static const tc_qtype enc[] = {TC_Q_F32, TC_Q_F16, TC_Q_BF16, TC_Q_Q8_0, TC_Q_Q4_0, TC_Q_Q4_1, TC_Q_Q5_0, TC_Q_Q5_1};
    for (size_t k = 0; k < sizeof enc / sizeof enc[0]; k++) {
        const tc_qtype_info *t = tc_qtype_get(enc[k]);
        size_t nv = ((size_t)3 << 20) + 96, nb = nv / t->block;
        float *x = malloc(nv * 4);
        for (size_t i = 0; i < nv; i++) {
            uint32_t r = (uint32_t)(next() >> 32);
            if (i % 3) /* mostly ordinary magnitudes */
                r = (r & 0x807fffffu) | (uint32_t)(100 + (r >> 8) % 60) << 23;
            memcpy(&x[i], &r, 4);
        }
        encode_both(enc[k], x, nb, "");
        free(x);
    }
}

/* The fast encoders against the reference on blocks drawn from a few values, so that what the
 * random blocks above almost never hold is common: a largest |x| held by both signs (numpy takes
 * the first), zeros of both signs (the scale's sign), infinities, NaNs, subnormals, halves, and a
 * number of blocks that is not a multiple of the eight (AVX2) or sixteen (AVX-512) the fast path
 * takes at once. */
Test(quant, fast_equals_reference_on_edges)
{
    static const float pick[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 0.49999997f, -1.5f,
                                 1e-45f, -1e-45f, 1e-40f, 3.4e38f, -3.4e38f, __builtin_inff(), -__builtin_inff(),
                                 __builtin_nanf("")};
    static const tc_qtype enc[] = {TC_Q_F16, TC_Q_BF16, TC_Q_Q8_0, TC_Q_Q4_0, TC_Q_Q4_1, TC_Q_Q5_0, TC_Q_Q5_1};
    for (size_t k = 0; k < sizeof enc / sizeof enc[0]; k++) {
        const tc_qtype_info *t = tc_qtype_get(enc[k]);
        size_t nb = 8 * 4096 + 5, nv = nb * t->block;
        float *x = malloc(nv * 4);
        for (size_t b = 0; b < nb; b++) {
            /* each block draws from 2 to 18 of the values: fewer values, more ties */
            size_t span = 2 + (size_t)(next() % (sizeof pick / sizeof pick[0] - 1));
            for (size_t i = 0; i < t->block; i++)
                x[b * t->block + i] = pick[next() % span];
        }
        encode_both(enc[k], x, nb, " on edge values");
        free(x);
    }
}

Test(quant, refuses_what_it_lacks)
{
    float f[256];
    uint8_t b[512] = {0};
    cr_assert_eq(tc_quant_decode(TC_Q_Q8_1, f, b, 1), -1);
    cr_assert_eq(tc_quant_decode_ref(TC_Q_Q8_K, f, b, 1), -1);
    cr_assert_eq(tc_quant_decode(TC_Q_F32, f, b, 1), -1, "element types are casts, not codecs");
    cr_assert_eq(tc_quant_encode(TC_Q_Q4_K, b, f, 1), -1);
    cr_assert_eq(tc_quant_encode_ref(TC_Q_NONE, b, f, 1), -1);
}
