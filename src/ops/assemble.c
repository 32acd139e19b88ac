#include "assemble.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buf.h"
#include "format.h"
#include "step.h"
#include "xfer.h"

#define SLAB (8u << 20)           /* input bytes gathered per cast and write */
#define CUDA_SLAB (32u << 20)
#define BIG (1u << 20)            /* a run of at least this many input bytes goes through the transfer */
#define READAHEAD (256u << 10)    /* per chunk, at most */
#define BUDGET (32u << 20)        /* for the read-aheads of all chunks together */
#define WHOLE (4u << 20)          /* a chunk stored in another order is read whole up to this size */
#define CBLK 4096u                /* else through a direct-mapped cache of blocks */
#define CBLKS 1024u
#define AROUND (1u << 20)         /* a run's CRC-32 is had from its storage's when at most this much lies around it */
#define CRC_ORDER 0xffffffffull   /* x's order modulo CRC-32's polynomial (a primitive one): a shift by that many
                                     bytes is none, so one by k bytes is undone by one by CRC_ORDER - k */

bool tc_assembled(const tc_ckpt *c, size_t i)
{
    size_t n;
    return tc_ckpt_chunks(c, i, &n) != NULL;
}

static bool c_order(const tc_chunk *ch, int nd);

bool tc_assembled_origin(const tc_ckpt *c, size_t i, uint64_t *off)
{
    size_t n;
    int nd = 0;
    const tc_chunk *ch = tc_ckpt_chunks(c, i, &n);
    const int64_t *shape = tc_ckpt_chunk_shape(c, i, &nd);
    if (!ch || !shape)
        return false;
    for (size_t k = 0; k < n; k++) /* chunks split on a later dimension: every run is part of a row */
        for (int j = 1; j < nd; j++)
            if (ch[k].sizes[j] != shape[j])
                return false;
    for (size_t k = 0; k < n; k++) {
        bool first = true;
        uint64_t vol = 1;
        for (int j = 0; j < nd; j++) {
            first = first && ch[k].offsets[j] == 0;
            vol *= (uint64_t)ch[k].sizes[j];
        }
        if (!first || !vol)
            continue;
        const tc_storage *s = tc_ckpt_storage(c, ch[k].storage);
        if (ch[k].soffset || !c_order(&ch[k], nd) || vol * tc_dtype_size(s->dtype) < BIG ||
            s->dtype != tc_ckpt_storage(c, i)->dtype)
            return false;
        tc_rd r;
        tc_diag d = TC_DIAG_INIT;
        if (tc_storage_open(c, ch[k].storage, &r, &d))
            return false;
        bool ok = r.src && r.src->fd >= 0;
        if (ok)
            *off = r.src->base + r.off;
        tc_rd_close(&r);
        return ok;
    }
    return false;
}

/* A chunk being read. */
typedef struct part {
    const tc_chunk *ch;
    const tc_storage *s;
    tc_rd r;
    bool open, corder;
    uint64_t run, nruns, len;   /* the next run, how many, elements in each */
    uint64_t pos;               /* the next run's first element in the whole tensor */
    uint8_t *ra;                /* read-ahead (C-ordered chunks) */
    size_t ralen, raat;
    uint8_t *win;               /* another order: the whole storage, or cache blocks */
    uint64_t *tag;
    int64_t *idx;               /* another order: the next element's index in the chunk */
    uint64_t sel;               /* its element in the storage */
} part;

typedef struct asm_ {
    tc_plan *p;                 /* NULL: the CPU, no progress */
    const tc_ckpt *c;
    const tc_storage *whole;
    tc_dtype from, to;
    size_t ein, eout;
    int nd;
    const int64_t *shape;
    uint64_t numel;
    uint64_t lo, hi;            /* the elements written: a view's range of the whole (all of it for a storage) */
    part *pt;
    size_t npt;
    size_t *heap, nheap;
    tc_dst *dst;                /* direct writes at off, or a sink */
    uint64_t off;
    tc_sink_fn sink;
    void *ctx;
    uint32_t *want_crc, crc;
    uint64_t pos;               /* elements placed (or passed over, before lo) */
    uint8_t *slab, *cbuf;
    size_t slab_cap, fill;      /* input bytes */
    uint64_t slab_pos;          /* the slab's first element, counted from lo */
    size_t rabuf;
    tc_cast_stats *stats;
    tc_diag *d;
} asm_;

static void dims(const int64_t *v, int n, char *buf, size_t len)
{
    tc_buf b = tc_buf_fixed(buf, len);
    tc_buf_putc(&b, '[');
    for (int i = 0; i < n; i++)
        tc_buf_printf(&b, "%s%" PRId64, i ? ", " : "", v[i]);
    tc_buf_putc(&b, ']');
}

static bool c_order(const tc_chunk *ch, int nd)
{
    int64_t want = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (ch->sizes[i] != 1 && ch->strides[i] != want)
            return false;
        want *= ch->sizes[i];
    }
    return true;
}

/* The first element of run j of part t in the whole tensor. */
static uint64_t run_pos(const asm_ *A, const part *t, uint64_t j, int split, const uint64_t *ostride)
{
    uint64_t pos = 0;
    for (int k = split - 1; k >= 0; k--) {
        uint64_t sz = (uint64_t)t->ch->sizes[k];
        pos += ((uint64_t)t->ch->offsets[k] + j % sz) * ostride[k];
        j /= sz;
    }
    if (split >= 0)
        pos += (uint64_t)t->ch->offsets[split] * ostride[split];
    (void)A;
    return pos;
}

static bool before(const part *pt, size_t a, size_t b) { return pt[a].pos < pt[b].pos; }

static void heap_push(asm_ *A, size_t x)
{
    size_t i = A->nheap++;
    A->heap[i] = x;
    while (i && before(A->pt, A->heap[i], A->heap[(i - 1) / 2])) {
        size_t up = (i - 1) / 2, t = A->heap[up];
        A->heap[up] = A->heap[i];
        A->heap[i] = t;
        i = up;
    }
}

static size_t heap_pop(asm_ *A)
{
    size_t top = A->heap[0];
    A->heap[0] = A->heap[--A->nheap];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < A->nheap && before(A->pt, A->heap[l], A->heap[m]))
            m = l;
        if (r < A->nheap && before(A->pt, A->heap[r], A->heap[m]))
            m = r;
        if (m == i)
            break;
        size_t t = A->heap[m];
        A->heap[m] = A->heap[i];
        A->heap[i] = t;
        i = m;
    }
    return top;
}

static void part_done(part *t)
{
    if (t->open)
        tc_rd_close(&t->r);
    t->open = false;
    free(t->ra);
    free(t->win);
    free(t->tag);
    free(t->idx);
    t->ra = t->win = NULL;
    t->tag = NULL;
    t->idx = NULL;
}

static int part_open(asm_ *A, part *t)
{
    if (t->open)
        return 0;
    int rc = tc_storage_open(A->c, t->ch->storage, &t->r, A->d);
    if (rc)
        return rc;
    t->open = true;
    if (t->corder && t->ch->soffset) { /* a piece of a larger storage (a ZeRO rank's flat buffer): from its start */
        if (!t->r.src)
            return tc_fail(A->d, TC_ERR_UNSUPPORTED, "chunk '%s' starts inside its storage, which is not a plain "
                           "range of its file", t->s->key);
        t->r.done = (uint64_t)t->ch->soffset * A->ein;
    }
    if (t->corder)
        return 0;
    /* another order: the storage whole when small, else a window of blocks over its file */
    if (!(t->idx = calloc((size_t)A->nd + 1, sizeof *t->idx)))
        return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
    if (t->s->nbytes <= WHOLE) {
        size_t got = 0;
        if (!(t->win = malloc(t->s->nbytes ? (size_t)t->s->nbytes : 1)))
            return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
        if ((rc = tc_rd_read(&t->r, t->win, (size_t)t->s->nbytes, &got, A->d)))
            return rc;
        if (got != t->s->nbytes)
            return tc_fail(A->d, TC_ERR_FORMAT, "chunk '%s' ends early", t->s->key);
        return 0;
    }
    if (!t->r.src)
        return tc_fail(A->d, TC_ERR_UNSUPPORTED, "chunk '%s' is larger than %u MiB, stored in another order than C's "
                       "and not a plain range of its file", t->s->key, WHOLE >> 20);
    if (!(t->win = malloc((size_t)CBLK * CBLKS)) || !(t->tag = calloc(CBLKS, sizeof *t->tag)))
        return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

/* Element e (its byte offset in the storage) of a chunk stored in another order. */
static int elem_at(asm_ *A, part *t, uint64_t byte, uint8_t *out)
{
    if (t->s->nbytes <= WHOLE) {
        memcpy(out, t->win + byte, A->ein);
        return 0;
    }
    uint64_t b = byte / CBLK;
    size_t slot = (size_t)(b % CBLKS);
    if (t->tag[slot] != b + 1) {
        uint64_t n = t->s->nbytes - b * CBLK < CBLK ? t->s->nbytes - b * CBLK : CBLK;
        t->tag[slot] = 0;
        int rc = tc_src_read(t->r.src, t->r.off + b * CBLK, t->win + (size_t)slot * CBLK, (size_t)n, t->s->key, A->d);
        if (rc)
            return rc;
        t->tag[slot] = b + 1;
    }
    memcpy(out, t->win + (size_t)slot * CBLK + byte % CBLK, A->ein);
    return 0;
}

/* A chunk stored in another order: its next index, and the element it selects. */
static void next_index(const asm_ *A, part *t)
{
    const int64_t *sz = t->ch->sizes, *st = t->ch->strides;
    for (int i = A->nd - 1; i >= 0; i--) {
        if (++t->idx[i] < sz[i]) {
            t->sel += (uint64_t)st[i];
            return;
        }
        t->sel -= (uint64_t)(t->idx[i] - 1) * (uint64_t)st[i];
        t->idx[i] = 0;
    }
}

/* The next k elements of chunk t (in its C order) into out. */
static int take(asm_ *A, part *t, uint64_t k, uint8_t *out)
{
    int rc = part_open(A, t);
    if (rc)
        return rc;
    size_t n = (size_t)(k * A->ein);
    if (t->corder) {
        while (n) {
            if (t->raat < t->ralen) { /* what the read-ahead holds */
                size_t m = t->ralen - t->raat < n ? t->ralen - t->raat : n;
                memcpy(out, t->ra + t->raat, m);
                t->raat += m;
                out += m;
                n -= m;
                continue;
            }
            size_t got = 0;
            if (n >= A->rabuf || !A->rabuf) { /* large: straight into place */
                if ((rc = tc_rd_read(&t->r, out, n, &got, A->d)))
                    return rc;
            } else {
                if (!t->ra && !(t->ra = malloc(A->rabuf)))
                    return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
                if ((rc = tc_rd_read(&t->r, t->ra, A->rabuf, &got, A->d)))
                    return rc;
                t->ralen = got;
                t->raat = 0;
                if (got)
                    continue;
            }
            if (!got)
                return tc_fail(A->d, TC_ERR_FORMAT, "chunk '%s' ends early", t->s->key);
            out += got;
            n -= got;
        }
        return 0;
    }
    for (uint64_t e = 0; e < k; e++) {
        if ((rc = elem_at(A, t, t->sel * A->ein, out + e * A->ein)))
            return rc;
        next_index(A, t);
    }
    return 0;
}

/* The next k elements of chunk t passed over unread (before a view's first
 * element): a C-ordered chunk's reader moves on, another order's index does. */
static int pass_over(asm_ *A, part *t, uint64_t k)
{
    int rc = part_open(A, t);
    if (rc)
        return rc;
    if (!t->corder) {
        for (uint64_t e = 0; e < k; e++)
            next_index(A, t);
        return 0;
    }
    uint64_t n = k * A->ein, m = t->raat < t->ralen ? t->ralen - t->raat : 0;
    m = m < n ? m : n;
    t->raat += (size_t)m;
    n -= m;
    if (!n)
        return 0;
    if (!t->r.src)
        return tc_fail(A->d, TC_ERR_UNSUPPORTED, "chunk '%s' is not a plain range of its file: a view inside the "
                       "tensor it assembles cannot start within it", t->s->key);
    t->r.done += n;
    return 0;
}

/* The CRC-32 of a buffer, its parts taken on the plan's threads and joined in order. */
#define CRC_PART (1u << 20)
typedef struct crc_job {
    const uint8_t *p;
    size_t len, part;
    uint32_t crc[TC_POOL_MAX];
    size_t n[TC_POOL_MAX];      /* bytes of each part */
} crc_job;

static void crc_part(void *arg, unsigned tid)
{
    crc_job *j = arg;
    size_t a = (size_t)tid * j->part, b = a + j->part < j->len ? a + j->part : j->len;
    j->n[tid] = a < b ? b - a : 0;
    j->crc[tid] = (uint32_t)crc32(crc32(0, NULL, 0), j->p + a, (uInt)j->n[tid]);
}

static uint32_t crc_of(tc_plan *p, uint32_t crc, const uint8_t *o, size_t len)
{
    tc_pool *pool = p && len >= 2 * CRC_PART ? tc_plan_pool(p) : NULL;
    unsigned n = pool ? tc_pool_size(pool) : 1;
    if (n < 2)
        return (uint32_t)crc32(crc, o, (uInt)len);
    crc_job j = {.p = o, .len = len, .part = (len + n - 1) / n};
    tc_pool_run(pool, crc_part, &j);
    for (unsigned t = 0; t < n; t++)
        if (j.n[t])
            crc = (uint32_t)crc32_combine(crc, j.crc[t], (z_off_t)j.n[t]);
    return crc;
}

/* The gathered elements: cast, checksummed, written. */
static int flush(asm_ *A)
{
    if (!A->fill)
        return 0;
    size_t n = A->fill / A->ein;
    const uint8_t *o = A->slab;
    int rc = 0;
    if (A->from != A->to) {
        if ((rc = tc_step_cast(A->p, A->to, A->cbuf, A->from, A->slab, n, A->stats, A->whole->key, A->d)))
            return rc;
        o = A->cbuf;
    }
    size_t olen = n * A->eout;
    if (A->want_crc)
        A->crc = crc_of(A->p, A->crc, o, olen);
    if (A->dst) {
        uint64_t at = A->off + A->slab_pos * A->eout;
        if ((rc = tc_dst_pwrite(A->dst, at, o, olen, A->d)))
            return rc;
        tc_dst_writeback(A->dst, at, olen);
    } else if ((rc = A->sink(A->ctx, o, olen, A->d))) {
        return rc;
    }
    if (A->p)
        tc_step_progress(A->p, A->fill);
    A->slab_pos += n;
    A->fill = 0;
    return 0;
}

/* The CRC-32 of bytes [a, a + n) of part t's storage, from the CRC-32 its
 * archive records for all of it and the few bytes around them (read here):
 * crc(PMS) = shift_|S|(shift_|M|(crc(P)) ^ crc(M)) ^ crc(S), with shift_k
 * what zlib's crc32_combine does to its first CRC for k bytes. Trusted as
 * the whole storage's is: a piece of a ZeRO rank's record whose padding was
 * cut on save (the tensor is the record less its last elements). */
static int piece_crc(asm_ *A, const part *t, uint64_t a, uint64_t n, uint32_t *out)
{
    const tc_storage *s = t->s;
    uint64_t b = a + n, post = s->nbytes - b;
    uint32_t pre_crc = (uint32_t)crc32(0, NULL, 0), post_crc = pre_crc;
    uint8_t buf[16384];
    for (uint64_t at = 0; at < s->nbytes;) { /* [0, a) and [b, nbytes) */
        if (at == a)
            at = b;
        uint64_t end = at < a ? a : s->nbytes, k = end - at < sizeof buf ? end - at : sizeof buf;
        if (!k)
            break;
        int rc = tc_src_read(t->r.src, t->r.off + at, buf, (size_t)k, s->key, A->d);
        if (rc)
            return rc;
        if (at < a)
            pre_crc = (uint32_t)crc32(pre_crc, buf, (uInt)k);
        else
            post_crc = (uint32_t)crc32(post_crc, buf, (uInt)k);
        at += k;
    }
    uint32_t pm = (uint32_t)crc32_combine(s->crc ^ post_crc, 0, (z_off_t)(CRC_ORDER - post % CRC_ORDER));
    *out = pm ^ (uint32_t)crc32_combine(pre_crc, 0, (z_off_t)n);
    return 0;
}

/* len elements of part t's run, at A->pos. */
static int do_run(asm_ *A, part *t, uint64_t len)
{
    uint64_t bytes = len * A->ein;
    bool gpu_cast = A->p && A->p->cuda && A->from != A->to;
    int rc = part_open(A, t);
    if (rc)
        return rc;
    if (A->dst && t->corder && t->r.src && bytes >= BIG && !gpu_cast && t->raat >= t->ralen) {
        if ((rc = flush(A)))
            return rc;
        /* a run copied unchanged has its CRC-32 from its chunk's own: all of it, or all but a few bytes around
           it (a ZeRO rank's record less its padding); checked against it when asked to check */
        const tc_storage *s = t->s;
        uint64_t at = t->r.done, around = s->nbytes - bytes;
        bool known = A->want_crc && A->from == A->to && s->crc_known && !(s->crc == 0 && s->nbytes) &&
                     sizeof(z_off_t) >= 8 && at + bytes <= s->nbytes && around <= AROUND;
        bool trust = known && !(A->p && A->p->o && A->p->o->verify_crc);
        uint32_t got = 0, want = s->crc;
        if (known && around && (rc = piece_crc(A, t, at, bytes, &want)))
            return rc;
        uint64_t in = t->r.off + t->r.done;
        rc = tc_step_range(A->p, t->r.src, in, bytes, s->key, A->from, A->to, A->dst,
                           A->off + (A->pos - A->lo) * A->eout, A->want_crc && !trust ? &got : NULL, A->stats, A->d);
        if (rc)
            return rc;
        t->r.done += bytes;
        if (known && !trust && got != want)
            return tc_fail(A->d, TC_ERR_FORMAT, "chunk '%s': CRC-32 %sis %08x but its archive says %08x (data corrupted)",
                           s->key, around ? "of the bytes read " : "", got, want);
        if (A->want_crc)
            A->crc = (uint32_t)crc32_combine(A->crc, trust ? want : got, (z_off_t)(len * A->eout));
        A->slab_pos = A->pos + len - A->lo;
        return 0;
    }
    for (uint64_t done = 0; done < len;) {
        uint64_t room = (A->slab_cap - A->fill) / A->ein;
        if (!room) {
            if ((rc = flush(A)))
                return rc;
            continue;
        }
        uint64_t k = len - done < room ? len - done : room;
        if ((rc = take(A, t, k, A->slab + A->fill)))
            return rc;
        A->fill += (size_t)(k * A->ein);
        done += k;
    }
    return 0;
}

static int run_all(asm_ *A, size_t i)
{
    size_t n;
    const tc_chunk *ch = tc_ckpt_chunks(A->c, i, &n);
    const tc_storage *w = tc_ckpt_storage(A->c, i);
    int nd = 0;
    const int64_t *shape = tc_ckpt_chunk_shape(A->c, i, &nd);
    if (!ch || !shape)
        return tc_fail(A->d, TC_ERR_UNSUPPORTED, "storage '%s' is not a tensor assembled from chunks", w->key);
    A->whole = w;
    A->nd = nd;
    A->shape = shape;
    A->numel = w->numel;
    if (A->lo > A->hi || A->hi > A->numel)
        return tc_fail(A->d, TC_ERR_FORMAT, "storage '%s' holds %" PRIu64 " elements, not the %" PRIu64
                       " from element %" PRIu64 " a view of it takes", w->key, A->numel, A->hi - A->lo, A->lo);
    A->ein = tc_dtype_size(A->from);
    A->eout = tc_dtype_size(A->to);
    if (A->from != A->to && !tc_cast_supported(A->to, A->from))
        return tc_fail(A->d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot cast %s to %s", w->key,
                       tc_dtype_name(A->from), tc_dtype_name(A->to));
    /* the last dimension any chunk splits: below it every chunk holds whole rows */
    int split = -1;
    for (size_t k = 0; k < n; k++)
        for (int j = A->nd - 1; j > split; j--)
            if (ch[k].sizes[j] != A->shape[j]) {
                split = j;
                break;
            }
    uint64_t ostride[TC_MAX_DIMS], acc = 1;
    for (int j = A->nd - 1; j >= 0; j--) {
        ostride[j] = acc;
        acc *= (uint64_t)A->shape[j];
    }
    uint64_t inner = split >= 0 ? ostride[split] : A->numel;
    int rc;
    A->pt = calloc(n + 1, sizeof *A->pt);
    A->heap = malloc((n + 1) * sizeof *A->heap);
    if (!A->pt || !A->heap)
        return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        part *t = &A->pt[A->npt];
        uint64_t vol = 1;
        for (int j = 0; j < A->nd; j++)
            vol *= (uint64_t)ch[k].sizes[j];
        if (!vol)
            continue;
        t->ch = &ch[k];
        t->s = tc_ckpt_storage(A->c, ch[k].storage);
        t->corder = c_order(&ch[k], A->nd);
        t->len = (split >= 0 ? (uint64_t)ch[k].sizes[split] : 1) * inner;
        t->nruns = vol / t->len;
        t->sel = (uint64_t)ch[k].soffset;
        /* the last element the chunk's strides reach from soffset lies in its storage */
        uint64_t last = (uint64_t)ch[k].soffset, have = t->s->nbytes / A->ein;
        bool ok = t->s->dtype == A->from && ch[k].soffset >= 0 && !(t->s->nbytes % A->ein);
        for (int j = 0; j < A->nd && ok; j++)
            ok = ch[k].strides[j] >= 0 &&
                 !__builtin_add_overflow(last, (uint64_t)(ch[k].sizes[j] - 1) * (uint64_t)ch[k].strides[j], &last);
        if (!ok || last >= have || (t->corder && have - (uint64_t)ch[k].soffset < vol))
            return tc_fail(A->d, TC_ERR_FORMAT, "tensor '%s': chunk '%s' does not hold %" PRIu64 " elements of %s",
                           w->key, t->s->key, vol, tc_dtype_name(A->from));
        t->pos = run_pos(A, t, 0, split, ostride);
        heap_push(A, A->npt++);
    }
    size_t ra = A->npt ? BUDGET / A->npt : 0;
    A->rabuf = ra > READAHEAD ? READAHEAD : ra < 4096 ? 0 : ra;
    bool gpu = A->p && A->p->cuda && A->from != A->to;
    A->slab_cap = (gpu ? CUDA_SLAB : SLAB) / (A->ein > A->eout ? A->ein : A->eout) * A->ein;
    uint64_t total = (A->hi - A->lo) * A->ein;
    if (A->slab_cap > total)
        A->slab_cap = total ? (size_t)total : A->ein;
    A->slab = malloc(A->slab_cap);
    if (!A->slab || (A->from != A->to && !(A->cbuf = malloc(A->slab_cap / A->ein * A->eout))))
        return tc_fail(A->d, TC_ERR_NOMEM, "out of memory");
    if (A->dst) /* the whole tensor is written: its space at once, where the file system gives it ahead */
        tc_dst_reserve(A->dst, A->off, (A->hi - A->lo) * A->eout);
    while (A->nheap && A->pos < A->hi) {
        part *t = &A->pt[heap_pop(A)];
        if (t->pos != A->pos) {
            char at[300];
            dims(t->ch->offsets, A->nd, at, sizeof at);
            return tc_fail(A->d, TC_ERR_FORMAT, "tensor '%s': the chunk at %s %s element %" PRIu64
                           " in C order (chunks that do not tile the tensor)", w->key, at,
                           t->pos < A->pos ? "overlaps another before" : "leaves a gap before", t->pos);
        }
        /* a view's range: the part before lo passed over, the part from hi on never reached */
        uint64_t skip = A->lo > A->pos ? A->lo - A->pos : 0, len = t->len;
        skip = skip < len ? skip : len;
        if (skip && (rc = pass_over(A, t, skip)))
            return rc;
        A->pos += skip;
        len -= skip;
        if (len > A->hi - A->pos)
            len = A->hi - A->pos;
        if (len && (rc = do_run(A, t, len)))
            return rc;
        A->pos += len;
        if (A->pos >= A->hi)
            break;
        if (++t->run < t->nruns) {
            t->pos = run_pos(A, t, t->run, split, ostride);
            heap_push(A, (size_t)(t - A->pt));
        } else {
            part_done(t);
        }
    }
    if (A->pos < A->hi)
        return tc_fail(A->d, TC_ERR_FORMAT, "tensor '%s': its chunks stop at element %" PRIu64 " of %" PRIu64
                       " (a chunk is missing)", w->key, A->pos, A->numel);
    return flush(A);
}

static void asm_free(asm_ *A)
{
    for (size_t k = 0; k < A->npt; k++)
        part_done(&A->pt[k]);
    free(A->pt);
    free(A->heap);
    free(A->slab);
    free(A->cbuf);
}

/* The element type the chunks of storage i hold: the tensor's own, or
 * another one the assembly casts from (a ZeRO buffer saved in bfloat16 that
 * DeepSpeed's converter returns as float32). */
static tc_dtype chunk_dtype(const tc_ckpt *c, size_t i)
{
    size_t n;
    const tc_chunk *ch = tc_ckpt_chunks(c, i, &n);
    return ch && n ? tc_ckpt_storage(c, ch[0].storage)->dtype : tc_ckpt_storage(c, i)->dtype;
}

int tc_assemble(tc_plan *p, const tc_ckpt *c, size_t i, uint64_t lo, uint64_t n, tc_dtype to, tc_dst *dst,
                uint64_t off, uint32_t *crc, tc_cast_stats *stats, tc_diag *d)
{
    asm_ A = {.p = p, .c = c, .from = chunk_dtype(c, i), .to = to, .lo = lo, .hi = lo + n, .dst = dst, .off = off,
              .want_crc = crc, .crc = (uint32_t)crc32(0, NULL, 0), .stats = stats, .d = d};
    int rc = run_all(&A, i);
    asm_free(&A);
    if (rc)
        return rc;
    if (crc)
        *crc = A.crc;
    return 0;
}

int tc_assemble_elements(const tc_ckpt *c, size_t i, uint64_t lo, uint64_t n, tc_dtype to, tc_sink_fn sink, void *ctx,
                         tc_cast_stats *stats, tc_diag *d)
{
    asm_ A = {.c = c, .from = chunk_dtype(c, i), .to = to, .lo = lo, .hi = lo + n, .sink = sink, .ctx = ctx,
              .crc = 0, .stats = stats, .d = d};
    int rc = run_all(&A, i);
    asm_free(&A);
    return rc;
}
