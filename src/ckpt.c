#include "ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "format.h"

/* ---- storages ---------------------------------------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int rehash(tc_ckpt *c, tc_diag *d)
{
    size_t cap = c->hcap ? c->hcap * 2 : 64;
    long *h = malloc(cap * sizeof *h);
    if (!h)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < cap; i++)
        h[i] = -1;
    for (size_t i = 0; i < c->ns; i++) {
        size_t j = hash_str(c->s[i].key) & (cap - 1);
        while (h[j] >= 0)
            j = (j + 1) & (cap - 1);
        h[j] = (long)i;
    }
    free(c->hash);
    c->hash = h;
    c->hcap = cap;
    return 0;
}

tc_storage *tc_ckpt_storage(tc_ckpt *c, const char *key)
{
    if (!c->hcap)
        return NULL;
    for (size_t j = hash_str(key) & (c->hcap - 1); c->hash[j] >= 0; j = (j + 1) & (c->hcap - 1))
        if (!strcmp(c->s[c->hash[j]].key, key))
            return &c->s[c->hash[j]];
    return NULL;
}

long tc_ckpt_new_storage(tc_ckpt *c, const char *key, tc_diag *d)
{
    if (c->ns == c->scap) {
        size_t cap = c->scap ? c->scap * 2 : 16;
        tc_storage *s = realloc(c->s, cap * sizeof *s);
        if (!s)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
        c->s = s;
        c->scap = cap;
    }
    if ((c->ns + 1) * 2 > c->hcap && rehash(c, d))
        return -1;
    tc_storage *s = &c->s[c->ns];
    memset(s, 0, sizeof *s);
    if (!(s->key = strdup(key)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    size_t j = hash_str(key) & (c->hcap - 1);
    while (c->hash[j] >= 0)
        j = (j + 1) & (c->hcap - 1);
    c->hash[j] = (long)c->ns;
    return (long)c->ns++;
}

int tc_storage_add_pid(tc_storage *s, pk_obj *pid, tc_diag *d)
{
    for (size_t i = 0; i < s->npids; i++)
        if (s->pids[i] == pid)
            return 0;
    if (s->npids == s->pcap) {
        size_t cap = s->pcap ? s->pcap * 2 : 4;
        pk_obj **p = realloc(s->pids, cap * sizeof *p);
        if (!p)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        s->pids = p;
        s->pcap = cap;
    }
    s->pids[s->npids++] = pid;
    return 0;
}

int tc_ckpt_on_persid(void *ctx, pk_obj *persid, tc_diag *d)
{
    tc_ckpt *c = ctx;
    pk_obj *t = persid->args;
    if (t->kind == PK_TUPLE && t->n >= 1 && pk_is_str(t->items[0], "module"))
        return 0; /* legacy whole-module source record: inert */
    if (t->kind != PK_TUPLE || (t->n != 5 && t->n != 6) || !pk_is_str(t->items[0], "storage"))
        return tc_fail(d, TC_ERR_FORMAT,
                       "a persistent id is not a ('storage', type, key, location, numel) tuple");
    pk_obj *type = t->items[1], *key = t->items[2], *loc = t->items[3], *numel = t->items[4];
    if (type->kind != PK_GLOBAL || key->kind != PK_STR || loc->kind != PK_STR || numel->kind != PK_INT ||
        numel->i < 0)
        return tc_fail(d, TC_ERR_FORMAT, "persistent id for storage '%s' has the wrong field types",
                       key->kind == PK_STR ? key->s : "?");
    if (t->n == 6 && t->items[5]->kind != PK_NONE)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' is a legacy storage view (view_metadata)", key->s);
    if (key->len == 0 || strlen(key->s) != key->len || strchr(key->s, '/') || !strcmp(key->s, "..") ||
        key->len > 200)
        return tc_fail(d, TC_ERR_FORMAT, "storage key '%.40s' is not a valid record name", key->s);
    tc_dtype dt;
    bool untyped = false;
    if (!strcmp(type->name, "UntypedStorage")) {
        dt = TC_DT_U8;
        untyped = true;
    } else {
        dt = tc_dtype_from_storage(type->name);
    }
    if (dt == TC_DT_INVALID)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' has unknown type %s.%s", key->s, type->s,
                       type->name);
    tc_storage *s = tc_ckpt_storage(c, key->s);
    if (!s) {
        long i = tc_ckpt_new_storage(c, key->s, d);
        if (i < 0)
            return d->code;
        s = &c->s[i];
        if (!(s->location = strdup(loc->s)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        s->dtype = dt;
        s->untyped = untyped;
        s->numel = (uint64_t)numel->i;
        if (__builtin_mul_overflow(s->numel, tc_dtype_size(dt), &s->nbytes))
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s': %" PRIu64 " elements overflow a byte count",
                           key->s, s->numel);
    } else if (s->dtype != dt || (uint64_t)numel->i != s->numel) {
        /* torch keeps the first; a file with two views must agree or it is corrupt */
        return tc_fail(d, TC_ERR_FORMAT,
                       "storage '%s' is named with two different types or sizes (%s x %" PRIu64
                       ", then %s x %" PRId64 ")",
                       key->s, tc_dtype_name(s->dtype), s->numel, tc_dtype_name(dt), numel->i);
    }
    return tc_storage_add_pid(s, t, d);
}

/* ---- facts, tensors, globals -------------------------------------------- */

int tc_ckpt_add_fact(tc_ckpt *c, const char *key, const char *value, tc_diag *d)
{
    tc_kv *f = realloc(c->facts, (c->nfacts + 1) * sizeof *f);
    if (!f)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    c->facts = f;
    f[c->nfacts].key = strdup(key);
    f[c->nfacts].value = strdup(value);
    if (!f[c->nfacts].key || !f[c->nfacts].value) {
        free(f[c->nfacts].key);
        free(f[c->nfacts].value);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    c->nfacts++;
    return 0;
}

tc_tensor *tc_ckpt_new_tensor(tc_ckpt *c, const char *name, tc_diag *d)
{
    if (c->nt == c->tcap) {
        size_t cap = c->tcap ? c->tcap * 2 : 32;
        tc_tensor *t = realloc(c->t, cap * sizeof *t);
        if (!t)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory"), NULL;
        c->t = t;
        c->tcap = cap;
    }
    tc_tensor *t = &c->t[c->nt];
    memset(t, 0, sizeof *t);
    t->storage = -1;
    t->alias_of = -1;
    if (!(t->name = strdup(name)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), NULL;
    c->nt++;
    return t;
}

typedef struct walker {
    tc_ckpt *c;
    tc_diag *d;
    char *path;
    size_t len, cap;
    uint64_t visits, max_visits;
    uint64_t aliases, max_aliases; /* tensor entries for an already seen rebuild call */
    const char *stack_top;         /* the walk recurses: bound its stack use */
    size_t max_stack;
} walker;

static int path_push(walker *w, const char *comp, size_t *saved)
{
    size_t cl = strlen(comp);
    *saved = w->len;
    if (w->len + cl + 2 > w->cap) {
        size_t cap = (w->len + cl + 2) * 2;
        if (cap > (1u << 20))
            return tc_fail(w->d, TC_ERR_LIMIT, "a tensor name is longer than 1 MiB");
        char *p = realloc(w->path, cap);
        if (!p)
            return tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
        w->path = p;
        w->cap = cap;
    }
    if (w->len)
        w->path[w->len++] = '.';
    memcpy(w->path + w->len, comp, cl + 1);
    w->len += cl;
    return 0;
}

static void path_pop(walker *w, size_t saved)
{
    w->len = saved;
    if (w->path)
        w->path[saved] = 0;
}

static const char *key_text(const pk_obj *k, char *buf, size_t n)
{
    switch (k->kind) {
    case PK_STR:
    case PK_BYTES: snprintf(buf, n, "%.*s", (int)(k->len < n ? k->len : n - 1), k->s); break;
    case PK_INT: snprintf(buf, n, "%" PRId64, k->i); break;
    case PK_BOOL: snprintf(buf, n, "%s", k->i ? "True" : "False"); break;
    case PK_NONE: snprintf(buf, n, "None"); break;
    case PK_FLOAT: snprintf(buf, n, "%g", k->f); break;
    default: snprintf(buf, n, "?"); break;
    }
    return buf;
}

static bool dict_items(const pk_obj *o, pk_obj ***items, size_t *n)
{
    if (o && (o->kind == PK_DICT || (o->kind == PK_CALL && o->items_kind == PK_ITEMS_DICT))) {
        *items = o->items;
        *n = o->n;
        return true;
    }
    return false;
}

static const pk_obj *dict_get(const pk_obj *o, const char *key)
{
    pk_obj **it;
    size_t n;
    if (!dict_items(o, &it, &n))
        return NULL;
    for (size_t i = 0; i + 1 < n; i += 2)
        if (pk_is_str(it[i], key))
            return it[i + 1];
    return NULL;
}

static bool is_rebuild(const pk_obj *g, const char *name)
{
    return pk_is_global(g, "torch._utils", name);
}

static int int_tuple(walker *w, const pk_obj *o, int64_t *out, int *nd, const char *what)
{
    if (o && o->kind == PK_CALL && pk_is_global(o->func, "torch", "Size") && o->args && o->args->n == 1)
        o = o->args->items[0];
    if (!o || (o->kind != PK_TUPLE && o->kind != PK_LIST))
        return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': %s is not a tuple", w->path, what);
    if (o->n > TC_MAX_DIMS)
        return tc_fail(w->d, TC_ERR_UNSUPPORTED, "tensor '%s': %zu dimensions (at most %d)", w->path, o->n,
                       TC_MAX_DIMS);
    for (size_t i = 0; i < o->n; i++) {
        if (o->items[i]->kind != PK_INT || o->items[i]->i < 0)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': %s[%zu] is not a non-negative integer",
                           w->path, what, i);
        out[i] = o->items[i]->i;
    }
    *nd = (int)o->n;
    return 0;
}

static tc_dtype dtype_global(const pk_obj *g)
{
    if (!g || g->kind != PK_GLOBAL || strcmp(g->s, "torch"))
        return TC_DT_INVALID;
    return tc_dtype_from_name(g->name);
}

/* A tensor from a rebuild call; param is the wrapping Parameter call or NULL. */
static int add_tensor(walker *w, pk_obj *call, pk_obj *param, const pk_obj *func, const pk_obj *args,
                      bool requires_grad_given, bool rg)
{
    tc_ckpt *c = w->c;
    tc_tensor *t = tc_ckpt_new_tensor(c, w->path, w->d);
    if (!t)
        return w->d->code;
    pk_obj *node = param ? param : call; /* memo holds the first tensor built by it, + 1 */
    if (node->memo) {
        t->alias_of = (long)node->memo - 1;
        if (++w->aliases > w->max_aliases)
            return tc_fail(w->d, TC_ERR_LIMIT,
                           "more than %" PRIu64 " names lead to tensors already named (objects shared very "
                           "many times; raise with --max-objects)",
                           w->max_aliases);
    } else
        node->memo = (uint32_t)c->nt;
    t->node = call;
    t->param = param;
    t->parameter = param != NULL;
    pk_obj *const *a = args->items;
    size_t na = args->n;
    int nd2 = 0;
    if (is_rebuild(func, "_rebuild_meta_tensor_no_storage")) {
        if (na < 3)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': meta tensor with %zu arguments", w->path, na);
        t->kind = TC_TENSOR_META;
        t->dtype = dtype_global(a[0]);
        snprintf(t->device, sizeof t->device, "meta");
        if (int_tuple(w, a[1], t->shape, &t->ndim, "size") || int_tuple(w, a[2], t->stride, &nd2, "stride"))
            return w->d->code;
        t->requires_grad = na > 3 && a[3]->kind == PK_BOOL && a[3]->i;
    } else if (is_rebuild(func, "_rebuild_wrapper_subclass")) {
        t->kind = TC_TENSOR_OTHER;
        t->dtype = na > 1 ? dtype_global(a[1]) : TC_DT_INVALID;
        snprintf(t->device, sizeof t->device, "?");
        if (na > 3 && (int_tuple(w, a[2], t->shape, &t->ndim, "size") ||
                       int_tuple(w, a[3], t->stride, &nd2, "stride")))
            return w->d->code;
    } else {
        bool v3 = is_rebuild(func, "_rebuild_tensor_v3");
        bool q = is_rebuild(func, "_rebuild_qtensor");
        size_t need = v3 ? 7 : 4;
        if (na < need)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': %s.%s with %zu arguments (needs %zu)", w->path,
                           func->s, func->name, na, need);
        t->kind = q ? TC_TENSOR_QUANT : TC_TENSOR_DENSE;
        const pk_obj *st = a[0];
        if (st->kind != PK_PERSID || st->args->kind != PK_TUPLE || st->args->n < 3 ||
            st->args->items[2]->kind != PK_STR)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': its storage is not a persistent id", w->path);
        tc_storage *s = tc_ckpt_storage(c, st->args->items[2]->s);
        if (!s)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': unknown storage", w->path);
        t->storage = s - c->s;
        s->ntensors++;
        if (a[1]->kind != PK_INT || a[1]->i < 0)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': storage offset is not a non-negative integer",
                           w->path);
        t->offset = a[1]->i;
        if (int_tuple(w, a[2], t->shape, &t->ndim, "size") || int_tuple(w, a[3], t->stride, &nd2, "stride"))
            return w->d->code;
        t->dtype = v3 ? dtype_global(a[6]) : s->dtype;
        if (t->dtype == TC_DT_INVALID)
            return tc_fail(w->d, TC_ERR_UNSUPPORTED, "tensor '%s': unknown dtype", w->path);
        if (!v3 && s->untyped)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': untyped storage without a dtype", w->path);
        size_t rgi = q ? 5 : 4;
        t->requires_grad = na > rgi && a[rgi]->kind == PK_BOOL && a[rgi]->i;
    }
    if (nd2 != t->ndim)
        return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': size has %d dimensions, stride %d", w->path,
                       t->ndim, nd2);
    if (requires_grad_given)
        t->requires_grad = rg;
    /* element count and extent, overflow-checked */
    uint64_t numel = 1, extent = 0;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t span;
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[i], &numel))
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': dimensions overflow 64 bits", w->path);
        if (t->shape[i] &&
            (__builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &span) ||
             __builtin_add_overflow(extent, span, &extent)))
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': strides overflow 64 bits", w->path);
    }
    t->numel = numel;
    if (__builtin_mul_overflow(numel, tc_dtype_size(t->dtype), &t->nbytes))
        return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': byte size overflows 64 bits", w->path);
    if (t->storage >= 0 && numel) {
        const tc_storage *s = &c->s[t->storage];
        uint64_t cap = s->nbytes / tc_dtype_size(t->dtype), last;
        if (__builtin_add_overflow((uint64_t)t->offset, extent, &last) || last >= cap)
            return tc_fail(w->d, TC_ERR_FORMAT,
                           "tensor '%s': reaches element %" PRIu64 " of storage '%s', which holds %" PRIu64
                           " (offset or strides past the storage)",
                           w->path, last, s->key, cap);
    }
    return 0;
}

static int walk(walker *w, pk_obj *o);

static int walk_dict(walker *w, pk_obj **it, size_t n)
{
    char kb[256];
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t sv;
        if (path_push(w, key_text(it[i], kb, sizeof kb), &sv))
            return w->d->code;
        int rc = walk(w, it[i + 1]);
        path_pop(w, sv);
        if (rc)
            return rc;
    }
    return 0;
}

static int walk_seq(walker *w, pk_obj **it, size_t n)
{
    char kb[32];
    for (size_t i = 0; i < n; i++) {
        size_t sv;
        snprintf(kb, sizeof kb, "%zu", i);
        if (path_push(w, kb, &sv))
            return w->d->code;
        int rc = walk(w, it[i]);
        path_pop(w, sv);
        if (rc)
            return rc;
    }
    return 0;
}

static int walk_named(walker *w, const char *comp, pk_obj *o)
{
    size_t sv;
    if (path_push(w, comp, &sv))
        return w->d->code;
    int rc = walk(w, o);
    path_pop(w, sv);
    return rc;
}

/* Sparse tensors: their component tensors, named as torch's accessors. */
static int walk_sparse(walker *w, const pk_obj *layout, pk_obj *parts)
{
    static const char *const coo[] = {"indices", "values"};
    static const char *const comp[] = {"crow_indices", "col_indices", "values"};
    static const char *const ccol[] = {"ccol_indices", "row_indices", "values"};
    const char *lay = "";
    if (layout && layout->kind == PK_CALL && layout->args && layout->args->n == 1 &&
        layout->args->items[0]->kind == PK_STR)
        lay = layout->args->items[0]->s;
    else if (layout && layout->kind == PK_GLOBAL)
        lay = layout->name;
    const char *const *names = strstr(lay, "coo") ? coo : strstr(lay, "csc") || strstr(lay, "bsc") ? ccol : comp;
    size_t nn = names == coo ? 2 : 3;
    int rc = 0;
    for (size_t i = 0; i < parts->n && !rc; i++) {
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        rc = walk_named(w, i < nn ? names[i] : idx, parts->items[i]);
    }
    return rc;
}

/* nn.Module pickled whole: names as state_dict() gives them. */
static int walk_module(walker *w, const pk_obj *state)
{
    static const char *const groups[] = {"_parameters", "_buffers"};
    const pk_obj *skip = dict_get(state, "_non_persistent_buffers_set");
    for (int gi = 0; gi < 2; gi++) {
        pk_obj **it;
        size_t n;
        if (!dict_items(dict_get(state, groups[gi]), &it, &n))
            continue;
        for (size_t i = 0; i + 1 < n; i += 2) {
            if (it[i + 1]->kind == PK_NONE || it[i]->kind != PK_STR)
                continue;
            bool np = false;
            if (gi == 1 && skip && skip->kind == PK_CALL && skip->args && skip->args->n == 1) {
                const pk_obj *l = skip->args->items[0];
                for (size_t j = 0; l->kind == PK_LIST && j < l->n; j++)
                    np |= pk_is_str(l->items[j], it[i]->s);
            }
            if (np)
                continue;
            size_t sv;
            if (path_push(w, it[i]->s, &sv))
                return w->d->code;
            int rc = walk(w, it[i + 1]);
            path_pop(w, sv);
            if (rc)
                return rc;
        }
    }
    pk_obj **it;
    size_t n;
    if (dict_items(dict_get(state, "_modules"), &it, &n)) {
        for (size_t i = 0; i + 1 < n; i += 2) {
            const pk_obj *m = it[i + 1];
            if (m->kind != PK_CALL || it[i]->kind != PK_STR || !m->state)
                continue;
            size_t sv;
            if (path_push(w, it[i]->s, &sv))
                return w->d->code;
            int rc = m->mark ? 0 : walk(w, it[i + 1]);
            path_pop(w, sv);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int walk_call(walker *w, pk_obj *o)
{
    const pk_obj *f = pk_call_global(o);
    pk_obj *args = o->args;
    if (f && args && args->kind == PK_TUPLE && !strcmp(f->s, "torch._utils")) {
        if (!strcmp(f->name, "_rebuild_parameter") || !strcmp(f->name, "_rebuild_parameter_with_state")) {
            if (args->n < 2)
                return tc_fail(w->d, TC_ERR_FORMAT, "parameter '%s' has %zu arguments", w->path, args->n);
            pk_obj *inner = args->items[0];
            const pk_obj *fi = pk_call_global(inner);
            if (!fi || !inner->args || inner->args->kind != PK_TUPLE)
                return walk(w, inner);
            return add_tensor(w, inner, o, fi, inner->args, args->items[1]->kind == PK_BOOL,
                              args->items[1]->kind == PK_BOOL && args->items[1]->i);
        }
        if (!strcmp(f->name, "_rebuild_tensor_v2") || !strcmp(f->name, "_rebuild_tensor_v3") ||
            !strcmp(f->name, "_rebuild_tensor") ||
            !strcmp(f->name, "_rebuild_meta_tensor_no_storage") || !strcmp(f->name, "_rebuild_wrapper_subclass"))
            return add_tensor(w, o, NULL, f, args, false, false);
        if (!strcmp(f->name, "_rebuild_device_tensor_from_cpu_tensor") && args->n >= 1)
            return walk(w, args->items[0]);
        if ((!strcmp(f->name, "_rebuild_sparse_tensor") || !strcmp(f->name, "_rebuild_sparse_csr_tensor")) &&
            args->n == 2 && args->items[1]->kind == PK_TUPLE)
            return walk_sparse(w, args->items[0], args->items[1]);
        if (!strcmp(f->name, "_rebuild_nested_tensor"))
            return walk_seq(w, args->items, args->n);
        if (!strcmp(f->name, "_rebuild_qtensor")) {
            int rc = add_tensor(w, o, NULL, f, args, false, false);
            if (!rc && args->n > 4 && args->items[4]->kind == PK_TUPLE && args->items[4]->n >= 3) {
                static const char *const qp[] = {"q_per_channel_scales", "q_per_channel_zero_points"};
                size_t first = w->c->nt;
                for (size_t i = 0; i < 2 && !rc; i++)
                    rc = walk_named(w, qp[i], args->items[4]->items[1 + i]);
                for (size_t k = first; k < w->c->nt; k++)
                    w->c->t[k].aux = true;
            }
            return rc;
        }
    }
    if (f && args && args->kind == PK_TUPLE && pk_is_global(f, "torch._tensor", "_rebuild_from_type_v2") &&
        args->n >= 3 && args->items[2]->kind == PK_TUPLE) {
        const pk_obj *fi = args->items[0];
        if (fi->kind == PK_GLOBAL && !strcmp(fi->s, "torch._utils"))
            return add_tensor(w, o, NULL, fi, args->items[2], false, false);
    }
    int rc = 0;
    if (o->items_kind == PK_ITEMS_DICT)
        rc = walk_dict(w, o->items, o->n);
    else if (o->items_kind == PK_ITEMS_LIST)
        rc = walk_seq(w, o->items, o->n);
    if (rc || !o->state)
        return rc;
    if (dict_get(o->state, "_parameters") || dict_get(o->state, "_modules"))
        return walk_module(w, o->state);
    pk_obj **it;
    size_t n;
    if (dict_items(o->state, &it, &n))
        return walk_dict(w, it, n);
    if (o->state->kind == PK_TUPLE) /* (dict state, slot state) */
        for (size_t i = 0; i < o->state->n && !rc; i++)
            if (dict_items(o->state->items[i], &it, &n))
                rc = walk_dict(w, it, n);
    return rc;
}

static int walk(walker *w, pk_obj *o)
{
    if (++w->visits > w->max_visits)
        return tc_fail(w->d, TC_ERR_LIMIT,
                       "the object graph has more than %" PRIu64
                       " paths (objects shared very many times; raise with --max-objects)",
                       w->max_visits);
    char here;
    uintptr_t a = (uintptr_t)w->stack_top, b = (uintptr_t)&here;
    if ((a > b ? a - b : b - a) > w->max_stack)
        return tc_fail(w->d, TC_ERR_LIMIT, "objects nested too deeply to walk with this stack (ulimit -s), at "
                       "'%.60s...'", w->path);
    if (o->mark)
        return 0; /* a cycle */
    int rc = 0;
    o->mark = 1;
    switch (o->kind) {
    case PK_DICT: rc = walk_dict(w, o->items, o->n); break;
    case PK_LIST:
    case PK_TUPLE: rc = walk_seq(w, o->items, o->n); break;
    case PK_CALL: rc = walk_call(w, o); break;
    default: break;
    }
    o->mark = 0;
    return rc;
}

/* ---- safety -------------------------------------------------------------- */

static const char *const allowed_exact[] = {
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.Size", "torch.Tensor", "torch.device", "_codecs.encode",
    "builtins.bytearray", "builtins.set", "builtins.complex", "torch._tensor._rebuild_from_type_v2",
    "torch.storage.UntypedStorage", "torch.storage.TypedStorage", "torch.per_tensor_affine",
    "torch.per_tensor_symmetric", "torch.per_channel_affine", "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams", "torch.sparse_coo", "torch.sparse_csr", "torch.strided",
    NULL};

static const char *const rebuild_fns[] = {
    "_rebuild_parameter", "_rebuild_parameter_with_state", "_rebuild_qtensor", "_rebuild_tensor",
    "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_sparse_tensor", "_rebuild_meta_tensor_no_storage",
    "_rebuild_nested_tensor", "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy",
    "_rebuild_device_tensor_from_cpu_tensor", NULL}; /* torch 2.x: not _rebuild_sparse_csr_tensor */

/* Modules whose every attribute can reach the system, and single names that can. */
static const char *const danger_modules[] = {
    "os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "pty", "runpy", "importlib", "pickle",
    "_pickle", "cPickle", "dill", "webbrowser", "code", "codeop", "commands", "ctypes", "marshal",
    "multiprocessing", "asyncio", "http", "urllib", "urllib2", "requests", "httplib", "ftplib",
    "smtplib", "telnetlib", "signal", "platform", "pip", "setuptools", "distutils", "pdb", "bdb",
    "timeit", "trace", "profile", "cProfile", "_posixsubprocess", "posixpath", "ntpath", "glob",
    "tempfile", "zipimport", "imp", "builtins.__import__", "torch.hub", "torch.jit", "torch._C",
    "torch.utils.cpp_extension", "numpy.testing", "_io", "io", NULL};
static const char *const danger_names[] = {
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.open", "builtins.__import__",
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.globals", "builtins.locals",
    "builtins.vars", "builtins.breakpoint", "builtins.input", "builtins.apply", "builtins.execfile",
    "builtins.file", "builtins.reload", "builtins.exit", "builtins.quit", "types.FunctionType",
    "types.CodeType", "types.MethodType", "types.LambdaType", "operator.attrgetter",
    "operator.methodcaller", "operator.itemgetter", "functools.partial", "functools.reduce",
    "copyreg._reconstructor", "torch.load", "torch.save", "numpy.load", "numpy.fromfile",
    "torch.serialization.load", NULL};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return true;
    return false;
}

void tc_global_verdict(const char *name, bool *allowed, bool *dangerous)
{
    *dangerous = in_list(danger_names, name);
    for (const char *const *m = danger_modules; *m && !*dangerous; m++) {
        size_t l = strlen(*m);
        *dangerous = !strncmp(name, *m, l) && name[l] == '.';
    }
    *allowed = false;
    if (*dangerous)
        return;
    if (in_list(allowed_exact, name)) {
        *allowed = true;
    } else if (!strncmp(name, "torch._utils.", 13)) {
        *allowed = in_list(rebuild_fns, name + 13);
    } else if (!strncmp(name, "torch.", 6) && !strchr(name + 6, '.')) {
        const char *n = name + 6;
        size_t l = strlen(n);
        *allowed = tc_dtype_from_name(n) != TC_DT_INVALID || (l > 7 && !strcmp(n + l - 7, "Storage")) ||
                   (l > 6 && !strcmp(n + l - 6, "Tensor")) ||
                   ((!strncmp(n, "uint", 4) || !strncmp(n, "int", 3)) && l <= 5);
    } else if (!strncmp(name, "torch.cuda.", 11) || !strncmp(name, "torch.sparse.", 13)) {
        const char *n = strrchr(name, '.') + 1;
        size_t l = strlen(n);
        *allowed = !strchr(name + (name[6] == 'c' ? 11 : 13), '.') && l > 6 && !strcmp(n + l - 6, "Tensor");
    }
}

typedef struct gctx {
    tc_ckpt *c;
    tc_diag *d;
    int rc;
} gctx;

static void collect_global(void *ctx, pk_obj *o)
{
    gctx *g = ctx;
    if (o->kind != PK_GLOBAL || g->rc)
        return;
    char name[1100];
    snprintf(name, sizeof name, "%s.%s", pk_module_py3(o->s), o->name);
    tc_ckpt *c = g->c;
    for (size_t i = 0; i < c->ngl; i++)
        if (!strcmp(c->gl[i].name, name)) {
            c->gl[i].count++;
            return;
        }
    tc_global *gl = realloc(c->gl, (c->ngl + 1) * sizeof *gl);
    if (!gl || !(gl[c->ngl].name = strdup(name))) {
        if (gl)
            c->gl = gl;
        g->rc = tc_fail(g->d, TC_ERR_NOMEM, "out of memory");
        return;
    }
    c->gl = gl;
    tc_global_verdict(name, &gl[c->ngl].allowed, &gl[c->ngl].dangerous);
    gl[c->ngl].count = 1;
    c->ngl++;
}

static int cmp_global(const void *a, const void *b)
{
    return strcmp(((const tc_global *)a)->name, ((const tc_global *)b)->name);
}

int tc_ckpt_index_graph(tc_ckpt *c, tc_diag *d)
{
    gctx g = {c, d, 0};
    pk_graph_foreach(c->g, collect_global, &g);
    if (g.rc)
        return g.rc;
    if (c->ngl) /* qsort's base must not be NULL, even for 0 items */
        qsort(c->gl, c->ngl, sizeof *c->gl, cmp_global);
    pk_graph_clear_marks(c->g);
    char top;
    struct rlimit rl;
    size_t stack = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 64u << 20;
    walker w = {.c = c, .d = d, .max_visits = c->lim.max_objects * 4 + 1000,
                .max_aliases = c->lim.max_objects / 256 + 1000, .stack_top = &top, .max_stack = stack / 2};
    size_t sv;
    int rc = path_push(&w, "", &sv);
    w.len = 0;
    if (!rc)
        rc = walk(&w, c->root);
    free(w.path);
    return rc;
}

bool tc_ckpt_has_dangerous(const tc_ckpt *c)
{
    for (size_t i = 0; i < c->ngl; i++)
        if (c->gl[i].dangerous)
            return true;
    return false;
}

/* ---- open/close ---------------------------------------------------------- */

int tc_ckpt_open(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    c->path = path;
    c->lim = *lim;
    int rc = tc_src_open_file(&c->src, path, d);
    if (rc) {
        free(c);
        return rc;
    }
    uint8_t head[64] = {0};
    size_t hn = c->src.size < sizeof head ? (size_t)c->src.size : sizeof head;
    if ((rc = tc_src_read(&c->src, 0, head, hn, "header", d)))
        goto fail;
    for (const tc_format *const *f = tc_formats; *f; f++)
        if ((*f)->probe(head, hn, path)) {
            c->fmt = *f;
            break;
        }
    if (!c->fmt) {
        rc = tc_fail(d, TC_ERR_FORMAT,
                     "not a checkpoint: no known format starts with bytes %02x %02x %02x %02x (expected a "
                     "torch zip, legacy torch or safetensors file)",
                     head[0], head[1], head[2], head[3]);
        goto fail;
    }
    if (!(c->g = pk_graph_new())) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = c->fmt->open(c, d)))
        goto fail;
    *out = c;
    return 0;
fail:
    tc_ckpt_close(c);
    return rc;
}

void tc_ckpt_close(tc_ckpt *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nt; i++)
        free(c->t[i].name);
    free(c->t);
    for (size_t i = 0; i < c->ns; i++) {
        free(c->s[i].key);
        free(c->s[i].location);
        free(c->s[i].pids);
    }
    free(c->s);
    for (size_t i = 0; i < c->ngl; i++)
        free(c->gl[i].name);
    free(c->gl);
    for (size_t i = 0; i < c->nfacts; i++) {
        free(c->facts[i].key);
        free(c->facts[i].value);
    }
    free(c->facts);
    for (size_t i = 0; i < c->nmeta; i++) {
        free(c->meta[i].key);
        free(c->meta[i].value);
    }
    free(c->meta);
    free(c->hash);
    free(c->archive);
    tc_zip_free(&c->zip);
    pk_graph_free(c->g);
    tc_src_close(&c->src);
    free(c);
}

const char *tc_ckpt_format(const tc_ckpt *c) { return c->fmt ? c->fmt->name : "unknown"; }

/* ---- storage bytes ---------------------------------------------------------- */

int tc_srd_open(tc_srd *r, const tc_ckpt *c, const tc_storage *s, tc_diag *d)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->s = s;
    if (!s->raw) {
        if (!s->rec)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s' has no data record", s->key);
        r->zip = true;
        return tc_zip_rd_open(&r->zr, &c->zip, s->rec, d);
    }
    return 0;
}

int tc_srd_read(tc_srd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    uint64_t left = r->s->nbytes - r->done;
    if (n > left)
        n = (size_t)left;
    *got = 0;
    if (!n)
        return 0;
    int rc;
    if (r->zip) {
        size_t total = 0, g = 0;
        while (total < n) {
            if ((rc = tc_zip_rd_read(&r->zr, (uint8_t *)buf + total, n - total, &g, false, d)))
                return rc;
            if (!g)
                return tc_fail(d, TC_ERR_FORMAT, "record for storage '%s' is shorter than its %" PRIu64 " bytes",
                               r->s->key, r->s->nbytes);
            total += g;
        }
    } else if ((rc = tc_src_read(&r->c->src, r->s->file_off + r->done, buf, n, r->s->key, d))) {
        return rc;
    }
    r->done += n;
    *got = n;
    return 0;
}

void tc_srd_close(tc_srd *r)
{
    if (r && r->zip)
        tc_zip_rd_close(&r->zr);
}
