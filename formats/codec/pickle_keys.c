/* Which dict keys and set members CPython takes as equal (value ids, see
 * pickle_internal.h), on base's hash map (tc_map: O(1) expected, keyed per
 * process so that a pickle cannot be crafted to collide), serialised values
 * by its keyed hash (tc_hash_bytes). */
#include "pickle_internal.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- value ids ----------------------------------------------------------------- */

struct pk_keys {
    tc_map by_node;  /* (node, 0) -> vid */
    tc_map by_value; /* serialised value -> vid (keys in blocks) */
    tc_map slots;    /* (container, vid) -> position */
    size_t nvals;
    TC_VEC(uint8_t *) blocks; /* the serialised values: never moved, so by_value keys on them */
    size_t used, room;        /* of the last block */
    uint8_t *buf; /* the value being serialised */
    size_t nbuf, capbuf;
    struct frame {
        const pk_obj *o;
        size_t next;
    } *stack;
    size_t sp, capstack;
    uint64_t *sort; /* frozenset members */
    size_t capsort;
};

pk_keys *pkk_new(void)
{
    return calloc(1, sizeof(pk_keys));
}

void pkk_free(pk_keys *k)
{
    if (!k)
        return;
    tc_map_free(&k->by_node);
    tc_map_free(&k->by_value);
    tc_map_free(&k->slots);
    for (size_t i = 0; i < k->blocks.n; i++)
        free(k->blocks.v[i]);
    tc_vec_free(&k->blocks);
    free(k->buf);
    free(k->stack);
    free(k->sort);
    free(k);
}

static int put(pk_keys *k, const void *p, size_t n)
{
    if (tc_grow(&k->buf, &k->capbuf, k->nbuf + n, 1))
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

/* Room for n bytes at the end of the last block (a new block when they do not fit), or NULL. */
static uint8_t *block_room(pk_keys *k, size_t n)
{
    if (k->blocks.n && n <= k->room)
        return k->blocks.v[k->blocks.n - 1] + k->used;
    size_t size = n > 65536 ? n : 65536;
    uint8_t *b = malloc(size);
    if (!b || tc_vec_push(&k->blocks, b)) {
        free(b);
        return NULL;
    }
    k->used = 0;
    k->room = size;
    return b;
}

/* The id of the value serialised in buf: the same bytes give the same id.
 * The bytes are copied to the blocks first and stay there only when they
 * are new (one hash per value: tc_map_put finds or inserts). */
static int intern(pk_keys *k, uint64_t *vid)
{
    uint8_t *at = block_room(k, k->nbuf);
    if (!at)
        return -1;
    memcpy(at, k->buf, k->nbuf);
    uint64_t old;
    int rc = tc_map_put(&k->by_value, at, k->nbuf, k->nvals + 1, &old);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        *vid = old;
        return 0;
    }
    k->used += k->nbuf;
    k->room -= k->nbuf;
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
    uint64_t *v = tc_map_find2(&k->by_node, (uint64_t)(uintptr_t)o, 0);
    if (!v)
        return 0;
    *vid = *v;
    return 1;
}

/* Tuples and frozensets from their members' ids, without recursion. */
static int compound(pk_keys *k, const pk_obj *root, uint64_t *vid, const char **kind)
{
    k->sp = 0;
    if (tc_grow(&k->stack, &k->capstack, 1, sizeof *k->stack))
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
                if (tc_grow(&k->stack, &k->capstack, k->sp + 1, sizeof *k->stack))
                    return -1;
                k->stack[k->sp++] = (struct frame){c, 0};
                pushed = true;
                break;
            }
        }
        if (pushed)
            continue;
        /* every member has an id now (atoms are interned here) */
        if (tc_grow(&k->sort, &k->capsort, o->n + 1, sizeof *k->sort))
            return -1;
        for (size_t i = 0; i < o->n; i++) {
            const pk_obj *c = o->items[i];
            uint64_t v;
            if (!cached(k, c, &v)) {
                k->nbuf = 0;
                int rc = atom(k, c);
                if (rc || intern(k, &v) ||
                    (worth_caching(c) && pk_map_set(&k->by_node, (uint64_t)(uintptr_t)c, 0, v)))
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
        if (intern(k, &v) || pk_map_set(&k->by_node, (uint64_t)(uintptr_t)o, 0, v))
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
    if (rc || intern(k, vid) || (worth_caching(o) && pk_map_set(&k->by_node, (uint64_t)(uintptr_t)o, 0, *vid)))
        return -1;
    return 0;
}

int pkk_slot(pk_keys *k, const pk_obj *c, uint64_t vid, size_t pos_if_new, size_t *pos, bool *found)
{
    uint64_t *v = tc_map_find2(&k->slots, (uint64_t)(uintptr_t)c, vid);
    if (v) {
        *found = true;
        *pos = (size_t)*v;
        return 0;
    }
    *found = false;
    *pos = pos_if_new;
    return tc_map_put2(&k->slots, (uint64_t)(uintptr_t)c, vid, pos_if_new, NULL) < 0 ? -1 : 0;
}
