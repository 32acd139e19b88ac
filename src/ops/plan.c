#include "plan.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "cast_cuda.h"
#include "xfer.h"

bool tc_glob_any(const char *const *pats, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(pats[i], name, 0) == 0)
            return true;
    return false;
}

/* The element type the tensors on each storage see (an untyped storage has
 * its tensors' dtype), into dt[]; INVALID where they disagree. One pass. */
static void elem_dtypes(const tc_ckpt *c, tc_dtype *dt, bool *mixed)
{
    size_t ns = tc_ckpt_nstorages(c);
    for (size_t i = 0; i < ns; i++) {
        dt[i] = tc_ckpt_storage(c, i)->untyped ? TC_DT_INVALID : tc_ckpt_storage(c, i)->dtype;
        mixed[i] = false;
    }
    for (size_t k = 0; k < tc_ckpt_ntensors(c); k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage < 0 || !tc_ckpt_storage(c, (size_t)t->storage)->untyped)
            continue;
        size_t i = (size_t)t->storage;
        mixed[i] |= dt[i] != TC_DT_INVALID && dt[i] != t->dtype;
        dt[i] = t->dtype;
    }
    for (size_t i = 0; i < ns; i++)
        if (mixed[i])
            dt[i] = TC_DT_INVALID;
}

static tc_engines *engines_of(tc_plan *p) { return p->o && p->o->engines ? p->o->engines : &p->own; }

/* Where the casts run: decided once per plan (or once for the plans that share engines), when the
 * first cast is planned. */
static int choose_engine(tc_plan *p, const tc_rewrite_opts *o, tc_diag *d)
{
    tc_engines *e = engines_of(p);
    if (!e->engine[0]) {
        if (o->engine != TC_ENGINE_CPU) {
            /* streams and pinned buffers made now, before any output exists;
             * with --engine auto a GPU that cannot take them leaves the CPU */
            char why[256] = "";
            e->caster = tc_cuda_caster_new(o->cuda_device, why, sizeof why);
            if (!e->caster && o->engine == TC_ENGINE_CUDA)
                return tc_fail(d, TC_ERR_USAGE, "--engine cuda: CUDA is not usable here (%s)", why);
        }
        if (e->caster)
            snprintf(e->engine, sizeof e->engine, "cuda:%d", o->cuda_device);
        else
            snprintf(e->engine, sizeof e->engine, "cpu (%s, %u threads)", tc_cast_cpu_path(),
                     tc_pool_default_size());
    }
    p->caster = e->caster;
    p->cuda = e->caster != NULL;
    snprintf(p->engine, sizeof p->engine, "%s", e->engine);
    return 0;
}

struct tc_pool *tc_plan_pool(tc_plan *p)
{
    tc_engines *e = engines_of(p);
    if (!e->pool)
        e->pool = tc_pool_new(0); /* NULL (out of memory) runs on this thread */
    return e->pool;
}

void tc_engines_free(tc_engines *e)
{
    if (!e)
        return;
    tc_pool_free(e->pool);
    tc_cuda_caster_free(e->caster);
    memset(e, 0, sizeof *e);
}

int tc_plan_make(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, tc_diag *d)
{
    return tc_plan_make_less(p, c, o, NULL, d);
}

/* Storages that only removed tensors view are not written: p->gone, and their bytes are not counted. */
static int mark_gone(tc_plan *p, const tc_ckpt *c, char *const *names, tc_diag *d)
{
    size_t ns = tc_ckpt_nstorages(c), nt = tc_ckpt_ntensors(c);
    bool *kept = calloc(ns + 1, sizeof *kept);
    if (!kept || !(p->gone = calloc(ns + 1, sizeof *p->gone))) {
        free(kept);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage < 0)
            continue;
        if (names[k])
            kept[t->storage] = true;
        else
            p->gone[t->storage] = true;
    }
    for (size_t i = 0; i < ns; i++) {
        p->gone[i] = p->gone[i] && !kept[i];
        p->ngone += p->gone[i];
    }
    free(kept);
    return 0;
}

/* Storages nothing in the file reaches (tc_storage.unreached) are not written either: gone too,
 * counted apart (p->nunreached). */
static int mark_unreached(tc_plan *p, const tc_ckpt *c, tc_diag *d)
{
    size_t ns = tc_ckpt_nstorages(c);
    for (size_t i = 0; i < ns; i++) {
        if (!tc_ckpt_storage(c, i)->unreached)
            continue;
        if (!p->gone && !(p->gone = calloc(ns + 1, sizeof *p->gone)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        p->nunreached++;
        if (!p->gone[i]) {
            p->gone[i] = true;
            p->ngone++;
        }
    }
    return 0;
}

int tc_plan_make_less(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, char *const *names, tc_diag *d)
{
    memset(p, 0, sizeof *p);
    size_t ns = tc_ckpt_nstorages(c), nt = tc_ckpt_ntensors(c);
    p->o = o;
    p->n = ns;
    p->out = calloc(ns + 1, sizeof *p->out);
    p->stat = calloc(ns + 1, sizeof *p->stat);
    int rc = names && p->out && p->stat ? mark_gone(p, c, names, d) : 0;
    if (rc || (rc = mark_unreached(p, c, d))) {
        tc_plan_free(p);
        return rc;
    }
#define REMOVED(k) (names && !names[k])
    /* first tensor on each storage, to name it in messages and find mixed selections */
    long *first = malloc((ns + 1) * sizeof *first);
    signed char *sel = malloc(ns + 1);
    bool *castable = malloc(ns + 1);
    tc_dtype *edt = malloc((ns + 1) * sizeof *edt);
    if (!p->out || !p->stat || !first || !sel || !castable || !edt) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    elem_dtypes(c, edt, castable); /* castable[] as scratch: set below */
    for (size_t i = 0; i < ns; i++) {
        const tc_storage *s = tc_ckpt_storage(c, i);
        tc_out_storage *ps = &p->out[i];
        ps->location = s->location;
        for (size_t m = 0; m < o->nmaps; m++)
            if (!strcmp(o->maps[m].from, s->location)) {
                ps->location = o->maps[m].to;
                break;
            }
        if (o->all_to && !o->nmaps)
            ps->location = o->all_to;
        ps->dtype = p->stat[i].from = edt[i];
        ps->nbytes = s->nbytes;
        first[i] = -1;
        sel[i] = -1;
        castable[i] = o->dtype != TC_DT_INVALID && ps->dtype != TC_DT_INVALID &&
                      tc_dtype_get(ps->dtype)->kind == TC_KIND_FLOAT && ps->dtype != o->dtype &&
                      tc_cast_supported(o->dtype, ps->dtype) && s->ntensors > 0;
        if (!p->gone || !p->gone[i])
            p->in_bytes += s->nbytes;
    }
    /* only plain tensors rebuilt by torch._utils are cast; quantizer scales and subclasses are not */
    for (size_t k = 0; k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage >= 0 && (t->kind != TC_TENSOR_DENSE || t->aux || t->subclass))
            castable[t->storage] = false;
    }
    for (size_t k = 0; k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage < 0 || !castable[t->storage] || REMOVED(k))
            continue;
        size_t i = (size_t)t->storage;
        bool want = (o->nonly == 0 || tc_glob_any(o->only, o->nonly, t->name)) &&
                    !tc_glob_any(o->keep, o->nkeep, t->name);
        if (sel[i] >= 0 && sel[i] != want) {
            rc = tc_fail(d, TC_ERR_USAGE,
                         "'%s' and '%s' share one storage; --keep/--only would give them different dtypes "
                         "(select both or neither)",
                         tc_ckpt_tensor(c, (size_t)first[i])->name, t->name);
            goto done;
        }
        if (sel[i] < 0)
            first[i] = (long)k;
        sel[i] = want;
    }
    for (size_t k = 0; k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage < 0 || !castable[t->storage] || t->alias_of >= 0 || REMOVED(k))
            continue;
        if (sel[t->storage] == 1)
            p->ncast++;
        else
            p->nkept++;
    }
    for (size_t i = 0; i < ns; i++) {
        tc_out_storage *ps = &p->out[i];
        if (castable[i] && sel[i] == 1) {
            if (!p->engine[0] && (rc = choose_engine(p, o, d)))
                goto done;
            ps->cast = true;
            ps->nbytes = ps->nbytes / tc_dtype_size(ps->dtype) * tc_dtype_size(o->dtype);
            ps->dtype = o->dtype;
        }
        if (!p->gone || !p->gone[i])
            p->out_bytes += ps->nbytes;
    }
#undef REMOVED
done:
    free(first);
    free(sel);
    free(castable);
    free(edt);
    if (rc)
        tc_plan_free(p);
    return rc;
}

void tc_plan_free(tc_plan *p)
{
    if (!p)
        return;
    free(p->out);
    free(p->stat);
    free(p->gone);
    tc_src_cache_free(p->rcache);
    free(p->rcache);
    tc_engines_free(&p->own);
    memset(p, 0, sizeof *p);
}

void tc_plan_totals(const tc_plan *p, uint64_t *overflow, uint64_t *underflow)
{
    *overflow = *underflow = 0;
    for (size_t i = 0; i < p->n; i++) {
        *overflow += p->stat[i].overflow;
        *underflow += p->stat[i].underflow;
    }
}
