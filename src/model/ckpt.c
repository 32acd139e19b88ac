#include "ckpt.h"

#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "verdict.h"

struct tc_ckpt {
    char *path;
    tc_src src;
    tc_limits lim;
    const void *driver;
    const char *format;
    void *priv;
    void (*free_priv)(void *);
    bool objects;
    tc_tensor *t;
    size_t nt, tcap;
    tc_strmap tnames;      /* first tensor of each name */
    tc_storage *s;
    size_t ns, scap;
    tc_strmap skeys;
    tc_global *gl;
    size_t ngl, glcap;
    tc_strmap gnames;
    tc_strmap mkeys;       /* metadata keys */
    tc_kv *facts, *meta;
    size_t nfacts, nmeta;
    tc_entry *ent;
    size_t nent, entcap;
    char **hazards;
    size_t nhazards;
    char **shards;
    size_t nshards;
    struct ckpt_ext *ext;  /* chunks and nested checkpoints (distributed checkpoints), at the end of this file */
    tc_keyed *keyed;
    size_t nkeyed, keyedcap;
    tc_module *mods;
    size_t nmods, modcap;
    struct {
        bool known, loads;
        char *why;
    } wo[TC_NTORCH];       /* torch.load(weights_only=True), per torch */
};

static void ext_free(struct ckpt_ext *x);

/* Grow *v (n used, *cap allocated, elements of size sz) to hold one more. */
static int reserve(void *v, size_t n, size_t *cap, size_t sz, tc_diag *d)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*(void **)v, nc * sz);
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    *(void **)v = p;
    *cap = nc;
    return 0;
}

int tc_ckpt_new(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return tc_fail_at(d, TC_ERR_NOMEM, path, TC_NO_OFFSET, "out of memory");
    }
    c->src.fd = -1;
    c->lim = *lim;
    c->format = "unknown";
    int rc = tc_src_open_file(&c->src, c->path, d);
    if (rc) {
        free(c->path);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void free_kvs(tc_kv *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].key);
        free(v[i].value);
    }
    free(v);
}

void tc_ckpt_close(tc_ckpt *c)
{
    if (!c)
        return;
    if (c->free_priv)
        c->free_priv(c->priv);
    for (size_t i = 0; i < c->nt; i++)
        free(c->t[i].name);
    free(c->t);
    for (size_t i = 0; i < c->ns; i++) {
        free(c->s[i].key);
        free(c->s[i].location);
    }
    free(c->s);
    for (size_t i = 0; i < c->ngl; i++)
        free(c->gl[i].name);
    free(c->gl);
    free_kvs(c->facts, c->nfacts);
    free_kvs(c->meta, c->nmeta);
    for (size_t i = 0; i < c->nent; i++) {
        free(c->ent[i].name);
        free(c->ent[i].text);
        free(c->ent[i].kind);
    }
    free(c->ent);
    for (size_t i = 0; i < c->nhazards; i++)
        free(c->hazards[i]);
    free(c->hazards);
    for (int i = 0; i < TC_NTORCH; i++)
        free(c->wo[i].why);
    for (size_t i = 0; i < c->nshards; i++)
        free(c->shards[i]);
    free(c->shards);
    for (size_t i = 0; i < c->nkeyed; i++) {
        for (size_t k = 0; k < c->keyed[i].nkeys; k++)
            free(c->keyed[i].keys[k]);
        free(c->keyed[i].keys);
        free(c->keyed[i].text);
        free(c->keyed[i].name);
    }
    free(c->keyed);
    for (size_t i = 0; i < c->nmods; i++) {
        free(c->mods[i].prefix);
        free(c->mods[i].cls);
    }
    free(c->mods);
    tc_strmap_free(&c->tnames);
    tc_strmap_free(&c->skeys);
    tc_strmap_free(&c->gnames);
    tc_strmap_free(&c->mkeys);
    ext_free(c->ext);
    tc_src_close(&c->src);
    free(c->path);
    free(c);
}

const char *tc_ckpt_path(const tc_ckpt *c) { return c->path; }
const tc_src *tc_ckpt_src(const tc_ckpt *c) { return &c->src; }
const tc_limits *tc_ckpt_limits(const tc_ckpt *c) { return &c->lim; }
size_t tc_ckpt_ntensors(const tc_ckpt *c) { return c->nt; }
const tc_tensor *tc_ckpt_tensor(const tc_ckpt *c, size_t i) { return &c->t[i]; }
tc_tensor *tc_ckpt_tensor_mut(tc_ckpt *c, size_t i) { return &c->t[i]; }
size_t tc_ckpt_nstorages(const tc_ckpt *c) { return c->ns; }
const tc_storage *tc_ckpt_storage(const tc_ckpt *c, size_t i) { return &c->s[i]; }
tc_storage *tc_ckpt_storage_mut(tc_ckpt *c, size_t i) { return &c->s[i]; }
size_t tc_ckpt_nglobals(const tc_ckpt *c) { return c->ngl; }
const tc_global *tc_ckpt_global(const tc_ckpt *c, size_t i) { return &c->gl[i]; }
size_t tc_ckpt_nfacts(const tc_ckpt *c) { return c->nfacts; }
const tc_kv *tc_ckpt_fact(const tc_ckpt *c, size_t i) { return &c->facts[i]; }
size_t tc_ckpt_nmeta(const tc_ckpt *c) { return c->nmeta; }
const tc_kv *tc_ckpt_meta(const tc_ckpt *c, size_t i) { return &c->meta[i]; }
size_t tc_ckpt_nentries(const tc_ckpt *c) { return c->nent; }
const tc_entry *tc_ckpt_entry(const tc_ckpt *c, size_t i) { return &c->ent[i]; }
size_t tc_ckpt_nshards(const tc_ckpt *c) { return c->nshards; }
const char *tc_ckpt_shard(const tc_ckpt *c, size_t i) { return c->shards[i]; }
size_t tc_ckpt_nkeyed(const tc_ckpt *c) { return c->nkeyed; }
const tc_keyed *tc_ckpt_keyed(const tc_ckpt *c, size_t i) { return &c->keyed[i]; }
size_t tc_ckpt_nmodules(const tc_ckpt *c) { return c->nmods; }
const tc_module *tc_ckpt_module(const tc_ckpt *c, size_t i) { return &c->mods[i]; }
const void *tc_ckpt_driver(const tc_ckpt *c) { return c->driver; }
const char *tc_ckpt_format(const tc_ckpt *c) { return c->format; }
void *tc_ckpt_priv(const tc_ckpt *c) { return c->priv; }
void tc_ckpt_set_objects(tc_ckpt *c, bool has) { c->objects = has; }
bool tc_ckpt_has_objects(const tc_ckpt *c) { return c->objects; }

void tc_ckpt_set_driver(tc_ckpt *c, const void *driver, const char *name, void *priv, void (*free_priv)(void *))
{
    c->driver = driver;
    c->format = name;
    c->priv = priv;
    c->free_priv = free_priv;
}

long tc_ckpt_find_storage(const tc_ckpt *c, const char *key)
{
    size_t i;
    return tc_strmap_get(&c->skeys, key, &i) ? (long)i : -1;
}

long tc_ckpt_find_tensor(const tc_ckpt *c, const char *name)
{
    size_t i;
    return tc_strmap_get(&c->tnames, name, &i) ? (long)i : -1;
}

const char *tc_ckpt_meta_get(const tc_ckpt *c, const char *key)
{
    size_t i;
    return tc_strmap_get(&c->mkeys, key, &i) ? c->meta[i].value : NULL;
}

bool tc_ckpt_has_dangerous(const tc_ckpt *c)
{
    for (size_t i = 0; i < c->ngl; i++)
        if (c->gl[i].dangerous)
            return true;
    return false;
}

size_t tc_ckpt_nhazards(const tc_ckpt *c) { return c->nhazards; }
const char *tc_ckpt_hazard(const tc_ckpt *c, size_t i) { return c->hazards[i]; }

bool tc_ckpt_is_safe(const tc_ckpt *c)
{
    for (size_t i = 0; i < c->ngl; i++)
        if (!c->gl[i].allowed)
            return false;
    return c->nhazards == 0;
}

void tc_ckpt_admit(tc_ckpt *c, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        size_t i;
        if (tc_verdict_admissible(names[k]) && tc_strmap_get(&c->gnames, names[k], &i) && !c->gl[i].allowed) {
            c->gl[i].allowed = true;
            c->gl[i].admitted = true;
        }
    }
}

int tc_ckpt_add_hazard(tc_ckpt *c, const char *text, tc_diag *d)
{
    char **p = realloc(c->hazards, (c->nhazards + 1) * sizeof *p);
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    c->hazards = p;
    if (!(p[c->nhazards] = strdup(text)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    c->nhazards++;
    return 0;
}

const char *tc_tensor_device(const tc_ckpt *c, const tc_tensor *t)
{
    return t->storage >= 0 ? c->s[t->storage].location : t->device;
}

bool tc_tensor_contiguous(const tc_tensor *t)
{
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want)
            return false;
        want *= t->shape[i];
    }
    return true;
}

long tc_ckpt_add_storage(tc_ckpt *c, const char *key, tc_diag *d)
{
    if (reserve(&c->s, c->ns, &c->scap, sizeof *c->s, d))
        return -1;
    tc_storage *s = &c->s[c->ns];
    memset(s, 0, sizeof *s);
    s->shard = -1;
    if (!(s->key = strdup(key)) || tc_strmap_put(&c->skeys, s->key, c->ns, NULL) < 0) {
        free(s->key);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    }
    return (long)c->ns++;
}

void tc_ckpt_clear_storages(tc_ckpt *c)
{
    for (size_t i = 0; i < c->ns; i++) {
        free(c->s[i].key);
        free(c->s[i].location);
    }
    c->ns = 0;
    tc_strmap_free(&c->skeys);
}

long tc_ckpt_add_tensor(tc_ckpt *c, const char *name, tc_diag *d)
{
    if (reserve(&c->t, c->nt, &c->tcap, sizeof *c->t, d))
        return -1;
    tc_tensor *t = &c->t[c->nt];
    memset(t, 0, sizeof *t);
    t->storage = -1;
    t->alias_of = -1;
    t->keyed = -1;
    if (!(t->name = strdup(name)) || tc_strmap_put(&c->tnames, t->name, c->nt, NULL) < 0) {
        free(t->name);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    }
    return (long)c->nt++;
}

int tc_ckpt_add_global(tc_ckpt *c, const char *name, tc_diag *d)
{
    size_t i;
    if (tc_strmap_get(&c->gnames, name, &i)) {
        c->gl[i].count++;
        return 0;
    }
    if (reserve(&c->gl, c->ngl, &c->glcap, sizeof *c->gl, d))
        return d->code;
    tc_global *g = &c->gl[c->ngl];
    memset(g, 0, sizeof *g);
    if (!(g->name = strdup(name)) || tc_strmap_put(&c->gnames, g->name, c->ngl, NULL) < 0) {
        free(g->name);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    tc_verdict v = tc_verdict_of(name);
    g->allowed = v.allowed;
    g->torch = v.torch;
    g->dangerous = v.why != NULL;
    g->why = v.why;
    g->count = 1;
    c->ngl++;
    return 0;
}

static int cmp_global(const void *a, const void *b)
{
    return strcmp(((const tc_global *)a)->name, ((const tc_global *)b)->name);
}

void tc_ckpt_sort_globals(tc_ckpt *c)
{
    if (c->ngl < 2)
        return;
    qsort(c->gl, c->ngl, sizeof *c->gl, cmp_global);
    tc_strmap_free(&c->gnames);
    for (size_t i = 0; i < c->ngl; i++)
        (void)tc_strmap_put(&c->gnames, c->gl[i].name, i, NULL); /* a failure only slows later lookups */
}

static int add_kv(tc_kv **v, size_t *n, const char *key, const char *value, tc_diag *d)
{
    tc_kv *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    *v = p;
    p[*n].key = strdup(key);
    p[*n].value = strdup(value);
    if (!p[*n].key || !p[*n].value) {
        free(p[*n].key);
        free(p[*n].value);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    (*n)++;
    return 0;
}

int tc_ckpt_add_fact(tc_ckpt *c, const char *key, const char *value, tc_diag *d)
{
    return add_kv(&c->facts, &c->nfacts, key, value, d);
}

int tc_ckpt_add_meta(tc_ckpt *c, const char *key, const char *value, tc_diag *d)
{
    int rc = add_kv(&c->meta, &c->nmeta, key, value, d);
    if (!rc && tc_strmap_put(&c->mkeys, c->meta[c->nmeta - 1].key, c->nmeta - 1, NULL) < 0)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return rc;
}

int tc_ckpt_add_entry(tc_ckpt *c, const tc_entry *e, tc_diag *d)
{
    if (reserve(&c->ent, c->nent, &c->entcap, sizeof *c->ent, d))
        return d->code;
    tc_entry *p = &c->ent[c->nent];
    *p = *e;
    p->name = strdup(e->name);
    p->text = strdup(e->text);
    p->kind = strdup(e->kind);
    if (!p->name || !p->text || !p->kind) {
        free(p->name);
        free(p->text);
        free(p->kind);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    c->nent++;
    return 0;
}

long tc_ckpt_add_shard(tc_ckpt *c, const char *name, tc_diag *d)
{
    char **p = realloc(c->shards, (c->nshards + 1) * sizeof *p);
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    c->shards = p;
    if (!(p[c->nshards] = strdup(name)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    return (long)c->nshards++;
}

/* ---- checkpoints made of pieces -------------------------------------------------- */

typedef struct chunkset {
    int ndim;
    int64_t *shape;
    tc_chunk *v;           /* not NULL once set, even with no chunk (a tensor of no elements) */
    size_t n;
} chunkset;

struct ckpt_ext {
    chunkset *sets;        /* per storage index (NULL n: not assembled), up to nsets */
    size_t nsets;
    long *part_of;         /* per storage index: the storage its chunk builds, or -1 */
    size_t npart;
    tc_object *obj;
    size_t nobj;
};

static void ext_free(struct ckpt_ext *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->nsets; i++) {
        for (size_t k = 0; k < x->sets[i].n; k++)
            free((void *)x->sets[i].v[k].offsets);
        free(x->sets[i].v);
        free(x->sets[i].shape);
    }
    free(x->sets);
    free(x->part_of);
    for (size_t i = 0; i < x->nobj; i++) {
        free(x->obj[i].name);
        free(x->obj[i].text);
        free(x->obj[i].kind);
        free(x->obj[i].why_not);
        free(x->obj[i].pickle);
    }
    free(x->obj);
    free(x);
}

static struct ckpt_ext *ext_of(tc_ckpt *c, tc_diag *d)
{
    if (!c->ext && !(c->ext = calloc(1, sizeof *c->ext)))
        tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return c->ext;
}

/* Grow a table of n elements of size sz to hold index i (new elements zeroed, or -1 for longs). */
static int grow_to(void *v, size_t *n, size_t i, size_t sz, bool minus1, tc_diag *d)
{
    if (i < *n)
        return 0;
    size_t nn = i + 1 > *n * 2 ? i + 1 : *n * 2;
    uint8_t *p = realloc(*(void **)v, nn * sz);
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memset(p + *n * sz, minus1 ? 0xff : 0, (nn - *n) * sz);
    *(void **)v = p;
    *n = nn;
    return 0;
}

int tc_ckpt_set_chunks(tc_ckpt *c, size_t i, int ndim, const int64_t *shape, const tc_chunk *v, size_t n,
                       tc_diag *d)
{
    struct ckpt_ext *x = ext_of(c, d);
    if (!x || grow_to(&x->sets, &x->nsets, i, sizeof *x->sets, false, d))
        return d->code;
    chunkset *cs = &x->sets[i];
    if (cs->v)
        return tc_fail(d, TC_ERR_FORMAT, "storage '%s' is given its chunks twice", c->s[i].key);
    size_t nd = ndim > 0 ? (size_t)ndim : 0;
    if (!(cs->shape = malloc((nd + 1) * sizeof *cs->shape)) || !(cs->v = calloc(n + 1, sizeof *cs->v)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memcpy(cs->shape, shape, nd * sizeof *shape);
    cs->ndim = ndim;
    for (size_t k = 0; k < n; k++) {
        int64_t *dims = malloc((3 * nd + 1) * sizeof *dims);
        if (!dims)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        memcpy(dims, v[k].offsets, nd * sizeof *dims);
        memcpy(dims + nd, v[k].sizes, nd * sizeof *dims);
        memcpy(dims + 2 * nd, v[k].strides, nd * sizeof *dims);
        cs->v[k] = (tc_chunk){v[k].storage, v[k].soffset, dims, dims + nd, dims + 2 * nd};
        cs->n = k + 1;
        if (grow_to(&x->part_of, &x->npart, v[k].storage, sizeof *x->part_of, true, d))
            return d->code;
        x->part_of[v[k].storage] = (long)i;
    }
    return 0;
}

const tc_chunk *tc_ckpt_chunks(const tc_ckpt *c, size_t i, size_t *n)
{
    if (!c->ext || i >= c->ext->nsets || !c->ext->sets[i].v) {
        *n = 0;
        return NULL;
    }
    *n = c->ext->sets[i].n;
    return c->ext->sets[i].v;
}

const int64_t *tc_ckpt_chunk_shape(const tc_ckpt *c, size_t i, int *ndim)
{
    if (!c->ext || i >= c->ext->nsets || !c->ext->sets[i].v)
        return NULL;
    *ndim = c->ext->sets[i].ndim;
    return c->ext->sets[i].shape;
}

long tc_ckpt_chunk_of(const tc_ckpt *c, size_t i)
{
    return c->ext && i < c->ext->npart ? c->ext->part_of[i] : -1;
}

int tc_ckpt_add_global_allowed(tc_ckpt *c, const char *name, const char *by, tc_diag *d)
{
    int rc = tc_ckpt_add_global(c, name, d);
    size_t i;
    if (!rc && tc_strmap_get(&c->gnames, name, &i) && !c->gl[i].allowed) {
        c->gl[i].allowed = true;
        c->gl[i].torch = by;
        c->gl[i].dangerous = false;
        c->gl[i].why = NULL;
    }
    return rc;
}

int tc_ckpt_new_src(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(name))) {
        free(c);
        return tc_fail_at(d, TC_ERR_NOMEM, name, TC_NO_OFFSET, "out of memory");
    }
    c->src = *src;
    c->lim = *lim;
    c->format = "unknown";
    *out = c;
    return 0;
}

int tc_ckpt_add_object(tc_ckpt *c, const char *name, const char *text, const char *kind, const uint8_t *pickle,
                       size_t pickle_len, const char *why_not, tc_diag *d)
{
    struct ckpt_ext *x = ext_of(c, d);
    tc_object *p = x && !(x->nobj % 64) ? realloc(x->obj, (x->nobj + 64) * sizeof *p) : x ? x->obj : NULL;
    if (!p)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    x->obj = p;
    tc_object *o = &p[x->nobj];
    *o = (tc_object){strdup(name), strdup(text), strdup(kind), pickle ? malloc(pickle_len ? pickle_len : 1) : NULL,
                     pickle_len, why_not ? strdup(why_not) : NULL};
    x->nobj++;
    if (!o->name || !o->text || !o->kind || (why_not && !o->why_not) || (pickle && !o->pickle))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (pickle)
        memcpy(o->pickle, pickle, pickle_len);
    return 0;
}

size_t tc_ckpt_nobjects(const tc_ckpt *c) { return c->ext ? c->ext->nobj : 0; }
const tc_object *tc_ckpt_object(const tc_ckpt *c, size_t i) { return &c->ext->obj[i]; }

long tc_ckpt_add_keyed(tc_ckpt *c, const char *name, bool attrs, const char *const *keys, const bool *text, size_t n,
                       tc_diag *d)
{
    if (reserve(&c->keyed, c->nkeyed, &c->keyedcap, sizeof *c->keyed, d))
        return -1;
    tc_keyed *k = &c->keyed[c->nkeyed];
    memset(k, 0, sizeof *k);
    k->attrs = attrs;
    k->name = strdup(name);
    k->keys = calloc(n + 1, sizeof *k->keys);
    k->text = calloc(n + 1, sizeof *k->text);
    bool ok = k->name && k->keys && k->text;
    for (size_t i = 0; ok && i < n; i++) {
        ok = (k->keys[i] = strdup(keys[i])) != NULL;
        k->text[i] = text[i];
        k->nkeys = i + 1;
    }
    if (!ok) {
        for (size_t i = 0; k->keys && i < k->nkeys; i++)
            free(k->keys[i]);
        free(k->keys);
        free(k->text);
        free(k->name);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    }
    k->nkeys = n;
    return (long)c->nkeyed++;
}

int tc_ckpt_add_module(tc_ckpt *c, const char *prefix, const char *cls, tc_diag *d)
{
    if (reserve(&c->mods, c->nmods, &c->modcap, sizeof *c->mods, d))
        return d->code;
    tc_module *m = &c->mods[c->nmods];
    m->prefix = strdup(prefix);
    m->cls = strdup(cls);
    if (!m->prefix || !m->cls) {
        free(m->prefix);
        free(m->cls);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    c->nmods++;
    return 0;
}

/* ---- torch.load(weights_only=True), per torch -------------------------------------------- */

const char *const tc_torch_names[TC_NTORCH] = {"1.13", "2.x"};

int tc_ckpt_set_weights_only(tc_ckpt *c, int torch, bool loads, const char *why, tc_diag *d)
{
    char *w = NULL;
    if (!loads && !(w = strdup(why ? why : "")))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    free(c->wo[torch].why);
    c->wo[torch].known = true;
    c->wo[torch].loads = loads;
    c->wo[torch].why = w;
    return 0;
}

bool tc_ckpt_weights_only(const tc_ckpt *c, int torch, bool *loads, const char **why)
{
    if (!c->wo[torch].known)
        return false;
    *loads = c->wo[torch].loads;
    *why = c->wo[torch].why;
    return true;
}
