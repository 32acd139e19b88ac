#include "rewrite.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zip.h"
#include "cast.h"
#include "cast_cuda.h"
#include "xfer.h"

#define CHUNK (8u << 20)
#define CUDA_CHUNK (32u << 20)

bool tc_glob_any(const char *const *pats, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(pats[i], name, 0) == 0)
            return true;
    return false;
}

/* The element type the tensors on storage i see; INVALID when they disagree. */
static tc_dtype elem_dtype(const tc_ckpt *c, size_t i)
{
    const tc_storage *s = &c->s[i];
    if (!s->untyped)
        return s->dtype;
    tc_dtype dt = TC_DT_INVALID;
    for (size_t k = 0; k < c->nt; k++) {
        if (c->t[k].storage != (long)i)
            continue;
        if (dt != TC_DT_INVALID && c->t[k].dtype != dt)
            return TC_DT_INVALID;
        dt = c->t[k].dtype;
    }
    return dt;
}

/* Where the casts run: decided once per plan, when the first cast is planned. */
static int choose_engine(tc_plan *p, const tc_rewrite_opts *o, tc_diag *d)
{
    if (o->engine != TC_ENGINE_CPU) {
        /* streams and pinned buffers made now, before any output exists;
         * with --engine auto a GPU that cannot take them leaves the CPU */
        char why[256] = "";
        p->caster = tc_cuda_caster_new(o->cuda_device, why, sizeof why);
        p->cuda = p->caster != NULL;
        if (!p->cuda && o->engine == TC_ENGINE_CUDA)
            return tc_fail(d, TC_ERR_USAGE, "--engine cuda: CUDA is not usable here (%s)", why);
    }
    if (p->cuda)
        snprintf(p->engine, sizeof p->engine, "cuda:%d", o->cuda_device);
    else
        snprintf(p->engine, sizeof p->engine, "cpu (%s, %u threads)", tc_cast_cpu_path(), tc_pool_default_size());
    return 0;
}

int tc_plan_make(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, tc_diag *d)
{
    memset(p, 0, sizeof *p);
    p->st = calloc(c->ns ? c->ns : 1, sizeof *p->st);
    if (!p->st)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    /* first tensor on each storage, to name it in messages and find mixed selections */
    long *first = malloc((c->ns ? c->ns : 1) * sizeof *first);
    signed char *sel = malloc(c->ns ? c->ns : 1);
    bool *castable = malloc(c->ns ? c->ns : 1);
    int rc = 0;
    if (!first || !sel || !castable) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c->ns; i++) {
        const tc_storage *s = &c->s[i];
        tc_plan_st *ps = &p->st[i];
        ps->location = s->location;
        for (size_t m = 0; m < o->nmaps; m++)
            if (!strcmp(o->maps[m].from, s->location)) {
                ps->location = o->maps[m].to;
                break;
            }
        if (o->all_to && !o->nmaps)
            ps->location = o->all_to;
        ps->dtype = elem_dtype(c, i);
        first[i] = -1;
        sel[i] = -1;
        castable[i] = o->dtype != TC_DT_INVALID && ps->dtype != TC_DT_INVALID &&
                      tc_dtype_get(ps->dtype)->kind == TC_KIND_FLOAT && ps->dtype != o->dtype &&
                      tc_cast_supported(o->dtype, ps->dtype) && s->ntensors > 0;
        p->in_bytes += s->nbytes;
    }
    for (size_t k = 0; k < c->nt; k++) {
        const tc_tensor *t = &c->t[k];
        if (t->storage < 0)
            continue;
        size_t i = (size_t)t->storage;
        if (t->kind != TC_TENSOR_DENSE || t->aux || !pk_call_global(t->node) ||
            strcmp(pk_call_global(t->node)->s, "torch._utils"))
            castable[i] = false;
    }
    for (size_t k = 0; k < c->nt; k++) {
        const tc_tensor *t = &c->t[k];
        if (t->storage < 0 || !castable[t->storage])
            continue;
        size_t i = (size_t)t->storage;
        bool want = (o->nonly == 0 || tc_glob_any(o->only, o->nonly, t->name)) &&
                    !tc_glob_any(o->keep, o->nkeep, t->name);
        if (sel[i] >= 0 && sel[i] != want) {
            rc = tc_fail(d, TC_ERR_USAGE,
                         "'%s' and '%s' share one storage; --keep/--only would give them different dtypes "
                         "(select both or neither)",
                         c->t[first[i]].name, t->name);
            goto done;
        }
        if (sel[i] < 0)
            first[i] = (long)k;
        sel[i] = want;
    }
    for (size_t k = 0; k < c->nt; k++) {
        const tc_tensor *t = &c->t[k];
        if (t->storage < 0 || !castable[t->storage] || t->alias_of >= 0)
            continue;
        if (sel[t->storage] == 1)
            p->ncast++;
        else
            p->nkept++;
    }
    for (size_t i = 0; i < c->ns; i++) {
        tc_plan_st *ps = &p->st[i];
        if (castable[i] && sel[i] == 1) {
            if (!p->engine[0] && (rc = choose_engine(p, o, d)))
                goto done;
            ps->cast = true;
            p->out_bytes += c->s[i].nbytes / tc_dtype_size(ps->dtype) * tc_dtype_size(o->dtype);
            ps->dtype = o->dtype;
        } else {
            p->out_bytes += c->s[i].nbytes;
        }
    }
done:
    free(first);
    free(sel);
    free(castable);
    if (rc)
        tc_plan_free(p);
    return rc;
}

void tc_plan_free(tc_plan *p)
{
    if (p) {
        free(p->st);
        p->st = NULL;
        tc_pool_free(p->pool);
        p->pool = NULL;
        tc_cuda_caster_free(p->caster);
        p->caster = NULL;
    }
}

/* ---- streaming ------------------------------------------------------------ */

int tc_stream_storage(const tc_ckpt *c, tc_plan *p, size_t i, const tc_rewrite_opts *o, tc_sink_fn sink,
                      void *ctx, uint64_t *done, uint64_t total, tc_diag *d)
{
    const tc_storage *s = &c->s[i];
    tc_plan_st *ps = &p->st[i];
    tc_dtype from = elem_dtype(c, i), to = ps->dtype;
    size_t esz = ps->cast ? tc_dtype_size(from) : 1, osz = ps->cast ? tc_dtype_size(to) : 1;
    /* CHUNK bytes on the larger side; bigger for the GPU, whose caster splits
     * a chunk over its two streams */
    size_t chunk = (p->cuda && ps->cast ? CUDA_CHUNK : CHUNK) / (esz > osz ? esz : osz) * esz;
    uint8_t *in = malloc(chunk), *out = ps->cast ? malloc(chunk / esz * osz) : NULL;
    tc_srd r;
    int rc = 0;
    if (!in || (ps->cast && !out)) {
        free(in);
        free(out);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    bool cuda = p->cuda;
    if ((rc = tc_srd_open(&r, c, s, d))) {
        free(in);
        free(out);
        return rc;
    }
    for (;;) {
        size_t got;
        if ((rc = tc_srd_read(&r, in, chunk, &got, d)) || !got)
            break;
        if (ps->cast) {
            size_t n = got / esz;
            tc_cast_stats cs = {0};
            char why[256] = "";
            if (cuda && (tc_cast_count(&cs, to, from, in, n) ||
                         tc_cuda_caster_run(p->caster, to, out, from, in, n, why, sizeof why))) {
                rc = tc_fail(d, TC_ERR_IO, "CUDA cast of storage '%s' failed: %s", s->key, why);
                break;
            }
            if (!cuda && tc_cast_cpu_counted(&cs, to, out, from, in, n)) {
                rc = tc_fail(d, TC_ERR_UNSUPPORTED, "cannot cast %s to %s", tc_dtype_name(from), tc_dtype_name(to));
                break;
            }
            ps->overflow += cs.overflow;
            ps->underflow += cs.underflow;
            rc = sink(ctx, out, n * osz, d);
        } else {
            rc = sink(ctx, in, got, d);
        }
        if (rc)
            break;
        *done += got;
        if (o->progress)
            o->progress(o->progress_ctx, *done, total);
    }
    tc_srd_close(&r);
    free(in);
    free(out);
    return rc;
}

/* ---- torch zip output --------------------------------------------------------- */

typedef struct edit {
    pk_graph *g;
    pk_obj *cache[64];
    size_t ncache;
    tc_diag *d;
} edit;

static pk_obj *intern(edit *e, pk_kind kind, const char *a, const char *b)
{
    for (size_t i = 0; i < e->ncache; i++) {
        pk_obj *o = e->cache[i];
        if (o->kind == kind && !strcmp(o->s, a) && (kind != PK_GLOBAL || !strcmp(o->name, b)))
            return o;
    }
    pk_obj *o = kind == PK_GLOBAL ? pk_new_global(e->g, a, b) : pk_new_str(e->g, a, strlen(a));
    if (o && e->ncache < 64)
        e->cache[e->ncache++] = o;
    if (!o)
        tc_fail(e->d, TC_ERR_NOMEM, "out of memory");
    return o;
}

static int retype_tensor(edit *e, tc_tensor *t, tc_dtype to)
{
    pk_obj *call = t->node;
    const pk_obj *f = pk_call_global(call);
    pk_obj *const *a = call->args->items;
    size_t na = call->args->n;
    bool v3in = pk_is_global(f, "torch._utils", "_rebuild_tensor_v3");
    bool old = pk_is_global(f, "torch._utils", "_rebuild_tensor");
    if (!v3in && !old && !pk_is_global(f, "torch._utils", "_rebuild_tensor_v2"))
        return tc_fail(e->d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot change the dtype of a %s.%s tensor",
                       t->name, f ? f->s : "?", f ? f->name : "?");
    if (!old && na < 6) /* requires_grad and backward_hooks are copied below */
        return tc_fail(e->d, TC_ERR_FORMAT, "tensor '%s': %s.%s with %zu arguments (needs 6)", t->name, f->s,
                       f->name, na);
    pk_obj *args[8];
    size_t n = 0;
    for (size_t i = 0; i < 4; i++)
        args[n++] = a[i];
    if (old) {
        pk_obj *rg = pk_new(e->g, PK_BOOL), *hooks = pk_new(e->g, PK_CALL), *empty = pk_new(e->g, PK_TUPLE);
        pk_obj *od = intern(e, PK_GLOBAL, "collections", "OrderedDict");
        if (!rg || !hooks || !empty || !od)
            return tc_fail(e->d, TC_ERR_NOMEM, "out of memory");
        hooks->func = od;
        hooks->args = empty;
        args[n++] = rg;
        args[n++] = hooks;
    } else {
        args[n++] = a[4];
        args[n++] = a[5];
    }
    pk_obj *meta = v3in ? (na > 7 ? a[7] : NULL) : (!old && na > 6 ? a[6] : NULL);
    if (tc_dtype_is_v3(to)) {
        if (!(call->func = intern(e, PK_GLOBAL, "torch._utils", "_rebuild_tensor_v3")) ||
            !(args[n++] = intern(e, PK_GLOBAL, "torch", tc_dtype_name(to))))
            return e->d->code;
    } else if (!(call->func = intern(e, PK_GLOBAL, "torch._utils", "_rebuild_tensor_v2"))) {
        return e->d->code;
    }
    if (meta)
        args[n++] = meta;
    if (!(call->args = pk_new_tuple(e->g, n, args)))
        return tc_fail(e->d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

static int edit_graph(tc_ckpt *c, tc_plan *p, tc_diag *d)
{
    edit e = {.g = c->g, .d = d};
    for (size_t i = 0; i < c->ns; i++) {
        tc_storage *s = &c->s[i];
        tc_plan_st *ps = &p->st[i];
        char key[32];
        snprintf(key, sizeof key, "%zu", i);
        pk_obj *k = pk_new_str(c->g, key, strlen(key));
        pk_obj *loc = intern(&e, PK_STR, ps->location, NULL);
        bool untyped = ps->cast ? tc_dtype_is_v3(ps->dtype) : s->untyped;
        uint64_t nbytes = tc_plan_out_bytes(c, p, i);
        pk_obj *type = untyped ? intern(&e, PK_GLOBAL, "torch.storage", "UntypedStorage")
                               : intern(&e, PK_GLOBAL, "torch", tc_dtype_get(ps->dtype)->storage);
        pk_obj *numel = pk_new_int(c->g, (int64_t)(untyped ? nbytes : nbytes / tc_dtype_size(ps->dtype)));
        if (!k || !loc || !type || !numel)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        for (size_t j = 0; j < s->npids; j++) {
            pk_obj *t = s->pids[j];
            t->n = 5; /* a legacy view_metadata slot goes */
            t->items[2] = k;
            t->items[3] = loc;
            if (ps->cast) {
                t->items[1] = type;
                t->items[4] = numel;
            }
        }
    }
    for (size_t k = 0; k < c->nt; k++) {
        tc_tensor *t = &c->t[k];
        if (t->storage < 0 || !p->st[t->storage].cast || t->alias_of >= 0)
            continue;
        int rc = retype_tensor(&e, t, p->st[t->storage].dtype);
        if (rc)
            return rc;
    }
    return 0;
}

typedef struct zsink {
    tc_zipw *w;
    bool werr;
} zsink;

static int zip_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    zsink *z = ctx;
    int rc = tc_zipw_write(z->w, buf, n, d);
    z->werr |= rc != 0;
    return rc;
}

int tc_torch_zip_open(tc_zipw *w, int fd, const char *out_path, uint8_t *pkl, size_t plen, tc_diag *d)
{
    char archive[256];
    tc_zip_archive_name(out_path, archive, sizeof archive);
    int rc = tc_zipw_init(w, fd, archive, d);
    if (!rc)
        rc = tc_zipw_add(w, "data.pkl", pkl, plen, d);
    if (!rc)
        rc = tc_zipw_add(w, "byteorder", "little", 6, d);
    free(pkl);
    return rc;
}

uint64_t tc_plan_out_bytes(const tc_ckpt *c, const tc_plan *p, size_t i)
{
    const tc_storage *s = &c->s[i];
    return p->st[i].cast ? s->nbytes / tc_dtype_size(elem_dtype(c, i)) * tc_dtype_size(p->st[i].dtype) : s->nbytes;
}

typedef struct xprog {
    const tc_rewrite_opts *o;
    uint64_t base, total;
} xprog;

static void xfer_progress(void *ctx, uint64_t in_done)
{
    xprog *x = ctx;
    x->o->progress(x->o->progress_ctx, x->base + in_done, x->total);
}

/* Storage i (stored in the input) into the open record, through tc_xfer. */
static int xfer_storage(tc_zipw *w, const tc_ckpt *c, tc_plan *p, size_t i, const tc_rewrite_opts *o, uint64_t done,
                        uint64_t total, bool *werr, tc_diag *d)
{
    const tc_storage *s = &c->s[i];
    tc_plan_st *ps = &p->st[i];
    xprog xp = {o, done, total};
    /* unchanged bytes keep the CRC-32 the input gives them, unless asked to check it */
    bool trust = !ps->cast && s->crc_known && !(s->crc == 0 && s->nbytes) && !o->verify_crc;
    tc_xfer x = {
        .src = &c->src, .in_off = s->file_off, .in_bytes = s->nbytes, .what = s->key, .out_fd = w->fd,
        .from = ps->cast ? elem_dtype(c, i) : ps->dtype, .to = ps->dtype, .want_crc = !trust,
        .progress = o->progress ? xfer_progress : NULL, .progress_ctx = &xp,
    };
    if (!p->pool && !(p->pool = tc_pool_new(0)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_zipw_reserve(w, tc_xfer_out_bytes(&x), &x.out_off, d);
    if (rc) {
        *werr = true;
        return rc;
    }
    if ((rc = tc_xfer_run(p->pool, &x, d))) {
        *werr = x.werr;
        return rc;
    }
    ps->overflow += x.stats.overflow;
    ps->underflow += x.stats.underflow;
    if ((rc = tc_zipw_commit(w, x.out_bytes, trust ? s->crc : x.crc, d)))
        *werr = true;
    return rc;
}

int tc_torch_zip_storage(tc_zipw *w, const tc_ckpt *c, tc_plan *p, size_t i, size_t key, const tc_rewrite_opts *o,
                         uint64_t *done, uint64_t total, bool *werr, tc_diag *d)
{
    const tc_storage *s = &c->s[i];
    bool cast = p->st[i].cast;
    char name[48];
    snprintf(name, sizeof name, "data/%zu", key);
    *werr = false;
    int rc = tc_zipw_begin(w, name, tc_plan_out_bytes(c, p, i), d);
    if (rc) {
        *werr = true;
        return rc;
    }
    if (s->raw && !(cast && p->cuda)) {
        /* stored: copied in the kernel, or read, cast and written, in parallel chunks */
        rc = xfer_storage(w, c, p, i, o, *done, total, werr, d);
        *done += s->nbytes;
    } else {
        zsink z = {w, false};
        rc = tc_stream_storage(c, p, i, o, zip_sink, &z, done, total, d);
        *werr = z.werr;
    }
    if (!rc && !cast && s->crc_known && s->crc != w->rec_crc && s->crc != 0)
        rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s': CRC-32 is %08x but the file says %08x (data corrupted)",
                     s->key, w->rec_crc, s->crc);
    if (!rc && (rc = tc_zipw_end(w, d)))
        *werr = true;
    return rc;
}

int tc_torch_zip_close(tc_zipw *w, int rc, tc_diag *d)
{
    if (!rc)
        rc = tc_zipw_add(w, "version", "3\n", 2, d);
    if (!rc)
        rc = tc_zipw_finish(w, d);
    tc_zipw_free(w);
    return rc;
}

int tc_write_torch(tc_ckpt *c, tc_plan *p, const tc_rewrite_opts *o, int fd, const char *out_path,
                   tc_diag *d)
{
    int rc = edit_graph(c, p, d);
    if (rc)
        return rc;
    uint8_t *pkl = NULL;
    size_t plen = 0;
    if ((rc = pk_write(c->g, c->root, o->max_depth, &pkl, &plen, d)))
        return rc;
    tc_zipw w;
    rc = tc_torch_zip_open(&w, fd, out_path, pkl, plen, d);
    uint64_t done = 0;
    bool werr;
    for (size_t i = 0; i < c->ns && !rc; i++)
        rc = tc_torch_zip_storage(&w, c, p, i, i, o, &done, p->in_bytes, &werr, d);
    return tc_torch_zip_close(&w, rc, d);
}
