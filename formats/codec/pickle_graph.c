/* Node storage for pickle graphs: nodes come from fixed blocks, strings from
 * a byte arena; item arrays are heap blocks freed with the graph, or, for a
 * container made whole at once (a tuple, a MARKed list as read), exactly as
 * many pointers in the arena: cap 0 with n > 0 says so, and the first push
 * onto such a node moves its items to the heap. A pickle of many small
 * tuples would otherwise cost a heap block each (the allocator's header and
 * a room of 8 pointers), several times their items. */
#include "pickle.h"
#include "pickle_internal.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

/* what pickle.h says a node costs, kept so */
_Static_assert(sizeof(void *) != 8 || sizeof(pk_obj) == 112, "a pk_obj grew");

#define NODE_BLOCK 4096
#define BYTE_BLOCK (256 * 1024)

typedef struct node_block {
    struct node_block *next;
    size_t used;
    pk_obj nodes[NODE_BLOCK];
} node_block;

typedef struct byte_block {
    struct byte_block *next;
    size_t used, cap;
    char data[];
} byte_block;

struct pk_graph {
    node_block *nodes;
    byte_block *bytes;
    uint64_t count;
};

pk_graph *pk_graph_new(void) { return calloc(1, sizeof(pk_graph)); }

uint64_t pk_graph_count(const pk_graph *g) { return g->count; }

#define FOR_EACH_NODE(g, o)                                                                        \
    for (node_block *b_ = (g)->nodes; b_; b_ = b_->next)                                         \
        for (pk_obj *o = b_->nodes; o < b_->nodes + b_->used; o++)

void pk_graph_free(pk_graph *g)
{
    if (!g)
        return;
    node_block *b = g->nodes;
    while (b) {
        for (size_t i = 0; i < b->used; i++)
            if (b->nodes[i].cap)
                free(b->nodes[i].items);
        node_block *next = b->next;
        free(b);
        b = next;
    }
    byte_block *y = g->bytes;
    while (y) {
        byte_block *next = y->next;
        free(y);
        y = next;
    }
    free(g);
}

void pk_graph_reset(pk_graph *g)
{
    /* the newest block of each kind stays, emptied; the rest go */
    for (node_block *b = g->nodes; b; b = b->next)
        for (size_t i = 0; i < b->used; i++)
            if (b->nodes[i].cap)
                free(b->nodes[i].items);
    if (g->nodes) {
        for (node_block *b = g->nodes->next, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        g->nodes->next = NULL;
        g->nodes->used = 0;
    }
    if (g->bytes) {
        for (byte_block *y = g->bytes->next, *next; y; y = next) {
            next = y->next;
            free(y);
        }
        g->bytes->next = NULL;
        g->bytes->used = 0;
    }
    g->count = 0;
}

void pk_graph_clear_marks(pk_graph *g)
{
    FOR_EACH_NODE(g, o) {
        o->mark = 0;
        o->memo = 0;
    }
}

void pk_graph_foreach(pk_graph *g, void (*fn)(void *ctx, pk_obj *o), void *ctx)
{
    FOR_EACH_NODE(g, o)
        fn(ctx, o);
}

pk_obj *pk_new(pk_graph *g, pk_kind kind)
{
    if (!g->nodes || g->nodes->used == NODE_BLOCK) {
        node_block *b = malloc(sizeof *b);
        if (!b)
            return NULL;
        b->next = g->nodes;
        b->used = 0;
        g->nodes = b;
    }
    pk_obj *o = &g->nodes->nodes[g->nodes->used++];
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)kind;
    g->count++;
    return o;
}

static char *arena_bytes(pk_graph *g, size_t n)
{
    byte_block *b = g->bytes;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > BYTE_BLOCK / 4 ? n : BYTE_BLOCK;
        byte_block *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (cap == n && b) { /* keep filling the current block after a big one */
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            g->bytes = nb;
        }
        b = nb;
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

static char *arena_str(pk_graph *g, const char *s, size_t len)
{
    char *p = arena_bytes(g, len + 1);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *pk_arena_str(pk_graph *g, const char *s, size_t len) { return arena_str(g, s, len); }

int pk_set_items(pk_graph *g, pk_obj *o, pk_obj *const *items, size_t n)
{
    if (!n)
        return 0;
    if (n > SIZE_MAX / sizeof *items)
        return -1;
    size_t bytes = n * sizeof *items;
    byte_block *b = g->bytes;
    if (b) { /* pointer-aligned, or a fresh block (whose data is) */
        size_t pad = (size_t)(-(uintptr_t)(b->data + b->used) & (sizeof *items - 1));
        b->used = b->cap - b->used >= pad + bytes ? b->used + pad : b->cap;
    }
    pk_obj **p = (pk_obj **)(void *)arena_bytes(g, bytes);
    if (!p)
        return -1;
    memcpy(p, items, bytes);
    o->items = p;
    o->n = n;
    o->cap = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i] && items[i]->depth + 1 > o->depth)
            o->depth = items[i]->depth + 1;
    return 0;
}

pk_obj *pk_new_int(pk_graph *g, int64_t v)
{
    pk_obj *o = pk_new(g, PK_INT);
    if (o)
        o->i = v;
    return o;
}

pk_obj *pk_new_str(pk_graph *g, const char *s, size_t len)
{
    pk_obj *o = pk_new(g, PK_STR);
    if (!o || !(o->s = arena_str(g, s, len)))
        return NULL;
    o->len = len;
    return o;
}

pk_obj *pk_new_bytes_kind(pk_graph *g, pk_kind kind, const void *s, size_t len)
{
    pk_obj *o = pk_new(g, kind);
    if (!o || !(o->s = arena_str(g, s, len)))
        return NULL;
    o->len = len;
    return o;
}

/* A bytearray grows in place while there is room; otherwise its bytes move to
 * a copy twice as large (o->cap is the room, the old copy stays in the arena:
 * at most as much again). */
int pk_bytes_append(pk_graph *g, pk_obj *o, const void *s, size_t len)
{
    if (!len)
        return 0;
    if (o->cap < o->len + len) {
        size_t cap = o->cap > o->len ? o->cap : o->len;
        cap = cap < 64 ? 64 : cap;
        while (cap < o->len + len)
            cap *= 2;
        if (cap > UINT32_MAX)
            return -1;
        char *p = arena_bytes(g, cap + 1);
        if (!p)
            return -1;
        memcpy(p, o->s, o->len);
        o->s = p;
        o->cap = (uint32_t)cap;
    }
    memcpy(o->s + o->len, s, len);
    o->len += len;
    o->s[o->len] = 0;
    return 0;
}

pk_obj *pk_new_global(pk_graph *g, const char *module, const char *name)
{
    pk_obj *o = pk_new(g, PK_GLOBAL);
    if (!o || !(o->s = arena_str(g, module, strlen(module))) ||
        !(o->name = arena_str(g, name, strlen(name))))
        return NULL;
    o->len = strlen(module);
    return o;
}

int pk_push(pk_graph *g, pk_obj *c, pk_obj *child)
{
    (void)g;
    if (c->n && !c->cap) { /* items in the arena: to the heap, with room to grow */
        pk_obj **h = malloc((c->n + 1) * sizeof *h);
        if (!h)
            return -1;
        memcpy(h, c->items, c->n * sizeof *h);
        c->items = h;
        c->cap = (uint32_t)(c->n + 1);
    }
    size_t cap = c->cap;
    if (c->n >= UINT32_MAX || tc_grow(&c->items, &cap, c->n + 1, sizeof *c->items))
        return -1;
    c->cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
    c->items[c->n++] = child;
    if (child && child->depth + 1 > c->depth)
        c->depth = child->depth + 1;
    return 0;
}

pk_obj *pk_new_tuple(pk_graph *g, size_t n, pk_obj *const *items)
{
    pk_obj *t = pk_new(g, PK_TUPLE);
    if (!t || pk_set_items(g, t, items, n))
        return NULL;
    return t;
}

bool pk_is_global(const pk_obj *o, const char *module, const char *name)
{
    return o && o->kind == PK_GLOBAL && !strcmp(pk_module_py3(o->s), module) &&
           !strcmp(o->name, name);
}

void pk_global_qualname(const pk_obj *o, bool raw, tc_buf *b)
{
    bool r = raw && (o->flags & PK_F_REMAPPED);
    tc_buf_puts(b, r ? o->raw_module : o->s);
    tc_buf_putc(b, '.');
    tc_buf_puts(b, r ? o->raw_name : o->name);
}

const pk_obj *pk_call_global(const pk_obj *o)
{
    if (!o || o->kind != PK_CALL || !o->func || o->func->kind != PK_GLOBAL)
        return NULL;
    return o->func;
}

bool pk_is_str(const pk_obj *o, const char *s)
{
    return o && o->kind == PK_STR && o->len == strlen(s) && !memcmp(o->s, s, o->len);
}

const char *pk_module_py3(const char *m) { return m; }
