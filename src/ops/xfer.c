#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "quant.h"

/* ---- pool ----------------------------------------------------------------- */

/* The larger of a chunk's input and output: small enough that a chunk stays
 * in a core's cache from pread to pwrite. */
#define CHUNK_BYTES ((size_t)512 << 10)

typedef struct helper {
    struct tc_pool *pool;
    unsigned tid;
} helper;

struct tc_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned n;              /* threads in all, the caller's included */
    unsigned gen, busy;
    bool quit;
    tc_pool_fn fn;
    void *arg;
    pthread_t th[TC_POOL_MAX];
    helper h[TC_POOL_MAX];
    uint8_t *scratch[TC_POOL_MAX]; /* per thread, 2 * CHUNK_BYTES, made when first needed */
};

static void *helper_main(void *a)
{
    helper *h = a;
    tc_pool *p = h->pool;
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        tc_pool_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        fn(arg, h->tid);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

unsigned tc_pool_default_size(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > TC_POOL_MAX ? TC_POOL_MAX : (unsigned)c;
}

tc_pool *tc_pool_new(unsigned n)
{
    if (n == 0)
        n = tc_pool_default_size();
    if (n > TC_POOL_MAX)
        n = TC_POOL_MAX;
    tc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->n = 1;
    if (pthread_mutex_init(&p->mu, NULL)) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->go, NULL)) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->done, NULL)) {
        pthread_cond_destroy(&p->go);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    /* helpers start with every signal blocked: only the caller's thread
     * takes SIGINT/SIGTERM, so its handlers behave as without threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned t = 1; t < n; t++) {
        p->h[t] = (helper){p, t};
        if (pthread_create(&p->th[t], NULL, helper_main, &p->h[t]))
            break; /* fewer threads: same results, slower */
        p->n++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return p;
}

unsigned tc_pool_size(const tc_pool *p)
{
    return p ? p->n : 1;
}

void tc_pool_free(tc_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (unsigned t = 1; t < p->n; t++)
        pthread_join(p->th[t], NULL);
    for (unsigned t = 0; t < p->n; t++)
        free(p->scratch[t]);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void tc_pool_run(tc_pool *p, tc_pool_fn fn, void *arg)
{
    if (!p || p->n < 2) {
        fn(arg, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->busy = p->n - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- transfer ------------------------------------------------------------- */

#define ROUND 64 /* chunks between progress reports and writeback starts */
#define KCOPY_BYTES ((size_t)4 << 20) /* a chunk of a copy in the kernel */
#define KCOPY_ROUND 8
#define KCOPY_MIN ((uint64_t)64 << 10) /* smaller copies are read and written */
#define MIN_CHUNK_BYTES ((size_t)64 << 10)

typedef struct worker {
    uint8_t *in, *out;
    tc_diag d;
    tc_cast_stats stats;
    uint64_t fail_at;        /* chunk that failed, UINT64_MAX: none */
} worker;

typedef struct job {
    tc_xfer *x;
    tc_pool *pool;             /* whose threads' scratch buffers the workers use */
    bool cast;
    size_t ein, eout;          /* bytes per element (for the block codecs: per block) in and out */
    size_t emid;               /* the block codecs: bytes of a block as float32; 0 otherwise */
    uint8_t *own;              /* scratch when there is no pool */
    /* the span being run: elements [lo, hi) */
    uint64_t lo, hi;
    bool write;                /* false: the output holds them already (shared); only their CRC is taken */
    atomic_bool kcopy;         /* copies in the kernel (copy_file_range) while it works */
    size_t celems;
    atomic_uint_fast64_t next; /* next chunk to take */
    uint64_t begin, end;       /* this round's chunks */
    atomic_bool stop;
    uint32_t crc[ROUND];
    worker w[TC_POOL_MAX];
} job;

/* Bytes [e0, e0 + n) of a copy with copy_file_range: 0 done, -1 not
 * possible here (the caller reads and writes them), 1 failed (in *d). */
static int kernel_copy(const tc_xfer *x, uint64_t e0, size_t n, tc_diag *d)
{
    loff_t in = (loff_t)(x->src->base + x->in_off + e0), out = (loff_t)(x->out_off + e0);
    if (x->in_off + e0 + n > x->src->size) /* a shrunken file: tc_src_read's message */
        return -1;
    while (n) {
        ssize_t c = copy_file_range(x->src->fd, &in, x->out->fd, &out, n, 0);
        if (c < 0 && errno == EINTR)
            continue;
        if (c < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) &&
            in == (loff_t)(x->src->base + x->in_off + e0))
            return -1;
        if (c <= 0) {
            tc_dst_fail(x->out, c < 0 ? errno : EIO, d);
            return 1;
        }
        n -= (size_t)c;
    }
    return 0;
}

/* Values between float32 and blocks a few blocks at a time (cast then encoded, decoded then cast),
 * so that the float32 values stay in the core's first-level cache between the two steps (through
 * the second-level one, encoding ran at half the speed) */
#define SUB_VALUES 2048

/* n elements of the job (blocks, or values for the element types) from in to out: encoded from
 * float32, cast to float32 first where they are of another type. */
static int encode(const tc_xfer *x, tc_cast_stats *stats, uint8_t *out, const uint8_t *in, size_t n, tc_diag *d)
{
    const tc_qtype_info *q = tc_qtype_get(x->enc);
    size_t vals = q->block, in_size = tc_dtype_size(x->from);
    if (x->from == TC_DT_F32 || x->from == TC_DT_BF16) { /* bfloat16 is read by the encoders themselves */
        if (x->from == TC_DT_F32 ? tc_quant_encode(x->enc, out, (const float *)(const void *)in, n)
                                 : tc_quant_encode_bf16(x->enc, out, in, n))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot write %s", q->name);
        return 0;
    }
    float sub[SUB_VALUES];
    size_t step = SUB_VALUES / vals; /* elements per step */
    for (size_t k = 0; k < n; k += step) {
        size_t m = n - k < step ? n - k : step, nv = m * vals;
        const uint8_t *src = in + k * vals * in_size;
        /* only float64 can lose range here: the rest widen exactly, uncounted */
        if (x->from == TC_DT_F64 ? tc_cast_cpu_counted(stats, TC_DT_F32, sub, x->from, src, nv)
                                 : tc_cast_cpu(TC_DT_F32, sub, x->from, src, nv))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot cast %s to float32", tc_dtype_name(x->from));
        if (tc_quant_encode(x->enc, out + k * q->bytes, sub, m))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot write %s", q->name);
    }
    return 0;
}

/* n blocks from in to out, as `to`: decoded to float32, then cast where `to` is another type, a
 * few blocks at a time as encode does. */
static int decode(const tc_xfer *x, tc_cast_stats *stats, uint8_t *out, const uint8_t *in, size_t n, tc_diag *d)
{
    const tc_qtype_info *q = tc_qtype_get(x->dec);
    if (x->to == TC_DT_F32) {
        if (tc_quant_decode(x->dec, (float *)(void *)out, in, n))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot dequantise %s", q->name);
        return 0;
    }
    float sub[SUB_VALUES];
    size_t step = SUB_VALUES / q->block, out_size = tc_dtype_size(x->to);
    for (size_t k = 0; k < n; k += step) {
        size_t m = n - k < step ? n - k : step, nv = m * q->block;
        if (tc_quant_decode(x->dec, sub, in + k * q->bytes, m))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot dequantise %s", q->name);
        if (tc_cast_cpu_counted(stats, x->to, out + k * q->block * out_size, TC_DT_F32, sub, nv))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot cast float32 to %s", tc_dtype_name(x->to));
    }
    return 0;
}

/* Elements [e0, e0 + n) through the worker's buffers (its thread's scratch,
 * made when first needed: copies in the kernel need none), in pieces that
 * fit them; *crc is continued over the output. */
static int read_cast_write(job *j, worker *w, uint64_t e0, size_t n, uint32_t *crc)
{
    const tc_xfer *x = j->x;
    if (!w->in) {
        uint8_t **sc = j->pool ? &j->pool->scratch[w - j->w] : &j->own;
        if (!*sc && !(*sc = malloc(2 * CHUNK_BYTES)))
            return tc_fail(&w->d, TC_ERR_NOMEM, "out of memory");
        w->in = *sc;
        w->out = *sc + CHUNK_BYTES;
    }
    size_t big = j->ein > j->eout ? j->ein : j->eout, piece = CHUNK_BYTES / (big > j->emid ? big : j->emid);
    for (size_t done = 0; done < n;) {
        size_t ne = n - done < piece ? n - done : piece;
        uint64_t el = e0 + done;
        if (tc_src_read(x->src, x->in_off + el * j->ein, w->in, ne * j->ein, x->what, &w->d))
            return -1;
        const uint8_t *o = w->in;
        if (x->dec != TC_Q_NONE) { /* blocks -> float32 -> `to` */
            if (decode(x, &w->stats, w->out, w->in, ne, &w->d))
                return -1;
            o = w->out;
        } else if (x->enc != TC_Q_NONE) { /* `from` -> float32 -> blocks */
            if (encode(x, &w->stats, w->out, w->in, ne, &w->d))
                return -1;
            o = w->out;
        } else if (j->cast) {
            if (tc_cast_cpu_counted(&w->stats, x->to, w->out, x->from, w->in, ne))
                return tc_fail(&w->d, TC_ERR_UNSUPPORTED, "cannot cast %s to %s", tc_dtype_name(x->from),
                               tc_dtype_name(x->to));
            o = w->out;
        }
        if (x->want_crc)
            *crc = (uint32_t)crc32(*crc, o, (uInt)(ne * j->eout));
        if (j->write && tc_dst_pwrite(x->out, x->out_off + el * j->eout, o, ne * j->eout, &w->d))
            return -1;
        done += ne;
    }
    return 0;
}

static void work(void *arg, unsigned tid)
{
    job *j = arg;
    worker *w = &j->w[tid];
    while (!atomic_load_explicit(&j->stop, memory_order_relaxed)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->end)
            break;
        uint64_t e0 = j->lo + k * j->celems;
        size_t ne = j->hi - e0 < j->celems ? (size_t)(j->hi - e0) : j->celems;
        if (atomic_load_explicit(&j->kcopy, memory_order_relaxed)) {
            int r = kernel_copy(j->x, e0, ne, &w->d);
            if (r == 0)
                continue;
            if (r > 0)
                goto failed;
            atomic_store(&j->kcopy, false); /* not here: read and write */
        }
        uint32_t crc = (uint32_t)crc32(0, NULL, 0);
        if (read_cast_write(j, w, e0, ne, &crc))
            goto failed;
        j->crc[k - j->begin] = crc;
        continue;
failed:
        w->fail_at = k;
        atomic_store(&j->stop, true);
        break;
    }
}

uint64_t tc_xfer_out_bytes(const tc_xfer *x)
{
    if (x->dec != TC_Q_NONE)
        return x->in_bytes / tc_qtype_get(x->dec)->bytes * tc_qtype_get(x->dec)->block * tc_dtype_size(x->to);
    if (x->enc != TC_Q_NONE)
        return x->in_bytes / (tc_qtype_get(x->enc)->block * tc_dtype_size(x->from)) * tc_qtype_get(x->enc)->bytes;
    if (x->from == x->to)
        return x->in_bytes;
    return x->in_bytes / tc_dtype_size(x->from) * tc_dtype_size(x->to);
}

/* Input bytes done once elements up to e are: all of them at the end (a
 * cast's trailing partial element included). */
static void report(const job *j, uint64_t e)
{
    const tc_xfer *x = j->x;
    if (!x->progress)
        return;
    x->progress(x->progress_ctx, e < x->in_bytes / j->ein ? e * j->ein : x->in_bytes);
}

/* Elements [lo, hi) of x: read, cast, their CRC continued in x->crc, and
 * written; or, when write is false (the output shares them already), only
 * read for their CRC, and not even that when no CRC is wanted. */
static int run_span(tc_pool *pool, job *j, uint64_t lo, uint64_t hi, bool write, tc_diag *d)
{
    tc_xfer *x = j->x;
    if (lo >= hi)
        return 0;
    if (!write && !x->want_crc) {
        x->out_bytes += (hi - lo) * j->eout;
        report(j, hi);
        return 0;
    }
    j->lo = lo;
    j->hi = hi;
    j->write = write;
    /* a copy in the kernel only where the file system copies on its server
     * (tc_dst_offloads); and as it sets up a pipe for every call, not for the
     * few KiB at either end of a shared range, or a small record */
    bool kcopy = write && !j->cast && !x->want_crc && x->src->fd >= 0 && tc_dst_offloads(x->out) &&
                 (hi - lo) * j->ein >= KCOPY_MIN;
    atomic_store(&j->kcopy, kcopy);
    j->celems = kcopy ? KCOPY_BYTES : CHUNK_BYTES / (j->ein > j->eout ? j->ein : j->eout);
    uint64_t round = kcopy ? KCOPY_ROUND : ROUND, n = hi - lo;
    unsigned nt = kcopy ? 1 : tc_pool_size(pool); /* parallel kernel copies only contend for the file */
    if (nt > 1 && !kcopy) {
        /* a range of few chunks is cut finer, down to MIN_CHUNK_BYTES, so
         * that the threads finish together (each range ends in a wait) */
        uint64_t want = (n + 4 * nt - 1) / (4 * nt);
        size_t floor = MIN_CHUNK_BYTES / (j->ein > j->eout ? j->ein : j->eout);
        if (want < j->celems)
            j->celems = want > floor ? (size_t)want : floor;
    }
    uint64_t nchunks = (n + j->celems - 1) / j->celems;
    if (nchunks < 2)
        nt = 1; /* not worth waking anyone */
    for (unsigned t = 0; t < nt; t++)
        j->w[t].fail_at = UINT64_MAX;
    if (write && nchunks > 1)
        tc_dst_reserve(x->out, x->out_off + lo * j->eout, n * j->eout);
    atomic_store(&j->stop, false);
    for (uint64_t r0 = 0; r0 < nchunks; r0 += round) {
        j->end = nchunks - r0 < round ? nchunks : r0 + round;
        j->begin = r0;
        atomic_store(&j->next, r0);
        tc_pool_run(nt > 1 ? pool : NULL, work, j);
        if (atomic_load(&j->stop)) {
            worker *f = NULL;
            for (unsigned t = 0; t < nt; t++)
                if (j->w[t].fail_at != UINT64_MAX && (!f || j->w[t].fail_at < f->fail_at))
                    f = &j->w[t];
            return tc_diag_copy(d, &f->d);
        }
        uint64_t o0 = (lo + r0 * j->celems) * j->eout, olen = 0;
        for (uint64_t k = r0; k < j->end; k++) {
            uint64_t e0 = lo + k * j->celems, ne = hi - e0 < j->celems ? hi - e0 : j->celems;
            if (x->want_crc)
                x->crc = (uint32_t)crc32_combine(x->crc, j->crc[k - r0], (z_off_t)(ne * j->eout));
            olen += ne * j->eout;
        }
        x->out_bytes += olen;
        /* in place, the input's cache goes as it is read (tc_dst_consumed) */
        uint64_t i0 = (lo + r0 * j->celems) * j->ein, iend = (lo + j->end * j->celems) * j->ein;
        iend = iend < hi * j->ein ? iend : hi * j->ein;
        tc_dst_consumed(x->out, x->src->fd, x->src->base + x->in_off + i0, iend - i0);
        if (write) {
            tc_dst_writeback(x->out, x->out_off + o0, olen);
            if (!j->cast)
                x->copied += olen;
        }
        uint64_t e = lo + j->end * j->celems;
        report(j, e < hi ? e : hi);
    }
    return 0;
}

int tc_xfer_run(tc_pool *pool, tc_xfer *x, tc_diag *d)
{
    x->out_bytes = x->shared = x->copied = 0;
    x->crc = (uint32_t)crc32(0, NULL, 0);
    job *j = calloc(1, sizeof *j);
    if (!j)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    j->x = x;
    j->pool = pool;
    j->cast = x->from != x->to || x->dec != TC_Q_NONE || x->enc != TC_Q_NONE;
    tc_dtype cf = x->dec != TC_Q_NONE ? TC_DT_F32 : x->from, ct = x->enc != TC_Q_NONE ? TC_DT_F32 : x->to;
    if ((cf != ct && !tc_cast_supported(ct, cf)) || (x->dec != TC_Q_NONE && !tc_quant_can_decode(x->dec)) ||
        (x->enc != TC_Q_NONE && !tc_quant_can_encode(x->enc))) {
        free(j);
        return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot convert %s to %s",
                       x->dec != TC_Q_NONE ? tc_qtype_name(x->dec) : tc_dtype_name(x->from),
                       x->enc != TC_Q_NONE ? tc_qtype_name(x->enc) : tc_dtype_name(x->to));
    }
    j->ein = j->cast ? tc_dtype_size(x->from) : 1;
    j->eout = j->cast ? tc_dtype_size(x->to) : 1;
    if (x->dec != TC_Q_NONE) { /* units of a block */
        const tc_qtype_info *q = tc_qtype_get(x->dec);
        j->ein = q->bytes, j->eout = q->block * tc_dtype_size(x->to), j->emid = q->block * 4;
    } else if (x->enc != TC_Q_NONE) {
        const tc_qtype_info *q = tc_qtype_get(x->enc);
        j->ein = q->block * tc_dtype_size(x->from), j->eout = q->bytes, j->emid = q->block * 4;
    }
    uint64_t n = x->in_bytes / j->ein, head = n, whole = 0;
    uint64_t at = x->src->base + x->in_off; /* in the file (a window's byte 0 lies at its base) */
    /* unchanged bytes at the same place within a block in both files: the
     * whole blocks between the first and the last partial one are shared
     * when the file system can (the output then needs no copy of them) */
    if (!j->cast && x->src->fd >= 0 && (at - x->out_off) % TC_SHARE_BLOCK == 0) {
        head = (TC_SHARE_BLOCK - at % TC_SHARE_BLOCK) % TC_SHARE_BLOCK;
        head = head < n ? head : n;
        whole = (n - head) / TC_SHARE_BLOCK * TC_SHARE_BLOCK;
    }
    int rc;
    if ((rc = run_span(pool, j, 0, head, true, d)))
        goto done;
    if (whole) {
        bool shared = x->in_off + head + whole <= x->src->size &&
                      tc_dst_clone(x->out, x->out_off + head, x->src->fd, at + head, whole);
        if (shared)
            x->shared = whole;
        if ((rc = run_span(pool, j, head, head + whole, !shared, d)))
            goto done;
    }
    rc = run_span(pool, j, head + whole, n, true, d);
done:
    for (unsigned t = 0; t < TC_POOL_MAX; t++) {
        tc_cast_stats *s = &j->w[t].stats;
        x->stats.overflow += s->overflow;
        x->stats.underflow += s->underflow;
        x->stats.nan += s->nan;
    }
    free(j->own);
    free(j);
    return rc;
}
