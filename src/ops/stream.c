#include "stream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cast_cuda.h"
#include "format.h"
#include "xfer.h"

#define CHUNK (8u << 20)        /* sequential streams: bytes per step on the larger side */
#define CUDA_CHUNK (32u << 20)  /* the GPU's caster splits a chunk over its two streams */
#define GATHER_CHUNK (4u << 20) /* elements gathered per cast/write step, in bytes */
#define WHOLE_MAX (32u << 20)   /* strided views of storages up to this size are read whole */

static void progress(tc_plan *p, uint64_t add)
{
    p->done += add;
    if (p->o && p->o->progress)
        p->o->progress(p->o->progress_ctx, p->done, p->total);
}

typedef struct xprog {
    tc_plan *p;
    uint64_t base;
} xprog;

static void xfer_progress(void *ctx, uint64_t in_done)
{
    xprog *x = ctx;
    x->p->o->progress(x->p->o->progress_ctx, x->base + in_done, x->p->total);
}

static tc_pool *pool_of(tc_plan *p)
{
    if (!p->pool)
        p->pool = tc_pool_new(0); /* NULL (out of memory) runs on this thread */
    return p->pool;
}

/* A plain range through the parallel transfer. */
static int xfer_range(tc_plan *p, const tc_src *src, uint64_t in_off, uint64_t in_bytes, const char *what,
                      tc_dtype from, tc_dtype to, tc_dst *dst, uint64_t off, uint32_t *crc, tc_cast_stats *stats,
                      tc_diag *d)
{
    xprog xp = {p, p->done};
    tc_xfer x = {
        .src = src, .in_off = in_off, .in_bytes = in_bytes, .what = what, .out = dst, .out_off = off,
        .from = from, .to = to, .want_crc = crc != NULL,
        .progress = p->o && p->o->progress ? xfer_progress : NULL, .progress_ctx = &xp,
    };
    int rc = tc_xfer_run(pool_of(p), &x, d);
    p->shared += x.shared;
    p->copied += x.copied;
    if (rc)
        return rc;
    if (crc)
        *crc = x.crc;
    if (stats) {
        stats->overflow += x.stats.overflow;
        stats->underflow += x.stats.underflow;
        stats->nan += x.stats.nan;
    }
    p->done += in_bytes;
    return 0;
}

/* n elements of `from` at in, as `to` at out, counted into stats: on the
 * plan's GPU when it casts there (p may be NULL: the CPU). The one cast step
 * of every stream; the parallel transfer casts its chunks the same way. */
static int cast_chunk(const tc_plan *p, tc_dtype to, void *out, tc_dtype from, const void *in, size_t n,
                      tc_cast_stats *stats, const char *what, tc_diag *d)
{
    tc_cast_stats cs = {0};
    if (p && p->cuda) {
        char why[256] = "";
        if (tc_cast_count(&cs, to, from, in, n) || tc_cuda_caster_run(p->caster, to, out, from, in, n, why, sizeof why))
            return tc_fail(d, TC_ERR_IO, "CUDA cast of storage '%s' failed: %s", what, why);
    } else if (tc_cast_cpu_counted(&cs, to, out, from, in, n)) {
        return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot cast %s to %s", tc_dtype_name(from), tc_dtype_name(to));
    }
    if (stats) {
        stats->overflow += cs.overflow;
        stats->underflow += cs.underflow;
        stats->nan += cs.nan;
    }
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
    int rc = 0;
    if (!in || (cast && !out))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (uint64_t pos = 0; !rc;) {
        size_t got;
        if ((rc = tc_rd_read(r, in, chunk, &got, d)) || !got)
            break;
        const uint8_t *o = in;
        size_t olen = got;
        if (cast) {
            size_t n = got / esz;
            if ((rc = cast_chunk(p, to, out, from, in, n, stats, r->what, d)))
                break;
            o = out;
            olen = n * osz;
        }
        if (crc)
            c32 = (uint32_t)crc32(c32, o, (uInt)olen);
        if ((rc = tc_dst_pwrite(dst, off + pos, o, olen, d)))
            break;
        tc_dst_writeback(dst, off + pos, olen);
        pos += olen;
        p->copied += cast ? 0 : olen;
        progress(p, got);
    }
    if (!rc && crc)
        *crc = c32;
    free(in);
    free(out);
    return rc;
}

bool tc_stream_origin(const tc_plan *p, const tc_ckpt *c, size_t i, uint64_t *off)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    if (p->out[i].cast || !s->stored || tc_ckpt_src(c)->fd < 0)
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
    tc_rd r;
    int rc = tc_storage_open(c, i, &r, d);
    if (rc)
        return rc;
    /* unchanged bytes keep the CRC-32 the input gives them, unless asked to check it */
    bool trust = !ps->cast && s->crc_known && !(s->crc == 0 && s->nbytes) && !(p->o && p->o->verify_crc);
    uint32_t got_crc = 0;
    bool computed = crc && !trust;
    if (r.src && !(ps->cast && p->cuda))
        rc = xfer_range(p, r.src, r.off, r.size, s->key, from, to, dst, off, computed ? &got_crc : NULL, &cs, d);
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

static bool contiguous(const tc_tensor *t)
{
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want)
            return false;
        want *= t->shape[i];
    }
    return true;
}

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
    progress(s->p, n);
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
    if (contiguous(t) && start <= s->nbytes && t->nbytes <= s->nbytes - start) {
        tc_rd r;
        int rc = tc_storage_open(c, (size_t)t->storage, &r, d);
        if (rc)
            return rc;
        const tc_src *src = r.src;
        uint64_t in_off = r.off;
        tc_rd_close(&r);
        if (src) /* a plain range: in parallel */
            return xfer_range(p, src, in_off + start, t->nbytes, s->key, t->dtype, to, dst, off, crc, stats, d);
    }
    dsink k = {dst, off, 0, (uint32_t)crc32(0, NULL, 0), crc != NULL, to == t->dtype && contiguous(t), p};
    int rc = tc_tensor_elements(c, t, to, dst_sink, &k, stats, d);
    if (!rc && crc)
        *crc = k.crc;
    return rc;
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

typedef struct out_stream {
    tc_sink_fn sink;
    void *ctx;
    tc_dtype from, to;
    uint8_t *cbuf;          /* cast output */
    tc_cast_stats *stats;
} out_stream;

static int emit(out_stream *os, const uint8_t *buf, size_t n, tc_diag *d)
{
    if (!n)
        return 0;
    if (os->from == os->to)
        return os->sink(os->ctx, buf, n, d);
    size_t cnt = n / tc_dtype_size(os->from);
    int rc = cast_chunk(NULL, os->to, os->cbuf, os->from, buf, cnt, os->stats, "gathered elements", d);
    return rc ? rc : os->sink(os->ctx, os->cbuf, cnt * tc_dtype_size(os->to), d);
}

/* A contiguous tensor: the storage read in order from the tensor's first byte. */
static int elements_in_order(tc_rd *r, uint64_t start, uint64_t nbytes, uint8_t *buf, size_t chunk, out_stream *os,
                             const char *key, tc_diag *d)
{
    int rc = 0;
    if (!r->src) /* a stream: skip to the first byte */
        for (uint64_t skip = start; skip && !rc;) {
            size_t got, want = skip < chunk ? (size_t)skip : chunk;
            if (!(rc = tc_rd_read(r, buf, want, &got, d)) && !got)
                rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
            skip -= got;
        }
    for (uint64_t pos = 0; pos < nbytes && !rc;) {
        size_t got, want = nbytes - pos < chunk ? (size_t)(nbytes - pos) : chunk;
        if (r->src) {
            got = want;
            if (start + pos + want > r->size)
                rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
            else
                rc = tc_src_read(r->src, r->off + start + pos, buf, want, key, d);
        } else if (!(rc = tc_rd_read(r, buf, want, &got, d)) && got != want) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", key);
        }
        if (!rc)
            rc = emit(os, buf, got, d);
        pos += got;
    }
    return rc;
}

/* A strided view: runs of the innermost dimension when it is contiguous, else single elements. */
static int elements_strided(gather *g, const tc_tensor *t, uint8_t *buf, size_t chunk, out_stream *os, tc_diag *d)
{
    size_t esz = tc_dtype_size(t->dtype);
    int nd = t->ndim;
    int64_t idx[TC_MAX_DIMS] = {0};
    bool inner = nd > 0 && t->stride[nd - 1] == 1;
    uint64_t run = inner ? (uint64_t)t->shape[nd - 1] : 1;
    int outer = inner ? nd - 1 : nd;
    size_t fill = 0;
    int rc = 0;
    for (uint64_t done_el = 0; done_el < t->numel && !rc;) {
        uint64_t el = (uint64_t)t->offset;
        for (int k = 0; k < outer; k++)
            el += (uint64_t)idx[k] * (uint64_t)t->stride[k];
        for (uint64_t r0 = 0; r0 < run && !rc;) {
            uint64_t n = run - r0, room = (chunk - fill) / esz;
            if (n > room)
                n = room;
            rc = fetch(g, (el + r0) * esz, (size_t)(n * esz), buf + fill, d);
            fill += (size_t)(n * esz);
            r0 += n;
            if (!rc && fill == chunk) {
                rc = emit(os, buf, fill, d);
                fill = 0;
            }
        }
        done_el += run;
        for (int k = outer - 1; k >= 0; k--) {
            if (++idx[k] < t->shape[k])
                break;
            idx[k] = 0;
        }
    }
    return rc ? rc : emit(os, buf, fill, d);
}

int tc_tensor_elements(const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_sink_fn sink, void *ctx,
                       tc_cast_stats *stats, tc_diag *d)
{
    if (!t->numel)
        return 0;
    if (t->storage < 0)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' has no data", t->name);
    const tc_storage *s = tc_ckpt_storage(c, (size_t)t->storage);
    size_t esz = tc_dtype_size(t->dtype);
    size_t chunk = GATHER_CHUNK / esz * esz;
    out_stream os = {sink, ctx, t->dtype, to, NULL, stats};
    uint8_t *buf = malloc(chunk);
    gather g = {.s = s};
    tc_rd r = {0};
    bool open = false;
    int rc = 0;
    if (!buf || (to != t->dtype && !(os.cbuf = malloc(chunk / esz * tc_dtype_size(to))))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (to != t->dtype && !tc_cast_supported(to, t->dtype)) {
        rc = tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot cast %s to %s", t->name, tc_dtype_name(t->dtype),
                     tc_dtype_name(to));
        goto done;
    }
    if ((rc = tc_storage_open(c, (size_t)t->storage, &r, d)))
        goto done;
    open = true;
    if (contiguous(t)) {
        rc = elements_in_order(&r, (uint64_t)t->offset * esz, t->nbytes, buf, chunk, &os, s->key, d);
        goto done;
    }
    /* strided: the whole storage in memory when small, else a read window over a plain range */
    if (s->nbytes <= WHOLE_MAX) {
        size_t got = 0;
        if (!(g.win = malloc(s->nbytes ? (size_t)s->nbytes : 1))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (!(rc = tc_rd_read(&r, g.win, (size_t)s->nbytes, &got, d)) && got != s->nbytes)
            rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", s->key);
        g.whole = true;
    } else if (!r.src) {
        rc = tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' is compressed and too large to gather a view of", s->key);
    } else if (!(g.win = malloc((size_t)NSETS * WAYS * BLK)) || !(g.tag = calloc(NSETS * WAYS, sizeof *g.tag)) ||
               !(g.age = calloc(NSETS * WAYS, sizeof *g.age))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    } else {
        g.src = r.src;
        g.base = r.off;
    }
    if (!rc)
        rc = elements_strided(&g, t, buf, chunk, &os, d);
done:
    if (open)
        tc_rd_close(&r);
    free(buf);
    free(os.cbuf);
    free(g.win);
    free(g.tag);
    free(g.age);
    return rc;
}
