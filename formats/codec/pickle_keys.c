/* Hash maps for the reader: the memo past its dense part, and which dict keys
 * and set members CPython takes as equal (value ids, see pickle_internal.h).
 * Every operation is O(1) expected; hashes are seeded per map so that a
 * pickle cannot be crafted to collide. */
#include "pickle_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Seeds from addresses: unknown to whoever wrote the pickle (ASLR), and no
 * shared state between threads reading pickles. */
static uint64_t seed_for(const void *p)
{
    char local;
    return mix((uint64_t)(uintptr_t)p ^ mix((uint64_t)(uintptr_t)&local));
}

static size_t slot_of(const pkmap *m, uint64_t a, uint64_t b)
{
    return (size_t)(mix(a ^ m->seed) ^ mix(b + 0x9e3779b97f4a7c15ULL + m->seed)) & (m->cap - 1);
}

void pkmap_free(pkmap *m)
{
    free(m->t);
    memset(m, 0, sizeof *m);
}

uint64_t *pkmap_get(const pkmap *m, uint64_t a, uint64_t b)
{
    if (!m->cap)
        return NULL;
    for (size_t i = slot_of(m, a, b);; i = (i + 1) & (m->cap - 1)) {
        pkmap_ent *e = &m->t[i];
        if (!e->used)
            return NULL;
        if (e->a == a && e->b == b)
            return &e->v;
    }
}

static int grow(pkmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    pkmap_ent *t = calloc(cap, sizeof *t), *old = m->t;
    if (!t)
        return -1;
    size_t oldcap = m->cap;
    if (!m->seed)
        m->seed = seed_for(t);
    m->t = t;
    m->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].used) {
            size_t j = slot_of(m, old[i].a, old[i].b);
            while (t[j].used)
                j = (j + 1) & (cap - 1);
            t[j] = old[i];
        }
    free(old);
    return 0;
}

int pkmap_put(pkmap *m, uint64_t a, uint64_t b, uint64_t v)
{
    uint64_t *p = pkmap_get(m, a, b);
    if (p) {
        *p = v;
        return 0;
    }
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return -1;
    size_t i = slot_of(m, a, b);
    while (m->t[i].used)
        i = (i + 1) & (m->cap - 1);
    m->t[i] = (pkmap_ent){a, b, v, true};
    m->n++;
    return 0;
}

/* ---- value ids ----------------------------------------------------------------- */

struct pk_keys {
    pkmap by_node;  /* (node, 0) -> vid */
    pkmap by_value; /* (hash of the serialised value, nth) -> index into vals */
    pkmap slots;    /* (container, vid) -> position */
    struct val {
        size_t off, len;
    } *vals;
    size_t nvals, capvals;
    uint8_t *bytes; /* serialised values */
    size_t nbytes, capbytes;
    uint8_t *buf; /* the value being serialised */
    size_t nbuf, capbuf;
    struct frame {
        const pk_obj *o;
        size_t next;
    } *stack;
    size_t sp, capstack;
    uint64_t *sort; /* frozenset members */
    size_t capsort;
    uint64_t seed;
};

pk_keys *pkk_new(void)
{
    pk_keys *k = calloc(1, sizeof *k);
    if (k)
        k->seed = seed_for(k);
    return k;
}

void pkk_free(pk_keys *k)
{
    if (!k)
        return;
    pkmap_free(&k->by_node);
    pkmap_free(&k->by_value);
    pkmap_free(&k->slots);
    free(k->vals);
    free(k->bytes);
    free(k->buf);
    free(k->stack);
    free(k->sort);
    free(k);
}

static int reserve(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int put(pk_keys *k, const void *p, size_t n)
{
    if (reserve((void **)&k->buf, &k->capbuf, k->nbuf + n, 1))
        return -1;
    memcpy(k->buf + k->nbuf, p, n);
    k->nbuf += n;
    return 0;
}

static int put_u64(pk_keys *k, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return put(k, b, 8);
}

/* minimal two's complement, little-endian, of an integer given as such bytes */
static int put_int_le(pk_keys *k, const uint8_t *p, size_t n)
{
    while (n > 1 && ((p[n - 1] == 0 && !(p[n - 2] & 0x80)) || (p[n - 1] == 0xFF && (p[n - 2] & 0x80))))
        n--;
    return put(k, "n", 1) || put(k, p, n);
}

static int put_i64(pk_keys *k, int64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return put_int_le(k, b, 8);
}

/* an integral float beyond int64, as the integer it equals */
static int put_big_float(pk_keys *k, double f)
{
    int e;
    double m = frexp(fabs(f), &e); /* |f| = m * 2^e, 0.5 <= m < 1, e > 63 */
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int shift = e - 53;
    size_t nb = (size_t)(e / 8 + 2);
    uint8_t *b = calloc(nb, 1);
    if (!b)
        return -1;
    for (int i = 0; i < 53; i++)
        if (mant >> i & 1) {
            int bit = i + shift;
            b[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
    if (f < 0) {
        unsigned carry = 1;
        for (size_t i = 0; i < nb; i++) {
            unsigned v = (uint8_t)~b[i] + carry;
            b[i] = (uint8_t)v;
            carry = v >> 8;
        }
    }
    int rc = put_int_le(k, b, nb);
    free(b);
    return rc;
}

static uint64_t hash_bytes(uint64_t seed, const uint8_t *p, size_t n)
{
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix(h ^ w) + 0x632be59bd9b4e019ULL;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    return mix(h ^ w ^ 0xa0761d6478bd642fULL);
}

/* The id of the value serialised in buf: the same bytes give the same id.
 * Values with one hash chain as (hash, 0), (hash, 1)... */
static int intern(pk_keys *k, uint64_t *vid)
{
    uint64_t h = hash_bytes(k->seed, k->buf, k->nbuf), nth = 0;
    for (;; nth++) {
        uint64_t *ix = pkmap_get(&k->by_value, h, nth);
        if (!ix)
            break;
        const struct val *v = &k->vals[*ix];
        if (v->len == k->nbuf && !memcmp(k->bytes + v->off, k->buf, k->nbuf)) {
            *vid = *ix + 1;
            return 0;
        }
    }
    if (reserve((void **)&k->vals, &k->capvals, k->nvals + 1, sizeof *k->vals) ||
        reserve((void **)&k->bytes, &k->capbytes, k->nbytes + k->nbuf + 1, 1) ||
        pkmap_put(&k->by_value, h, nth, k->nvals))
        return -1;
    memcpy(k->bytes + k->nbytes, k->buf, k->nbuf);
    k->vals[k->nvals] = (struct val){k->nbytes, k->nbuf};
    k->nbytes += k->nbuf;
    *vid = ++k->nvals;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *unhashable(int kind)
{
    switch (kind) {
    case PK_LIST: return "list";
    case PK_DICT: return "dict";
    case PK_SET: return "set";
    case PK_BYTEARRAY: return "bytearray";
    default: return NULL;
    }
}

/* Serialise an atom (or a node hashed by identity) into buf. 1: not an atom. */
static int atom(pk_keys *k, const pk_obj *o)
{
    switch (o->kind) {
    case PK_NONE: return put(k, "N", 1);
    case PK_BOOL:
    case PK_INT: return put_i64(k, o->i);
    case PK_BIGINT: return put_int_le(k, (const uint8_t *)o->s, o->len);
    case PK_FLOAT: {
        double f = o->f;
        if (isnan(f)) /* NaN != NaN: only the same object is the same key */
            return put(k, "I", 1) || put_u64(k, (uint64_t)(uintptr_t)o);
        if (isfinite(f) && f == floor(f)) {
            if (fabs(f) < 9.2e18)
                return put_i64(k, (int64_t)f);
            return put_big_float(k, f);
        }
        uint64_t bits;
        memcpy(&bits, &f, 8);
        return put(k, "f", 1) || put_u64(k, bits);
    }
    case PK_STR: return put(k, "s", 1) || put(k, o->s, o->len);
    case PK_BYTES: return put(k, "b", 1) || put(k, o->s, o->len);
    case PK_GLOBAL: /* the same name imports the same object */
        return put(k, "g", 1) || put(k, o->s, strlen(o->s) + 1) || put(k, o->name, strlen(o->name) + 1) ||
               put(k, (o->flags & PK_F_DOTTED) ? "d" : "a", 1);
    case PK_CALL:
    case PK_PERSID: return put(k, "I", 1) || put_u64(k, (uint64_t)(uintptr_t)o);
    default: return 1;
    }
}

/* Short atoms are cheaper to intern again than to remember per node; long
 * strings (a memoized key used a million times) and tuples are remembered. */
static bool worth_caching(const pk_obj *o)
{
    return o->kind == PK_TUPLE || o->kind == PK_FROZENSET ||
           ((o->kind == PK_STR || o->kind == PK_BYTES || o->kind == PK_BIGINT) && o->len > 24);
}

static int cached(pk_keys *k, const pk_obj *o, uint64_t *vid)
{
    if (!worth_caching(o))
        return 0;
    uint64_t *v = pkmap_get(&k->by_node, (uint64_t)(uintptr_t)o, 0);
    if (!v)
        return 0;
    *vid = *v;
    return 1;
}

/* Tuples and frozensets from their members' ids, without recursion. */
static int compound(pk_keys *k, const pk_obj *root, uint64_t *vid, const char **kind)
{
    k->sp = 0;
    if (reserve((void **)&k->stack, &k->capstack, 1, sizeof *k->stack))
        return -1;
    k->stack[k->sp++] = (struct frame){root, 0};
    while (k->sp) {
        struct frame *f = &k->stack[k->sp - 1];
        const pk_obj *o = f->o;
        bool pushed = false;
        for (; f->next < o->n; f->next++) {
            const pk_obj *c = o->items[f->next];
            uint64_t v;
            if ((*kind = unhashable(c->kind)))
                return 1;
            if ((c->kind == PK_TUPLE || c->kind == PK_FROZENSET) && !cached(k, c, &v)) {
                if (reserve((void **)&k->stack, &k->capstack, k->sp + 1, sizeof *k->stack))
                    return -1;
                k->stack[k->sp++] = (struct frame){c, 0};
                pushed = true;
                break;
            }
        }
        if (pushed)
            continue;
        /* every member has an id now (atoms are interned here) */
        if (reserve((void **)&k->sort, &k->capsort, o->n + 1, sizeof *k->sort))
            return -1;
        for (size_t i = 0; i < o->n; i++) {
            const pk_obj *c = o->items[i];
            uint64_t v;
            if (!cached(k, c, &v)) {
                k->nbuf = 0;
                int rc = atom(k, c);
                if (rc || intern(k, &v) ||
                    (worth_caching(c) && pkmap_put(&k->by_node, (uint64_t)(uintptr_t)c, 0, v)))
                    return -1;
            }
            k->sort[i] = v;
        }
        if (o->kind == PK_FROZENSET) /* members are distinct already; order does not matter */
            qsort(k->sort, o->n, sizeof *k->sort, cmp_u64);
        k->nbuf = 0;
        if (put(k, o->kind == PK_TUPLE ? "t" : "z", 1))
            return -1;
        for (size_t i = 0; i < o->n; i++)
            if (put_u64(k, k->sort[i]))
                return -1;
        uint64_t v;
        if (intern(k, &v) || pkmap_put(&k->by_node, (uint64_t)(uintptr_t)o, 0, v))
            return -1;
        k->sp--;
        if (o == root)
            *vid = v;
    }
    return 0;
}

int pkk_vid(pk_keys *k, const pk_obj *o, uint64_t *vid, const char **kind)
{
    if ((*kind = unhashable(o->kind)))
        return 1;
    if (cached(k, o, vid))
        return 0;
    if (o->kind == PK_TUPLE || o->kind == PK_FROZENSET)
        return compound(k, o, vid, kind);
    k->nbuf = 0;
    int rc = atom(k, o);
    if (rc > 0) {
        *kind = "object";
        return 1;
    }
    if (rc || intern(k, vid) || (worth_caching(o) && pkmap_put(&k->by_node, (uint64_t)(uintptr_t)o, 0, *vid)))
        return -1;
    return 0;
}

int pkk_slot(pk_keys *k, const pk_obj *c, uint64_t vid, size_t pos_if_new, size_t *pos, bool *found)
{
    uint64_t *v = pkmap_get(&k->slots, (uint64_t)(uintptr_t)c, vid);
    if (v) {
        *found = true;
        *pos = (size_t)*v;
        return 0;
    }
    *found = false;
    *pos = pos_if_new;
    return pkmap_put(&k->slots, (uint64_t)(uintptr_t)c, vid, pos_if_new);
}
