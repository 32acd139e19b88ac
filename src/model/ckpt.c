#include "ckpt.h"

#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "vec.h"
#include "verdict.h"

/* The checkpoint's own memory for what every tensor has once: names, keys and
 * dimensions, in blocks that never move (so pointers into them stay valid)
 * and are freed together. The blocks double from ARENA_FIRST to ARENA_BLOCK:
 * a checkpoint of a few tensors (a scan opens thousands one after another)
 * costs a few KiB, not a MiB that malloc hands back to the system each time. */
#define ARENA_FIRST ((size_t)4 << 10)
#define ARENA_BLOCK ((size_t)1 << 20)

typedef struct arena {
    TC_VEC(char *) b;
    size_t used, cap;     /* of the last block */
} arena;

static void *arena_alloc(arena *a, size_t n, size_t align)
{
    size_t at = (a->used + align - 1) & ~(align - 1);
    if (!a->b.n || at > a->cap || n > a->cap - at) {
        size_t grown = !a->b.n ? ARENA_FIRST : a->cap < ARENA_BLOCK / 2 ? 2 * a->cap : ARENA_BLOCK;
        size_t cap = n > grown ? n : grown;
        char *blk = malloc(cap);
        if (!blk || tc_vec_push(&a->b, blk) < 0) {
            free(blk);
            return NULL;
        }
        a->cap = cap;
        at = 0;
    }
    a->used = at + n;
    return a->b.v[a->b.n - 1] + at;
}

static char *arena_str(arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = arena_alloc(a, n, 1);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->b.n; i++)
        free(a->b.v[i]);
    tc_vec_free(&a->b);
}

static const int64_t no_dims[1];

struct tc_ckpt {
    char *path;
    tc_src src;
    tc_limits lim;
    const tc_format *driver;
    void *priv;
    void (*free_priv)(void *);
    tc_opener opener;        /* tc_ckpt_set_opener */
    bool objects;
    const char *distributed; /* tc_ckpt_set_distributed */
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
    size_t nfacts, nmeta, factcap, metacap;
    tc_entry *ent;
    size_t nent, entcap;
    char **hazards;
    size_t nhazards, hazcap;
    char **shards;
    size_t nshards, shardcap;
    struct ckpt_ext *ext;  /* chunks and nested checkpoints (distributed checkpoints), at the end of this file */
    tc_keyed *keyed;
    size_t nkeyed, keyedcap;
    tc_module *mods;
    size_t nmods, modcap;
    arena mem;             /* tensor names, storage keys, dimensions */
    bool tnames_built, skeys_built; /* the name maps, made on the first lookup: most readers look nothing up */
    tc_strmap lockeys;     /* interned locations (tc_ckpt_set_location) -> index in locs */
    TC_VEC(char *) locs;
    struct {
        bool known, loads;
        char *why;
    } wo[TC_NTORCH];       /* torch.load(weights_only=True), per torch */
};

/* Whether a storage's location is one tc_ckpt_set_location interned (else the driver's to free). */
static bool interned(const tc_ckpt *c, const char *loc)
{
    size_t i;
    return loc && tc_strmap_get(&c->lockeys, loc, &i) && c->locs.v[i] == loc;
}

static void free_location(const tc_ckpt *c, char *loc)
{
    if (!interned(c, loc))
        free(loc);
}

static void ext_free(struct ckpt_ext *x);

/* Grow *v (n used, *cap allocated, elements of size sz) to hold one more. */
static int reserve(void *v, size_t n, size_t *cap, size_t sz, tc_diag *d)
{
    return tc_grow(v, cap, n + 1, sz) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : 0;
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
    free(c->t);
    for (size_t i = 0; i < c->ns; i++)
        free_location(c, c->s[i].location);
    free(c->s);
    for (size_t i = 0; i < c->locs.n; i++)
        free(c->locs.v[i]);
    tc_vec_free(&c->locs);
    tc_strmap_free(&c->lockeys);
    arena_free(&c->mem);
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
const tc_format *tc_ckpt_driver(const tc_ckpt *c) { return c->driver; }
void *tc_ckpt_priv(const tc_ckpt *c) { return c->priv; }
void tc_ckpt_set_opener(tc_ckpt *c, tc_opener opener) { c->opener = opener; }
tc_opener tc_ckpt_opener(const tc_ckpt *c) { return c->opener; }
void tc_ckpt_set_objects(tc_ckpt *c, bool has) { c->objects = has; }
bool tc_ckpt_has_objects(const tc_ckpt *c) { return c->objects; }

void tc_ckpt_set_driver(tc_ckpt *c, const tc_format *driver, void *priv, void (*free_priv)(void *))
{
    c->driver = driver;
    c->priv = priv;
    c->free_priv = free_priv;
}

/* The name maps are made on the first lookup, from the tables as they are
 * then, and kept up to date by every add after it. A lookup changes no
 * visible state, so the accessors stay const; they are not called from
 * several threads at once. */
static int build_skeys(tc_ckpt *c)
{
    for (size_t i = 0; i < c->ns; i++)
        if (tc_strmap_put(&c->skeys, c->s[i].key, i, NULL) < 0) {
            tc_strmap_free(&c->skeys);
            return -1;
        }
    c->skeys_built = true;
    return 0;
}

static int build_tnames(tc_ckpt *c)
{
    for (size_t i = 0; i < c->nt; i++)
        if (tc_strmap_put(&c->tnames, c->t[i].name, i, NULL) < 0) {
            tc_strmap_free(&c->tnames);
            return -1;
        }
    c->tnames_built = true;
    return 0;
}

long tc_ckpt_find_storage(const tc_ckpt *c, const char *key)
{
    size_t i;
    if (!c->skeys_built) {
        if (build_skeys((tc_ckpt *)c) < 0) { /* out of memory: a linear search still answers */
            for (i = 0; i < c->ns; i++)
                if (!strcmp(c->s[i].key, key))
                    return (long)i;
            return -1;
        }
    }
    return tc_strmap_get(&c->skeys, key, &i) ? (long)i : -1;
}

long tc_ckpt_find_tensor(const tc_ckpt *c, const char *name)
{
    size_t i;
    if (!c->tnames_built) {
        if (build_tnames((tc_ckpt *)c) < 0) {
            for (i = 0; i < c->nt; i++)
                if (!strcmp(c->t[i].name, name))
                    return (long)i;
            return -1;
        }
    }
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
    int rc = reserve(&c->hazards, c->nhazards, &c->hazcap, sizeof *c->hazards, d);
    if (rc)
        return rc;
    if (!(c->hazards[c->nhazards] = strdup(text)))
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
    /* a safetensors tensor and its storage share one name */
    if (c->nt && !strcmp(c->t[c->nt - 1].name, key))
        s->key = c->t[c->nt - 1].name;
    else if (!(s->key = arena_str(&c->mem, key)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    if (c->skeys_built && tc_strmap_put(&c->skeys, s->key, c->ns, NULL) < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    return (long)c->ns++;
}

void tc_ckpt_clear_storages(tc_ckpt *c)
{
    for (size_t i = 0; i < c->ns; i++)
        free_location(c, c->s[i].location);
    c->ns = 0;
    tc_strmap_free(&c->skeys);
    c->skeys_built = false;
}

int tc_ckpt_set_location(tc_ckpt *c, size_t i, const char *location, tc_diag *d)
{
    size_t at;
    char *keep = NULL;
    if (tc_strmap_get(&c->lockeys, location, &at)) {
        keep = c->locs.v[at];
    } else if (!(keep = strdup(location)) || tc_vec_push(&c->locs, keep) < 0 ||
               tc_strmap_put(&c->lockeys, keep, c->locs.n - 1, NULL) < 0) {
        if (keep && c->locs.n && c->locs.v[c->locs.n - 1] == keep)
            c->locs.n--;
        free(keep);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    free_location(c, c->s[i].location);
    c->s[i].location = keep;
    return 0;
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
    t->shape = t->stride = no_dims;
    t->device = "";
    if (c->ns && !strcmp(c->s[c->ns - 1].key, name))
        t->name = c->s[c->ns - 1].key;
    else if (!(t->name = arena_str(&c->mem, name)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    if (c->tnames_built && tc_strmap_put(&c->tnames, t->name, c->nt, NULL) < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), -1;
    return (long)c->nt++;
}

int tc_ckpt_set_dims(tc_ckpt *c, size_t i, int ndim, const int64_t *shape, const int64_t *stride, tc_diag *d)
{
    tc_tensor *t = &c->t[i];
    if (ndim <= 0) {
        t->ndim = 0;
        t->shape = t->stride = no_dims;
        return 0;
    }
    int64_t *v = arena_alloc(&c->mem, 2 * (size_t)ndim * sizeof *v, sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memcpy(v, shape, (size_t)ndim * sizeof *v);
    if (stride) {
        memcpy(v + ndim, stride, (size_t)ndim * sizeof *v);
    } else {
        int64_t st = 1;
        for (int k = ndim - 1; k >= 0; k--) {
            v[ndim + k] = st;
            st = (int64_t)((uint64_t)st * (uint64_t)(shape[k] ? shape[k] : 1)); /* no overflow trap: shapes are the file's */
        }
    }
    t->ndim = ndim;
    t->shape = v;
    t->stride = v + ndim;
    return 0;
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

static int add_kv(tc_kv **v, size_t *n, size_t *cap, const char *key, const char *value, tc_diag *d)
{
    int rc = reserve(v, *n, cap, sizeof **v, d);
    if (rc)
        return rc;
    tc_kv *p = *v;
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
    return add_kv(&c->facts, &c->nfacts, &c->factcap, key, value, d);
}

int tc_ckpt_add_meta(tc_ckpt *c, const char *key, const char *value, tc_diag *d)
{
    int rc = add_kv(&c->meta, &c->nmeta, &c->metacap, key, value, d);
    if (rc)
        return rc;
    if (tc_strmap_put(&c->mkeys, c->meta[c->nmeta - 1].key, c->nmeta - 1, NULL) < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
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
    if (reserve(&c->shards, c->nshards, &c->shardcap, sizeof *c->shards, d))
        return -1;
    if (!(c->shards[c->nshards] = strdup(name)))
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
    size_t nobj, objcap;
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

/* Grow a table of *n elements of size sz to hold index i (new elements zeroed,
 * or -1 for longs): every allocated element is in use, so *n is its capacity. */
static int grow_to(void *v, size_t *n, size_t i, size_t sz, bool minus1, tc_diag *d)
{
    size_t was = *n;
    if (tc_grow(v, n, i + 1, sz))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    uint8_t *p;
    memcpy(&p, v, sizeof p);
    memset(p + was * sz, minus1 ? 0xff : 0, (*n - was) * sz);
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
    if (rc)
        return rc;
    size_t i;
    if (tc_strmap_get(&c->gnames, name, &i) && !c->gl[i].allowed) {
        c->gl[i].allowed = true;
        c->gl[i].torch = NULL;
        c->gl[i].reader = by;
        c->gl[i].dangerous = false;
        c->gl[i].why = NULL;
    }
    return 0;
}

void tc_ckpt_set_distributed(tc_ckpt *c, const char *what) { c->distributed = what; }
const char *tc_ckpt_distributed(const tc_ckpt *c) { return c->distributed; }

int tc_ckpt_drop_frozen(tc_ckpt *c, tc_diag *d)
{
    long *to = malloc((c->nt + 1) * sizeof *to); /* old index -> new, -1 when dropped */
    if (!to)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < c->nt; i++) {
        tc_tensor *t = &c->t[i];
        bool drop = t->frozen || (t->alias_of >= 0 && to[t->alias_of] < 0);
        to[i] = drop ? -1 : (long)n;
        if (drop) {
            /* its name and dimensions stay in the checkpoint's blocks until it is freed */
            if (t->storage >= 0 && t->alias_of < 0 && c->s[t->storage].ntensors)
                c->s[t->storage].ntensors--;
            continue;
        }
        if (t->alias_of >= 0)
            t->alias_of = to[t->alias_of];
        c->t[n++] = *t;
    }
    c->nt = n;
    free(to);
    /* the name map is made again on the next lookup */
    tc_strmap_free(&c->tnames);
    c->tnames_built = false;
    (void)d;
    return 0;
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
    *out = c;
    return 0;
}

int tc_ckpt_add_object(tc_ckpt *c, const char *name, const char *text, const char *kind, const uint8_t *pickle,
                       size_t pickle_len, const char *why_not, tc_diag *d)
{
    struct ckpt_ext *x = ext_of(c, d);
    if (!x)
        return TC_ERR_NOMEM;
    int rc = reserve(&x->obj, x->nobj, &x->objcap, sizeof *x->obj, d);
    if (rc)
        return rc;
    tc_object *o = &x->obj[x->nobj];
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
