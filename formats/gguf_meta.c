/* GGUF metadata for people and other programs: the accessors of gguf.h, each
 * KV as typed JSON or as a line of a table, --kv values parsed, and the
 * llama family's names as transformers' GGUF loader gives them. */
#include "gguf_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const type_names[TC_GGUF_NTYPES] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32", "FLOAT32",
                                                        "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
/* ggml's short names (gguf_type_name), which llama.cpp's --override-kv also takes in part */
static const char *const short_names[TC_GGUF_NTYPES] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                                         "bool", "str", "arr", "u64", "i64", "f64"};

const char *tc_gguf_type_name(uint32_t type) { return type < TC_GGUF_NTYPES ? type_names[type] : "?"; }

int tc_gguf_type_from_name(const char *name)
{
    for (int t = 0; name && t < TC_GGUF_NTYPES; t++)
        if (!strcasecmp(name, type_names[t]) || !strcasecmp(name, short_names[t]))
            return t;
    if (name && !strcasecmp(name, "int"))
        return TC_GGUF_INT32; /* llama.cpp's --override-kv spellings */
    if (name && !strcasecmp(name, "float"))
        return TC_GGUF_FLOAT32;
    return -1;
}

/* ---- accessors ------------------------------------------------------------------------------ */

size_t tc_gguf_nfiles(const tc_ckpt *c)
{
    const gg_priv *g = gg_priv_of(c);
    return g ? g->files.n : 0;
}

bool tc_gguf_file_info(const tc_ckpt *c, size_t k, tc_gguf_file *out)
{
    const gg_priv *g = gg_priv_of(c);
    if (!g || k >= g->files.n)
        return false;
    const gg_file *f = &g->files.v[k];
    *out = (tc_gguf_file){f->path, f->version, f->big, f->align, f->data_off, f->nkv, f->ntensors};
    return true;
}

bool tc_gguf_tensor_info(const tc_ckpt *c, size_t i, tc_gguf_tensor *out)
{
    const gg_priv *g = gg_priv_of(c);
    if (!g || i >= g->t.n)
        return false;
    const gg_tensor *t = &g->t.v[i];
    *out = (tc_gguf_tensor){t->q, t->nd, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, t->bytes, t->off, t->abs, t->file};
    return true;
}

size_t tc_gguf_nkv(const tc_ckpt *c, size_t k)
{
    const gg_priv *g = gg_priv_of(c);
    return g && k < g->files.n ? (size_t)g->files.v[k].nkv : 0;
}

static const gg_kv *kv_at(const tc_ckpt *c, size_t k, size_t i, const gg_file **f)
{
    const gg_priv *g = gg_priv_of(c);
    if (!g || k >= g->files.n || i >= g->files.v[k].nkv)
        return NULL;
    *f = &g->files.v[k];
    return &g->kv.v[g->files.v[k].kv0 + i];
}

const char *tc_gguf_kv_key(const tc_ckpt *c, size_t k, size_t i, uint32_t *type, uint32_t *etype, uint64_t *count)
{
    const gg_file *f;
    const gg_kv *kv = kv_at(c, k, i, &f);
    if (!kv)
        return NULL;
    if (type)
        *type = kv->type;
    if (etype)
        *etype = kv->etype;
    if (count)
        *count = kv->count;
    return kv->key;
}

/* ---- values read back from the file ------------------------------------------------------------ */

void gg_cur_init(gg_cur *c, const gg_file *f, uint64_t off, uint64_t len)
{
    c->f = f;
    c->pos = off;
    c->end = off + len;
    c->boff = c->blen = 0;
}

int gg_cur_get(gg_cur *c, void *out, size_t n, tc_diag *d)
{
    uint8_t *o = out;
    while (n) {
        if (c->pos < c->boff || c->pos >= c->boff + c->blen) {
            uint64_t left = c->end - c->pos;
            size_t want = left < sizeof c->buf ? (size_t)left : sizeof c->buf;
            if (!want)
                return tc_fail_at(d, TC_ERR_FORMAT, c->f->path, c->pos, "metadata value ends early");
            int rc = gg_read(c->f, c->pos, c->buf, want, d);
            if (rc)
                return rc;
            c->boff = c->pos;
            c->blen = want;
        }
        size_t at = (size_t)(c->pos - c->boff), k = c->blen - at < n ? c->blen - at : n;
        memcpy(o, c->buf + at, k);
        o += k;
        n -= k;
        c->pos += k;
    }
    return 0;
}

int gg_cur_num(gg_cur *c, size_t size, uint64_t *v, tc_diag *d)
{
    uint8_t b[8];
    int rc = gg_cur_get(c, b, size, d);
    if (rc)
        return rc;
    *v = gg_num(c->f, b, size);
    return 0;
}

/* The shortest decimal that reads back to the same float32 (f32) or float64. */
static void put_float(tc_buf *b, double v, bool f32, bool json)
{
    if (!isfinite(v)) {
        const char *s = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
        tc_buf_printf(b, json ? "\"%s\"" : "%s", s);
        return;
    }
    char t[40];
    if (v == 0) { /* with a point, so that a reader keeps -0 a float */
        tc_buf_puts(b, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, v);
        if (f32 ? strtof(t, NULL) == (float)v : strtod(t, NULL) == v)
            break;
    }
    /* 10000, not 1e+04 (the range first: a cast of a double out of int64_t's range is undefined) */
    if (strchr(t, 'e') && fabs(v) < 1e15 && v == (double)(int64_t)v)
        snprintf(t, sizeof t, "%.0f", v);
    tc_buf_puts(b, t);
}

/* A scalar of type t with bits v. */
static void put_scalar(tc_buf *b, uint32_t t, uint64_t v, bool json)
{
    float f;
    double x;
    uint32_t u32 = (uint32_t)v;
    switch (t) {
    case TC_GGUF_INT8: tc_buf_printf(b, "%d", (int8_t)v); break;
    case TC_GGUF_INT16: tc_buf_printf(b, "%d", (int16_t)v); break;
    case TC_GGUF_INT32: tc_buf_printf(b, "%" PRId32, (int32_t)v); break;
    case TC_GGUF_INT64: tc_buf_printf(b, "%" PRId64, (int64_t)v); break;
    case TC_GGUF_BOOL: tc_buf_puts(b, v ? "true" : "false"); break;
    case TC_GGUF_FLOAT32:
        memcpy(&f, &u32, 4);
        put_float(b, f, true, json);
        break;
    case TC_GGUF_FLOAT64:
        memcpy(&x, &v, 8);
        put_float(b, x, false, json);
        break;
    default: tc_buf_printf(b, "%" PRIu64, v); break;
    }
}

/* s escaped for a JSON string (no quotes around: it may be a piece of one). */
static void json_string(tc_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            tc_buf_putc(b, '\\');
            tc_buf_putc(b, (char)c);
        } else if (c == '\n') {
            tc_buf_puts(b, "\\n");
        } else if (c == '\t') {
            tc_buf_puts(b, "\\t");
        } else if (c < 0x20) {
            tc_buf_printf(b, "\\u%04x", c);
        } else {
            tc_buf_putc(b, (char)c);
        }
    }
}

/* Where a long JSON value goes as it is made (see tc_gguf_kv_json). */
typedef struct jout {
    void (*flush)(void *ctx, tc_buf *b);
    void *ctx;
} jout;

static void maybe_flush(tc_buf *b, const jout *j)
{
    if (j && j->flush && tc_buf_len(b) >= (1u << 20))
        j->flush(j->ctx, b);
}

/* A string's length and bytes at the cursor, appended as JSON (in pieces) or, cut at max bytes,
 * as escaped text. */
static int put_string(gg_cur *c, tc_buf *b, bool json, size_t max, const jout *j, tc_diag *d)
{
    uint64_t len;
    int rc = gg_cur_num(c, 8, &len, d);
    if (rc)
        return rc;
    if (len > c->end - c->pos)
        return tc_fail_at(d, TC_ERR_FORMAT, c->f->path, c->pos, "metadata string runs past its value");
    uint64_t keep = json || len <= max ? len : max;
    char piece[4096];
    tc_buf_putc(b, '"');
    for (uint64_t done = 0; done < keep && !rc; ) {
        size_t k = keep - done < sizeof piece ? (size_t)(keep - done) : sizeof piece;
        if (!(rc = gg_cur_get(c, piece, k, d))) {
            if (json)
                json_string(b, piece, k);
            else
                tc_buf_esc(b, piece, k);
            maybe_flush(b, j);
        }
        done += k;
    }
    c->pos += len - keep;
    tc_buf_puts(b, json || keep == len ? "\"" : "...\"");
    return rc;
}

/* The elements of an array of n of type et at the cursor; text: the first few only (then "..."). */
static int put_array(gg_cur *c, uint32_t et, uint64_t n, tc_buf *b, bool json, int depth, const jout *j, tc_diag *d)
{
    int rc = 0;
    size_t sz = gg_scalar_size(et), start = tc_buf_len(b);
    tc_buf_putc(b, '[');
    for (uint64_t i = 0; i < n && !rc; i++) {
        if (!json && (i == 8 || tc_buf_len(b) - start > 120)) {
            tc_buf_puts(b, ", ...");
            break;
        }
        if (i)
            tc_buf_puts(b, ", ");
        if (et == TC_GGUF_STRING) {
            rc = put_string(c, b, json, 40, j, d);
        } else if (et == TC_GGUF_ARRAY) {
            uint64_t it, in;
            if (!(rc = gg_cur_num(c, 4, &it, d)) && !(rc = gg_cur_num(c, 8, &in, d)))
                rc = depth < GG_MAX_NEST ? put_array(c, (uint32_t)it, in, b, json, depth + 1, j, d)
                                         : tc_fail(d, TC_ERR_LIMIT, "arrays nested too deep");
        } else {
            uint64_t v;
            if (!(rc = gg_cur_num(c, sz, &v, d)))
                put_scalar(b, et, v, json);
        }
        maybe_flush(b, j);
    }
    tc_buf_putc(b, ']');
    return rc;
}

static int put_value(const gg_file *f, const gg_kv *kv, tc_buf *b, bool json, const jout *j, tc_diag *d)
{
    if (kv->type != TC_GGUF_STRING && kv->type != TC_GGUF_ARRAY) {
        put_scalar(b, kv->type, kv->bits, json);
        return 0;
    }
    gg_cur *c = malloc(sizeof *c);
    if (!c)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    gg_cur_init(c, f, kv->off, kv->len);
    int rc = kv->type == TC_GGUF_STRING ? put_string(c, b, json, 200, j, d)
                                        : put_array(c, kv->etype, kv->count, b, json, 0, j, d);
    free(c);
    return rc;
}

int tc_gguf_kv_json(const tc_ckpt *c, size_t k, size_t i, tc_buf *out, void (*flush)(void *ctx, tc_buf *b),
                    void *ctx, tc_diag *d)
{
    jout j = {flush, ctx};
    const gg_file *f;
    const gg_kv *kv = kv_at(c, k, i, &f);
    if (!kv)
        return tc_fail(d, TC_ERR_USAGE, "no metadata entry %zu", i);
    tc_buf_puts(out, "{\"key\": \"");
    json_string(out, kv->key, strlen(kv->key));
    tc_buf_printf(out, "\", \"type\": \"%s\"", tc_gguf_type_name(kv->type));
    if (kv->type == TC_GGUF_ARRAY)
        tc_buf_printf(out, ", \"element_type\": \"%s\", \"count\": %" PRIu64 "%s", tc_gguf_type_name(kv->etype),
                      kv->count, kv->nested ? ", \"nested\": true" : "");
    tc_buf_puts(out, ", \"value\": ");
    int rc = put_value(f, kv, out, true, &j, d);
    tc_buf_putc(out, '}');
    if (rc)
        return rc;
    if (tc_buf_oom(out))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory for metadata '%.100s'", kv->key);
    return 0;
}

int tc_gguf_kv_text(const tc_ckpt *c, size_t k, size_t i, tc_buf *out, tc_diag *d)
{
    const gg_file *f;
    const gg_kv *kv = kv_at(c, k, i, &f);
    if (!kv)
        return tc_fail(d, TC_ERR_USAGE, "no metadata entry %zu", i);
    if (kv->type == TC_GGUF_ARRAY)
        tc_buf_printf(out, "[%s x %" PRIu64 "] ", tc_gguf_type_name(kv->etype), kv->count);
    return put_value(f, kv, out, false, NULL, d);
}

/* ---- --kv ------------------------------------------------------------------------------------- */

int tc_gguf_kv_parse(const char *text, tc_gguf_wkv *out, char *why, size_t whyn)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text) {
        snprintf(why, whyn, "expected KEY=VALUE or KEY=TYPE:VALUE");
        return -1;
    }
    tc_gguf_wkv w = {.key = NULL, .type = TC_GGUF_STRING};
    const char *val = eq + 1, *colon = strchr(val, ':');
    char tname[16] = "";
    if (colon && (size_t)(colon - val) < sizeof tname) {
        memcpy(tname, val, (size_t)(colon - val));
        tname[colon - val] = 0;
    }
    int t = tname[0] ? tc_gguf_type_from_name(tname) : -1;
    if (t >= 0)
        val = colon + 1;
    else
        t = TC_GGUF_STRING; /* no known TYPE: prefix, the whole value is a string */
    if (t == TC_GGUF_ARRAY) {
        snprintf(why, whyn, "arrays cannot be given here");
        return -1;
    }
    w.type = (uint32_t)t;
    char *end = NULL;
    errno = 0;
    if (t == TC_GGUF_STRING) {
        w.str = val;
        w.len = strlen(val);
    } else if (t == TC_GGUF_BOOL) {
        if (!strcmp(val, "true") || !strcmp(val, "1"))
            w.bits = 1;
        else if (strcmp(val, "false") && strcmp(val, "0")) {
            snprintf(why, whyn, "BOOL value '%.40s' is not true or false", val);
            return -1;
        }
    } else if (t == TC_GGUF_FLOAT32 || t == TC_GGUF_FLOAT64) {
        double x = strtod(val, &end);
        if (!*val || *end) {
            snprintf(why, whyn, "'%.40s' is not a number", val);
            return -1;
        }
        if (t == TC_GGUF_FLOAT32) {
            float f = (float)x;
            uint32_t u;
            memcpy(&u, &f, 4);
            w.bits = u;
        } else {
            memcpy(&w.bits, &x, 8);
        }
    } else {
        bool sgn = t == TC_GGUF_INT8 || t == TC_GGUF_INT16 || t == TC_GGUF_INT32 || t == TC_GGUF_INT64;
        size_t bits = gg_scalar_size((uint32_t)t) * 8;
        if (sgn) {
            long long v = strtoll(val, &end, 10);
            long long lim = bits == 64 ? INT64_MAX : (1ll << (bits - 1)) - 1;
            if (!*val || *end || errno || v > lim || v < -lim - 1) {
                snprintf(why, whyn, "'%.40s' is not a %s", val, tc_gguf_type_name((uint32_t)t));
                return -1;
            }
            w.bits = (uint64_t)v & (bits == 64 ? UINT64_MAX : (1ull << bits) - 1);
        } else {
            unsigned long long v = strtoull(val, &end, 10);
            if (!*val || *end || errno || *val == '-' || (bits < 64 && v >> bits)) {
                snprintf(why, whyn, "'%.40s' is not a %s", val, tc_gguf_type_name((uint32_t)t));
                return -1;
            }
            w.bits = v;
        }
    }
    *out = w;
    out->key = text; /* the caller cuts it at '=' */
    return 0;
}

/* ---- the llama family's names, as transformers' GGUF loader gives them -------------------------- */

static int read_string_kv(const gg_priv *g, const char *key, char *out, size_t n, tc_diag *d)
{
    const gg_file *f = &g->files.v[0];
    const gg_kv *kv = gg_find_kv(g, f, key);
    if (!kv || kv->type != TC_GGUF_STRING) {
        out[0] = 0;
        return 0;
    }
    uint8_t l8[8];
    int rc;
    if ((rc = gg_read(f, kv->off, l8, 8, d)))
        return rc;
    uint64_t len = gg_num(f, l8, 8);
    size_t k = len < n - 1 ? (size_t)len : n - 1;
    if ((rc = gg_read(f, kv->off + 8, out, k, d)))
        return rc;
    out[k] = 0;
    return 0;
}

static bool int_kv(const gg_priv *g, const char *key, uint64_t *v)
{
    const gg_kv *kv = gg_find_kv(g, &g->files.v[0], key);
    if (!kv || kv->type == TC_GGUF_STRING || kv->type == TC_GGUF_ARRAY || kv->type == TC_GGUF_FLOAT32 ||
        kv->type == TC_GGUF_FLOAT64 || kv->type == TC_GGUF_BOOL)
        return false;
    *v = kv->bits;
    return true;
}

int gg_hf_check(const gg_priv *g, tc_diag *d)
{
    char arch[64];
    uint64_t h, kvh;
    int rc = read_string_kv(g, "general.architecture", arch, sizeof arch, d);
    if (rc)
        return rc;
    if (strcmp(arch, "llama"))
        return tc_fail_at(d, TC_ERR_USAGE, g->files.v[0].path, TC_NO_OFFSET,
                          "--names hf maps the llama family (general.architecture 'llama'); this file's is '%s'", arch);
    if (!int_kv(g, "llama.attention.head_count", &h) || !h)
        return tc_fail_at(d, TC_ERR_FORMAT, g->files.v[0].path, TC_NO_OFFSET,
                          "--names hf: no integer llama.attention.head_count, which undoing the Q/K permutation needs");
    if (!int_kv(g, "llama.attention.head_count_kv", &kvh) || !kvh)
        return tc_fail_at(d, TC_ERR_FORMAT, g->files.v[0].path, TC_NO_OFFSET,
                          "--names hf: no integer llama.attention.head_count_kv (llama.cpp then takes head_count, "
                          "transformers' loader leaves attn_q/attn_k permuted: tensorctl does not guess)");
    return 0;
}

int gg_hf_name(const gg_priv *g, const char *gguf, gg_tensor *t, char *out, size_t n, tc_diag *d)
{
    static const struct {
        const char *gguf, *hf;
        int perm; /* 1: q (head_count), 2: k (head_count_kv) */
    } blk[] = {
        {"attn_norm", "input_layernorm", 0},      {"attn_q", "self_attn.q_proj", 1}, {"attn_k", "self_attn.k_proj", 2},
        {"attn_v", "self_attn.v_proj", 0},        {"attn_output", "self_attn.o_proj", 0},
        {"ffn_norm", "post_attention_layernorm", 0}, {"ffn_gate", "mlp.gate_proj", 0}, {"ffn_up", "mlp.up_proj", 0},
        {"ffn_down", "mlp.down_proj", 0},
    };
    static const struct {
        const char *gguf, *hf;
    } top[] = {{"token_embd.weight", "model.embed_tokens.weight"},
               {"output_norm.weight", "model.norm.weight"},
               {"output.weight", "lm_head.weight"}};
    snprintf(out, n, "%s", gguf); /* no Hugging Face name: the GGUF one */
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(gguf, top[i].gguf))
            snprintf(out, n, "%s", top[i].hf);
    unsigned layer;
    int used = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &used) != 1 || !used)
        return 0;
    const char *part = gguf + used, *dot = strrchr(part, '.');
    if (!dot || (strcmp(dot, ".weight") && strcmp(dot, ".bias")))
        return 0;
    for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++) {
        if (strlen(blk[i].gguf) != (size_t)(dot - part) || strncmp(part, blk[i].gguf, (size_t)(dot - part)))
            continue;
        snprintf(out, n, "model.layers.%u.%s%s", layer, blk[i].hf, dot);
        if (!blk[i].perm)
            return 0;
        uint64_t heads = 0;
        int_kv(g, blk[i].perm == 1 ? "llama.attention.head_count" : "llama.attention.head_count_kv", &heads);
        const tc_qtype_info *qi = tc_qtype_get(t->q);
        /* rows of a matrix ([out, in] in torch's order), or the elements of a bias */
        t->prows = t->nd == 2 ? (uint64_t)t->ne[1] : (uint64_t)t->ne[0];
        t->prow_bytes = t->nd == 2 ? t->row_bytes : qi->bytes;
        if ((t->nd != 2 && (t->nd != 1 || qi->plain == TC_DT_INVALID)) || heads > t->prows || heads > UINT32_MAX ||
            t->prows % (2 * heads))
            return tc_fail_at(d, TC_ERR_FORMAT, g->files.v[t->file].path, TC_NO_OFFSET,
                              "--names hf: tensor '%s' (%" PRIu32 "-D %s, %" PRIu64 " rows) cannot be split into %" PRIu64
                              " heads of row pairs",
                              gguf, t->nd, qi->name, t->prows, heads);
        t->perm_heads = (uint32_t)heads;
        return 0;
    }
    return 0;
}
