/* The pickles tensorctl writes for torch: a checkpoint's own graph rewritten
 * (storages re-keyed, re-tagged, cast), or a new state_dict. */
#include "torch_pickle.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* ---- rewriting a checkpoint whole ------------------------------------------------ */

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

static int retype_tensor(edit *e, const tc_tensor *t, pk_obj *call, tc_dtype to)
{
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

/* Key surgery: the items of each keyed container the edits name get their
 * new keys, or go (edits sorted by container). */
static int apply_edits(tc_torch_graph *tg, const tc_keyedit *ed, size_t ned, bool *dropped, tc_diag *d)
{
    *dropped = false;
    for (size_t i = 0; i < ned;) {
        size_t k = ed[i].keyed, j = i;
        pk_obj *node = k < tg->nkeyed ? tg->keyed[k] : NULL;
        if (!node || (node->kind != PK_DICT && !(node->kind == PK_CALL && node->items_kind == PK_ITEMS_DICT)))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "key surgery names a container that is not a dict");
        bool gone = false;
        for (; j < ned && ed[j].keyed == k; j++) {
            size_t at = 2 * ed[j].item;
            if (at + 1 >= node->n || !node->items[at])
                return tc_fail(d, TC_ERR_UNSUPPORTED, "key surgery names item %zu of a dict of %zu", ed[j].item,
                               node->n / 2);
            if (!ed[j].key) {
                node->items[at] = NULL;
                gone = true;
            } else if (!(node->items[at] = pk_new_str(tg->g, ed[j].key, strlen(ed[j].key)))) {
                return tc_fail(d, TC_ERR_NOMEM, "out of memory");
            }
        }
        if (gone) {
            size_t m = 0;
            for (size_t a = 0; a + 1 < node->n; a += 2)
                if (node->items[a]) {
                    node->items[m++] = node->items[a];
                    node->items[m++] = node->items[a + 1];
                }
            node->n = m;
            *dropped = true;
        }
        i = j;
    }
    return 0;
}

/* The storage key node a persistent id holds, where its text is already the one the output gives
 * it (storages kept in order, none dropped: nearly always), else NULL: a new string node for each
 * storage was a node per tensor more (45 MB at 400,000 tensors). It is never changed, only
 * pointed to again. */
static pk_obj *same_key(pk_obj *old, const char *key)
{
    size_t n = strlen(key);
    return old && old->kind == PK_STR && !old->flags && old->len == n && !memcmp(old->s, key, n) ? old : NULL;
}

int tc_torch_rewrite(tc_torch_graph *tg, const tc_rewrite_job *job, bool *keep, uint8_t **pkl, size_t *len,
                     tc_diag *d)
{
    const tc_ckpt *c = tg->c;
    const tc_out_storage *out = job->storages;
    edit e = {.g = tg->g, .d = d};
    bool dropped = false;
    size_t ns = tc_ckpt_nstorages(c), rank = 0;
    int rc = apply_edits(tg, job->edits, job->nedits, &dropped, d);
    if (rc)
        return rc;
    for (size_t i = 0; i < ns; i++) /* (what nothing reached when the file was read stays out) */
        keep[i] = !dropped && !tc_ckpt_storage(c, i)->unreached;
    if (dropped && (rc = tc_torch_reach(tg, keep, d)))
        return rc;
    for (size_t i = 0; i < ns; i++) {
        if (!keep[i])
            continue;
        const tc_storage *s = tc_ckpt_storage(c, i);
        const tc_out_storage *ps = &out[i];
        char key[32];
        snprintf(key, sizeof key, "%zu", rank++);
        const tc_pids *pids = i < tg->npids ? &tg->pids[i] : NULL;
        pk_obj *k = pids && pids->n ? same_key(tc_pids_at(pids, 0)->items[2], key) : NULL;
        if (!k)
            k = pk_new_str(tg->g, key, strlen(key));
        pk_obj *loc = intern(&e, PK_STR, ps->location, NULL);
        bool untyped = ps->cast ? tc_dtype_is_v3(ps->dtype) : s->untyped;
        pk_obj *type = untyped ? intern(&e, PK_GLOBAL, "torch.storage", "UntypedStorage")
                               : intern(&e, PK_GLOBAL, "torch", tc_dtype_get(ps->dtype)->storage);
        /* only a cast changes the element count (a node per storage otherwise spent) */
        pk_obj *numel = !ps->cast ? NULL
                                  : pk_new_int(tg->g, (int64_t)(untyped ? ps->nbytes : ps->nbytes / tc_dtype_size(ps->dtype)));
        if (!k || !loc || !type || (ps->cast && !numel))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        for (size_t j = 0; pids && j < pids->n; j++) {
            pk_obj *t = tc_pids_at(pids, j);
            t->n = 5; /* a legacy view_metadata slot goes */
            t->items[2] = k;
            t->items[3] = loc;
            if (ps->cast) {
                t->items[1] = type;
                t->items[4] = numel;
            }
        }
    }
    for (size_t k = 0; k < tc_ckpt_ntensors(c); k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage < 0 || !out[t->storage].cast || t->alias_of >= 0 || !keep[t->storage])
            continue;
        int rc2 = retype_tensor(&e, t, tg->tnode[k], out[t->storage].dtype);
        if (rc2)
            return rc2;
    }
    return pk_write(tg->g, tg->root, job->max_depth, pkl, len, d);
}

/* ---- a new state_dict ---------------------------------------------------------------- */

/* The state_dict is written tensor by tensor (pk_stream): the nodes of one
 * item live in a scratch graph, reset once the item is written, so that the
 * memory is the pickle's bytes and a few nodes, not 15 nodes per tensor
 * (926 MB for 400,000 tensors). What later items refer to lives in the
 * graph that lasts (`keep`): the globals and strings every item shares, the
 * key and element count of a block more than one item views, and an item
 * that a later one is (tied weights, fetched from the memo).
 *
 * Values the pickle writer never memoizes (ints, bools, the empty tuple) are
 * written the same whether their nodes are shared or not: the small ones are
 * made once. */
#define SMALL_INTS 1024

typedef struct gb {
    pk_graph *keep;        /* nodes that outlive the item being written */
    pk_graph *g;           /* where the item's own nodes go: keep, or the scratch graph */
    pk_obj *s_storage, *od, *v2, *v3, *untyped, *param;
    edit names;            /* location strings and storage types, made once (in keep) */
    pk_obj *small[SMALL_INTS], *yes, *no, *empty;
    bool oom;
} gb;

static pk_obj *chk(gb *b, pk_obj *o)
{
    if (!o)
        b->oom = true;
    return o;
}

static pk_obj *an_int(gb *b, int64_t v)
{
    if (v < 0 || v >= SMALL_INTS)
        return chk(b, pk_new_int(b->g, v));
    if (!b->small[v])
        b->small[v] = chk(b, pk_new_int(b->keep, v));
    return b->small[v];
}

static pk_obj *a_bool(gb *b, bool v)
{
    pk_obj **at = v ? &b->yes : &b->no;
    if (!*at && (*at = chk(b, pk_new(b->keep, PK_BOOL))))
        (*at)->i = v;
    return *at;
}

static pk_obj *ints(gb *b, const int64_t *v, int n)
{
    pk_obj *t = chk(b, pk_new(b->g, PK_TUPLE));
    for (int i = 0; t && i < n; i++)
        if (pk_push(b->g, t, an_int(b, v[i])))
            b->oom = true;
    return t;
}

/* An empty OrderedDict call. */
static pk_obj *od_new(gb *b)
{
    pk_obj *o = chk(b, pk_new(b->g, PK_CALL));
    if (!b->empty)
        b->empty = chk(b, pk_new(b->keep, PK_TUPLE));
    if (b->oom)
        return NULL;
    o->func = b->od;
    o->args = b->empty;
    return o;
}

/* _rebuild_tensor_v2/v3 of item it, over the persistent id pid of its block. */
static pk_obj *rebuild(gb *b, const tc_witem *it, pk_obj *pid)
{
    bool v3 = tc_dtype_is_v3(it->dtype);
    pk_obj *call = chk(b, pk_new(b->g, PK_CALL)), *rg = a_bool(b, it->parameter ? false : it->requires_grad);
    pk_obj *hooks = od_new(b);
    if (b->oom)
        return NULL;
    pk_obj *a[7] = {pid, an_int(b, it->offset), ints(b, it->shape, it->ndim),
                    ints(b, it->stride, it->ndim), rg, hooks,
                    v3 ? chk(b, pk_new_global(b->g, "torch", tc_dtype_name(it->dtype))) : NULL};
    if (b->oom || !(call->args = chk(b, pk_new_tuple(b->g, v3 ? 7 : 6, a))))
        return NULL;
    call->func = v3 ? b->v3 : b->v2;
    if (!it->parameter)
        return call;
    /* _rebuild_parameter(tensor, requires_grad, OrderedDict()) */
    pk_obj *p = chk(b, pk_new(b->g, PK_CALL)), *prg = a_bool(b, it->requires_grad), *h = od_new(b);
    if (b->oom)
        return NULL;
    p->func = b->param;
    p->args = chk(b, pk_new_tuple(b->g, 3, (pk_obj *[]){call, prg, h}));
    return b->oom ? NULL : p;
}

/* The persistent id of an item over block k: ('storage', type, 'k', location,
 * numel). Every item gets a tuple of its own whose key and location strings
 * are shared per block (keys[k], made in keep when more than one item views
 * the block); the storage type is one node per type, fetched from the memo
 * after its first use, as torch.save writes it (the pickler memoizes the
 * class) and as the rewrite of a cast leaves it (the element count, an int,
 * is written by value). */
static pk_obj *item_pid(gb *b, const tc_wblock *bl, size_t k, bool shared, pk_obj **keys)
{
    bool v3 = tc_dtype_is_v3(bl->dtype);
    pk_obj *key = keys[k];
    if (!key) {
        char text[32];
        snprintf(text, sizeof text, "%zu", k);
        key = chk(b, pk_new_str(shared ? b->keep : b->g, text, strlen(text)));
        if (shared)
            keys[k] = key;
    }
    const char *storage = tc_dtype_get(bl->dtype)->storage;
    pk_obj *type = v3 ? b->untyped : chk(b, intern(&b->names, PK_GLOBAL, "torch", storage));
    int64_t n = (int64_t)(v3 ? bl->nbytes : bl->nbytes / tc_dtype_size(bl->dtype));
    pk_obj *it[5] = {b->s_storage, type, key, chk(b, intern(&b->names, PK_STR, bl->location, NULL)), an_int(b, n)};
    pk_obj *tup = b->oom ? NULL : chk(b, pk_new_tuple(b->g, 5, it));
    pk_obj *pid = chk(b, pk_new(b->g, PK_PERSID));
    if (b->oom)
        return NULL;
    pid->args = tup;
    return pid;
}

/* Which blocks more than one item views (views[k]) and which items a later
 * one is the same object as (tied[i]): what must outlive one item's graph. */
static void find_shared(const tc_write_job *job, uint8_t *views, bool *tied)
{
    for (size_t i = 0; i < job->nitems; i++) {
        const tc_witem *it = &job->items[i];
        if (it->same_as >= 0 && (size_t)it->same_as < i)
            tied[it->same_as] = true;
        else if (views[it->block] < 2)
            views[it->block]++;
    }
}

int tc_torch_state_dict(const tc_write_job *job, uint8_t **pkl, size_t *len, tc_diag *d)
{
    pk_graph *scratch = pk_graph_new();
    gb b = {.keep = pk_graph_new(), .names = {.d = d}};
    b.g = b.keep;
    b.names.g = b.keep;
    pk_obj **nodes = calloc(job->nitems + 1, sizeof *nodes), **keys = calloc(job->nblocks + 1, sizeof *keys);
    uint8_t *views = calloc(job->nblocks + 1, 1);
    bool *tied = calloc(job->nitems + 1, sizeof *tied);
    pk_stream *ps = NULL;
    pk_obj *root = NULL;
    int rc = 0;
    if (!b.keep || !scratch || !nodes || !keys || !views || !tied) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    find_shared(job, views, tied);
    b.s_storage = chk(&b, pk_new_str(b.keep, "storage", 7));
    b.od = chk(&b, pk_new_global(b.keep, "collections", "OrderedDict"));
    b.v2 = chk(&b, pk_new_global(b.keep, "torch._utils", "_rebuild_tensor_v2"));
    b.v3 = chk(&b, pk_new_global(b.keep, "torch._utils", "_rebuild_tensor_v3"));
    b.untyped = chk(&b, pk_new_global(b.keep, "torch.storage", "UntypedStorage"));
    b.param = chk(&b, pk_new_global(b.keep, "torch._utils", "_rebuild_parameter"));
    if (b.oom || !(root = job->plain_dict ? chk(&b, pk_new(b.keep, PK_DICT)) : od_new(&b))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!job->plain_dict)
        root->items_kind = PK_ITEMS_DICT;
    if ((rc = pk_stream_new(&ps, root, job->nitems + job->nobjs, job->max_depth ? job->max_depth : 1000, d)))
        goto done;
    for (size_t i = 0; i < job->nitems; i++) {
        const tc_witem *it = &job->items[i];
        b.g = tied[i] ? b.keep : scratch;
        pk_obj *node = it->same_as >= 0 ? nodes[it->same_as] : NULL;
        if (!node) {
            size_t k = it->block;
            pk_obj *pid = item_pid(&b, &job->blocks[k], k, views[k] > 1, keys);
            node = pid ? rebuild(&b, it, pid) : NULL;
        }
        if (tied[i])
            nodes[i] = node;
        pk_obj *key = node ? chk(&b, pk_new_str(scratch, it->name, strlen(it->name))) : NULL;
        if (!node || b.oom) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((rc = pk_stream_pair(ps, key, node)))
            goto done;
        pk_graph_reset(scratch);
    }
    for (size_t k = 0; k < job->nobjs; k++) {
        pk_read_opts ro = {.limits = PK_LIMITS_DEFAULT, .what = job->obj_names[k]};
        pk_obj *v = NULL, *key;
        if ((rc = pk_read(scratch, job->obj_pickles[k], job->obj_lens[k], &ro, &v, NULL, d)))
            goto done;
        if (!(key = pk_new_str(scratch, job->obj_names[k], strlen(job->obj_names[k])))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((rc = pk_stream_pair(ps, key, v)))
            goto done;
        pk_graph_reset(scratch);
    }
    rc = pk_stream_end(ps, pkl, len);
done:
    pk_stream_free(ps);
    free(nodes);
    free(keys);
    free(views);
    free(tied);
    pk_graph_free(scratch);
    pk_graph_free(b.keep);
    return rc;
}
