#include "stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "assemble.h"
#include "format.h"
#include "quant.h"
#include "step.h"

#define CHUNK (8u << 20)        /* sequential streams: bytes per step on the larger side */
#define CUDA_CHUNK (32u << 20)  /* the GPU's caster splits a chunk over its two streams */
#define GATHER_CHUNK (4u << 20) /* elements gathered per cast/write step, in bytes */
#define WHOLE_MAX (32u << 20)   /* strided views of storages up to this size are read whole */

/* A storage stored as blocks, as a plain range of its file: decoded and cast by the parallel transfer.
 * 1 when it is not one (read it through open_values). */
static int xfer_blocks(tc_plan *p, const tc_ckpt *c, size_t i, tc_dtype to, tc_dst *dst, uint64_t off, uint32_t *crc,
                       tc_cast_stats *stats, tc_diag *d)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd r;
    int rc = tc_storage_open(c, i, &r, d);
    if (rc)
        return rc;
    const tc_src *src = r.src;
    uint64_t in_off = r.off, in_bytes = r.size;
    tc_rd_close(&r);
    if (!src || !tc_quant_can_decode(s->enc) || in_bytes != s->enc_bytes)
        return 1;
    return tc_step_coded(p, src, in_off, in_bytes, s->key, s->enc, TC_DT_F32, to, TC_Q_NONE, dst, off, crc, stats, d);
}

/* ---- storages stored as blocks (tc_storage.enc) ---------------------------------------- */

#define DEC_CHUNK (4u << 20) /* bytes of blocks decoded per step */

/* A reader of a storage's float32 values over its driver's reader of blocks. */
typedef struct dec {
    tc_rd raw;
    tc_qtype q;
    size_t in_unit, out_unit, cap;  /* bytes per block in and out; blocks per step */
    uint8_t *in;
    float *stage;                   /* one block decoded for a read of less than a block */
    size_t stage_at, stage_n;       /* bytes of stage not yet returned */
} dec;

static int dec_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    dec *x = r->state;
    uint8_t *o = buf;
    size_t done = 0;
    if (x->stage_n) {
        size_t k = x->stage_n < n ? x->stage_n : n;
        memcpy(o, (uint8_t *)x->stage + x->stage_at, k);
        x->stage_at += k;
        x->stage_n -= k;
        *got = k;
        return 0;
    }
    size_t nb = n / x->out_unit < x->cap ? n / x->out_unit : x->cap;
    bool staged = nb == 0;
    nb += staged;
    size_t g = 0;
    int rc;
    if ((rc = tc_rd_read(&x->raw, x->in, nb * x->in_unit, &g, d)))
        return rc;
    if (g != nb * x->in_unit)
        return tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends inside a %s block", r->what, tc_qtype_name(x->q));
    if (tc_quant_decode(x->q, staged ? x->stage : (float *)(void *)o, x->in, nb))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot dequantise %s", tc_qtype_name(x->q));
    if (staged) {
        done = n;
        memcpy(o, x->stage, n);
        x->stage_at = n;
        x->stage_n = x->out_unit - n;
    } else {
        done = nb * x->out_unit;
    }
    *got = done;
    return 0;
}

static void dec_close(tc_rd *r)
{
    dec *x = r->state;
    tc_rd_close(&x->raw);
    free(x->in);
    free(x->stage);
    free(x);
    r->state = NULL;
}

/* Storage i's values as its dtype says: through its driver, decoded when it is stored as blocks. */
static int open_values(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    int rc = tc_storage_open(c, i, r, d);
    if (rc || s->enc == TC_Q_NONE)
        return rc;
    const tc_qtype_info *q = tc_qtype_get(s->enc);
    dec *x = NULL;
    if (!tc_quant_can_decode(s->enc))
        rc = tc_fail_at(d, TC_ERR_UNSUPPORTED, tc_ckpt_path(c), s->file_off,
                        "tensor data '%s' is %s blocks, which cannot be dequantised (gguf-py 0.19 has no dequantiser "
                        "for them)", s->key, q->name);
    else if (!(x = calloc(1, sizeof *x)) || !(x->in = malloc(DEC_CHUNK / q->bytes * q->bytes)) ||
             !(x->stage = malloc((size_t)q->block * 4)))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (rc) {
        if (x) {
            free(x->in);
            free(x);
        }
        tc_rd_close(r);
        return rc;
    }
    x->raw = *r;
    x->q = s->enc;
    x->in_unit = q->bytes;
    x->out_unit = (size_t)q->block * 4;
    x->cap = DEC_CHUNK / q->bytes;
    const char *what = r->what;
    tc_rd_range(r, NULL, 0, s->nbytes);
    r->what = what;
    r->read = dec_read;
    r->close = dec_close;
    r->state = x;
    return 0;
}

/* Sequential: read a chunk, cast it (on the GPU when the plan says so), write it. */
static int stream_seq(tc_plan *p, tc_rd *r, tc_dtype from, tc_dtype to, tc_dst *dst, uint64_t off, uint32_t *crc,
                      tc_cast_stats *stats, tc_diag *d)
{
    bool cast = from != to, cuda = cast && p->cuda;
    size_t esz = cast ? tc_dtype_size(from) : 1, osz = cast ? tc_dtype_size(to) : 1;
    size_t chunk = (cuda ? CUDA_CHUNK : CHUNK) / (esz > osz ? esz : osz) * esz;
    uint8_t *in = malloc(chunk), *out = cast ? malloc(chunk / esz * osz) : NULL;
    uint32_t c32 = (uint32_t)crc32(0, NULL, 0);
    int rc;
    if (!in || (cast && !out)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint64_t pos = 0;;) {
        size_t got;
        if ((rc = tc_rd_read(r, in, chunk, &got, d)))
            goto done;
        if (!got)
            break;
        const uint8_t *o = in;
        size_t olen = got;
        if (cast) {
            size_t n = got / esz;
            if ((rc = tc_step_cast(p, to, out, from, in, n, stats, r->what, d)))
                goto done;
            o = out;
            olen = n * osz;
        }
        if (crc)
            c32 = (uint32_t)crc32(c32, o, (uInt)olen);
        if ((rc = tc_dst_pwrite(dst, off + pos, o, olen, d)))
            goto done;
        tc_dst_writeback(dst, off + pos, olen);
        pos += olen;
        p->copied += cast ? 0 : olen;
        tc_step_progress(p, got);
    }
    if (crc)
        *crc = c32;
done:
    free(in);
    free(out);
    return rc;
}

bool tc_stream_origin(const tc_plan *p, const tc_ckpt *c, size_t i, uint64_t *off)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    if (p->out[i].cast)
        return false;
    if (tc_assembled(c, i)) /* a distributed checkpoint's tensor: where its first chunk lies */
        return tc_assembled_origin(c, i, off);
    if (!s->stored || tc_ckpt_src(c)->fd < 0)
        return false;
    *off = s->file_off;
    return true;
}

int tc_stream_storage(tc_plan *p, const tc_ckpt *c, size_t i, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    const tc_out_storage *ps = &p->out[i];
    tc_plan_stat *stat = &p->stat[i];
    tc_dtype from = ps->cast ? stat->from : ps->dtype, to = ps->dtype;
    tc_cast_stats cs = {0};
    if (tc_assembled(c, i)) { /* a distributed checkpoint's tensor: from its chunks */
        int arc = tc_assemble(p, c, i, 0, s->numel, to, dst, off, crc, &cs, d);
        stat->overflow += cs.overflow;
        stat->underflow += cs.underflow;
        return arc;
    }
    if (s->enc != TC_Q_NONE && !(ps->cast && p->cuda)) { /* blocks: decoded in parallel when they are a plain range */
        int brc = xfer_blocks(p, c, i, to, dst, off, crc, &cs, d);
        stat->overflow += cs.overflow;
        stat->underflow += cs.underflow;
        if (brc <= 0)
            return brc;
    }
    tc_rd r;
    int rc = open_values(c, i, &r, d);
    if (rc)
        return rc;
    /* unchanged bytes keep the CRC-32 the input gives them, unless asked to check it */
    bool trust = !ps->cast && s->crc_known && !(s->crc == 0 && s->nbytes) && !(p->o && p->o->verify_crc);
    uint32_t got_crc = 0;
    bool computed = crc && !trust;
    if (r.src && !(ps->cast && p->cuda))
        rc = tc_step_range(p, r.src, r.off, r.size, s->key, from, to, dst, off, computed ? &got_crc : NULL, &cs, d);
    else
        rc = stream_seq(p, &r, from, to, dst, off, computed ? &got_crc : NULL, &cs, d);
    tc_rd_close(&r);
    stat->overflow += cs.overflow;
    stat->underflow += cs.underflow;
    if (rc)
        return rc;
    if (computed && !ps->cast && s->crc_known && s->crc != got_crc && s->crc != 0)
        return tc_fail_at(d, TC_ERR_FORMAT, tc_ckpt_path(c), s->file_off,
                          "storage '%s': CRC-32 is %08x but the file says %08x (data corrupted)", s->key, got_crc,
                          s->crc);
    if (crc)
        *crc = trust ? s->crc : got_crc;
    return 0;
}

/* ---- tensors --------------------------------------------------------------------- */

typedef struct dsink {
    tc_dst *dst;
    uint64_t off, pos;
    uint32_t crc;
    bool want_crc;
    bool same;        /* the bytes are a contiguous range of the input, unchanged */
    tc_plan *p;
} dsink;

static int dst_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    dsink *s = ctx;
    if (s->want_crc)
        s->crc = (uint32_t)crc32(s->crc, buf, (uInt)n);
    int rc = tc_dst_pwrite(s->dst, s->off + s->pos, buf, n, d);
    s->pos += n;
    s->p->copied += s->same ? n : 0;
    tc_step_progress(s->p, n);
    return rc;
}

int tc_stream_tensor(tc_plan *p, const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_dst *dst, uint64_t off,
                     uint32_t *crc, tc_cast_stats *stats, tc_diag *d)
{
    if (!t->numel) {
        if (crc)
            *crc = (uint32_t)crc32(0, NULL, 0);
        return 0;
    }
    if (to != t->dtype && !tc_cast_supported(to, t->dtype))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot cast %s to %s", t->name, tc_dtype_name(t->dtype),
                       tc_dtype_name(to));
    const tc_storage *s = tc_ckpt_storage(c, (size_t)t->storage);
    uint64_t start = (uint64_t)t->offset * tc_dtype_size(t->dtype);
    if (tc_assembled(c, (size_t)t->storage)) { /* all of its storage, or a contiguous range (a ZeRO group's) */
        if (!tc_tensor_contiguous(t) || t->offset < 0)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' is a strided view of a tensor assembled from chunks",
                           t->name);
        return tc_assemble(p, c, (size_t)t->storage, (uint64_t)t->offset, t->numel, to, dst, off, crc, stats, d);
    }
    if (s->enc != TC_Q_NONE && tc_tensor_contiguous(t) && !start && t->nbytes == s->nbytes) {
        int rc = xfer_blocks(p, c, (size_t)t->storage, to, dst, off, crc, stats, d);
        if (rc <= 0)
            return rc;
    }
    if (tc_tensor_contiguous(t) && start <= s->nbytes && t->nbytes <= s->nbytes - start) {
        tc_rd r;
        int rc = open_values(c, (size_t)t->storage, &r, d);
        if (rc)
            return rc;
        const tc_src *src = r.src;
        uint64_t in_off = r.off;
        tc_rd_close(&r);
        if (src) /* a plain range: in parallel */
            return tc_step_range(p, src, in_off + start, t->nbytes, s->key, t->dtype, to, dst, off, crc, stats, d);
    }
    dsink k = {dst, off, 0, (uint32_t)crc32(0, NULL, 0), crc != NULL, to == t->dtype && tc_tensor_contiguous(t), p};
    int rc;
    if ((rc = tc_tensor_elements(c, t, to, dst_sink, &k, stats, d)))
        return rc;
    if (crc)
        *crc = k.crc;
    return 0;
}

/* ---- gathering a tensor's elements ------------------------------------------------- */

/* Strided views of large stored storages are read through a 4-way
 * set-associative cache of 4 KiB blocks (32 MiB): a transposed matrix with up
 * to ~8k columns then reads each block about once. */
#define BLK 4096u
#define NSETS 2048u
#define WAYS 4u

typedef struct gather {
    const tc_src *src;      /* the storage as a plain range of a file, when it is one */
    uint64_t base;
    const tc_storage *s;
    uint8_t *win;           /* the whole storage (small ones), or the cache blocks */
    bool whole;
    uint64_t *tag, *age, clock;
} gather;

static int block(gather *g, uint64_t b, const uint8_t **out, tc_diag *d)
{
    size_t set = (size_t)((b * 0x9E3779B97F4A7C15ull) >> 53) % NSETS, victim = set * WAYS;
    for (size_t w = set * WAYS; w < set * WAYS + WAYS; w++) {
        if (g->tag[w] == b + 1) {
            g->age[w] = ++g->clock;
            *out = g->win + w * BLK;
            return 0;
        }
        if (g->age[w] < g->age[victim])
            victim = w;
    }
    uint64_t off = b * BLK, n = g->s->nbytes - off < BLK ? g->s->nbytes - off : BLK;
    g->tag[victim] = 0;
    int rc = tc_src_read(g->src, g->base + off, g->win + victim * BLK, (size_t)n, g->s->key, d);
    if (rc)
        return rc;
    g->tag[victim] = b + 1;
    g->age[victim] = ++g->clock;
    *out = g->win + victim * BLK;
    return 0;
}

static int fetch(gather *g, uint64_t off, size_t len, uint8_t *dst, tc_diag *d)
{
    if (g->whole) {
        memcpy(dst, g->win + off, len);
        return 0;
    }
    if (len >= 16 * BLK)
        return tc_src_read(g->src, g->base + off, dst, len, g->s->key, d);
    while (len) {
        const uint8_t *p;
        uint64_t b = off / BLK, in = off % BLK;
        size_t k = BLK - in < len ? (size_t)(BLK - in) : len;
        int rc = block(g, b, &p, d);
        if (rc)
            return rc;
        memcpy(dst, p + in, k);
        dst += k;
        off += k;
        len -= k;
    }
    return 0;
}

/* ---- pulling a tensor's elements ---------------------------------------------------------- */

struct tc_elems {
    const tc_tensor *t;
    const tc_storage *s;
    tc_rd r;
    bool open;
    size_t esz;
    bool contiguous;
    uint64_t start, pos;    /* contiguous: the tensor's first byte in its storage, bytes returned */
    bool skipped;           /* a stream: read up to start */
    gather g;               /* strided */
    int64_t idx[TC_MAX_DIMS];
    uint64_t run, r0, done_el;
    int outer;
};

void tc_elems_close(tc_elems *e)
{
    if (!e)
        return;
    if (e->open)
        tc_rd_close(&e->r);
    free(e->g.win);
    free(e->g.tag);
    free(e->g.age);
    free(e);
}

int tc_elems_open(tc_elems **out, const tc_ckpt *c, const tc_tensor *t, tc_diag *d)
{
    *out = NULL;
    if (t->numel && t->storage < 0)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' has no data", t->name);
    if (t->numel && tc_assembled(c, (size_t)t->storage))
        return tc_fail(d, TC_ERR_UNSUPPORTED,
                       "tensor '%s' is assembled from the chunks of a distributed checkpoint; read it after "
                       "'tensorctl consolidate'", t->name);
    tc_elems *e = calloc(1, sizeof *e);
    if (!e)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    e->t = t;
    e->esz = tc_dtype_size(t->dtype);
    if (!t->numel) {
        *out = e;
        return 0;
    }
    e->s = tc_ckpt_storage(c, (size_t)t->storage);
    int rc = open_values(c, (size_t)t->storage, &e->r, d);
    if (rc)
        goto fail;
    e->open = true;
    e->contiguous = tc_tensor_contiguous(t);
    e->start = (uint64_t)t->offset * e->esz;
    if (e->contiguous) {
        *out = e;
        return 0;
    }
    /* strided: the whole storage in memory when small, else a read window over a plain range */
    int nd = t->ndim;
    bool inner = nd > 0 && t->stride[nd - 1] == 1;
    e->run = inner ? (uint64_t)t->shape[nd - 1] : 1;
    e->outer = inner ? nd - 1 : nd;
    e->g.s = e->s;
    if (e->s->nbytes <= WHOLE_MAX) {
        size_t got = 0;
        if (!(e->g.win = malloc(e->s->nbytes ? (size_t)e->s->nbytes : 1))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        if (!(rc = tc_rd_read(&e->r, e->g.win, (size_t)e->s->nbytes, &got, d)) && got != e->s->nbytes)
            rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", e->s->key);
        e->g.whole = true;
    } else if (!e->r.src) {
        rc = tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' is compressed and too large to gather a view of",
                     e->s->key);
    } else if (!(e->g.win = malloc((size_t)NSETS * WAYS * BLK)) ||
               !(e->g.tag = calloc(NSETS * WAYS, sizeof *e->g.tag)) ||
               !(e->g.age = calloc(NSETS * WAYS, sizeof *e->g.age))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    } else {
        e->g.src = e->r.src;
        e->g.base = e->r.off;
    }
    if (rc)
        goto fail;
    *out = e;
    return 0;
fail:
    tc_elems_close(e);
    return rc;
}

bool tc_elems_range(const tc_elems *e, const tc_src **src, uint64_t *off)
{
    if (!e->open || !e->contiguous || !e->r.src || e->start > e->r.size || e->t->nbytes > e->r.size - e->start)
        return false;
    *src = e->r.src;
    *off = e->r.off + e->start;
    return true;
}

/* A contiguous tensor: the storage read in order from the tensor's first byte. */
static int read_in_order(tc_elems *e, uint8_t *buf, size_t n, size_t *got, tc_diag *d)
{
    tc_rd *r = &e->r;
    const char *key = e->s->key;
    int rc;
    if (!r->src && !e->skipped) { /* a stream: skip to the first byte */
        for (uint64_t skip = e->start; skip;) {
            size_t g, want = skip < n ? (size_t)skip : n;
            if ((rc = tc_rd_read(r, buf, want, &g, d)))
                return rc;
            if (!g)
                return tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
            skip -= g;
        }
        e->skipped = true;
    }
    size_t want = e->t->nbytes - e->pos < n ? (size_t)(e->t->nbytes - e->pos) : n;
    if (r->src) {
        if (e->start + e->pos + want > r->size)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
        if ((rc = tc_src_read(r->src, r->off + e->start + e->pos, buf, want, key, d)))
            return rc;
    } else {
        size_t g;
        if ((rc = tc_rd_read(r, buf, want, &g, d)))
            return rc;
        if (g != want)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
    }
    e->pos += want;
    *got = want;
    return 0;
}

/* A strided view: runs of the innermost dimension when it is contiguous, else single elements. */
static int read_strided(tc_elems *e, uint8_t *buf, size_t n, size_t *got, tc_diag *d)
{
    const tc_tensor *t = e->t;
    size_t esz = e->esz, fill = 0;
    while (e->done_el < t->numel && fill + esz <= n) {
        uint64_t el = (uint64_t)t->offset;
        for (int k = 0; k < e->outer; k++)
            el += (uint64_t)e->idx[k] * (uint64_t)t->stride[k];
        uint64_t cnt = e->run - e->r0, room = (n - fill) / esz;
        if (cnt > room)
            cnt = room;
        int rc = fetch(&e->g, (el + e->r0) * esz, (size_t)(cnt * esz), buf + fill, d);
        if (rc)
            return rc;
        fill += (size_t)(cnt * esz);
        e->r0 += cnt;
        if (e->r0 < e->run)
            break; /* the buffer is full */
        e->r0 = 0;
        e->done_el += e->run;
        for (int k = e->outer - 1; k >= 0; k--) {
            if (++e->idx[k] < t->shape[k])
                break;
            e->idx[k] = 0;
        }
    }
    *got = fill;
    return 0;
}

int tc_elems_read(tc_elems *e, void *buf, size_t n, size_t *got, tc_diag *d)
{
    *got = 0;
    n = n / e->esz * e->esz;
    if (!e->t->numel || !n)
        return 0;
    return e->contiguous ? read_in_order(e, buf, n, got, d) : read_strided(e, buf, n, got, d);
}

/* ---- pushing them to a sink ------------------------------------------------------------- */

int tc_tensor_elements(const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_sink_fn sink, void *ctx,
                       tc_cast_stats *stats, tc_diag *d)
{
    if (!t->numel)
        return 0;
    if (t->storage < 0)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' has no data", t->name);
    if (tc_assembled(c, (size_t)t->storage)) {
        if (!tc_tensor_contiguous(t) || t->offset < 0)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' is a strided view of a tensor assembled from chunks",
                           t->name);
        return tc_assemble_elements(c, (size_t)t->storage, (uint64_t)t->offset, t->numel, to, sink, ctx, stats, d);
    }
    size_t esz = tc_dtype_size(t->dtype);
    size_t chunk = GATHER_CHUNK / esz * esz;
    bool cast = to != t->dtype;
    if (cast && !tc_cast_supported(to, t->dtype))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot cast %s to %s", t->name, tc_dtype_name(t->dtype),
                       tc_dtype_name(to));
    uint8_t *buf = malloc(chunk), *cbuf = cast ? malloc(chunk / esz * tc_dtype_size(to)) : NULL;
    tc_elems *e = NULL;
    int rc = 0;
    if (!buf || (cast && !cbuf))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    else
        rc = tc_elems_open(&e, c, t, d);
    for (size_t got; !rc;) {
        if ((rc = tc_elems_read(e, buf, chunk, &got, d)) || !got)
            break;
        if (cast) {
            size_t cnt = got / esz;
            if (!(rc = tc_step_cast(NULL, to, cbuf, t->dtype, buf, cnt, stats, "gathered elements", d)))
                rc = sink(ctx, cbuf, cnt * tc_dtype_size(to), d);
        } else {
            rc = sink(ctx, buf, got, d);
        }
    }
    tc_elems_close(e);
    free(buf);
    free(cbuf);
    return rc;
}

uint64_t tc_expand_limit(uint64_t storage_bytes, uint64_t max_expand)
{
    uint64_t limit;
    if (__builtin_mul_overflow(storage_bytes, max_expand ? max_expand : TC_DEFAULT_MAX_EXPAND, &limit))
        limit = UINT64_MAX;
    return limit < TC_EXPAND_FLOOR ? TC_EXPAND_FLOOR : limit;
}

int tc_expand_check(const tc_ckpt *c, const tc_tensor *t, tc_dtype as, uint64_t max_expand, tc_diag *d)
{
    if (t->storage < 0)
        return 0;
    uint64_t sbytes = tc_ckpt_storage(c, (size_t)t->storage)->nbytes, want = tc_tensor_bytes_as(t, as);
    if (want <= tc_expand_limit(sbytes, max_expand))
        return 0;
    return tc_fail(d, TC_ERR_LIMIT,
                   "tensor '%s' is a view of %" PRIu64 " bytes of storage that reads out as %" PRIu64
                   " bytes (stride 0 or overlapping strides); raise with --max-expand",
                   t->name, sbytes, want);
}
