#include "diff.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "hash.h"
#include "keys.h"
#include "safety.h"
#include "stream.h"
#include "xfer.h"

#define CHUNK ((size_t)512 << 10) /* bytes of the wider side per chunk: fixed, so results never depend on threads */
#define ROUND 64                  /* chunks between merges when every side is a plain range */

/* ---- sides ------------------------------------------------------------------------------ */

const char *tc_diff_format(const tc_diff_side *s) { return s->c ? tc_ckpt_format(s->c) : "manifest"; }

static bool known_device(const char *dev) { return dev && strcmp(dev, "-"); }

static bool side_meta(const tc_diff_side *s, long i, tc_diff_meta *m)
{
    if (i < 0)
        return false;
    memset(m, 0, sizeof *m);
    if (s->c) {
        const tc_tensor *t = tc_ckpt_tensor(s->c, (size_t)i);
        *m = (tc_diff_meta){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
                            .stride = t->stride, .has_layout = true, .offset = t->offset,
                            .device = tc_tensor_device(s->c, t), .has_data = t->storage >= 0, .numel = t->numel};
    } else {
        const tc_manifest_entry *e = &s->m->e[i];
        *m = (tc_diff_meta){.name = e->name, .dtype = e->dtype, .ndim = e->ndim, .shape = e->shape,
                            .stride = e->stride, .has_layout = e->has_stride, .offset = e->offset,
                            .device = e->device, .has_data = e->has_data, .numel = e->numel};
    }
    if (!known_device(m->device))
        m->device = NULL;
    return true;
}

bool tc_diff_meta_of(const tc_diff_report *r, const tc_diff_entry *e, int side, tc_diff_meta *out)
{
    return side_meta(side ? &r->b : &r->a, side ? e->ib : e->ia, out);
}

static int open_side(tc_diff_side *s, const char *path, const tc_diff_opts *o, tc_diag *d)
{
    int rc;
    s->path = path;
    if (tc_manifest_probe(path)) {
        if ((rc = tc_manifest_open(&s->m, path, &o->lim, d)))
            return rc;
        s->ntensors = s->m->n;
        return 0;
    }
    if ((rc = tc_open(&s->c, path, &o->lim, d)))
        return rc;
    s->ntensors = tc_ckpt_ntensors(s->c);
    tc_ckpt_admit(s->c, o->safe_globals, o->nsafe);
    if (!tc_ckpt_is_safe(s->c)) {
        s->unsafe = true;
        tc_safety_why(s->c, s->why_unsafe, sizeof s->why_unsafe);
    }
    return 0;
}

static const char *side_name(const tc_diff_side *s, size_t i)
{
    return s->c ? tc_ckpt_tensor(s->c, i)->name : s->m->e[i].name;
}

/* Where name ends with tail, that end of name; else NULL. */
static const char *tail_of(const char *name, const char *tail)
{
    size_t ln = strlen(name), lt = strlen(tail);
    return lt <= ln && !memcmp(name + ln - lt, tail, lt) ? name + ln - lt : NULL;
}

/* The side's names after --strip-prefix (or as they are, checked distinct). Each points into the
 * side's own name, which it ends (a stripped name is its name's tail), or into s->own. */
static int side_names(tc_diff_side *s, const tc_diff_opts *o, const char ***out, tc_diag *d)
{
    const char **v = calloc(s->ntensors + 1, sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->ntensors; i++)
        v[i] = side_name(s, i);
    /* key surgery's rule, on this side alone; a side whose names share no first component keeps them */
    char shared[512];
    tc_keyops ko = {.strip = o->strip && (o->strip_prefix || tc_keys_shared_prefix(v, s->ntensors, shared,
                                                                                      sizeof shared)),
                    .strip_prefix = o->strip_prefix};
    tc_keymap km;
    int rc;
    if ((rc = tc_keymap_make(&ko, v, s->ntensors, &km, d)))
        goto done;
    if (!(s->prefix = strdup(km.stripped ? km.stripped : ""))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < s->ntensors; i++) { /* v[i] becomes the name after key surgery, the side's */
        const char *t = tail_of(v[i], km.name[i]);
        if (!t && !s->own && !(s->own = calloc(s->ntensors + 1, sizeof *s->own))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (t)
            free(km.name[i]);
        else
            s->own[i] = km.name[i];
        v[i] = t ? t : km.name[i];
        km.name[i] = NULL;
    }
    *out = v;
    v = NULL;
done:
    tc_keymap_free(&km);
    free(v);
    if (rc) {
        if (o->strip) {
            char m[sizeof d->msg];
            snprintf(m, sizeof m, "%s", d->msg);
            snprintf(d->msg, sizeof d->msg, "--strip-prefix: %.1000s", m);
        }
        tc_diag_subject(d, s->path);
    }
    return rc;
}

/* ---- comparing values, chunk by chunk ------------------------------------------------------- */

typedef struct vside {
    tc_elems *e;
    const tc_src *src;       /* plain range: the elements are at off of src */
    uint64_t off;
    tc_dtype dt;
    size_t esz;
    const char *what;
} vside;

typedef struct ctx {
    const tc_diff_opts *o;
    tc_diff_report *rep;
    tc_pool *pool;
    unsigned nt;
    uint8_t *scratch[TC_POOL_MAX];  /* per thread: a chunk for each side read as a plain range */
    uint8_t *slot[2];               /* per side read in order: nt chunks */
    tc_src_cache cache[2];          /* per side: small tensors, read by the caller's thread */
    uint64_t done, total;           /* bytes, for progress */
    struct vjob *vj;                /* the value comparison's state, made once */
} ctx;

typedef struct vjob {
    ctx *x;
    vside s[2];
    const tc_cmp_rule *rule;
    uint64_t numel, celems, begin, end;
    atomic_uint_fast64_t next;
    atomic_bool stop;
    tc_cmp_res res[ROUND];
    tc_diag d[TC_POOL_MAX];
    uint64_t fail_at[TC_POOL_MAX];
} vjob;

static void vwork(void *arg, unsigned tid)
{
    vjob *j = arg;
    while (!atomic_load_explicit(&j->stop, memory_order_relaxed)) {
        uint64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->end)
            return;
        uint64_t e0 = k * j->celems;
        size_t ne = j->numel - e0 < j->celems ? (size_t)(j->numel - e0) : (size_t)j->celems;
        const uint8_t *p[2];
        for (int s = 0; s < 2; s++) {
            const vside *v = &j->s[s];
            if (!v->src) {
                p[s] = j->x->slot[s] + (k - j->begin) * CHUNK;
                continue;
            }
            /* a tensor of one chunk is compared by the caller's thread alone: small ones through its caches */
            int hit = j->end - j->begin == 1 ? tc_src_cached(&j->x->cache[s], v->src, v->off + e0 * v->esz,
                                                             ne * v->esz, v->what, &p[s], &j->d[tid])
                                             : 1;
            if (hit < 0) {
                j->fail_at[tid] = k;
                atomic_store(&j->stop, true);
                return;
            }
            if (hit == 0)
                continue;
            uint8_t *buf = j->x->scratch[tid] + (size_t)s * CHUNK;
            if (tc_src_read(v->src, v->off + e0 * v->esz, buf, ne * v->esz, v->what, &j->d[tid])) {
                j->fail_at[tid] = k;
                atomic_store(&j->stop, true);
                return;
            }
            p[s] = buf;
        }
        tc_cmp_res_init(&j->res[k - j->begin]);
        tc_cmp_run(&j->res[k - j->begin], j->rule, j->s[0].dt, p[0], j->s[1].dt, p[1], ne, e0);
    }
}

static void progress(ctx *x, uint64_t add)
{
    x->done += add;
    if (x->o->progress)
        x->o->progress(x->o->progress_ctx, x->done, x->total);
}

/* The next want bytes of a side read in order, all of them. */
static int read_all(tc_elems *e, uint8_t *buf, size_t want, const char *name, tc_diag *d)
{
    size_t got = 0;
    int rc = tc_elems_read(e, buf, want, &got, d);
    if (rc)
        return rc;
    if (got != want)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s' ends early", name);
    return 0;
}

/* Buffers, made when first needed and kept for every tensor. */
static int buffers(ctx *x, bool seq0, bool seq1, tc_diag *d)
{
    for (unsigned t = 0; t < x->nt; t++)
        if (!x->scratch[t] && !(x->scratch[t] = malloc(2 * CHUNK)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (int s = 0; s < 2; s++)
        if ((s ? seq1 : seq0) && !x->slot[s] && !(x->slot[s] = malloc(x->nt * CHUNK)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

/* Whether r says only "r->n elements compared, every one identical": what tc_diff_res makes of an
 * entry that keeps no result. The sums are left out: the cosine is worked out before. */
static bool plain_equal(const tc_cmp_res *r)
{
    tc_cmp_res c;
    tc_cmp_res_init(&c);
    const tc_cmp_val *va[2] = {&r->first_a, &r->first_b}, *vc[2] = {&c.first_a, &c.first_b};
    for (int k = 0; k < 2; k++)
        if (va[k]->kind != vc[k]->kind || memcmp(&va[k]->re, &vc[k]->re, sizeof va[k]->re) ||
            memcmp(&va[k]->im, &vc[k]->im, sizeof va[k]->im) || va[k]->i != vc[k]->i || va[k]->u != vc[k]->u)
            return false;
    return r->bits_differ == c.bits_differ && r->changed == c.changed && r->mismatched == c.mismatched &&
           r->first == c.first && !memcmp(&r->max_abs, &c.max_abs, sizeof r->max_abs) &&
           !memcmp(&r->max_rel, &c.max_rel, sizeof r->max_rel) && r->max_abs_at == c.max_abs_at &&
           r->max_rel_at == c.max_rel_at && r->nan_a == c.nan_a && r->inf_a == c.inf_a && r->nan_b == c.nan_b &&
           r->inf_b == c.inf_b;
}

const tc_cmp_res *tc_diff_res(const tc_diff_entry *e, tc_cmp_res *tmp)
{
    if (e->res)
        return e->res;
    tc_cmp_res_init(tmp);
    tmp->n = e->nvalues;
    return tmp;
}

/* Keep r as e's result: nothing but its count when that says it all. */
static int keep_res(tc_diff_entry *e, const tc_cmp_res *r, tc_diag *d)
{
    e->nvalues = r->n;
    if (plain_equal(r))
        return 0;
    if (!(e->res = malloc(sizeof *e->res)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    *e->res = *r;
    return 0;
}

static int compare_values(ctx *x, tc_diff_entry *e, const tc_tensor *ta, const tc_tensor *tb, tc_diag *d)
{
    if (!x->vj && !(x->vj = malloc(sizeof *x->vj)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    vjob *j = x->vj;
    const tc_diff_side *side[2] = {&x->rep->a, &x->rep->b};
    const tc_tensor *t[2] = {ta, tb};
    j->x = x;
    j->rule = &x->o->rule;
    for (unsigned k = 0; k < TC_POOL_MAX; k++) {
        j->fail_at[k] = UINT64_MAX;
        tc_diag_clear(&j->d[k]);
    }
    memset(j->s, 0, sizeof j->s);
    atomic_store(&j->stop, false);
    j->numel = ta->numel;
    int rc;
    bool seq[2] = {false, false};
    for (int s = 0; s < 2; s++) {
        vside *v = &j->s[s];
        v->dt = t[s]->dtype;
        v->esz = tc_dtype_size(v->dt);
        v->what = t[s]->storage >= 0 ? tc_ckpt_storage(side[s]->c, (size_t)t[s]->storage)->key : t[s]->name;
        if ((rc = tc_expand_check(side[s]->c, t[s], t[s]->dtype, x->o->max_expand, d)) ||
            (rc = tc_elems_open(&v->e, side[s]->c, t[s], d))) {
            tc_diag_subject(d, side[s]->path);
            goto done;
        }
        seq[s] = !tc_elems_range(v->e, &v->src, &v->off);
    }
    size_t wide = j->s[0].esz > j->s[1].esz ? j->s[0].esz : j->s[1].esz;
    j->celems = CHUNK / wide;
    uint64_t nchunks = (j->numel + j->celems - 1) / j->celems, round = seq[0] || seq[1] ? x->nt : ROUND;
    tc_cmp_res total;
    tc_cmp_res_init(&total);
    if ((rc = buffers(x, seq[0], seq[1], d)))
        goto done;
    for (uint64_t r0 = 0; r0 < nchunks; r0 += round) {
        j->begin = r0;
        j->end = nchunks - r0 < round ? nchunks : r0 + round;
        atomic_store(&j->next, r0);
        for (int s = 0; s < 2; s++) /* sides read in order: this round's chunks, by the caller */
            for (uint64_t k = r0; seq[s] && k < j->end; k++) {
                uint64_t e0 = k * j->celems, ne = j->numel - e0 < j->celems ? j->numel - e0 : j->celems;
                uint8_t *buf = x->slot[s] + (k - r0) * CHUNK;
                if ((rc = read_all(j->s[s].e, buf, (size_t)ne * j->s[s].esz, t[s]->name, d))) {
                    tc_diag_subject(d, side[s]->path);
                    goto done;
                }
            }
        tc_pool_run(j->end - r0 > 1 ? x->pool : NULL, vwork, j);
        if (atomic_load(&j->stop)) {
            unsigned f = 0; /* the failure at the lowest offset, whichever thread met it */
            for (unsigned k = 1; k < x->nt; k++)
                if (j->fail_at[k] < j->fail_at[f])
                    f = k;
            rc = tc_diag_copy(d, &j->d[f]);
            goto done;
        }
        uint64_t bytes = 0;
        for (uint64_t k = r0; k < j->end; k++) {
            tc_cmp_merge(&total, &j->res[k - r0]);
            uint64_t ne = j->numel - k * j->celems < j->celems ? j->numel - k * j->celems : j->celems;
            bytes += ne * (j->s[0].esz + j->s[1].esz);
        }
        progress(x, bytes);
        if (x->o->quick && total.mismatched)
            break;
    }
    if ((rc = keep_res(e, &total, d)))
        goto done;
    e->how = TC_DIFF_VALUES;
    e->equal = !total.mismatched;
    e->bitwise = ta->dtype == tb->dtype && !total.bits_differ;
    e->cosine = x->o->rule.sums ? tc_cmp_cosine(&total) : NAN;
done:
    for (int s = 0; s < 2; s++) {
        tc_elems_close(j->s[s].e);
        j->s[s].e = NULL;
    }
    return rc;
}

static bool layout_differs(const tc_diff_entry *e)
{
    return e->dtype_differs || e->stride_differs || e->offset_differs || e->device_differs;
}

/* ---- against a manifest: SHA-256 ----------------------------------------------------------- */

/* The checkpoint side when one side is a manifest (NULL when both are), and which side it is. */
static const tc_diff_side *hashed_side(const tc_diff_report *r, int *which)
{
    *which = r->a.c ? 0 : 1;
    return r->a.c ? &r->a : r->b.c ? &r->b : NULL;
}

static void finish_hash(ctx *x, tc_diff_entry *e)
{
    e->how = TC_DIFF_SHA256;
    e->equal = e->bitwise = !strcmp(e->sha->a, e->sha->b);
    e->done = true;
    if (x->o->strict && layout_differs(e))
        e->equal = false;
}

/* What a manifest allows for a name in both; true when a tensor of the checkpoint remains to be hashed. */
static bool plan_hashes(ctx *x, tc_diff_entry *e)
{
    const tc_diff_side *a = &x->rep->a, *b = &x->rep->b;
    if (e->dtype_differs) {
        e->why_not = "dtypes differ, so their SHA-256s cannot agree";
        return false;
    }
    if ((a->m && !a->m->e[e->ia].has_sha) || (b->m && !b->m->e[e->ib].has_sha)) {
        e->how = TC_DIFF_METADATA;
        e->equal = true;
        return false;
    }
    if (a->m)
        memcpy(e->sha->a, a->m->e[e->ia].sha256, 65);
    if (b->m)
        memcpy(e->sha->b, b->m->e[e->ib].sha256, 65);
    if (a->m && b->m) { /* two manifests: nothing to read */
        finish_hash(x, e);
        return false;
    }
    return true;
}

typedef struct hjob {
    ctx *x;
    const tc_diff_side *s;        /* the checkpoint */
    int which;                    /* its side: 0 A, 1 B */
    const size_t *todo;           /* entries to hash, in order */
    size_t n;
    atomic_size_t next;
    atomic_bool stop;             /* a failure, or (quick) a difference */
    atomic_uint_fast64_t bytes;
    uint64_t base;                /* progress before */
    pthread_mutex_t mu;           /* one checkpoint's readers are opened and closed one at a time */
    tc_diag d[TC_POOL_MAX];
    size_t fail_at[TC_POOL_MAX];
} hjob;

/* One tensor's SHA-256, its reader opened and closed under the lock. */
static int hash_one(hjob *j, const tc_tensor *t, char sha[65], tc_diag *d)
{
    int rc;
    if ((rc = tc_expand_check(j->s->c, t, t->dtype, j->x->o->max_expand, d)))
        return rc;
    tc_elems *el = NULL;
    pthread_mutex_lock(&j->mu);
    rc = tc_elems_open(&el, j->s->c, t, d);
    pthread_mutex_unlock(&j->mu);
    if (rc)
        return rc;
    rc = tc_elems_sha256(el, sha, d);
    pthread_mutex_lock(&j->mu);
    tc_elems_close(el);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* Each thread takes the next tensor, opens it (under the lock), hashes it, closes it. */
static void hwork(void *arg, unsigned tid)
{
    hjob *j = arg;
    while (!atomic_load(&j->stop)) {
        size_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n)
            return;
        tc_diff_entry *e = &j->x->rep->e[j->todo[k]];
        const tc_tensor *t = tc_ckpt_tensor(j->s->c, (size_t)(j->which ? e->ib : e->ia));
        if (hash_one(j, t, j->which ? e->sha->b : e->sha->a, &j->d[tid])) {
            tc_diag_subject(&j->d[tid], j->s->path);
            j->fail_at[tid] = k;
            atomic_store(&j->stop, true);
            return;
        }
        finish_hash(j->x, e);
        uint64_t done = atomic_fetch_add(&j->bytes, t->nbytes) + t->nbytes;
        if (tid == 0 && j->x->o->progress) /* the caller's thread */
            j->x->o->progress(j->x->o->progress_ctx, j->base + done, j->x->total);
        if (j->x->o->quick && !e->equal)
            atomic_store(&j->stop, true);
    }
}

/* Hash the checkpoint's tensors of the planned entries on the pool; a name that is the same
 * tensor as an earlier planned name of the checkpoint takes that name's hash. */
static int run_hashes(ctx *x, const bool *todo, tc_diag *d)
{
    int which;
    const tc_diff_side *s = hashed_side(x->rep, &which);
    size_t nt = tc_ckpt_ntensors(s->c), n = 0;
    long *entry = malloc((nt + 1) * sizeof *entry); /* the checkpoint's tensor -> its planned entry */
    size_t *list = malloc((x->rep->n + 1) * sizeof *list);
    hjob *j = calloc(1, sizeof *j);
    int rc = 0;
    if (!entry || !list || !j) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nt; i++)
        entry[i] = -1;
    for (size_t i = 0; i < x->rep->n; i++) {
        if (!todo[i])
            continue;
        const tc_diff_entry *e = &x->rep->e[i];
        long ti = which ? e->ib : e->ia, alias = tc_ckpt_tensor(s->c, (size_t)ti)->alias_of;
        entry[ti] = (long)i;
        if (alias < 0 || entry[alias] < 0)
            list[n++] = i;
    }
    *j = (hjob){.x = x, .s = s, .which = which, .todo = list, .n = n, .base = x->done};
    for (unsigned t = 0; t < TC_POOL_MAX; t++)
        j->fail_at[t] = SIZE_MAX;
    if (pthread_mutex_init(&j->mu, NULL)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "cannot make a lock");
        goto done;
    }
    tc_pool_run(n > 1 ? x->pool : NULL, hwork, j);
    pthread_mutex_destroy(&j->mu);
    x->done = j->base + atomic_load(&j->bytes);
    unsigned f = 0;
    for (unsigned t = 1; t < x->nt; t++)
        if (j->fail_at[t] < j->fail_at[f])
            f = t;
    if (j->fail_at[f] != SIZE_MAX) {
        rc = tc_diag_copy(d, &j->d[f]);
        goto done;
    }
    for (size_t i = 0; i < x->rep->n && !(x->o->quick && atomic_load(&j->stop)); i++) { /* the aliases */
        tc_diff_entry *e = &x->rep->e[i];
        long ti = which ? e->ib : e->ia;
        if (!todo[i] || e->done)
            continue;
        const tc_diff_entry *was = &x->rep->e[entry[tc_ckpt_tensor(s->c, (size_t)ti)->alias_of]];
        memcpy(which ? e->sha->b : e->sha->a, which ? was->sha->b : was->sha->a, 65);
        finish_hash(x, e);
    }
done:
    free(entry);
    free(list);
    free(j);
    return rc;
}

/* ---- one name ------------------------------------------------------------------------------ */

/* What the metadata says; true when the values (or hashes) remain to be compared. */
static bool plan_entry(ctx *x, tc_diff_entry *e)
{
    tc_diff_meta ma, mb;
    bool in_a = side_meta(&x->rep->a, e->ia, &ma), in_b = side_meta(&x->rep->b, e->ib, &mb);
    e->cosine = NAN;
    if (!in_a || !in_b) {
        e->why_not = in_a ? "only in A" : "only in B";
        e->done = true;
        return false;
    }
    e->dtype_differs = ma.dtype != mb.dtype;
    e->shape_differs = ma.ndim != mb.ndim || memcmp(ma.shape, mb.shape, (size_t)ma.ndim * sizeof *ma.shape);
    if (ma.has_layout && mb.has_layout) {
        e->offset_differs = ma.offset != mb.offset;
        e->stride_differs = !e->shape_differs && memcmp(ma.stride, mb.stride, (size_t)ma.ndim * sizeof *ma.stride);
    }
    e->device_differs = ma.device && mb.device && strcmp(ma.device, mb.device);
    bool values = false;
    if (e->shape_differs) {
        e->why_not = "shapes differ";
    } else if (!ma.has_data || !mb.has_data) {
        e->why_not = ma.has_data ? "no data in B" : mb.has_data ? "no data in A" : NULL;
        if (!e->why_not) {
            e->how = TC_DIFF_NO_DATA;
            e->equal = true;
        }
    } else if (x->rep->a.m || x->rep->b.m) {
        if ((values = plan_hashes(x, e)))
            x->total += x->rep->a.c ? ma.numel * tc_dtype_size(ma.dtype) : mb.numel * tc_dtype_size(mb.dtype);
        else if (e->how == TC_DIFF_SHA256)
            return false; /* done, strict applied */
    } else if (x->rep->same_file) {
        e->how = TC_DIFF_SAME_FILE;
        e->equal = e->bitwise = true;
    } else if (!tc_cmp_comparable(ma.dtype, mb.dtype)) {
        e->why_not = "dtypes that cannot be compared by value";
    } else {
        values = true;
        const tc_tensor *ta = tc_ckpt_tensor(x->rep->a.c, (size_t)e->ia), *tb = tc_ckpt_tensor(x->rep->b.c, (size_t)e->ib);
        if (ta->alias_of < 0 || tb->alias_of < 0 || x->rep->e[ta->alias_of].ib != tb->alias_of) /* else read once */
            x->total += ma.numel * (tc_dtype_size(ma.dtype) + tc_dtype_size(mb.dtype));
    }
    if (!values) {
        e->done = true;
        if (x->o->strict && layout_differs(e))
            e->equal = false;
    }
    return values;
}

/* The values of a planned name of two checkpoints; the result of an earlier name when both sides hold
 * the same tensor for both. */
static int run_entry(ctx *x, tc_diff_entry *e, tc_diag *d)
{
    const tc_tensor *ta = tc_ckpt_tensor(x->rep->a.c, (size_t)e->ia), *tb = tc_ckpt_tensor(x->rep->b.c, (size_t)e->ib);
    const tc_diff_entry *was = ta->alias_of >= 0 && tb->alias_of >= 0 ? &x->rep->e[ta->alias_of] : NULL;
    if (was && was->ib == tb->alias_of && was->done && was->how == TC_DIFF_VALUES) {
        tc_cmp_res tmp;
        int rc = keep_res(e, tc_diff_res(was, &tmp), d);
        if (rc)
            return rc;
        e->how = was->how;
        e->equal = was->equal;
        e->bitwise = was->bitwise;
        e->cosine = was->cosine;
    } else {
        int rc = compare_values(x, e, ta, tb, d);
        if (rc)
            return rc;
    }
    e->done = true;
    if (x->o->strict && layout_differs(e))
        e->equal = false;
    return 0;
}

/* ---- two files ----------------------------------------------------------------------------- */

static bool differs(const tc_diff_entry *e) { return e->done && !e->equal; }

int tc_diff_files(tc_diff_report *rep, const char *pa, const char *pb, const tc_diff_opts *o, tc_diag *d)
{
    memset(rep, 0, sizeof *rep);
    const char **na = NULL, **nb = NULL;
    ctx x = {.o = o, .rep = rep, .cache = {TC_SRC_CACHE_INIT, TC_SRC_CACHE_INIT}};
    tc_nameidx bmap = {0};
    bool *matched = NULL, *todo = NULL;
    long *ib_of = NULL;
    int rc;
    if ((rc = open_side(&rep->a, pa, o, d)) || (rc = open_side(&rep->b, pb, o, d)) ||
        (rc = side_names(&rep->a, o, &na, d)) || (rc = side_names(&rep->b, o, &nb, d)))
        goto done;
    size_t nA = rep->a.ntensors, nB = rep->b.ntensors;
    rep->same_file = rep->a.c && rep->b.c && tc_same_file(pa, pb);
    matched = calloc(nB + 1, sizeof *matched);
    ib_of = malloc((nA + 1) * sizeof *ib_of);
    if (!matched || !ib_of) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (tc_nameidx_make(&bmap, nb, nB) < 0) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t nboth = 0;
    for (size_t i = 0; i < nA; i++) {
        size_t j;
        ib_of[i] = tc_nameidx_get(&bmap, na[i], &j) ? (long)j : -1;
        if (ib_of[i] >= 0 && !matched[j])
            matched[j] = true, nboth++;
    }
    size_t nent = nA + (nB - nboth);
    rep->e = calloc(nent + 1, sizeof *rep->e);
    todo = calloc(nent + 1, sizeof *todo);
    if (!rep->e || !todo) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < nA; i++) { /* A's names in A's order: entry i is A's tensor i */
        tc_diff_entry *e = &rep->e[rep->n++];
        e->name = na[i];
        e->ia = (long)i;
        e->ib = ib_of[i];
        if (e->ib >= 0 && (rep->a.m || rep->b.m) && !(e->sha = calloc(1, sizeof *e->sha))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    for (size_t j = 0; j < nB; j++)
        if (!matched[j]) {
            tc_diff_entry *e = &rep->e[rep->n++];
            e->name = nb[j];
            e->ia = -1;
            e->ib = (long)j;
        }
    bool stop = false;
    for (size_t i = 0; i < rep->n; i++) {
        todo[i] = plan_entry(&x, &rep->e[i]);
        stop |= o->quick && differs(&rep->e[i]);
    }
    if (!stop) {
        x.pool = tc_pool_new(o->threads);
        x.nt = tc_pool_size(x.pool);
    }
    int which;
    if (stop || !hashed_side(rep, &which)) {
        /* nothing to read */
    } else if (rep->a.m || rep->b.m) {
        rc = run_hashes(&x, todo, d);
    } else {
        for (size_t i = 0; i < rep->n && !stop && !rc; i++)
            if (todo[i]) {
                rc = run_entry(&x, &rep->e[i], d);
                stop = o->quick && differs(&rep->e[i]);
            }
    }
    if (rc)
        goto done;
    for (size_t i = 0; i < rep->n; i++) {
        const tc_diff_entry *e = &rep->e[i];
        if (e->ia < 0)
            rep->nonly_b++;
        else if (e->ib < 0)
            rep->nonly_a++;
        else if (!e->done)
            rep->partial = true;
        else if (e->equal)
            rep->nequal++, rep->nbitwise += e->bitwise;
        else
            rep->ndiffer++;
        rep->ncompared += e->ia >= 0 && e->ib >= 0 && e->done;
    }
    rep->equal = !rep->partial && !rep->ndiffer && !rep->nonly_a && !rep->nonly_b;
done:
    free(na);
    free(nb);
    tc_nameidx_free(&bmap);
    free(matched);
    free(ib_of);
    free(todo);
    free(x.vj);
    tc_pool_free(x.pool);
    for (unsigned t = 0; t < TC_POOL_MAX; t++)
        free(x.scratch[t]);
    free(x.slot[0]);
    free(x.slot[1]);
    tc_src_cache_free(&x.cache[0]);
    tc_src_cache_free(&x.cache[1]);
    return rc;
}

void tc_diff_report_free(tc_diff_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free(r->e[i].res);
        free(r->e[i].sha);
    }
    free(r->e);
    for (int s = 0; s < 2; s++) {
        tc_diff_side *sd = s ? &r->b : &r->a;
        tc_ckpt_close(sd->c);
        tc_manifest_free(sd->m);
        free(sd->prefix);
        for (size_t i = 0; sd->own && i < sd->ntensors; i++)
            free(sd->own[i]);
        free(sd->own);
    }
    memset(r, 0, sizeof *r);
}
