/* Tensors in torch's object graph: every rebuild call reachable from the
 * root, named by its path of keys (modules as state_dict() names them).
 *
 * Slightly over ~800 lines: one walk with its forms of containers (dicts,
 * pairs lists of Python 2 files, modules, TorchScript objects) and the
 * holders key surgery needs; each form is a few dozen lines of the walk. */
#include "torch_pickle.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "buf.h"
#include "map.h"
#include "strmap.h"
#include "vec.h"

/* ---- walking the graph ----------------------------------------------------------- */

typedef struct walker {
    tc_torch_graph *tg;
    tc_ckpt *c;
    tc_diag *d;
    char *path;
    size_t len, cap;
    uint64_t visits, max_visits;
    uint64_t aliases, max_aliases; /* tensor entries for an already seen rebuild call */
    uint64_t name_bytes, max_name_bytes; /* of every tensor name: paths through shared objects multiply */
    uint64_t cuts;                 /* cycles cut short so far */
    const char *stack_top;         /* the walk recurses: bound its stack use */
    size_t max_stack;
    /* the container the next value walked is an item of (key surgery): set before each item, NULL elsewhere */
    pk_obj *holder;
    size_t item, holder_len;       /* its item index; the length of its path */
    bool attrs;                    /* the holder is an object's attributes */
    tc_map holders;                /* holder node (and 0) -> its keyed container index */
    int in_module;                 /* modules pickled whole around the value walked */
    tc_buf key;                    /* a key's name, as key_name makes it */
    const char *bad;               /* on the path: a key that is no name (what it is), or NULL */
    size_t bad_at;                 /* the path's length before that key */
} walker;

/* The value walked next is item i of holder (whose own path is w->path), or of no keyed container (holder NULL). */
static void set_holder(walker *w, pk_obj *holder, size_t i, bool attrs)
{
    w->holder = holder;
    w->item = i;
    w->attrs = attrs;
    w->holder_len = w->len;
}

static int path_push(walker *w, const char *comp, size_t *saved)
{
    size_t cl = strlen(comp);
    *saved = w->len;
    if (w->len + cl + 2 > (1u << 20))
        return tc_fail(w->d, TC_ERR_LIMIT, "a tensor name is longer than 1 MiB");
    if (tc_grow(&w->path, &w->cap, w->len + cl + 2, 1))
        return tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
    if (w->len)
        w->path[w->len++] = '.';
    memcpy(w->path + w->len, comp, cl + 1);
    w->len += cl;
    return 0;
}

static void path_pop(walker *w, size_t saved)
{
    if (w->bad && saved <= w->bad_at)
        w->bad = NULL;
    w->len = saved;
    if (w->path)
        w->path[saved] = 0;
}

/* A Python str as repr() writes it (for a key that is no name: a NUL or a lone surrogate in it). */
static void repr_str(tc_buf *b, const char *s, size_t n)
{
    tc_buf_putc(b, '\'');
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == 0xed && i + 2 < n && ((uint8_t)s[i + 1] & 0xe0) == 0xa0) { /* a surrogate, as 3-byte UTF-8 */
            tc_buf_printf(b, "\\u%04x", 0xd000u | ((uint8_t)s[i + 1] & 0x3fu) << 6 | ((uint8_t)s[i + 2] & 0x3fu));
            i += 2;
        } else if (c == '\\' || c == '\'') {
            tc_buf_printf(b, "\\%c", c);
        } else if (c < 0x20 || c == 0x7f) {
            tc_buf_printf(b, "\\x%02x", c);
        } else {
            tc_buf_putc(b, (char)c);
        }
    }
    tc_buf_putc(b, '\'');
}

/* A two's complement little-endian integer in decimal. */
static void bigint_text(tc_buf *b, const uint8_t *p, size_t n)
{
    uint8_t *m = malloc(n ? n : 1);
    char *dig = malloc(3 * n + 2);
    if (!m || !dig) {
        free(m);
        free(dig);
        tc_buf_puts(b, "<int>");
        return;
    }
    bool neg = n && (p[n - 1] & 0x80);
    unsigned carry = 1;
    for (size_t i = 0; i < n; i++) { /* magnitude, little-endian */
        unsigned v = neg ? (uint8_t)~p[i] + carry : p[i];
        m[i] = (uint8_t)v;
        carry = neg ? v >> 8 : 0;
    }
    size_t nd = 0, top = n;
    while (top && !m[top - 1])
        top--;
    while (top) { /* divide by 10, most significant byte first */
        unsigned r = 0;
        for (size_t i = top; i-- > 0;) {
            unsigned v = r << 8 | m[i];
            m[i] = (uint8_t)(v / 10);
            r = v % 10;
        }
        dig[nd++] = (char)('0' + r);
        while (top && !m[top - 1])
            top--;
    }
    if (!nd)
        dig[nd++] = '0';
    if (neg)
        tc_buf_putc(b, '-');
    while (nd)
        tc_buf_putc(b, dig[--nd]);
    free(m);
    free(dig);
}

/* A float as Python's repr: the shortest digits that read back as the same
 * number, fixed-point for exponents -4 to 15, else with an exponent. */
static void float_text(tc_buf *b, double f)
{
    if (isnan(f) || isinf(f)) {
        tc_buf_puts(b, isnan(f) ? "nan" : f < 0 ? "-inf" : "inf");
        return;
    }
    char t[48];
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, f);
        if (strtod(t, NULL) == f)
            break;
    }
    snprintf(t, sizeof t, "%.*e", prec - 1, f);
    int exp = atoi(strchr(t, 'e') + 1);
    if (exp < -4 || exp >= 16) {
        char *e = strchr(t, 'e'), *dot = strchr(t, '.');
        if (dot && e) { /* "1.50e+20" is "1.5e+20" */
            char *z = e;
            while (z > dot + 1 && z[-1] == '0')
                z--;
            if (z == dot + 1)
                z = dot;
            memmove(z, e, strlen(e) + 1);
        }
        tc_buf_puts(b, t);
        return;
    }
    snprintf(t, sizeof t, "%.*f", prec - 1 - exp > 0 ? prec - 1 - exp : 0, f);
    tc_buf_puts(b, t);
    if (!strchr(t, '.'))
        tc_buf_puts(b, ".0");
}

/* The name component of a dict key, into b. Text, ints, bools, None and
 * floats name their tensors as str() of the key; any other key (bytes, a
 * tuple, text that is not UTF-8 or holds a NUL) is no name a state_dict can
 * have: it is written as repr() writes it, and *bad (when given) says what it is. */
static void key_name(const pk_obj *k, tc_buf *b, const char **bad, int depth)
{
    if (depth > 8) {
        tc_buf_puts(b, "...");
        if (bad)
            *bad = "a tuple";
        return;
    }
    const char *why = NULL;
    switch (k->kind) {
    case PK_STR:
        if ((k->flags & PK_F_SURROGATE) || memchr(k->s, 0, k->len)) {
            why = k->flags & PK_F_SURROGATE ? "text that is not UTF-8 (a lone surrogate)" : "text holding a NUL";
            repr_str(b, k->s, k->len);
        } else {
            tc_buf_add(b, k->s, k->len);
        }
        break;
    case PK_INT: tc_buf_printf(b, "%" PRId64, k->i); break;
    case PK_BIGINT: bigint_text(b, (const uint8_t *)k->s, k->len); break;
    case PK_BOOL: tc_buf_puts(b, k->i ? "True" : "False"); break;
    case PK_NONE: tc_buf_puts(b, "None"); break;
    case PK_FLOAT: float_text(b, k->f); break;
    case PK_BYTES:
    case PK_BYTEARRAY:
        why = k->kind == PK_BYTES ? "bytes" : "a bytearray";
        tc_buf_puts(b, k->kind == PK_BYTES ? "b" : "bytearray(b");
        repr_str(b, k->s, k->len);
        if (k->kind == PK_BYTEARRAY)
            tc_buf_putc(b, ')');
        break;
    case PK_TUPLE:
        why = "a tuple";
        tc_buf_putc(b, '(');
        for (size_t i = 0; i < k->n && depth < 8; i++) {
            if (i)
                tc_buf_puts(b, ", ");
            key_name(k->items[i], b, NULL, depth + 1);
        }
        if (depth >= 8 && k->n)
            tc_buf_puts(b, "...");
        tc_buf_puts(b, k->n == 1 ? ",)" : ")");
        break;
    case PK_CALL: {
        /* bytes under protocol 2: _codecs.encode(text, 'latin1'), each character one byte */
        const pk_obj *f = pk_call_global(k);
        const pk_obj *a = k->args;
        if (f && pk_is_global(f, "_codecs", "encode") && a && a->kind == PK_TUPLE && a->n == 2 &&
            a->items[0]->kind == PK_STR && pk_is_str(a->items[1], "latin1")) {
            tc_buf raw = TC_BUF_INIT(0);
            const uint8_t *p = (const uint8_t *)a->items[0]->s;
            bool ok = true;
            for (size_t i = 0; i < a->items[0]->len && ok; i++) {
                if (p[i] < 0x80) {
                    tc_buf_putc(&raw, (char)p[i]);
                } else if ((p[i] & 0xfe) == 0xc2 && i + 1 < a->items[0]->len) {
                    tc_buf_putc(&raw, (char)((p[i] & 0x03) << 6 | (p[i + 1] & 0x3f)));
                    i++;
                } else {
                    ok = false;
                }
            }
            if (ok) {
                why = "bytes";
                tc_buf_putc(b, 'b');
                repr_str(b, tc_buf_str(&raw), tc_buf_len(&raw));
                tc_buf_free(&raw);
                break;
            }
            tc_buf_free(&raw);
        }
        why = "an object that is no text";
        tc_buf_printf(b, "<%s>", f ? f->name : "object");
        break;
    }
    default:
        why = "an object that is no text";
        tc_buf_printf(b, "<%s>", k->kind == PK_GLOBAL ? "global" : k->kind == PK_FROZENSET ? "frozenset" : "value");
        break;
    }
    if (bad)
        *bad = why;
}

void tc_torch_key_name(const pk_obj *k, tc_buf *b, const char **bad) { key_name(k, b, bad, 0); }

/* Push key k onto the path (as key_name names it), remembering where a key that is no name entered it. */
/* As path_push, *saved is the length to go back to whatever happens, so that
 * no path (an out-of-memory one included) leaves it unset. */
static int key_push(walker *w, const pk_obj *k, size_t *saved)
{
    const char *bad;
    *saved = w->len;
    tc_buf_reset(&w->key);
    key_name(k, &w->key, &bad, 0);
    if (tc_buf_oom(&w->key))
        return tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
    int rc = path_push(w, tc_buf_str(&w->key), saved);
    if (rc)
        return rc;
    if (bad && !w->bad) {
        w->bad = bad;
        w->bad_at = *saved;
    }
    return 0;
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

/* The keyed container of w->holder (recorded the first time a tensor is found in it), or -1. */
static long holder_index(walker *w)
{
    if (!w->holder)
        return -1;
    const uint64_t *at = tc_map_find2(&w->holders, (uint64_t)(uintptr_t)w->holder, 0);
    if (at)
        return (long)*at;
    pk_obj **it;
    size_t n;
    if (!dict_items(w->holder, &it, &n))
        return -1;
    size_t nk = n / 2, bytes = 0;
    char **keys = calloc(nk + 1, sizeof *keys);
    bool *text = calloc(nk + 1, sizeof *text);
    char *name = strndup(w->path ? w->path : "", w->holder_len);
    long k = -1;
    bool ok = keys && text && name;
    tc_buf kb = TC_BUF_INIT(0);
    for (size_t i = 0; ok && i < nk; i++) {
        const char *bad;
        tc_buf_reset(&kb);
        key_name(it[2 * i], &kb, &bad, 0);
        ok = !tc_buf_oom(&kb) && (keys[i] = strdup(tc_buf_str(&kb))) != NULL;
        /* renamed only when the name is the key itself */
        text[i] = it[2 * i]->kind == PK_STR && !bad;
        bytes += ok ? strlen(keys[i]) + 1 : 0;
    }
    tc_buf_free(&kb);
    if (!ok)
        tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
    else if ((w->name_bytes += bytes + w->holder_len) > w->max_name_bytes)
        tc_fail(w->d, TC_ERR_LIMIT,
                "the tensor names take more than %" PRIu64
                " bytes (objects nested very deep or shared very many times; raise with --max-objects)",
                w->max_name_bytes);
    else if ((k = tc_ckpt_add_keyed(w->c, name, w->attrs, (const char *const *)keys, text, nk, w->d)) >= 0) {
        tc_torch_graph *tg = w->tg;
        if (tc_grow(&tg->keyed, &tg->keyedcap, tg->nkeyed + 1, sizeof *tg->keyed))
            k = -1, tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
        if (k >= 0 && tc_map_put2(&w->holders, (uint64_t)(uintptr_t)w->holder, 0, (uint64_t)k, NULL) < 0)
            k = -1, tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
        if (k >= 0)
            tg->keyed[tg->nkeyed++] = w->holder;
    }
    for (size_t i = 0; keys && i < nk; i++)
        free(keys[i]);
    free(keys);
    free(text);
    free(name);
    return k;
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

static int note_tensor(tc_torch_graph *tg, size_t k, pk_obj *call, pk_obj *param, tc_diag *d)
{
    size_t ca = tg->ntnode, cb = tg->ntnode; /* two arrays of capacity ntnode: it moves when both have grown */
    if (tc_grow(&tg->tnode, &ca, k + 1, sizeof *tg->tnode) || tc_grow(&tg->tparam, &cb, k + 1, sizeof *tg->tparam))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tg->ntnode = ca;
    tg->tnode[k] = call;
    tg->tparam[k] = param;
    return 0;
}

/* What a BUILD or SETITEMS applied to a rebuilt tensor would do in torch:
 * Tensor.__setstate__ takes a 3-tuple (requires_grad, _, backward_hooks) and
 * sets requires_grad; any other state changes the tensor's data (a 4-tuple
 * calls set_(), a 5-tuple replaces .data), and item assignment writes into
 * it. Those are refused rather than described wrongly. *rg receives a
 * requires_grad the state sets. */
static int after_rebuild(walker *w, const pk_obj *o, int *rg)
{
    if (o->items_kind)
        return tc_fail(w->d, TC_ERR_UNSUPPORTED,
                       "tensor '%s': the pickle assigns items into the rebuilt tensor, which changes its data in "
                       "torch; refusing to describe it",
                       w->path);
    if (!o->state)
        return 0;
    const pk_obj *s = o->state;
    if (s->kind == PK_TUPLE && s->n == 3 && s->items[0]->kind == PK_BOOL) {
        *rg = (int)s->items[0]->i;
        return 0;
    }
    return tc_fail(w->d, TC_ERR_UNSUPPORTED,
                   "tensor '%s': the pickle sets the rebuilt tensor's state (BUILD with %s), which replaces its data "
                   "in torch; refusing to describe it",
                   w->path, s->kind == PK_TUPLE ? "a tuple other than (requires_grad, _, hooks)" : "a non-tuple");
}

/* A tensor from a rebuild call; param is the wrapping Parameter call or NULL. */
static int add_tensor(walker *w, pk_obj *call, pk_obj *param, const pk_obj *func, const pk_obj *args,
                      bool requires_grad_given, bool rg)
{
    tc_ckpt *c = w->c;
    if ((w->name_bytes += w->len + 1) > w->max_name_bytes)
        return tc_fail(w->d, TC_ERR_LIMIT,
                       "the tensor names take more than %" PRIu64
                       " bytes (objects nested very deep or shared very many times; raise with --max-objects)",
                       w->max_name_bytes);
    long ti = tc_ckpt_add_tensor(c, w->path, w->d);
    if (ti < 0)
        return w->d->code;
    if (note_tensor(w->tg, (size_t)ti, call, param, w->d))
        return w->d->code;
    long kx = w->holder ? holder_index(w) : -1;
    if (w->holder && kx < 0 && w->d->code)
        return w->d->code;
    tc_tensor *t = tc_ckpt_tensor_mut(c, (size_t)ti);
    t->keyed = kx;
    t->item = w->item;
    t->badkey = w->bad;
    pk_obj *node = param ? param : call; /* tag: the first tensor built by it, + 1 */
    if (node->tag) {
        t->alias_of = (long)node->tag - 1;
        if (++w->aliases > w->max_aliases)
            return tc_fail(w->d, TC_ERR_LIMIT,
                           "more than %" PRIu64 " names lead to tensors already named (objects shared very "
                           "many times; raise with --max-objects)",
                           w->max_aliases);
    } else {
        node->tag = (uint32_t)ti + 1;
    }
    t->parameter = param != NULL;
    pk_obj *const *a = args->items;
    size_t na = args->n;
    int nd = 0, nd2 = 0;
    int64_t shape[TC_MAX_DIMS], stride[TC_MAX_DIMS];
    if (is_rebuild(func, "_rebuild_meta_tensor_no_storage")) {
        if (na < 3)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': meta tensor with %zu arguments", w->path, na);
        t->kind = TC_TENSOR_META;
        t->dtype = dtype_global(a[0]);
        t->device = "meta";
        if (int_tuple(w, a[1], shape, &nd, "size") || int_tuple(w, a[2], stride, &nd2, "stride"))
            return w->d->code;
        t->requires_grad = na > 3 && a[3]->kind == PK_BOOL && a[3]->i;
    } else if (is_rebuild(func, "_rebuild_wrapper_subclass")) {
        t->kind = TC_TENSOR_OTHER;
        t->dtype = na > 1 ? dtype_global(a[1]) : TC_DT_INVALID;
        t->device = "?";
        if (na > 3 && (int_tuple(w, a[2], shape, &nd, "size") || int_tuple(w, a[3], stride, &nd2, "stride")))
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
        long si = tc_ckpt_find_storage(c, st->args->items[2]->s);
        if (si < 0)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': unknown storage", w->path);
        tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
        t->storage = si;
        s->ntensors++;
        if (a[1]->kind != PK_INT || a[1]->i < 0)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': storage offset is not a non-negative integer",
                           w->path);
        t->offset = a[1]->i;
        if (int_tuple(w, a[2], shape, &nd, "size") || int_tuple(w, a[3], stride, &nd2, "stride"))
            return w->d->code;
        t->dtype = v3 ? dtype_global(a[6]) : s->dtype;
        if (t->dtype == TC_DT_INVALID)
            return tc_fail(w->d, TC_ERR_UNSUPPORTED, "tensor '%s': unknown dtype", w->path);
        if (!v3 && s->untyped)
            return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': untyped storage without a dtype", w->path);
        size_t rgi = q ? 5 : 4;
        t->requires_grad = na > rgi && a[rgi]->kind == PK_BOOL && a[rgi]->i;
    }
    if (nd2 != nd)
        return tc_fail(w->d, TC_ERR_FORMAT, "tensor '%s': size has %d dimensions, stride %d", w->path, nd, nd2);
    if (tc_ckpt_set_dims(c, (size_t)ti, nd, shape, stride, w->d))
        return w->d->code;
    t = tc_ckpt_tensor_mut(c, (size_t)ti);
    if (requires_grad_given)
        t->requires_grad = rg;
    int set_rg = -1;
    if (after_rebuild(w, call, &set_rg) || (param && after_rebuild(w, param, &set_rg)))
        return w->d->code;
    if (set_rg >= 0)
        t->requires_grad = set_rg;
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
        const tc_storage *s = tc_ckpt_storage(c, (size_t)t->storage);
        uint64_t cap = s->nbytes / tc_dtype_size(t->dtype), last;
        if (__builtin_add_overflow((uint64_t)t->offset, extent, &last) || last >= cap)
            return tc_fail(w->d, TC_ERR_FORMAT,
                           "tensor '%s': reaches element %" PRIu64 " of storage '%s', which holds %" PRIu64
                           " (offset or strides past the storage)",
                           w->path, last, s->key, cap);
    }
    return 0;
}

/* pk_obj.mark during the walk */
enum { MARK_ON_PATH = 1, MARK_NO_TENSORS = 2 };

static int walk(walker *w, pk_obj *o);

/* The items it[0..n) of holder (a dict, a dict-like call, an object's state: attrs). */
static int walk_dict(walker *w, pk_obj *holder, pk_obj **it, size_t n, bool attrs)
{
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t sv;
        set_holder(w, holder, i / 2, attrs);
        if (key_push(w, it[i], &sv))
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
        set_holder(w, NULL, 0, false);
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
    set_holder(w, NULL, 0, false);
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

static int walk_module_state(walker *w, const pk_obj *state, const tc_strmap *np_names);

/* nn.Module pickled whole: names as state_dict() gives them (minus the
 * buffers named in _non_persistent_buffers_set, as state_dict() leaves them
 * out). The set is pickled as set([...]) under protocols 0-3 (a REDUCE on a
 * list), as EMPTY_SET + ADDITEMS under 4 and 5. */
static int walk_module(walker *w, const pk_obj *state)
{
    const pk_obj *skip = dict_get(state, "_non_persistent_buffers_set"), *l = NULL;
    tc_strmap np_names = {0};
    if (skip && (skip->kind == PK_SET || skip->kind == PK_FROZENSET))
        l = skip;
    else if (skip && skip->kind == PK_CALL && skip->args && skip->args->n == 1 &&
             (skip->args->items[0]->kind == PK_LIST || skip->args->items[0]->kind == PK_TUPLE))
        l = skip->args->items[0];
    if (l) {
        for (size_t j = 0; j < l->n; j++)
            if (l->items[j]->kind == PK_STR && tc_strmap_put(&np_names, l->items[j]->s, j, NULL) < 0) {
                tc_strmap_free(&np_names);
                return tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
            }
    }
    int rc = walk_module_state(w, state, &np_names);
    tc_strmap_free(&np_names);
    return rc;
}

static int walk_module_state(walker *w, const pk_obj *state, const tc_strmap *np_names)
{
    static const char *const groups[] = {"_parameters", "_buffers"};
    for (int gi = 0; gi < 2; gi++) {
        pk_obj **it;
        size_t n;
        pk_obj *group = (pk_obj *)dict_get(state, groups[gi]);
        if (!dict_items(group, &it, &n))
            continue;
        for (size_t i = 0; i + 1 < n; i += 2) {
            if (it[i + 1]->kind == PK_NONE || it[i]->kind != PK_STR)
                continue;
            size_t at;
            if (gi == 1 && tc_strmap_get(np_names, it[i]->s, &at))
                continue;
            size_t sv;
            set_holder(w, group, i / 2, true);
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
            set_holder(w, NULL, 0, false);
            if (path_push(w, it[i]->s, &sv))
                return w->d->code;
            int rc = walk(w, it[i + 1]);
            path_pop(w, sv);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The pairs of OrderedDict([[k, v], ...]) or dict(((k, v), ...)), as Python 2's pickles built
 * them (a REDUCE on one list of pairs), or NULL. */
static pk_obj *pairs_arg(const pk_obj *f, const pk_obj *args)
{
    if (!f || !args || args->kind != PK_TUPLE || args->n != 1 ||
        !(pk_is_global(f, "collections", "OrderedDict") || pk_is_global(f, "builtins", "dict")))
        return NULL;
    pk_obj *l = args->items[0];
    if (l->kind != PK_LIST && l->kind != PK_TUPLE)
        return NULL;
    for (size_t i = 0; i < l->n; i++)
        if ((l->items[i]->kind != PK_LIST && l->items[i]->kind != PK_TUPLE) || l->items[i]->n != 2)
            return NULL;
    return l;
}

static int walk_pairs(walker *w, const pk_obj *l)
{
    for (size_t i = 0; i < l->n; i++) {
        pk_obj *const *kv = l->items[i]->items;
        size_t sv;
        set_holder(w, NULL, 0, false); /* pairs in a list: no keyed container key surgery can edit */
        if (key_push(w, kv[0], &sv))
            return w->d->code;
        int rc = walk(w, kv[1]);
        path_pop(w, sv);
        if (rc)
            return rc;
    }
    return 0;
}

/* Parameter(data[, requires_grad]) as torch before 1.0 pickled it (a REDUCE on the class; 0.3 then
 * BUILDs a (requires_grad, volatile, hooks) state on it): the tensor data is, requires_grad as given,
 * True by default. */
static int walk_old_parameter(walker *w, pk_obj *o)
{
    pk_obj *args = o->args, *inner = args->items[0];
    const pk_obj *fi = pk_call_global(inner);
    if (!fi || !inner->args || inner->args->kind != PK_TUPLE)
        return walk(w, inner);
    bool rg = args->n < 2 || (args->items[1]->kind == PK_BOOL && args->items[1]->i);
    return add_tensor(w, inner, o, fi, inner->args, true, rg);
}

/* TorchScript: an object of a module class its code declares is named as
 * scripted_module.state_dict() names it: the attributes declared as
 * parameters, then those declared as buffers (None ones left out), then every
 * attribute holding a module object, recursively. Other objects hold no
 * state_dict() names. */
static int walk_script_as(walker *w, pk_obj *o, const char *qual)
{
    const tc_script_class *cls = tc_script_class_of(w->tg->script, qual);
    pk_obj **it;
    size_t n;
    if (!cls)
        return 0; /* no module: a TorchScript class, whose tensors are no state_dict()'s */
    if (!o->state || !dict_items(o->state, &it, &n))
        return tc_fail(w->d, TC_ERR_UNSUPPORTED,
                       "module '%s' (%s) is saved with a state of its own (__getstate__), not its attributes; its "
                       "state_dict() names cannot be read",
                       w->path, qual);
    if (!cls->declared)
        return tc_fail(w->d, TC_ERR_UNSUPPORTED,
                       "module class %s declares no __parameters__ or no __buffers__ in its code (an archive of an "
                       "older torch?); which attributes are parameters and buffers is unknown",
                       qual);
    if (!w->in_module) {
        if ((w->name_bytes += w->len + strlen(qual)) > w->max_name_bytes)
            return tc_fail(w->d, TC_ERR_LIMIT,
                           "the tensor names take more than %" PRIu64
                           " bytes (objects nested very deep or shared very many times; raise with --max-objects)",
                           w->max_name_bytes);
        int rc = tc_ckpt_add_module(w->c, w->path ? w->path : "", qual, w->d);
        if (rc)
            return rc;
    }
    tc_strmap attrs = {0};
    int rc = 0;
    for (size_t i = 0; i + 1 < n && !rc; i += 2)
        if (it[i]->kind == PK_STR && tc_strmap_put(&attrs, it[i]->s, i, NULL) < 0)
            rc = tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
    w->in_module++;
    for (int g = 0; g < 2 && !rc; g++) {
        char *const *names = g ? cls->buffers : cls->params;
        size_t nn = g ? cls->nbuffers : cls->nparams, at;
        for (size_t k = 0; k < nn && !rc; k++) {
            if (!tc_strmap_get(&attrs, names[k], &at) || it[at + 1]->kind == PK_NONE)
                continue;
            size_t sv;
            set_holder(w, o->state, at / 2, true);
            if ((rc = path_push(w, names[k], &sv)))
                break;
            rc = walk(w, it[at + 1]);
            path_pop(w, sv);
        }
    }
    tc_buf fq = TC_BUF_INIT(0);
    for (size_t i = 0; i + 1 < n && !rc; i += 2) {
        const pk_obj *fv = pk_call_global(it[i + 1]);
        if (it[i]->kind != PK_STR || !fv)
            continue;
        tc_buf_reset(&fq);
        pk_global_qualname(fv, false, &fq);
        if (tc_buf_oom(&fq)) {
            rc = tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        if (!tc_script_class_of(w->tg->script, tc_buf_str(&fq)))
            continue;
        size_t sv;
        set_holder(w, NULL, 0, false);
        if ((rc = path_push(w, it[i]->s, &sv)))
            break;
        rc = walk(w, it[i + 1]);
        path_pop(w, sv);
    }
    tc_buf_free(&fq);
    w->in_module--;
    tc_strmap_free(&attrs);
    return rc;
}

/* walk_script_as under f's whole qualified name (the classes code/ declares are looked up by it) */
static int walk_script(walker *w, pk_obj *o, const pk_obj *f)
{
    tc_buf q = TC_BUF_INIT(0);
    pk_global_qualname(f, false, &q);
    int rc = tc_buf_oom(&q) ? tc_fail(w->d, TC_ERR_NOMEM, "out of memory") : walk_script_as(w, o, tc_buf_str(&q));
    tc_buf_free(&q);
    return rc;
}

static int walk_call(walker *w, pk_obj *o)
{
    const pk_obj *f = pk_call_global(o);
    pk_obj *args = o->args;
    if (f && args && args->kind == PK_TUPLE && (args->n == 1 || args->n == 2) &&
        pk_is_global(f, "torch.nn.parameter", "Parameter"))
        return walk_old_parameter(w, o);
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
            !strcmp(f->name, "_rebuild_tensor") || !strcmp(f->name, "_rebuild_meta_tensor_no_storage") ||
            !strcmp(f->name, "_rebuild_wrapper_subclass"))
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
            if (rc)
                return rc;
            if (args->n > 4 && args->items[4]->kind == PK_TUPLE && args->items[4]->n >= 3) {
                static const char *const qp[] = {"q_per_channel_scales", "q_per_channel_zero_points"};
                size_t first = tc_ckpt_ntensors(w->c);
                for (size_t i = 0; i < 2 && !rc; i++)
                    rc = walk_named(w, qp[i], args->items[4]->items[1 + i]);
                for (size_t k = first; k < tc_ckpt_ntensors(w->c); k++)
                    tc_ckpt_tensor_mut(w->c, k)->aux = true;
            }
            return rc;
        }
    }
    if (f && args && args->kind == PK_TUPLE && pk_is_global(f, "torch._tensor", "_rebuild_from_type_v2") &&
        args->n >= 3 && args->items[2]->kind == PK_TUPLE) {
        const pk_obj *fi = args->items[0];
        if (fi->kind == PK_GLOBAL && !strcmp(fi->s, "torch._utils")) {
            int rc = add_tensor(w, o, NULL, fi, args->items[2], false, false);
            if (rc)
                return rc;
            tc_ckpt_tensor_mut(w->c, tc_ckpt_ntensors(w->c) - 1)->subclass = true;
            return 0;
        }
    }
    if (w->tg->script && f)
        return walk_script(w, o, f);
    int rc = 0;
    const pk_obj *pairs = pairs_arg(f, args);
    if (pairs && (rc = walk_pairs(w, pairs)))
        return rc;
    if (o->items_kind == PK_ITEMS_DICT)
        rc = walk_dict(w, o, o->items, o->n, false);
    else if (o->items_kind == PK_ITEMS_LIST)
        rc = walk_seq(w, o->items, o->n);
    if (rc || !o->state)
        return rc;
    if (dict_get(o->state, "_parameters") || dict_get(o->state, "_modules")) {
        if (!w->in_module && f) { /* the outermost module: where extract finds a state_dict() */
            tc_buf cls = TC_BUF_INIT(0);
            pk_global_qualname(f, false, &cls);
            if (tc_buf_oom(&cls))
                rc = tc_fail(w->d, TC_ERR_NOMEM, "out of memory");
            else if ((w->name_bytes += w->len + tc_buf_len(&cls)) > w->max_name_bytes)
                rc = tc_fail(w->d, TC_ERR_LIMIT,
                             "the tensor names take more than %" PRIu64
                             " bytes (objects nested very deep or shared very many times; raise with --max-objects)",
                             w->max_name_bytes);
            else
                rc = tc_ckpt_add_module(w->c, w->path ? w->path : "", tc_buf_str(&cls), w->d);
            tc_buf_free(&cls);
            if (rc)
                return rc;
        }
        w->in_module++;
        rc = walk_module(w, o->state);
        w->in_module--;
        return rc;
    }
    pk_obj **it;
    size_t n;
    if (dict_items(o->state, &it, &n))
        return walk_dict(w, o->state, it, n, true);
    if (o->state->kind == PK_TUPLE) /* (dict state, slot state) */
        for (size_t i = 0; i < o->state->n && !rc; i++)
            if (dict_items(o->state->items[i], &it, &n))
                rc = walk_dict(w, o->state->items[i], it, n, true);
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
    if (o->mark == MARK_NO_TENSORS)
        return 0;
    if (o->mark == MARK_ON_PATH) {
        w->cuts++;
        return 0; /* a cycle */
    }
    int rc = 0;
    size_t tensors = tc_ckpt_ntensors(w->c);
    uint64_t cuts = w->cuts;
    o->mark = MARK_ON_PATH;
    switch (o->kind) {
    case PK_DICT: rc = walk_dict(w, o, o->items, o->n, false); break;
    case PK_LIST:
    case PK_TUPLE: rc = walk_seq(w, o->items, o->n); break;
    case PK_CALL: rc = walk_call(w, o); break;
    default: break;
    }
    /* walked whole, no tensor under it and no cycle cut short: no other path through it finds one */
    o->mark = tc_ckpt_ntensors(w->c) == tensors && w->cuts == cuts ? MARK_NO_TENSORS : 0;
    return rc;
}

static size_t stack_limit;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;

/* The stack's size limit, asked once a process (a scan walks a graph per file). */
/* keep[i] set where some path from the root reaches a persistent id of storage i (torch_pickle.h). */
int tc_torch_reach(tc_torch_graph *tg, bool *keep, tc_diag *d)
{
    size_t n = 0, cap = 1024;
    pk_obj **st = malloc(cap * sizeof *st);
    if (!st)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    pk_graph_clear_marks(tg->g);
    st[n++] = tg->root;
    tg->root->mark = 1;
    int rc = 0;
    while (n && !rc) {
        pk_obj *o = st[--n];
        if (o->kind == PK_PERSID && o->args && o->args->kind == PK_TUPLE && o->args->n >= 3 &&
            o->args->items[2]->kind == PK_STR) {
            long si = tc_ckpt_find_storage(tg->c, o->args->items[2]->s);
            if (si >= 0)
                keep[si] = true;
        }
        pk_obj *kids[4] = {o->func, o->args, o->state, o->kwargs};
        size_t nk = o->kind == PK_GLOBAL ? 0 : o->n; /* a global's name is no child */
        if (tc_grow(&st, &cap, n + 4 + nk, sizeof *st)) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t i = 0; i < 4; i++)
            if (kids[i] && !kids[i]->mark) {
                kids[i]->mark = 1;
                st[n++] = kids[i];
            }
        for (size_t i = 0; o->items && i < nk; i++)
            if (o->items[i] && !o->items[i]->mark) {
                o->items[i]->mark = 1;
                st[n++] = o->items[i];
            }
    }
    free(st);
    pk_graph_clear_marks(tg->g);
    return rc;
}

static void stack_init(void)
{
    struct rlimit rl;
    stack_limit = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 64u << 20;
}

int tc_torch_walk(tc_torch_graph *tg, tc_diag *d)
{
    tc_ckpt *c = tg->c;
    char top;
    pthread_once(&stack_once, stack_init);
    size_t stack = stack_limit;
    const tc_limits *lim = tc_ckpt_limits(c);
    walker w = {.tg = tg, .c = c, .d = d, .max_visits = lim->max_objects * 4 + 1000,
                .max_aliases = lim->max_objects / 256 + 1000, .stack_top = &top, .max_stack = stack / 2,
                .max_name_bytes = 64 * tg->pickle_bytes + lim->max_objects};
    pk_graph_clear_marks(tg->g);
    size_t sv;
    int rc = path_push(&w, "", &sv);
    w.len = 0;
    if (rc)
        goto done;
    rc = walk(&w, tg->root);
done:
    pk_graph_clear_marks(tg->g);
    free(w.path);
    tc_buf_free(&w.key);
    tc_map_free(&w.holders);
    return rc;
}
