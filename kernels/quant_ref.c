/* The reference block codecs: one function per block type, written from the
 * layouts of gguf-format.md section 6, each value computed as gguf-py's
 * numpy code computes it (its operations in float32, in its order). */
#include "quant_internal.h"
#include "quant_grids.h"

typedef void (*dec_fn)(float *y, const uint8_t *b);
typedef void (*enc_fn)(uint8_t *b, const float *x);

static void dec_q4_0(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 0xf) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

static void dec_q4_1(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b), m = tcq_half_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 0xf) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

static void dec_q5_0(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    uint32_t qh = tcq_u32(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 0xf) | ((qh >> j) & 1) << 4, hi = (b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

static void dec_q5_1(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b), m = tcq_half_at(b + 2);
    uint32_t qh = tcq_u32(b + 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 0xf) | ((qh >> j) & 1) << 4, hi = (b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

static void dec_q8_0(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    for (int j = 0; j < 32; j++)
        y[j] = (float)(int8_t)b[2 + j] * d;
}

/* 2-bit fields of 256 values laid out as two halves of 128: in half h, value s*32 + j is bits 2s..2s+1 of byte h*32 + j. */
static inline int crumb(const uint8_t *q, int i) { return (q[(i / 128) * 32 + i % 32] >> (2 * ((i / 32) % 4))) & 3; }

static void dec_q2_k(float *y, const uint8_t *b)
{
    const uint8_t *sc = b, *qs = b + 16;
    float d = tcq_half_at(b + 80), dmin = tcq_half_at(b + 82);
    for (int g = 0; g < 16; g++) {
        float dl = d * (float)(sc[g] & 0xf), ml = dmin * (float)(sc[g] >> 4);
        for (int k = 0; k < 16; k++)
            y[g * 16 + k] = dl * (float)crumb(qs, g * 16 + k) - ml;
    }
}

static void dec_q3_k(float *y, const uint8_t *b)
{
    const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
    float d = tcq_half_at(b + 108);
    for (int g = 0; g < 16; g++) {
        int lo = (s[g % 8] >> (4 * (g / 8))) & 0xf, hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
        float dl = d * (float)((int8_t)(lo | hi << 4) - 32);
        for (int k = 0; k < 16; k++) {
            int i = g * 16 + k, h = (hm[i % 32] >> (i / 32)) & 1;
            y[i] = dl * (float)(crumb(qs, i) - ((h ^ 1) << 2));
        }
    }
}

/* The eight 6-bit scales and mins of a Q4_K/Q5_K block's scales[12]. */
static void k_scale_min(const uint8_t *s, int sc[8], int mn[8])
{
    for (int k = 0; k < 4; k++) {
        sc[k] = s[k] & 0x3f;
        mn[k] = s[4 + k] & 0x3f;
        sc[4 + k] = (s[8 + k] & 0xf) | ((s[k] >> 2) & 0x30);
        mn[4 + k] = (s[8 + k] >> 4) | ((s[4 + k] >> 2) & 0x30);
    }
}

static void dec_q4_k(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b), dmin = tcq_half_at(b + 2);
    int sc[8], mn[8];
    k_scale_min(b + 4, sc, mn);
    const uint8_t *qs = b + 16;
    for (int j = 0; j < 8; j++) {
        float dj = d * (float)sc[j], mj = dmin * (float)mn[j];
        for (int l = 0; l < 32; l++)
            y[j * 32 + l] = dj * (float)((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xf) - mj;
    }
}

static void dec_q5_k(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b), dmin = tcq_half_at(b + 2);
    int sc[8], mn[8];
    k_scale_min(b + 4, sc, mn);
    const uint8_t *qh = b + 16, *qs = b + 48;
    for (int j = 0; j < 8; j++) {
        float dj = d * (float)sc[j], mj = dmin * (float)mn[j];
        for (int l = 0; l < 32; l++) {
            int q = ((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xf) | ((qh[l] >> j) & 1) << 4;
            y[j * 32 + l] = dj * (float)q - mj;
        }
    }
}

static void dec_q6_k(float *y, const uint8_t *b)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = tcq_half_at(b + 208);
    for (int i = 0; i < 256; i++) {
        int a = i / 128, r = i % 128;
        int lo = (ql[a * 64 + r % 64] >> (4 * (r / 64))) & 0xf, hi = (qh[a * 32 + r % 32] >> (2 * (r / 32))) & 3;
        y[i] = (d * (float)sc[i / 16]) * (float)((int8_t)(lo | hi << 4) - 32);
    }
}

static void dec_tq1_0(float *y, const uint8_t *b)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    float d = tcq_half_at(b + 52);
    int i = 0;
    /* qs[0..32): five digits each, qs[32..48): five, qh[4]: four; digit = ((byte * 3^p mod 256) * 3) >> 8 */
    for (int p = 0; p < 5; p++)
        for (int j = 0; j < 32; j++)
            y[i++] = d * (float)((((uint8_t)(b[j] * pow3[p])) * 3 >> 8) - 1);
    for (int p = 0; p < 5; p++)
        for (int j = 0; j < 16; j++)
            y[i++] = d * (float)((((uint8_t)(b[32 + j] * pow3[p])) * 3 >> 8) - 1);
    for (int p = 0; p < 4; p++)
        for (int j = 0; j < 4; j++)
            y[i++] = d * (float)((((uint8_t)(b[48 + j] * pow3[p])) * 3 >> 8) - 1);
}

static void dec_tq2_0(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b + 64);
    for (int i = 0; i < 256; i++)
        y[i] = d * (float)(crumb(b, i) - 1);
}

static const int8_t kv_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void dec_mxfp4(float *y, const uint8_t *b)
{
    uint32_t e = b[0];
    float d = tcq_bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23); /* 2^(e-127) / 2 */
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kv_e2m1[b[1 + j] & 0xf];
        y[j + 16] = d * (float)kv_e2m1[b[1 + j] >> 4];
    }
}

/* An unsigned E4M3 scale (bias 7; 0x00 and 0x7f read as 0), halved for the doubled E2M1 values. */
static float ue4m3_half(uint8_t x)
{
    int e = (x >> 3) & 0xf, m = x & 7;
    float raw = e == 0 ? (float)m * 0x1p-9f : (1.0f + (float)m / 8.0f) * __builtin_ldexpf(1.0f, e - 7);
    return x == 0 || x == 0x7f ? 0.0f : raw * 0.5f;
}

static void dec_nvfp4(float *y, const uint8_t *b)
{
    for (int g = 0; g < 4; g++) {
        float d = ue4m3_half(b[g]);
        for (int k = 0; k < 8; k++) {
            y[g * 16 + k] = d * (float)kv_e2m1[b[4 + g * 8 + k] & 0xf];
            y[g * 16 + 8 + k] = d * (float)kv_e2m1[b[4 + g * 8 + k] >> 4];
        }
    }
}

/* Eight values of a grid row times db, each signed by a bit of sign. */
static inline void signed_row(float *y, float db, const int8_t *row, unsigned sign)
{
    for (int k = 0; k < 8; k++)
        y[k] = (sign >> k) & 1 ? tcq_negate(db * (float)row[k]) : db * (float)row[k];
}

static void dec_iq2_xxs(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b + 2 + 8 * ib;
        uint32_t aux1 = tcq_u32(q + 4);
        float db = d * (0.5f + (float)(aux1 >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++)
            signed_row(y + ib * 32 + l * 8, db, tc_grid_iq2xxs[q[l]], tcq_ksign((aux1 >> (7 * l)) & 0x7f));
    }
}

static void dec_iq2_xs(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b), db[16];
    for (int k = 0; k < 16; k++)
        db[k] = d * (0.5f + (float)((b[66 + k / 2] >> (4 * (k % 2))) & 0xf)) * 0.25f;
    for (int j = 0; j < 32; j++) {
        uint16_t q = tcq_u16(b + 2 + 2 * j);
        signed_row(y + j * 8, db[j / 2], tc_grid_iq2xs[q & 511], tcq_ksign(q >> 9));
    }
}

static void dec_iq2_s(float *y, const uint8_t *b)
{
    const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *s = b + 74;
    float d = tcq_half_at(b), db[16];
    for (int k = 0; k < 16; k++)
        db[k] = d * (0.5f + (float)((s[k / 2] >> (4 * (k % 2))) & 0xf)) * 0.25f;
    for (int j = 0; j < 32; j++) {
        unsigned idx = qs[j] | ((qh[j / 4] >> (2 * (j % 4))) & 3) << 8;
        signed_row(y + j * 8, db[j / 2], tc_grid_iq2s[idx], signs[j]);
    }
}

static void dec_iq3_xxs(float *y, const uint8_t *b)
{
    const uint8_t *qs = b + 2;
    float d = tcq_half_at(b);
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = tcq_u32(b + 66 + 4 * ib);
        float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            unsigned sign = tcq_ksign((aux >> (7 * l)) & 0x7f);
            for (int k = 0; k < 8; k++) {
                int e = ib * 32 + l * 8 + k;
                float v = db * (float)tc_grid_iq3xxs[qs[e / 4]][e % 4];
                y[e] = (sign >> k) & 1 ? tcq_negate(v) : v;
            }
        }
    }
}

static void dec_iq3_s(float *y, const uint8_t *b)
{
    const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *s = b + 106;
    float d = tcq_half_at(b);
    for (int e = 0; e < 256; e++) {
        int i = e / 4, sc = (s[e / 64] >> (4 * ((e / 32) % 2))) & 0xf;
        float db = d * (float)(1 + 2 * sc);
        unsigned idx = qs[i] | ((qh[i / 8] >> (i % 8)) & 1) << 8;
        float v = db * (float)tc_grid_iq3s[idx][e % 4];
        y[e] = (signs[e / 8] >> (e % 8)) & 1 ? tcq_negate(v) : v;
    }
}

static void dec_iq1_s(float *y, const uint8_t *b)
{
    const uint8_t *qs = b + 2;
    float d = tcq_half_at(b);
    for (int ib = 0; ib < 8; ib++) {
        uint16_t qh = tcq_u16(b + 34 + 2 * ib);
        float dl = d * (float)(2 * ((qh >> 12) & 7) + 1), delta = qh & 0x8000 ? -0.125f : 0.125f;
        for (int l = 0; l < 4; l++) {
            unsigned idx = qs[ib * 4 + l] | ((qh >> (3 * l)) & 7) << 8;
            for (int k = 0; k < 8; k++)
                y[ib * 32 + l * 8 + k] = dl * ((float)tc_grid_iq1s[idx][k] + delta);
        }
    }
}

static void dec_iq1_m(float *y, const uint8_t *b)
{
    const uint8_t *qs = b, *qh = b + 32;
    uint16_t sc[4];
    for (int w = 0; w < 4; w++)
        sc[w] = tcq_u16(b + 48 + 2 * w);
    /* the block's f16 scale is the top nibbles of the four scale words */
    float d = tcq_half((uint16_t)((sc[0] >> 12) | (sc[1] & 0xf000) >> 8 | (sc[2] & 0xf000) >> 4 | (sc[3] & 0xf000)));
    for (int i = 0; i < 32; i++) { /* rows of 8 values; two per half sub-block, four per sub-block of 32 */
        int half = i / 2, v = (qh[i / 2] >> (4 * (i % 2))) & 0xf, s = (sc[half / 4] >> (3 * (half % 4))) & 7;
        float dl = d * (float)(2 * s + 1), delta = v & 8 ? -0.125f : 0.125f;
        unsigned idx = qs[i] | (v & 7) << 8;
        for (int k = 0; k < 8; k++)
            y[i * 8 + k] = dl * ((float)tc_grid_iq1s[idx][k] + delta);
    }
}

static const int8_t kv_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static void dec_iq4_nl(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)kv_iq4[b[2 + j] & 0xf];
        y[j + 16] = d * (float)kv_iq4[b[2 + j] >> 4];
    }
}

static void dec_iq4_xs(float *y, const uint8_t *b)
{
    float d = tcq_half_at(b);
    uint16_t sh = tcq_u16(b + 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        int lo = (sl[ib / 2] >> (4 * (ib % 2))) & 0xf, hi = (sh >> (2 * ib)) & 3;
        float dl = d * (float)((int8_t)(lo | hi << 4) - 32);
        for (int j = 0; j < 16; j++) {
            y[ib * 32 + j] = dl * (float)kv_iq4[qs[ib * 16 + j] & 0xf];
            y[ib * 32 + 16 + j] = dl * (float)kv_iq4[qs[ib * 16 + j] >> 4];
        }
    }
}

/* ---- encoding ------------------------------------------------------------------- */

/* The element of largest magnitude, signed: numpy's argmax of |x| (the first
 * of equals; the first NaN when there is one). */
static float absmax_signed(const float *x, int n)
{
    int best = 0;
    for (int i = 0; i < n; i++) {
        float a = __builtin_fabsf(x[i]);
        if (a != a)
            return x[i];
        if (a > __builtin_fabsf(x[best]))
            best = i;
    }
    return x[best];
}

/* Largest and smallest (NaN when there is one; the first of equal zeros, see quant.h). */
static void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = x[0], hi = x[0];
    for (int i = 0; i < n; i++) {
        if (x[i] != x[i]) {
            *mn = *mx = x[i];
            return;
        }
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *mn = lo;
    *mx = hi;
}

static inline float inv_or_zero(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }

/* trunc(v) as numpy casts it to uint8, then clipped to top. */
static inline uint8_t q_clip(float v, uint8_t top)
{
    uint8_t q = tcq_low_byte(__builtin_truncf(v));
    return q > top ? top : q;
}

static void enc_q4_0(uint8_t *b, const float *x)
{
    float d = absmax_signed(x, 32) / -8.0f, id = inv_or_zero(d);
    tcq_put16(b, tcq_to_half(d));
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(q_clip(x[j] * id + 8.5f, 15) | q_clip(x[j + 16] * id + 8.5f, 15) << 4);
}

static void enc_q4_1(uint8_t *b, const float *x)
{
    float mn, mx;
    min_max(x, 32, &mn, &mx);
    float d = (mx - mn) / 15.0f, id = inv_or_zero(d);
    tcq_put16(b, tcq_to_half(d));
    tcq_put16(b + 2, tcq_to_half(mn));
    for (int j = 0; j < 16; j++)
        b[4 + j] = (uint8_t)(q_clip((x[j] - mn) * id + 0.5f, 15) | q_clip((x[j + 16] - mn) * id + 0.5f, 15) << 4);
}

/* The 5-bit values of Q5_0/Q5_1: the low nibbles packed in qs, the fifth bits in qh. */
static void put5(uint8_t *qh4, uint8_t *qs, const uint8_t q[32])
{
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++)
        qh |= (uint32_t)(q[j] >> 4 & 1) << j;
    for (int k = 0; k < 4; k++)
        qh4[k] = (uint8_t)(qh >> (8 * k));
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 0xf) | q[j + 16] << 4);
}

static void enc_q5_0(uint8_t *b, const float *x)
{
    float d = absmax_signed(x, 32) / -16.0f, id = inv_or_zero(d);
    uint8_t q[32];
    for (int j = 0; j < 32; j++)
        q[j] = q_clip(x[j] * id + 16.5f, 31);
    tcq_put16(b, tcq_to_half(d));
    put5(b + 2, b + 6, q);
}

static void enc_q5_1(uint8_t *b, const float *x)
{
    float mn, mx;
    min_max(x, 32, &mn, &mx);
    float d = (mx - mn) / 31.0f, id = inv_or_zero(d);
    uint8_t q[32];
    for (int j = 0; j < 32; j++)
        q[j] = q_clip((x[j] - mn) * id + 0.5f, 31);
    tcq_put16(b, tcq_to_half(d));
    tcq_put16(b + 2, tcq_to_half(mn));
    put5(b + 4, b + 8, q);
}

static void enc_q8_0(uint8_t *b, const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float a = __builtin_fabsf(x[j]);
        if (a != a) {
            amax = a;
            break;
        }
        amax = a > amax ? a : amax;
    }
    float d = amax / 127.0f, id = inv_or_zero(d);
    tcq_put16(b, tcq_to_half(d));
    for (int j = 0; j < 32; j++)
        b[2 + j] = tcq_low_byte(tcq_round_away(x[j] * id));
}

/* ---- dispatch -------------------------------------------------------------------- */

static dec_fn decoder(tc_qtype q)
{
    switch (q) {
    case TC_Q_Q4_0: return dec_q4_0;
    case TC_Q_Q4_1: return dec_q4_1;
    case TC_Q_Q5_0: return dec_q5_0;
    case TC_Q_Q5_1: return dec_q5_1;
    case TC_Q_Q8_0: return dec_q8_0;
    case TC_Q_Q2_K: return dec_q2_k;
    case TC_Q_Q3_K: return dec_q3_k;
    case TC_Q_Q4_K: return dec_q4_k;
    case TC_Q_Q5_K: return dec_q5_k;
    case TC_Q_Q6_K: return dec_q6_k;
    case TC_Q_TQ1_0: return dec_tq1_0;
    case TC_Q_TQ2_0: return dec_tq2_0;
    case TC_Q_MXFP4: return dec_mxfp4;
    case TC_Q_NVFP4: return dec_nvfp4;
    case TC_Q_IQ2_XXS: return dec_iq2_xxs;
    case TC_Q_IQ2_XS: return dec_iq2_xs;
    case TC_Q_IQ2_S: return dec_iq2_s;
    case TC_Q_IQ3_XXS: return dec_iq3_xxs;
    case TC_Q_IQ3_S: return dec_iq3_s;
    case TC_Q_IQ1_S: return dec_iq1_s;
    case TC_Q_IQ1_M: return dec_iq1_m;
    case TC_Q_IQ4_NL: return dec_iq4_nl;
    case TC_Q_IQ4_XS: return dec_iq4_xs;
    default: return NULL;
    }
}

static enc_fn encoder(tc_qtype q)
{
    switch (q) {
    case TC_Q_Q4_0: return enc_q4_0;
    case TC_Q_Q4_1: return enc_q4_1;
    case TC_Q_Q5_0: return enc_q5_0;
    case TC_Q_Q5_1: return enc_q5_1;
    case TC_Q_Q8_0: return enc_q8_0;
    default: return NULL;
    }
}

bool tc_quant_can_decode(tc_qtype q) { return decoder(q) != NULL; }

bool tc_quant_can_encode(tc_qtype q) { return q == TC_Q_F32 || q == TC_Q_F16 || q == TC_Q_BF16 || encoder(q); }

int tc_quant_decode_ref(tc_qtype q, float *dst, const void *src, size_t n)
{
    dec_fn f = decoder(q);
    if (!f)
        return -1;
    const tc_qtype_info *t = tc_qtype_get(q);
    for (size_t i = 0; i < n; i++)
        f(dst + i * t->block, (const uint8_t *)src + i * t->bytes);
    return 0;
}

int tc_quant_encode_ref(tc_qtype q, void *dst, const float *src, size_t n)
{
    uint8_t *o = dst;
    switch (q) {
    case TC_Q_F32:
        if (n)
            memcpy(dst, src, n * 4);
        return 0;
    case TC_Q_F16:
        for (size_t i = 0; i < n; i++)
            tcq_put16(o + 2 * i, tcq_to_half(src[i]));
        return 0;
    case TC_Q_BF16:
        for (size_t i = 0; i < n; i++)
            tcq_put16(o + 2 * i, tcq_to_bf16(src[i]));
        return 0;
    default:
        break;
    }
    enc_fn f = encoder(q);
    if (!f)
        return -1;
    const tc_qtype_info *t = tc_qtype_get(q);
    for (size_t i = 0; i < n; i++)
        f(o + i * t->bytes, src + i * t->block);
    return 0;
}
