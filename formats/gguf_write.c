/* GGUF writing: one file of a write job, laid out as ggml reads it (version
 * 3, little-endian): the header, the KVs, the tensor infos, padding to the
 * alignment, then each tensor at the padded running offset, zero padding
 * after each (as gguf-py's writer). The bytes come from the job's data
 * callback; a KV copied from a GGUF input is streamed from its file,
 * converted to little-endian. */
#include "gguf_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

/* A buffered sequential writer. */
typedef struct wb {
    tc_dst *dst;
    size_t n;
    uint8_t buf[1 << 16];
} wb;

static int wb_flush(wb *w, tc_diag *d)
{
    int rc = w->n ? tc_dst_write(w->dst, w->buf, w->n, d) : 0;
    w->n = 0;
    return rc;
}

static int wb_put(wb *w, const void *p, size_t n, tc_diag *d)
{
    const uint8_t *s = p;
    while (n) {
        if (w->n == sizeof w->buf) {
            int rc = wb_flush(w, d);
            if (rc)
                return rc;
        }
        size_t k = sizeof w->buf - w->n < n ? sizeof w->buf - w->n : n;
        memcpy(w->buf + w->n, s, k);
        w->n += k;
        s += k;
        n -= k;
    }
    return 0;
}

static int wb_num(wb *w, uint64_t v, size_t size, tc_diag *d)
{
    uint8_t b[8];
    for (size_t i = 0; i < size; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return wb_put(w, b, size, d);
}

static int wb_str(wb *w, const char *s, size_t n, tc_diag *d)
{
    int rc = wb_num(w, n, 8, d);
    return rc ? rc : wb_put(w, s, n, d);
}

/* The KV an entry copies, and the file it lies in; NULL for a given value. */
static const gg_kv *source(const tc_gguf_wkv *e, const gg_file **f)
{
    const gg_priv *g = e->from ? gg_priv_of(e->from) : NULL;
    if (!g || e->index >= g->files.v[0].nkv)
        return NULL;
    *f = &g->files.v[0];
    return &g->kv.v[g->files.v[0].kv0 + e->index];
}

/* Bytes of an entry's value (after its type). */
static uint64_t value_bytes(const tc_gguf_wkv *e)
{
    const gg_file *f;
    const gg_kv *kv = source(e, &f);
    if (kv)
        return kv->type == TC_GGUF_ARRAY ? 12 + kv->len : kv->type == TC_GGUF_STRING ? kv->len : gg_scalar_size(kv->type);
    return e->type == TC_GGUF_STRING ? 8 + e->len : gg_scalar_size(e->type);
}

/* A copied value: its elements re-read in the input's byte order and written little-endian. */
static int copy_value(wb *w, const gg_file *f, const gg_kv *kv, tc_diag *d)
{
    if (kv->type != TC_GGUF_STRING && kv->type != TC_GGUF_ARRAY)
        return wb_num(w, kv->bits, gg_scalar_size(kv->type), d);
    gg_cur *c = malloc(sizeof *c);
    if (!c)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    gg_cur_init(c, f, kv->off, kv->len);
    uint64_t n = 1;
    uint32_t et = kv->type;
    int rc = 0;
    if (kv->type == TC_GGUF_ARRAY) {
        et = kv->etype;
        n = kv->count;
        if ((rc = wb_num(w, et, 4, d)) || (rc = wb_num(w, n, 8, d)))
            goto done;
    }
    size_t sz = gg_scalar_size(et);
    uint8_t chunk[4096];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v;
        if (et != TC_GGUF_STRING) {
            if ((rc = gg_cur_num(c, sz, &v, d)) || (rc = wb_num(w, v, sz, d)))
                goto done;
            continue;
        }
        if ((rc = gg_cur_num(c, 8, &v, d)) || (rc = wb_num(w, v, 8, d)))
            goto done;
        while (v) {
            size_t k = v < sizeof chunk ? (size_t)v : sizeof chunk;
            if ((rc = gg_cur_get(c, chunk, k, d)) || (rc = wb_put(w, chunk, k, d)))
                goto done;
            v -= k;
        }
    }
done:
    free(c);
    return rc;
}

static int write_kv(wb *w, const tc_gguf_wkv *e, tc_diag *d)
{
    const gg_file *f;
    const gg_kv *kv = source(e, &f);
    int rc = wb_str(w, e->key, strlen(e->key), d);
    if (rc || (rc = wb_num(w, kv ? kv->type : e->type, 4, d)))
        return rc;
    if (kv)
        return copy_value(w, f, kv, d);
    if (e->type == TC_GGUF_STRING)
        return wb_str(w, e->str, e->len, d);
    return wb_num(w, e->bits, gg_scalar_size(e->type), d);
}

/* The alignment the KVs ask for (general.alignment), 32 by default; 0 when they ask for an invalid one. */
static uint32_t alignment_of(const tc_gguf_job *gj, tc_diag *d)
{
    for (size_t i = 0; i < gj->nkv; i++) {
        if (strcmp(gj->kv[i].key, "general.alignment"))
            continue;
        const gg_file *f;
        const gg_kv *kv = source(&gj->kv[i], &f);
        uint32_t type = kv ? kv->type : gj->kv[i].type;
        uint64_t v = kv ? kv->bits : gj->kv[i].bits;
        if (type != TC_GGUF_UINT32 || !v || (v & (v - 1))) {
            tc_fail(d, TC_ERR_USAGE, "general.alignment must be a UINT32 power of two");
            return 0;
        }
        return (uint32_t)v;
    }
    return 32;
}

static int check(const tc_write_job *job, const tc_gguf_job *gj, tc_diag *d)
{
    tc_map names = {0};
    int rc = 0;
    for (size_t i = 0; i < job->nitems && !rc; i++) {
        const tc_witem *it = &job->items[i];
        size_t l = strlen(it->name);
        tc_qtype q = gj->types[it->block];
        uint64_t numel = 1, bytes;
        for (int k = 0; k < it->ndim; k++)
            numel *= (uint64_t)it->shape[k];
        int put = tc_map_put(&names, it->name, l, i, NULL);
        if (put < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else if (!put)
            rc = tc_fail(d, TC_ERR_USAGE, "tensor '%s' would be written twice", it->name);
        else if (l >= GG_MAX_NAME)
            rc = tc_fail(d, TC_ERR_USAGE,
                         "tensor '%s': GGUF names are at most %d bytes (ggml's GGML_MAX_NAME); --rename or --strip-prefix "
                         "shortens it", it->name, GG_MAX_NAME - 1);
        else if (it->ndim > 4)
            rc = tc_fail(d, TC_ERR_USAGE, "tensor '%s' has %d dimensions; GGUF holds at most 4", it->name, it->ndim);
        else if (!tc_qtype_bytes(q, numel, &bytes) || bytes != job->blocks[it->block].nbytes ||
                 (it->ndim && it->shape[it->ndim - 1] % tc_qtype_get(q)->block))
            rc = tc_fail(d, TC_ERR_USAGE, "tensor '%s': %" PRIu64 " values do not make rows of whole %s blocks", it->name,
                         numel, tc_qtype_name(q));
    }
    for (size_t i = 0; i < gj->nkv && !rc; i++) {
        const gg_file *f;
        const gg_kv *kv = source(&gj->kv[i], &f);
        if (kv && kv->nested)
            rc = tc_fail(d, TC_ERR_USAGE, "key '%s' is an array of arrays, which ggml refuses", gj->kv[i].key);
        else if (!gj->kv[i].key[0])
            rc = tc_fail(d, TC_ERR_USAGE, "an empty key, which ggml refuses");
    }
    tc_map_free(&names);
    return rc;
}

static const uint8_t zeros[256];

/* The header, the key/values and the tensor infos, then pad zero bytes up to the data. */
static int write_head(wb *w, const tc_write_job *job, const tc_gguf_job *gj, uint32_t align, uint64_t pad,
                      tc_diag *d)
{
    int rc;
    if ((rc = wb_put(w, "GGUF", 4, d)) || (rc = wb_num(w, 3, 4, d)) || (rc = wb_num(w, job->nitems, 8, d)) ||
        (rc = wb_num(w, gj->nkv, 8, d)))
        return rc;
    for (size_t i = 0; i < gj->nkv; i++)
        if ((rc = write_kv(w, &gj->kv[i], d)))
            return rc;
    uint64_t off = 0;
    for (size_t i = 0; i < job->nitems; i++) {
        const tc_witem *it = &job->items[i];
        tc_qtype q = gj->types[it->block];
        int nd = it->ndim ? it->ndim : 1; /* GGUF has no 0-D tensors: a scalar is [1] */
        if ((rc = wb_str(w, it->name, strlen(it->name), d)) || (rc = wb_num(w, (uint64_t)nd, 4, d)))
            return rc;
        for (int k = 0; k < nd; k++)
            if ((rc = wb_num(w, it->ndim ? (uint64_t)it->shape[it->ndim - 1 - k] : 1, 8, d)))
                return rc;
        if ((rc = wb_num(w, tc_qtype_get(q)->ggml, 4, d)) || (rc = wb_num(w, off, 8, d)))
            return rc;
        off += (job->blocks[it->block].nbytes + align - 1) / align * align;
    }
    while (pad) { /* alignment can exceed 256 */
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if ((rc = wb_put(w, zeros, k, d)))
            return rc;
        pad -= k;
    }
    return wb_flush(w, d);
}

int tc_gguf_write(const tc_write_job *job, tc_dst *dst, tc_diag *d)
{
    const tc_gguf_job *gj = job->gguf;
    if (!gj)
        return tc_fail(d, TC_ERR_USAGE, "a GGUF output needs its tensor types");
    int rc;
    if ((rc = check(job, gj, d)))
        return rc;
    uint32_t align = alignment_of(gj, d);
    if (!align)
        return d->code;
    uint64_t head = 24;
    for (size_t i = 0; i < gj->nkv; i++)
        head += 8 + strlen(gj->kv[i].key) + 4 + value_bytes(&gj->kv[i]);
    for (size_t i = 0; i < job->nitems; i++)
        head += 8 + strlen(job->items[i].name) + 4 + 8 * (uint64_t)(job->items[i].ndim ? job->items[i].ndim : 1) + 4 + 8;
    uint64_t data = (head + align - 1) / align * align;
    wb *w = malloc(sizeof *w);
    if (!w)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    w->dst = dst;
    w->n = 0;
    rc = write_head(w, job, gj, align, data - head, d);
    free(w);
    if (rc)
        return rc;
    uint64_t off = 0;
    for (size_t i = 0; i < job->nitems; i++) {
        const tc_witem *it = &job->items[i];
        uint64_t n = job->blocks[it->block].nbytes, padded = (n + align - 1) / align * align;
        if ((rc = job->data(job->ctx, it->block, dst, data + off, NULL, d)))
            return rc;
        for (uint64_t p = n; p < padded;) {
            size_t k = padded - p < sizeof zeros ? (size_t)(padded - p) : sizeof zeros;
            if ((rc = tc_dst_pwrite(dst, data + off + p, zeros, k, d)))
                return rc;
            p += k;
        }
        off += padded;
    }
    tc_dst_seek(dst, data + off);
    return 0;
}
