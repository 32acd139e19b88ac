/* The steps every stream of this layer is made of (stream.c's storages and
 * tensors, assemble.c's chunks, gguf_out.c's blocks), below them all: a
 * cast, a plain range through the parallel transfer (decoded from or encoded
 * as blocks on the way), and the plan's progress. */
#include "step.h"

#include <stdlib.h>

#include "cast_cuda.h"
#include "xfer.h"

void tc_step_progress(tc_plan *p, uint64_t add)
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

void tc_step_cache_on(tc_plan *p)
{
    if (!p->rcache && (p->rcache = malloc(sizeof *p->rcache)))
        *p->rcache = (tc_src_cache)TC_SRC_CACHE_INIT;
}

void tc_step_cache_off(tc_plan *p)
{
    tc_src_cache_free(p->rcache);
    free(p->rcache);
    p->rcache = NULL;
}

int tc_step_coded(tc_plan *p, const tc_src *src, uint64_t in_off, uint64_t in_bytes, const char *what, tc_qtype dec,
                  tc_dtype from, tc_dtype to, tc_qtype enc, tc_dst *dst, uint64_t off, uint32_t *crc,
                  tc_cast_stats *stats, tc_diag *d)
{
    const uint8_t *mem;
    tc_src msrc;
    int hit = p->rcache ? tc_src_cached(p->rcache, src, in_off, in_bytes, what, &mem, d) : 1;
    if (hit < 0)
        return hit;
    if (hit == 0) { /* the transfer reads it from memory */
        tc_src_init_mem(&msrc, mem, (size_t)in_bytes, src->what);
        src = &msrc;
        in_off = 0;
    }
    xprog xp = {p, p->done};
    tc_xfer x = {
        .src = src, .in_off = in_off, .in_bytes = in_bytes, .what = what, .out = dst, .out_off = off,
        .from = from, .to = to, .dec = dec, .enc = enc, .want_crc = crc != NULL,
        .progress = p->o && p->o->progress ? xfer_progress : NULL, .progress_ctx = &xp,
    };
    int rc = tc_xfer_run(tc_plan_pool(p), &x, d);
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

int tc_step_range(tc_plan *p, const tc_src *src, uint64_t in_off, uint64_t in_bytes, const char *what, tc_dtype from,
                  tc_dtype to, tc_dst *dst, uint64_t off, uint32_t *crc, tc_cast_stats *stats, tc_diag *d)
{
    return tc_step_coded(p, src, in_off, in_bytes, what, TC_Q_NONE, from, to, TC_Q_NONE, dst, off, crc, stats, d);
}

int tc_step_cast(const tc_plan *p, tc_dtype to, void *out, tc_dtype from, const void *in, size_t n,
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
