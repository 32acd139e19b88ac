/* GGUF reading: the header, the metadata, the tensor infos and split sets
 * (gguf_rd.c reads the tensors' bytes).
 *
 * A file is accepted only where ggml's loader (gguf_init_from_reader, and
 * llama.cpp's bounds check of tensor data) and gguf-py's GGUFReader would
 * both read it, with these exceptions, each a reading of one of them:
 *   - big-endian files (ggml refuses them on a little-endian host; gguf-py
 *     and ggml on a big-endian host read them): element tensors swapped per
 *     element; in blocks, the f16 scale fields swapped and the packed bits
 *     not, as gguf_convert_endian.py writes them, for the block types it
 *     knows (other block types are refused). gguf-py's dequantize reads
 *     those scales, and BF16 values, little-endian, as GGUFWriter (which
 *     does not swap uint8 data) writes them: such a file has two readings,
 *     a hazard;
 *   - arrays of arrays: gguf-py reads them (flattening the values), ggml
 *     refuses the file: a hazard;
 *   - a type gguf-py cannot dequantise is listed and copied, not read.
 * Refused where one of them refuses: bad magic, versions other than 2 and
 * 3, empty, duplicate or non-UTF-8 keys and names, unknown value or tensor
 * types, general.alignment not a power-of-two UINT32, more than 4 dims,
 * names of 64 bytes or more, rows not a whole number of blocks, strings
 * over 1 GiB and arrays over 2^30 elements (ggml's limits), counts the file
 * cannot hold, offsets other than the padded running sum ggml requires
 * (misaligned, gaps, overlaps), and data past the end of the file. */
#include "gguf_priv.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

/* A failure about file `path` at byte off, which the message ends with. */
__attribute__((format(printf, 5, 6))) static int bad(tc_diag *d, int code, const char *path, uint64_t off,
                                                     const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (off == TC_NO_OFFSET)
        return tc_fail_at(d, code, path, off, "%s", msg);
    return tc_fail_at(d, code, path, off, "%s (at byte %" PRIu64 ")", msg, off);
}

/* ---- a buffered reader for the header ------------------------------------------------- */

typedef struct rd {
    const gg_file *f;
    uint64_t pos, size;   /* next byte; the file's size */
    uint64_t boff;        /* buf holds [boff, boff + blen) */
    size_t blen;
    tc_diag *d;
    uint8_t buf[1 << 16];
} rd;

/* Make [pos, pos + n) (n <= sizeof buf) available; what: the field, for a truncated file. */
static int need(rd *r, size_t n, const char *what)
{
    if (n > r->size || r->pos > r->size - n)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos, "file ends inside %s (%" PRIu64 " bytes; truncated?)",
                          what, r->size);
    if (r->pos >= r->boff && r->pos + n <= r->boff + r->blen)
        return 0;
    size_t want = r->size - r->pos < sizeof r->buf ? (size_t)(r->size - r->pos) : sizeof r->buf;
    int rc = tc_src_read(r->f->src, r->pos, r->buf, want, what, r->d);
    if (rc)
        return rc;
    r->boff = r->pos;
    r->blen = want;
    return 0;
}

static const uint8_t *at(const rd *r) { return r->buf + (r->pos - r->boff); }

static int num(rd *r, size_t size, uint64_t *out, const char *what)
{
    int rc = need(r, size, what);
    if (rc)
        return rc;
    *out = gg_num(r->f, at(r), size);
    r->pos += size;
    return 0;
}

/* Strict UTF-8, as Python's decoder: no overlong forms, surrogates or code points past U+10FFFF.
 * Feed bytes in pieces; st carries an unfinished sequence (0 when between characters). */
typedef struct utf8 {
    int left;         /* continuation bytes still due */
    uint8_t lo, hi;   /* the range of the next one */
} utf8;

static bool utf8_feed(utf8 *u, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (u->left) {
            if (c < u->lo || c > u->hi)
                return false;
            u->left--;
            u->lo = 0x80, u->hi = 0xbf;
            continue;
        }
        if (c < 0x80)
            continue;
        u->lo = 0x80, u->hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            u->left = 1;
        else if (c >= 0xe0 && c <= 0xef)
            u->left = 2, u->lo = c == 0xe0 ? 0xa0 : 0x80, u->hi = c == 0xed ? 0x9f : 0xbf;
        else if (c >= 0xf0 && c <= 0xf4)
            u->left = 3, u->lo = c == 0xf0 ? 0x90 : 0x80, u->hi = c == 0xf4 ? 0x8f : 0xbf;
        else
            return false;
    }
    return true;
}

/* A string's length, checked against ggml's limit and the bytes left. */
static int str_len(rd *r, uint64_t *len, const char *what)
{
    int rc = num(r, 8, len, what);
    if (rc)
        return rc;
    if (*len > GG_MAX_STRING)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 8,
                          "%s: string length %" PRIu64 " is over ggml's limit of 1 GiB (corrupt file?)", what, *len);
    if (*len > r->size - r->pos)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 8,
                          "%s: string length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes; truncated?)",
                          what, *len, r->size);
    return 0;
}

/* A string's bytes, checked to be UTF-8 (gguf-py decodes every string strictly); *nul: it holds a NUL byte.
 * With out, the bytes are copied there (NUL-terminated; out has room for len + 1). */
static int str_body(rd *r, uint64_t len, char *out, bool *nul, const char *what)
{
    utf8 u = {0, 0, 0};
    uint64_t start = r->pos;
    *nul = false;
    while (len) {
        size_t n = len < sizeof r->buf ? (size_t)len : sizeof r->buf;
        int rc = need(r, n, what);
        if (rc)
            return rc;
        if (!utf8_feed(&u, at(r), n))
            return bad(r->d, TC_ERR_FORMAT, r->f->path, start,
                              "%s: string is not valid UTF-8 (gguf-py cannot decode it)", what);
        *nul |= memchr(at(r), 0, n) != NULL;
        if (out) {
            memcpy(out, at(r), n);
            out += n;
        }
        r->pos += n;
        len -= n;
    }
    if (u.left)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, start, "%s: string is not valid UTF-8 (gguf-py cannot decode it)",
                          what);
    if (out)
        *out = 0;
    return 0;
}

/* ---- metadata ------------------------------------------------------------------------- */

/* One value of type t (already read); kv gets its place. depth: arrays of arrays above it. */
static int value(rd *r, uint32_t t, gg_kv *kv, int depth, const char *key)
{
    char what[160];
    snprintf(what, sizeof what, "the value of key '%.100s'", key);
    if (t == TC_GGUF_STRING) {
        uint64_t len;
        bool nul;
        int rc = str_len(r, &len, what);
        return rc ? rc : str_body(r, len, NULL, &nul, what);
    }
    if (t != TC_GGUF_ARRAY) {
        size_t sz = gg_scalar_size(t);
        if (!sz)
            return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 4, "key '%.100s' has unknown value type %" PRIu32,
                              key, t);
        uint64_t v;
        int rc = num(r, sz, &v, what);
        if (rc)
            return rc;
        if (kv && !depth)
            kv->bits = v;
        return 0;
    }
    uint64_t et, n;
    int rc;
    if ((rc = num(r, 4, &et, what)) || (rc = num(r, 8, &n, what)))
        return rc;
    if (et >= TC_GGUF_NTYPES)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 12,
                          "key '%.100s' is an array of unknown value type %" PRIu64, key, et);
    if (n > GG_MAX_ARRAY)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 8,
                          "key '%.100s' is an array of %" PRIu64 " elements, over ggml's limit of 2^30", key, n);
    uint64_t least = et == TC_GGUF_STRING ? 8 : et == TC_GGUF_ARRAY ? 12 : gg_scalar_size((uint32_t)et);
    if (n > (r->size - r->pos) / least)
        return bad(r->d, TC_ERR_FORMAT, r->f->path, r->pos - 8,
                          "key '%.100s' is an array of %" PRIu64 " elements, more than the rest of the file holds "
                          "(truncated or corrupt?)", key, n);
    if (kv && !depth) {
        kv->etype = (uint32_t)et;
        kv->count = n;
        kv->off = r->pos;
        kv->nested = et == TC_GGUF_ARRAY;
    }
    if (et == TC_GGUF_ARRAY && depth + 1 >= GG_MAX_NEST)
        return bad(r->d, TC_ERR_LIMIT, r->f->path, r->pos, "key '%.100s' nests arrays more than %d deep", key,
                          GG_MAX_NEST);
    if (et != TC_GGUF_STRING && et != TC_GGUF_ARRAY) {
        r->pos += n * least;
        return 0;
    }
    for (uint64_t i = 0; i < n && !rc; i++)
        rc = value(r, (uint32_t)et, NULL, depth + 1, key);
    return rc;
}

static int read_kvs(rd *r, gg_priv *g, gg_file *f, tc_map *keys, tc_diag *d)
{
    for (uint64_t i = 0; i < f->nkv; i++) {
        uint64_t kstart = r->pos, len, t;
        char what[64];
        snprintf(what, sizeof what, "key %" PRIu64, i);
        int rc = str_len(r, &len, what);
        if (rc)
            return rc;
        if (!len)
            return bad(d, TC_ERR_FORMAT, f->path, kstart, "key %" PRIu64 " is empty (ggml refuses empty keys)", i);
        gg_kv *kv = tc_vec_extend(&g->kv, 1);
        char *key = kv ? malloc((size_t)len + 1) : NULL;
        if (!key)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory for key %" PRIu64, i);
        kv->key = key;
        bool nul;
        if ((rc = str_body(r, len, key, &nul, what)))
            return rc;
        if (nul)
            return bad(d, TC_ERR_FORMAT, f->path, kstart,
                              "key %" PRIu64 " holds a NUL byte (ggml's lookups stop there, gguf-py's do not)", i);
        int put = tc_map_put(keys, key, (size_t)len, i, NULL);
        if (put < 0)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        if (!put)
            return bad(d, TC_ERR_FORMAT, f->path, kstart, "key '%.200s' is given twice (ggml and gguf-py refuse it)",
                              key);
        if ((rc = num(r, 4, &t, "a value type")))
            return rc;
        kv->type = (uint32_t)t;
        uint64_t vstart = r->pos;
        if ((rc = value(r, kv->type, kv, 0, key)))
            return rc;
        if (kv->type != TC_GGUF_ARRAY)
            kv->off = vstart;
        kv->len = r->pos - kv->off;
    }
    return 0;
}

/* ---- tensor infos ----------------------------------------------------------------------- */

typedef struct info {
    char *name;
    uint64_t start;  /* where its info starts, for messages */
} info;

static int read_infos(rd *r, gg_priv *g, gg_file *f, size_t fi, info *names, tc_diag *d)
{
    for (uint64_t i = 0; i < f->ntensors; i++) {
        uint64_t start = r->pos, len, nd, type, off;
        char what[64];
        snprintf(what, sizeof what, "the name of tensor %" PRIu64, i);
        int rc = str_len(r, &len, what);
        if (rc)
            return rc;
        if (len >= GG_MAX_NAME)
            return bad(d, TC_ERR_FORMAT, f->path, start,
                              "tensor %" PRIu64 ": name of %" PRIu64 " bytes; ggml takes at most %d (GGML_MAX_NAME)", i,
                              len, GG_MAX_NAME - 1);
        char *name = malloc((size_t)len + 1);
        if (!name)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        names[i] = (info){name, start};
        bool nul;
        if ((rc = str_body(r, len, name, &nul, what)))
            return rc;
        if (nul)
            return bad(d, TC_ERR_FORMAT, f->path, start,
                              "tensor %" PRIu64 ": name holds a NUL byte (ggml cuts it there, gguf-py does not)", i);
        if ((rc = num(r, 4, &nd, "a tensor's dimension count")))
            return rc;
        if (nd > 4)
            return bad(d, TC_ERR_FORMAT, f->path, r->pos - 4,
                              "tensor '%s' has %" PRIu64 " dimensions; ggml takes at most 4 (GGML_MAX_DIMS)", name, nd);
        gg_tensor *t = tc_vec_extend(&g->t, 1);
        if (!t)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        t->file = fi;
        t->nd = (uint32_t)nd;
        uint64_t numel = 1;
        bool ovf = false;
        for (int k = 0; k < 4; k++) {
            uint64_t ne = 1;
            if ((uint64_t)k < nd && (rc = num(r, 8, &ne, "a tensor's dimensions")))
                return rc;
            if (ne > INT64_MAX)
                return bad(d, TC_ERR_FORMAT, f->path, r->pos - 8,
                                  "tensor '%s': dimension %d is %" PRIu64 ", negative for ggml", name, k, ne);
            t->ne[k] = (int64_t)ne;
            ovf |= __builtin_mul_overflow(numel, ne, &numel);
        }
        if (ovf || numel >= INT64_MAX)
            return bad(d, TC_ERR_FORMAT, f->path, start,
                              "tensor '%s': %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64
                              " elements overflow a 64-bit count",
                              name, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        if ((rc = num(r, 4, &type, "a tensor's type")))
            return rc;
        tc_qtype q = type <= UINT32_MAX ? tc_qtype_from_ggml((uint32_t)type) : TC_Q_NONE;
        if (q == TC_Q_NONE)
            return bad(d, TC_ERR_FORMAT, f->path, r->pos - 4,
                              "tensor '%s' has ggml type %" PRIu64 ", which is no type gguf-py 0.19 knows (removed, newer "
                              "or corrupt)", name, type);
        const tc_qtype_info *qi = tc_qtype_get(q);
        if (t->ne[0] % qi->block)
            return bad(d, TC_ERR_FORMAT, f->path, start,
                              "tensor '%s' of type %s has rows of %" PRId64 " values, not a multiple of its block of %" PRIu32,
                              name, qi->name, t->ne[0], qi->block);
        t->q = q;
        if (!tc_qtype_bytes(q, numel, &t->bytes) || !tc_qtype_bytes(q, (uint64_t)t->ne[0], &t->row_bytes))
            return bad(d, TC_ERR_FORMAT, f->path, start, "tensor '%s': its size in bytes overflows", name);
        if ((rc = num(r, 8, &off, "a tensor's offset")))
            return rc;
        t->off = off;
    }
    return 0;
}

/* ---- one file ---------------------------------------------------------------------------- */

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Parse file f (its src set) into g: header, KVs, infos, layout. names receives its tensor names. */
static int parse_file(gg_priv *g, size_t fi, const tc_limits *lim, info **names_out, tc_diag *d)
{
    gg_file *f = &g->files.v[fi];
    rd *r = malloc(sizeof *r);
    tc_map keys = {0};
    info *names = NULL;
    int rc = 0;
    if (!r)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    *r = (rd){.f = f, .pos = 0, .size = f->src->size, .boff = 0, .blen = 0, .d = d};
    uint8_t h[8];
    if ((rc = need(r, 4, "the magic")))
        goto done;
    memcpy(h, at(r), 4);
    if (memcmp(h, "GGUF", 4)) {
        rc = bad(d, TC_ERR_FORMAT, f->path, 0, "not a GGUF file: magic is %02x %02x %02x %02x, not 'GGUF'", h[0],
                        h[1], h[2], h[3]);
        goto done;
    }
    r->pos = 4;
    if ((rc = need(r, 4, "the version")))
        goto done;
    uint32_t v = tc_le32(at(r));
    if (v && !(v & 0xffff)) /* the low half zero: the other byte order (both readers' test) */
        f->big = true, v = __builtin_bswap32(v);
    r->pos = 8;
    if (v == 1) {
        rc = bad(d, TC_ERR_UNSUPPORTED, f->path, 4,
                        "GGUF version 1 (32-bit counts), which ggml and gguf-py no longer read");
        goto done;
    }
    if (v != 2 && v != 3) {
        rc = bad(d, TC_ERR_UNSUPPORTED, f->path, 4, "GGUF version %" PRIu32 "; ggml and gguf-py read 2 and 3", v);
        goto done;
    }
    f->version = v;
    if ((rc = num(r, 8, &f->ntensors, "the tensor count")) || (rc = num(r, 8, &f->nkv, "the metadata count")))
        goto done;
    uint64_t left = r->size - r->pos;
    if (f->ntensors > left / 24 || f->nkv > left / 14) {
        rc = bad(d, TC_ERR_FORMAT, f->path, f->ntensors > left / 24 ? 8 : 16,
                        "the header lists %" PRIu64 " %s, more than the rest of the file (%" PRIu64 " bytes) can hold "
                        "(truncated or corrupt?)",
                        f->ntensors > left / 24 ? f->ntensors : f->nkv,
                        f->ntensors > left / 24 ? "tensors" : "metadata entries", left);
        goto done;
    }
    if (f->ntensors > lim->max_entries || f->nkv > lim->max_entries) {
        rc = bad(d, TC_ERR_LIMIT, f->path, 8,
                        "the header lists %" PRIu64 " tensors and %" PRIu64 " metadata entries, over the limit of %" PRIu64
                        " (raise with --max-entries)", f->ntensors, f->nkv, lim->max_entries);
        goto done;
    }
    f->kv0 = g->kv.n;
    if ((rc = read_kvs(r, g, f, &keys, d)))
        goto done;
    f->align = 32;
    const gg_kv *a = gg_find_kv(g, f, "general.alignment");
    if (a && a->type != TC_GGUF_UINT32) {
        rc = bad(d, TC_ERR_FORMAT, f->path, a->off, "general.alignment is %s; ggml and gguf-py need UINT32",
                        tc_gguf_type_name(a->type));
        goto done;
    }
    if (a && (!a->bits || (a->bits & (a->bits - 1)))) {
        rc = bad(d, TC_ERR_FORMAT, f->path, a->off,
                        "general.alignment is %" PRIu64 "; it must be a non-zero power of two", a->bits);
        goto done;
    }
    if (a)
        f->align = (uint32_t)a->bits;
    size_t t0 = g->t.n;
    if (!(names = calloc(f->ntensors + 1, sizeof *names))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = read_infos(r, g, f, fi, names, d)))
        goto done;
    f->data_off = pad_to(r->pos, f->align);
    if (f->ntensors && f->data_off > r->size) {
        rc = bad(d, TC_ERR_FORMAT, f->path, r->pos,
                        "file ends inside the padding before the tensor data (%" PRIu64 " bytes; truncated?)", r->size);
        goto done;
    }
    /* ggml: each tensor at the running sum of the padded sizes before it */
    uint64_t want = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        gg_tensor *t = &g->t.v[t0 + i];
        const char *nm = names[i].name;
        if (t->off % f->align)
            rc = bad(d, TC_ERR_FORMAT, f->path, names[i].start,
                     "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu32, nm, t->off, f->align);
        else if (t->bytes > r->size - f->data_off || t->off > r->size - f->data_off - t->bytes)
            rc = bad(d, TC_ERR_FORMAT, f->path, names[i].start,
                     "tensor '%s': data at %" PRIu64 " + %" PRIu64 " bytes runs past the end of the file (%" PRIu64
                     " bytes; truncated?)",
                     nm, f->data_off + t->off, t->bytes, r->size);
        else if (t->off < want)
            rc = bad(d, TC_ERR_FORMAT, f->path, names[i].start,
                     "tensor '%s': offset %" PRIu64 " overlaps tensor '%s', which ends at %" PRIu64, nm, t->off,
                     names[i - 1].name, g->t.v[t0 + i - 1].off + g->t.v[t0 + i - 1].bytes);
        else if (t->off > want)
            rc = bad(d, TC_ERR_FORMAT, f->path, names[i].start,
                     "tensor '%s': offset %" PRIu64 " leaves a gap; ggml needs %" PRIu64
                     " (tensors back to back in the order listed, each padded to %" PRIu32 ")",
                     nm, t->off, want, f->align);
        if (rc)
            goto done;
        t->abs = f->data_off + t->off;
        want = t->off + pad_to(t->bytes, f->align);
    }
    *names_out = names;
    names = NULL;
done:
    if (names)
        for (size_t i = 0; i < f->ntensors; i++)
            free(names[i].name);
    free(names);
    tc_map_free(&keys);
    free(r);
    return rc;
}

/* ---- the checkpoint ------------------------------------------------------------------------ */

static void priv_free(void *p)
{
    gg_priv *g = p;
    if (!g)
        return;
    for (size_t i = 0; i < g->files.n; i++) {
        free(g->files.v[i].path);
        tc_src_close(&g->files.v[i].own);
    }
    for (size_t i = 0; i < g->kv.n; i++)
        free(g->kv.v[i].key);
    tc_vec_free(&g->files);
    tc_vec_free(&g->kv);
    tc_vec_free(&g->t);
    free(g);
}

static bool probe(const tc_probe *p)
{
    size_t l = p->path ? strlen(p->path) : 0;
    return (p->n >= 4 && !memcmp(p->head, "GGUF", 4)) || (l > 5 && !strcmp(p->path + l - 5, ".gguf"));
}

/* "X-00001-of-00003.gguf": the part before "-00001" when path is shard `no` (1-based) of `count`, else 0. */
static size_t split_prefix(const char *path, unsigned no, unsigned count)
{
    char tail[40];
    snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", no, count);
    size_t l = strlen(path), t = strlen(tail);
    return l > t && !strcmp(path + l - t, tail) ? l - t : 0;
}

static int add_tensors(tc_ckpt *c, gg_priv *g, size_t fi, size_t t0, info *names, tc_map *seen, tc_diag *d)
{
    gg_file *f = &g->files.v[fi];
    bool hf = tc_ckpt_limits(c)->names == TC_NAMES_HF;
    for (size_t i = 0; i < f->ntensors; i++) {
        gg_tensor *t = &g->t.v[t0 + i];
        const tc_qtype_info *qi = tc_qtype_get(t->q);
        const char *name = names[i].name;
        int put = tc_map_put(seen, name, strlen(name), t0 + i, NULL);
        if (put < 0)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        if (!put)
            return bad(d, TC_ERR_FORMAT, f->path, names[i].start,
                              "tensor name '%s' is given twice (ggml and gguf-py refuse it)", name);
        if (f->big && qi->plain == TC_DT_INVALID && !gg_be_fields(t->q))
            return bad(d, TC_ERR_UNSUPPORTED, f->path, names[i].start,
                              "tensor '%s': %s blocks in a big-endian file have no agreed byte order "
                              "(gguf_convert_endian.py swaps Q4_0, Q8_0, Q4_K, Q6_K, MXFP4 and NVFP4)", name, qi->name);
        char hfname[256];
        if (hf && gg_hf_name(g, name, t, hfname, sizeof hfname, d) < 0)
            return d->code;
        if (hf && tc_ckpt_find_tensor(c, hfname) >= 0)
            return bad(d, TC_ERR_FORMAT, f->path, names[i].start, "--names hf: tensor '%s' would be named '%s' twice",
                       name, hfname);
        long si = tc_ckpt_add_storage(c, hf ? hfname : name, d);
        if (si < 0)
            return d->code;
        tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
        if (tc_ckpt_set_location(c, (size_t)si, "-", d))
            return d->code;
        uint64_t numel = 1;
        for (uint32_t k = 0; k < t->nd; k++)
            numel *= (uint64_t)t->ne[k];
        bool block = qi->plain == TC_DT_INVALID;
        s->dtype = block ? TC_DT_F32 : qi->plain;
        s->numel = numel;
        s->nbytes = block ? numel * 4 : t->bytes;
        s->enc = block ? t->q : TC_Q_NONE;
        s->enc_bytes = block ? t->bytes : 0;
        /* a plain range of the file only when its bytes are read as they lie */
        s->stored = !block && !(f->big && qi->bytes > 1) && !t->perm_heads;
        s->file_off = t->abs;
        s->ntensors = 1;
        s->shard = g->files.n > 1 ? (long)fi : -1;
        long ti = tc_ckpt_add_tensor(c, hf ? hfname : name, d);
        if (ti < 0)
            return d->code;
        tc_tensor *tt = tc_ckpt_tensor_mut(c, (size_t)ti);
        tt->kind = block && !qi->decodes ? TC_TENSOR_QUANT : TC_TENSOR_DENSE;
        tt->dtype = s->dtype;
        tt->ndim = (int)t->nd;
        int64_t shape[TC_MAX_DIMS];
        for (int k = 0; k < (int)t->nd; k++) /* torch's shape is ne reversed */
            shape[k] = t->ne[t->nd - 1 - (uint32_t)k];
        if (tc_ckpt_set_dims(c, (size_t)ti, (int)t->nd, shape, NULL, d))
            return d->code;
        tt->storage = si;
        tt->numel = numel;
        tt->nbytes = s->nbytes;
        tt->device = "-";
    }
    return 0;
}

static int fact_u64(tc_ckpt *c, const char *key, uint64_t v, tc_diag *d)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    return tc_ckpt_add_fact(c, key, t, d);
}

/* The other files of a split set whose first file is files[0]. */
static int open_shards(tc_ckpt *c, gg_priv *g, unsigned count, info ***names, tc_diag *d)
{
    const char *path = g->files.v[0].path;
    size_t pl = split_prefix(path, 1, count);
    if (!pl)
        return bad(d, TC_ERR_FORMAT, path, TC_NO_OFFSET,
                          "is the first of %u split files (split.count), but its name does not end in -00001-of-%05u.gguf, "
                          "so the others cannot be found (llama.cpp names them so)", count, count);
    for (unsigned k = 2; k <= count; k++) {
        gg_file *f = tc_vec_extend(&g->files, 1);
        char *p = f ? malloc(pl + 32) : NULL;
        if (!p)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        snprintf(p, pl + 32, "%.*s-%05u-of-%05u.gguf", (int)pl, path, k, count);
        f->path = p;
        f->own.fd = -1;
        int rc = tc_src_open_file(&f->own, p, d);
        if (rc)
            return rc;
        f->src = &f->own;
        if ((rc = parse_file(g, g->files.n - 1, tc_ckpt_limits(c), &(*names)[k - 1], d)))
            return rc;
        const gg_kv *no = gg_find_kv(g, f, "split.no"), *cnt = gg_find_kv(g, f, "split.count");
        if (!no || no->type != TC_GGUF_UINT16 || no->bits != k - 1 || !cnt || cnt->type != TC_GGUF_UINT16 ||
            cnt->bits != count)
            return bad(d, TC_ERR_FORMAT, p, TC_NO_OFFSET,
                              "is not split %u of %u: its split.no and split.count (UINT16) say otherwise", k - 1, count);
    }
    return 0;
}

/* What makes a file a hazard: readings that differ between gguf-py and ggml. */
static int judge(tc_ckpt *c, gg_priv *g, tc_diag *d)
{
    for (size_t i = 0; i < g->kv.n; i++)
        if (g->kv.v[i].nested) {
            char h[400];
            snprintf(h, sizeof h,
                     "key '%.200s' is an array of arrays: gguf-py reads its values flattened, ggml refuses the file",
                     g->kv.v[i].key);
            return tc_ckpt_add_hazard(c, h, d);
        }
    for (size_t i = 0; i < g->t.n; i++) {
        const gg_tensor *t = &g->t.v[i];
        if (g->files.v[t->file].big && (t->q == TC_Q_BF16 || tc_qtype_is_block(t->q))) {
            char h[400];
            snprintf(h, sizeof h,
                     "big-endian file with %s tensor '%s': tensorctl reads its %s big-endian, as gguf_convert_endian.py "
                     "writes them; gguf-py dequantises them little-endian, as its GGUFWriter leaves them",
                     tc_qtype_name(t->q), tc_ckpt_tensor(c, i)->name, t->q == TC_Q_BF16 ? "values" : "scales");
            return tc_ckpt_add_hazard(c, h, d);
        }
    }
    return 0;
}

static int open_gguf(tc_ckpt *c, tc_diag *d)
{
    gg_priv *g = calloc(1, sizeof *g);
    if (!g)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, &tc_format_gguf, g, priv_free);
    gg_file *f = tc_vec_extend(&g->files, 1);
    size_t names_cap = 2;
    info **names = calloc(names_cap, sizeof *names);
    tc_map seen = {0};
    int rc = 0;
    if (!f || !names || !(f->path = strdup(tc_ckpt_path(c)))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    f->own.fd = -1;
    f->src = tc_ckpt_src(c);
    if ((rc = parse_file(g, 0, tc_ckpt_limits(c), &names[0], d)))
        goto done;
    const gg_kv *no = gg_find_kv(g, f, "split.no"), *cnt = gg_find_kv(g, f, "split.count");
    unsigned count = 1;
    if (cnt && cnt->type == TC_GGUF_UINT16 && cnt->bits > 1 && no && no->type == TC_GGUF_UINT16 && no->bits == 0) {
        count = (unsigned)cnt->bits;
        if (tc_grow(&names, &names_cap, (size_t)count + 1, sizeof *names)) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        memset(names + 1, 0, count * sizeof *names);
        if ((rc = open_shards(c, g, count, &names, d)))
            goto done;
        const gg_kv *tot = gg_find_kv(g, &g->files.v[0], "split.tensors.count");
        if (tot && tot->type == TC_GGUF_INT32 && tot->bits != g->t.n) {
            rc = bad(d, TC_ERR_FORMAT, g->files.v[0].path, TC_NO_OFFSET,
                            "split.tensors.count is %" PRIu64 " but the %u files hold %zu tensors (a shard is missing or "
                            "corrupt)", tot->bits, count, g->t.n);
            goto done;
        }
    }
    if (tc_ckpt_limits(c)->names == TC_NAMES_HF && (rc = gg_hf_check(g, d)))
        goto done;
    size_t t0 = 0;
    for (size_t k = 0; k < g->files.n; k++) {
        const char *base = strrchr(g->files.v[k].path, '/');
        if (g->files.n > 1 && tc_ckpt_add_shard(c, base ? base + 1 : g->files.v[k].path, d) < 0) {
            rc = d->code;
            goto done;
        }
        if ((rc = add_tensors(c, g, k, t0, names[k], &seen, d)))
            goto done;
        t0 += g->files.v[k].ntensors;
    }
    const gg_file *f0 = &g->files.v[0];
    if ((rc = fact_u64(c, "version", f0->version, d)) ||
        (rc = tc_ckpt_add_fact(c, "byte order", f0->big ? "big-endian" : "little-endian", d)) ||
        (rc = fact_u64(c, "alignment", f0->align, d)) || (rc = fact_u64(c, "metadata", f0->nkv, d)))
        goto done;
    if (g->files.n > 1 && (rc = fact_u64(c, "split files", g->files.n, d)))
        goto done;
    if (count == 1 && no && cnt && cnt->type == TC_GGUF_UINT16 && no->type == TC_GGUF_UINT16 && cnt->bits > 1) {
        char v[64];
        snprintf(v, sizeof v, "%" PRIu64 " of %" PRIu64 " (open the first for the whole set)", no->bits + 1, cnt->bits);
        if ((rc = tc_ckpt_add_fact(c, "split", v, d)))
            goto done;
    }
    rc = judge(c, g, d);
done:
    for (size_t k = 0; names && k < g->files.n; k++) {
        for (size_t i = 0; names[k] && i < g->files.v[k].ntensors; i++)
            free(names[k][i].name);
        free(names[k]);
    }
    free(names);
    tc_map_free(&seen);
    return rc;
}

const tc_format tc_format_gguf = {.name = "gguf", .probe = probe, .open = open_gguf, .open_storage = gg_open_storage,
                                  .write = tc_gguf_write, .caps = TC_CAP_GGUF | TC_CAP_WRITES_GGUF};
