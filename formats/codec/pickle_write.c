/* Protocol-2 pickle writer limited to the opcodes torch's weights_only loader
 * accepts. Memoizes as CPython's pickler does (every string, container, global
 * and call result), so a node reachable twice is written once. */
#include "pickle.h"
#include "pickle_internal.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct wr {
    uint8_t *buf;
    size_t len, cap;
    uint32_t next_memo;
    uint32_t max_depth;
    tc_diag *d;
    int err;
    const char *stack_top; /* save recurses: bound its stack use */
    size_t max_stack;
} wr;

static void put(wr *w, const void *p, size_t n)
{
    if (w->err)
        return;
    if (n > SIZE_MAX - w->len || tc_grow(&w->buf, &w->cap, w->len + n, 1)) {
        w->err = tc_fail(w->d, TC_ERR_NOMEM, "out of memory writing the pickle");
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void op(wr *w, uint8_t c) { put(w, &c, 1); }

static void u32(wr *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void memo_put(wr *w, pk_obj *o)
{
    uint32_t id = w->next_memo++;
    o->memo = id + 1;
    if (id < 256) {
        uint8_t b[2] = {'q', (uint8_t)id};
        put(w, b, 2);
    } else {
        op(w, 'r');
        u32(w, id);
    }
}

static bool memo_get(wr *w, const pk_obj *o)
{
    if (!o->memo)
        return false;
    uint32_t id = o->memo - 1;
    if (id < 256) {
        uint8_t b[2] = {'h', (uint8_t)id};
        put(w, b, 2);
    } else {
        op(w, 'j');
        u32(w, id);
    }
    return true;
}

static void put_int(wr *w, int64_t v)
{
    if (v >= 0 && v < 256) {
        uint8_t b[2] = {'K', (uint8_t)v};
        put(w, b, 2);
    } else if (v >= 0 && v < 65536) {
        uint8_t b[3] = {'M', (uint8_t)v, (uint8_t)(v >> 8)};
        put(w, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(w, 'J');
        u32(w, (uint32_t)(int32_t)v);
    } else { /* LONG1 with the shortest two's complement */
        uint8_t b[8];
        uint64_t u = (uint64_t)v;
        int k = 8;
        for (int i = 0; i < 8; i++)
            b[i] = (uint8_t)(u >> (8 * i));
        while (k > 1 && ((b[k - 1] == 0 && !(b[k - 2] & 0x80)) || (b[k - 1] == 0xFF && (b[k - 2] & 0x80))))
            k--;
        uint8_t h[2] = {0x8a, (uint8_t)k};
        put(w, h, 2);
        put(w, b, (size_t)k);
    }
}

static void put_unicode(wr *w, const char *s, size_t len)
{
    op(w, 'X');
    u32(w, (uint32_t)len);
    put(w, s, len);
}

static void put_global(wr *w, const char *module, const char *name)
{
    if (strchr(module, '\n') || strchr(name, '\n')) { /* would end the text line early: opcodes */
        if (!w->err)
            w->err = tc_fail(w->d, TC_ERR_FORMAT, "global name '%.60s' contains a newline", module);
        return;
    }
    op(w, 'c');
    put(w, module, strlen(module));
    op(w, '\n');
    put(w, name, strlen(name));
    op(w, '\n');
}

/* A global of the graph, written as GLOBAL text in a protocol-2 pickle: the
 * loader must import exactly the object the graph names. Refused when it
 * would not: a name that is not strict UTF-8 (surrogates), one that
 * fix_imports remaps at protocol 2 (dbm.open loads as dbm.ndbm.open), one
 * only an attribute walk resolves (protocol 4 dotted names), or an empty one. */
static void save_global(wr *w, const pk_obj *o)
{
    const char *m = o->s, *n = o->name, *tm, *tn;
    bool sur;
    size_t bad;
    const char *why = NULL;
    if (!*m || !*n)
        why = "has an empty part";
    else if ((o->flags & PK_F_SURROGATE) || pkt_utf8_check((const uint8_t *)m, strlen(m), false, &sur, &bad) ||
             pkt_utf8_check((const uint8_t *)n, strlen(n), false, &sur, &bad))
        why = "is not UTF-8 text, which GLOBAL needs";
    else if (o->flags & PK_F_DOTTED)
        why = "is resolved by an attribute walk (protocol 4), which protocol 2 does not do";
    if (why) {
        if (!w->err)
            w->err = tc_fail(w->d, TC_ERR_UNSUPPORTED, "global '%.80s.%.80s' %s: cannot be written with protocol 2",
                             m, n, why);
        return;
    }
    if ((o->flags & PK_F_REMAPPED) && o->raw_module && o->raw_name && pk_compat_map(o->raw_module, o->raw_name, &tm, &tn) &&
        !strcmp(tm, m) && !strcmp(tn, n)) {
        put_global(w, o->raw_module, o->raw_name); /* as the input wrote it: protocol 2 maps it the same way */
        return;
    }
    if (pk_compat_map(m, n, &tm, &tn) && (strcmp(tm, m) || strcmp(tn, n))) {
        if (!w->err)
            w->err = tc_fail(w->d, TC_ERR_UNSUPPORTED,
                             "global '%.80s.%.80s' would load as '%.80s.%.80s' from a protocol-2 pickle "
                             "(fix_imports): cannot be written",
                             m, n, tm, tn);
        return;
    }
    put_global(w, m, n);
}

static int save(wr *w, pk_obj *o, uint32_t depth);

/* pk_obj.mark bits while writing */
enum { BUSY = 1, SHARED_PERSID = 2 };

/* torch.save never memoizes a persistent id (and the output stays byte for
 * byte torch's), but one the input shared through the memo must stay one
 * object: find the persistent ids reachable twice. */
static int mark_shared_persids(wr *w, pk_obj *root)
{
    size_t cap = 256, sp = 0;
    pk_obj **st = malloc(cap * sizeof *st);
    if (!st)
        return w->err = tc_fail(w->d, TC_ERR_NOMEM, "out of memory writing the pickle");
    st[sp++] = root;
    while (sp) {
        pk_obj *o = st[--sp];
        if (!o)
            continue;
        if (o->memo) { /* seen: memo counts visits here, and is reset before writing */
            if (o->kind == PK_PERSID)
                o->mark |= SHARED_PERSID;
            continue;
        }
        o->memo = 1;
        if (tc_grow(&st, &cap, sp + o->n + 4, sizeof *st)) {
            free(st);
            return w->err = tc_fail(w->d, TC_ERR_NOMEM, "out of memory writing the pickle");
        }
        st[sp++] = o->func;
        st[sp++] = o->args;
        st[sp++] = o->state;
        st[sp++] = o->kwargs;
        for (size_t i = 0; i < o->n; i++)
            st[sp++] = o->items[i];
    }
    free(st);
    return 0;
}

static int save_items(wr *w, pk_obj **items, size_t n, bool dict, uint32_t depth)
{
    size_t step = dict ? 2 : 1;
    for (size_t i = 0; i < n && !w->err; i += 1000 * step) {
        size_t k = n - i < 1000 * step ? n - i : 1000 * step;
        if (k == step) {
            for (size_t j = 0; j < k; j++)
                save(w, items[i + j], depth);
            op(w, dict ? 's' : 'a');
        } else {
            op(w, '(');
            for (size_t j = 0; j < k; j++)
                save(w, items[i + j], depth);
            op(w, dict ? 'u' : 'e');
        }
    }
    return w->err;
}

/* bytes in protocol 2: _codecs.encode(text, 'latin1') as CPython writes it. */
static void save_bytes(wr *w, pk_obj *o, uint32_t depth)
{
    (void)depth;
    char *u = malloc(o->len * 2 + 1);
    if (!u) {
        w->err = tc_fail(w->d, TC_ERR_NOMEM, "out of memory writing the pickle");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < o->len; i++) {
        unsigned char c = (unsigned char)o->s[i];
        if (c < 0x80) {
            u[k++] = (char)c;
        } else {
            u[k++] = (char)(0xC0 | c >> 6);
            u[k++] = (char)(0x80 | (c & 0x3F));
        }
    }
    put_global(w, "_codecs", "encode");
    w->next_memo++; /* keep numbering simple: the global is not reused */
    put_unicode(w, u, k);
    put_unicode(w, "latin1", 6);
    op(w, 0x86);
    op(w, 'R');
    free(u);
    memo_put(w, o);
}

static int save(wr *w, pk_obj *o, uint32_t depth)
{
    if (w->err)
        return w->err;
    if (!o)
        return w->err = tc_fail(w->d, TC_ERR_FORMAT, "missing object in graph");
    if (depth > w->max_depth)
        return w->err = tc_fail(w->d, TC_ERR_LIMIT,
                                "objects nested deeper than %u (raise with --max-depth)", w->max_depth);
    char here;
    uintptr_t a = (uintptr_t)w->stack_top, b = (uintptr_t)&here;
    if ((a > b ? a - b : b - a) > w->max_stack)
        return w->err = tc_fail(w->d, TC_ERR_LIMIT,
                                "objects nested too deeply (%u) to write with this stack (ulimit -s)", depth);
    if (memo_get(w, o))
        return w->err;
    if (o->mark & BUSY)
        return w->err = tc_fail(w->d, TC_ERR_UNSUPPORTED,
                                "a tuple or call contains itself; such cycles cannot be rewritten");
    depth++;
    switch (o->kind) {
    case PK_NONE: op(w, 'N'); break;
    case PK_BOOL: op(w, o->i ? 0x88 : 0x89); break;
    case PK_INT: put_int(w, o->i); break;
    case PK_BIGINT: {
        if (o->len > 255) {
            op(w, 0x8b); /* LONG4 is not in the weights_only list; only huge ints reach here */
            u32(w, (uint32_t)o->len);
        } else {
            uint8_t h[2] = {0x8a, (uint8_t)o->len};
            put(w, h, 2);
        }
        put(w, o->s, o->len);
        break;
    }
    case PK_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &o->f, 8);
        uint8_t b[9] = {'G'};
        for (int i = 0; i < 8; i++)
            b[1 + i] = (uint8_t)(bits >> (56 - 8 * i));
        put(w, b, 9);
        break;
    }
    case PK_STR:
        put_unicode(w, o->s, o->len);
        memo_put(w, o);
        break;
    case PK_BYTES: save_bytes(w, o, depth); break;
    case PK_BYTEARRAY:
        put_global(w, "__builtin__", "bytearray");
        w->next_memo++;
        o->mark |= BUSY;
        {
            pk_obj tmp = *o;
            tmp.kind = PK_BYTES;
            tmp.memo = 0;
            op(w, '(');
            save_bytes(w, &tmp, depth);
            op(w, 't');
        }
        op(w, 'R');
        o->mark &= (uint8_t)~BUSY;
        memo_put(w, o);
        break;
    case PK_TUPLE:
        if (o->n == 0) {
            op(w, ')');
            break;
        }
        o->mark |= BUSY;
        if (o->n > 3)
            op(w, '(');
        for (size_t i = 0; i < o->n; i++)
            save(w, o->items[i], depth);
        op(w, o->n == 1 ? 0x85 : o->n == 2 ? 0x86 : o->n == 3 ? 0x87 : 't');
        o->mark &= (uint8_t)~BUSY;
        memo_put(w, o);
        break;
    case PK_LIST:
        op(w, ']');
        memo_put(w, o);
        save_items(w, o->items, o->n, false, depth);
        break;
    case PK_DICT:
        op(w, '}');
        memo_put(w, o);
        save_items(w, o->items, o->n, true, depth);
        break;
    case PK_SET:
    case PK_FROZENSET: {
        put_global(w, "__builtin__", o->kind == PK_SET ? "set" : "frozenset");
        w->next_memo++;
        o->mark |= BUSY;
        op(w, ']');
        w->next_memo++;
        save_items(w, o->items, o->n, false, depth);
        op(w, 0x85);
        op(w, 'R');
        o->mark &= (uint8_t)~BUSY;
        memo_put(w, o);
        break;
    }
    case PK_GLOBAL:
        save_global(w, o);
        memo_put(w, o);
        break;
    case PK_CALL:
        if (o->kwargs)
            return w->err = tc_fail(w->d, TC_ERR_UNSUPPORTED,
                                    "object created with keyword arguments (NEWOBJ_EX) cannot be "
                                    "written with protocol 2");
        o->mark |= BUSY;
        save(w, o->func, depth);
        save(w, o->args, depth);
        op(w, o->newobj ? 0x81 : 'R');
        o->mark &= (uint8_t)~BUSY;
        memo_put(w, o);
        if (o->items_kind)
            save_items(w, o->items, o->n, o->items_kind == PK_ITEMS_DICT, depth);
        if (o->state) {
            save(w, o->state, depth);
            op(w, 'b');
        }
        break;
    case PK_PERSID:
        o->mark |= BUSY;
        save(w, o->args, depth);
        op(w, 'Q');
        o->mark &= (uint8_t)~BUSY;
        if (o->mark & SHARED_PERSID) /* what persistent_load returned once stays one object */
            memo_put(w, o);
        break;
    default:
        return w->err = tc_fail(w->d, TC_ERR_FORMAT, "unknown node kind %d", o->kind);
    }
    return w->err;
}

static void clear_memo(void *ctx, pk_obj *o)
{
    (void)ctx;
    o->memo = 0;
}

static void clear_shared(void *ctx, pk_obj *o)
{
    (void)ctx;
    o->mark &= (uint8_t)~SHARED_PERSID;
}

/* A writer whose depth bound counts from its caller's frame at *top. */
static void wr_init(wr *w, uint32_t max_depth, const char *top, tc_diag *d)
{
    struct rlimit rl;
    size_t stack = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 64u << 20;
    *w = (wr){.max_depth = max_depth, .d = d, .stack_top = top, .max_stack = stack / 2};
    uint8_t proto[2] = {0x80, 2};
    put(w, proto, 2);
}

/* The pickle's end: '.', and the bytes to the caller (or freed on an error). */
static int wr_finish(wr *w, uint8_t **out, size_t *out_len)
{
    op(w, '.');
    if (w->err) {
        free(w->buf);
        w->buf = NULL;
        return w->err;
    }
    *out = w->buf;
    *out_len = w->len;
    w->buf = NULL;
    return 0;
}

int pk_write(pk_graph *g, pk_obj *root, uint32_t max_depth, uint8_t **out, size_t *out_len, tc_diag *d)
{
    char top = 0; /* only its address counts: where the stack was */
    wr w;
    pk_graph_clear_marks(g);
    wr_init(&w, max_depth, &top, d);
    if (!w.err && mark_shared_persids(&w, root)) {
        free(w.buf);
        pk_graph_clear_marks(g);
        return w.err;
    }
    pk_graph_foreach(g, clear_memo, NULL);
    save(&w, root, 0);
    pk_graph_foreach(g, clear_shared, NULL); /* marks as callers knew them: all clear */
    return wr_finish(&w, out, out_len);
}

/* ---- a dict pickle pair by pair ---------------------------------------------- */

struct pk_stream {
    wr w;
    size_t npairs, done; /* pairs announced, pairs written */
    size_t batch;        /* pairs in the batch being written (save_items' batches of 1000) */
};

int pk_stream_new(pk_stream **out, pk_obj *root, size_t npairs, uint32_t max_depth, tc_diag *d)
{
    bool dict = root && (root->kind == PK_DICT || (root->kind == PK_CALL && root->items_kind == PK_ITEMS_DICT));
    if (!dict || root->n || root->state || root->kwargs)
        return tc_fail(d, TC_ERR_FORMAT, "a pickle written pair by pair needs an empty dict for its root");
    pk_stream *s = calloc(1, sizeof *s);
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory writing the pickle");
    char top = 0; /* only its address counts: where the stack was */
    wr_init(&s->w, max_depth, &top, d);
    s->npairs = npairs;
    /* the root as save writes it, its items to come: for a call, its function,
     * arguments and REDUCE; for a dict, EMPTY_DICT; memoized either way */
    if (root->kind == PK_CALL) {
        root->mark |= BUSY;
        save(&s->w, root->func, 1);
        save(&s->w, root->args, 1);
        op(&s->w, root->newobj ? 0x81 : 'R');
        root->mark &= (uint8_t)~BUSY;
    } else {
        op(&s->w, '}');
    }
    memo_put(&s->w, root);
    if (s->w.err) {
        int rc = s->w.err;
        pk_stream_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int pk_stream_pair(pk_stream *s, pk_obj *key, pk_obj *value)
{
    wr *w = &s->w;
    if (w->err)
        return w->err;
    if (s->done == s->npairs)
        return w->err = tc_fail(w->d, TC_ERR_FORMAT, "more pairs than the %zu announced", s->npairs);
    char top = 0; /* only its address counts: where the stack was */
    w->stack_top = &top; /* the bound on save's recursion counts from here */
    if (s->done % 1000 == 0) {
        s->batch = s->npairs - s->done < 1000 ? s->npairs - s->done : 1000;
        if (s->batch > 1)
            op(w, '(');
    }
    save(w, key, 1);
    save(w, value, 1);
    s->done++;
    if (s->done % 1000 == 0 || s->done == s->npairs)
        op(w, s->batch == 1 ? 's' : 'u');
    return w->err;
}

int pk_stream_end(pk_stream *s, uint8_t **out, size_t *out_len)
{
    if (!s->w.err && s->done != s->npairs)
        s->w.err = tc_fail(s->w.d, TC_ERR_FORMAT, "%zu of the %zu pairs announced were written", s->done,
                           s->npairs);
    return wr_finish(&s->w, out, out_len);
}

void pk_stream_free(pk_stream *s)
{
    if (!s)
        return;
    free(s->w.buf);
    free(s);
}
