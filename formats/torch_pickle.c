/* torch.save's pickle: storages from persistent ids, tensors and contents
 * from the object graph, and the pickles tensorctl writes. */
#include "torch_pickle.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "readings.h"
#include "strmap.h"
#include "vec.h"

/* ---- the graph and its side tables ------------------------------------------- */

tc_torch_graph *tc_torch_graph_of(const tc_ckpt *c)
{
    return tc_ckpt_can(c, TC_CAP_TORCH_GRAPH) ? tc_ckpt_priv(c) : NULL;
}

int tc_torch_graph_init(tc_torch_graph *tg, tc_ckpt *c, tc_diag *d)
{
    memset(tg, 0, sizeof *tg);
    tg->c = c;
    if (!(tg->g = pk_graph_new()))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

void tc_torch_graph_free(tc_torch_graph *tg)
{
    if (!tg)
        return;
    for (size_t i = 0; i < tg->npids; i++)
        free(tg->pids[i].more);
    free(tg->pids);
    free(tg->tnode);
    free(tg->tparam);
    free(tg->keyed);
    pk_graph_free(tg->g);
    memset(tg, 0, sizeof *tg);
}

/* Record a persistent-id tuple naming storage si (once). */
static int add_pid(tc_torch_graph *tg, size_t si, pk_obj *pid, tc_diag *d)
{
    size_t was = tg->npids; /* every element allocated is in use (zeroed): npids is the capacity */
    if (tc_grow(&tg->pids, &tg->npids, si + 1, sizeof *tg->pids))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memset(tg->pids + was, 0, (tg->npids - was) * sizeof *tg->pids);
    tc_pids *s = &tg->pids[si];
    /* the same tuple comes back through the memo: it is the last one added */
    if (s->n && tc_pids_at(s, s->n - 1) == pid)
        return 0;
    if (!s->n) {
        s->one = pid;
        s->n = 1;
        return 0;
    }
    if (tc_grow(&s->more, &s->cap, s->n, sizeof *s->more))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    s->more[s->n++ - 1] = pid;
    return 0;
}

/* ---- persistent ids ------------------------------------------------------------- */

int tc_torch_persid(void *ctx, pk_obj *persid, tc_diag *d)
{
    tc_torch_graph *tg = ctx;
    tc_ckpt *c = tg->c;
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
    long si = tc_ckpt_find_storage(c, key->s);
    if (si < 0) {
        if ((si = tc_ckpt_add_storage(c, key->s, d)) < 0)
            return d->code;
        if (tc_ckpt_set_location(c, (size_t)si, loc->s, d))
            return d->code;
        tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
        s->dtype = dt;
        s->untyped = untyped;
        s->numel = (uint64_t)numel->i;
        if (__builtin_mul_overflow(s->numel, tc_dtype_size(dt), &s->nbytes))
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s': %" PRIu64 " elements overflow a byte count",
                           key->s, s->numel);
    } else {
        const tc_storage *s = tc_ckpt_storage(c, (size_t)si);
        if (s->dtype != dt || (uint64_t)numel->i != s->numel)
            /* torch keeps the first; a file with two views must agree or it is corrupt */
            return tc_fail(d, TC_ERR_FORMAT,
                           "storage '%s' is named with two different types or sizes (%s x %" PRIu64
                           ", then %s x %" PRId64 ")",
                           key->s, tc_dtype_name(s->dtype), s->numel, tc_dtype_name(dt), numel->i);
    }
    return add_pid(tg, (size_t)si, t, d);
}

int tc_torch_read_failed(tc_torch_graph *tg, int rc, const char *what, tc_diag *d)
{
    char unsafe[1100];
    if (rc == TC_ERR_NOMEM || rc == TC_ERR_UNSAFE)
        return rc;
    tc_first_unsafe_global(tg->g, unsafe, sizeof unsafe);
    if (!unsafe[0])
        return rc;
    char was[sizeof d->msg];
    snprintf(was, sizeof was, "%s", d->msg);
    tc_diag_clear(d);
    return tc_fail(d, TC_ERR_UNSAFE, "%s names %s before it fails (torch.load would import and call it first): %s",
                   what, unsafe, was);
}

pk_read_opts tc_torch_read_opts(tc_torch_graph *tg, const char *what)
{
    const tc_limits *lim = tc_ckpt_limits(tg->c);
    pk_read_opts o = {.limits = {lim->max_objects, lim->max_depth, lim->max_objects},
                      .what = what,
                      .on_persid = tc_torch_persid,
                      .ctx = tg,
                      .ops_seen = tg->ops,
                      .long_digits = &tg->long_digits};
    return o;
}

/* ---- contents: short descriptions of what is not a tensor ------------------------- */

/* A description: at most 159 bytes, cut with "..." (a tc_buf over b; set up by sbuf_init, never copied). */
typedef struct sbuf {
    char b[160];
    tc_buf t;
} sbuf;

static void sbuf_init(sbuf *s)
{
    s->t = tc_buf_fixed(s->b, sizeof s->b);
}

static void sput(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sput(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_buf_vprintf(&s->t, fmt, ap);
    va_end(ap);
}

/* p cut to at most max bytes (never inside a UTF-8 sequence), escaped for a terminal (tc_buf_esc) */
static void sput_text(sbuf *s, const char *p, size_t len, size_t max)
{
    size_t n = len;
    if (n > max)
        for (n = max; n > 0 && ((unsigned char)p[n] & 0xc0) == 0x80;)
            n--;
    tc_buf_esc(&s->t, p, n);
}

static void describe(const tc_torch_graph *tg, const pk_obj *o, sbuf *s, int depth);

static void describe_items(const tc_torch_graph *tg, pk_obj *const *it, size_t n, bool dict, sbuf *s, int depth)
{
    for (size_t i = 0; i < n; i += dict ? 2 : 1) {
        if (i)
            sput(s, ", ");
        if (tc_buf_len(&s->t) > 120) {
            sput(s, "...");
            return;
        }
        describe(tg, it[i], s, depth + 1);
        if (dict) {
            sput(s, ": ");
            describe(tg, it[i + 1], s, depth + 1);
        }
    }
}

static void describe(const tc_torch_graph *tg, const pk_obj *o, sbuf *s, int depth)
{
    if (o->tag && o->tag <= tc_ckpt_ntensors(tg->c)) {
        const tc_tensor *t = tc_ckpt_tensor(tg->c, o->tag - 1);
        sput(s, "tensor %s[", tc_dtype_name(t->dtype));
        for (int i = 0; i < t->ndim; i++)
            sput(s, "%s%" PRId64, i ? "," : "", t->shape[i]);
        sput(s, "]");
        return;
    }
    switch (o->kind) {
    case PK_NONE: sput(s, "None"); break;
    case PK_BOOL: sput(s, o->i ? "True" : "False"); break;
    case PK_INT: sput(s, "%" PRId64, o->i); break;
    case PK_BIGINT: sput(s, "<%zu-byte int>", o->len); break;
    case PK_FLOAT: sput(s, "%g", o->f); break;
    case PK_STR:
        sput(s, "'");
        sput_text(s, o->s, o->len, 40);
        sput(s, "%s'", o->len > 40 ? "..." : "");
        break;
    case PK_BYTES:
    case PK_BYTEARRAY: sput(s, "<%zu bytes>", o->len); break;
    case PK_GLOBAL:
        sput_text(s, o->s, strlen(o->s), 190);
        sput(s, ".");
        sput_text(s, o->name, strlen(o->name), 190);
        break;
    case PK_PERSID: sput(s, "<storage>"); break;
    case PK_DICT:
        if (depth >= 2 && o->n) {
            sput(s, "{%zu items}", o->n / 2);
            break;
        }
        sput(s, "{");
        describe_items(tg, o->items, o->n, true, s, depth);
        sput(s, "}");
        break;
    case PK_LIST:
    case PK_TUPLE:
    case PK_SET:
    case PK_FROZENSET: {
        const char *br = o->kind == PK_LIST ? "[]" : o->kind == PK_TUPLE ? "()" : "{}";
        if (depth >= 2 && o->n) {
            sput(s, "%c%zu items%c", br[0], o->n, br[1]);
            break;
        }
        sput(s, "%c", br[0]);
        describe_items(tg, o->items, o->n, false, s, depth);
        sput(s, "%c", br[1]);
        break;
    }
    case PK_CALL: {
        const pk_obj *f = pk_call_global(o);
        if (f && !strcmp(f->s, "collections") && !strcmp(f->name, "OrderedDict") && !o->n) {
            sput(s, "OrderedDict()");
            break;
        }
        if (f)
            sput_text(s, f->name, strlen(f->name), 190);
        else
            sput(s, "<call>");
        if (o->items_kind) {
            sput(s, o->items_kind == PK_ITEMS_DICT ? "{" : "[");
            if (depth >= 2)
                sput(s, "%zu items", o->items_kind == PK_ITEMS_DICT ? o->n / 2 : o->n);
            else
                describe_items(tg, o->items, o->n, o->items_kind == PK_ITEMS_DICT, s, depth);
            sput(s, o->items_kind == PK_ITEMS_DICT ? "}" : "]");
        } else {
            sput(s, "(...)");
        }
        break;
    }
    default: sput(s, "?"); break;
    }
}

static const char *kind_text(const pk_obj *o)
{
    switch (o->kind) {
    case PK_NONE: return "None";
    case PK_BOOL: return "bool";
    case PK_INT:
    case PK_BIGINT: return "int";
    case PK_FLOAT: return "float";
    case PK_STR: return "str";
    case PK_BYTES:
    case PK_BYTEARRAY: return "bytes";
    case PK_TUPLE: return "tuple";
    case PK_LIST: return "list";
    case PK_DICT: return "dict";
    case PK_SET:
    case PK_FROZENSET: return "set";
    case PK_CALL: {
        const pk_obj *f = pk_call_global(o);
        return f ? f->name : "object";
    }
    default: return "object";
    }
}

void tc_torch_describe(const tc_torch_graph *tg, const pk_obj *o, char *text, size_t n, const char **kind)
{
    sbuf s;
    sbuf_init(&s);
    describe(tg, o, &s, 0);
    snprintf(text, n, "%s", s.b);
    *kind = kind_text(o);
}

/* The key/value items of a dict, a dict-like object or an object's state
 * dict (then *attr), or NULL. */
static pk_obj *const *kv_items(const pk_obj *o, size_t *n, bool *attr)
{
    *attr = false;
    if (o->kind == PK_DICT || (o->kind == PK_CALL && o->items_kind == PK_ITEMS_DICT)) {
        *n = o->n;
        return o->items;
    }
    if (o->kind == PK_CALL && o->state && o->state->kind == PK_DICT && !o->tag) {
        *n = o->state->n;
        *attr = true;
        return o->state->items;
    }
    *n = 0;
    return NULL;
}

/* The tensor names, sorted, to count the tensors under an entry in O(log n):
 * its own name, and the range [name + ".", name + "/") of names under it. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t lower_bound(const char *const *v, size_t n, const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(v[mid], key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t tensors_under(const char *const *v, size_t n, const char *name)
{
    size_t l = strlen(name), at = lower_bound(v, n, name), k = 0;
    if (at < n && !strcmp(v[at], name))
        k++;
    char *lo = malloc(l + 2);
    if (!lo)
        return k;
    memcpy(lo, name, l);
    lo[l] = '.';
    lo[l + 1] = 0;
    size_t a = lower_bound(v, n, lo);
    lo[l] = '.' + 1;
    k += lower_bound(v, n, lo) - a;
    free(lo);
    return k;
}

static int add_entries(tc_torch_graph *tg, tc_diag *d)
{
    size_t n;
    bool attr;
    pk_obj *const *it = kv_items(tg->root, &n, &attr);
    if (!it)
        return 0;
    size_t nt = tc_ckpt_ntensors(tg->c);
    const char **names = malloc((nt + 1) * sizeof *names);
    if (!names)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < nt; k++)
        names[k] = tc_ckpt_tensor(tg->c, k)->name;
    qsort(names, nt, sizeof *names, cmp_str);
    int rc = 0;
    /* entries named as their tensors are (tc_torch_key_name), whatever their keys */
    tc_buf top = TC_BUF_INIT(0), name = TC_BUF_INIT(0);
    for (size_t i = 0; i + 1 < n && !rc; i += 2) {
        size_t m2;
        bool attr2, attr3;
        const pk_obj *v = it[i + 1];
        pk_obj *const *sub = kv_items(v, &m2, &attr2);
        sbuf s;
        sbuf_init(&s);
        describe(tg, v, &s, 0);
        tc_buf_reset(&top);
        tc_torch_key_name(it[i], &top, NULL);
        tc_entry e = {(char *)tc_buf_str(&top), s.b, (char *)kind_text(v), 1,
                      tensors_under(names, nt, tc_buf_str(&top)), v->tag != 0, sub != NULL, attr};
        rc = tc_buf_oom(&top) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_entry(tg->c, &e, d);
        for (size_t j = 0; sub && j + 1 < m2 && !rc; j += 2) {
            tc_buf_reset(&name);
            tc_buf_puts(&name, tc_buf_str(&top));
            tc_buf_putc(&name, '.');
            tc_torch_key_name(sub[j], &name, NULL);
            size_t m3;
            sbuf t;
            sbuf_init(&t);
            describe(tg, sub[j + 1], &t, 0);
            tc_entry e2 = {(char *)tc_buf_str(&name), t.b, (char *)kind_text(sub[j + 1]), 2,
                           tensors_under(names, nt, tc_buf_str(&name)), sub[j + 1]->tag != 0,
                           kv_items(sub[j + 1], &m3, &attr3) != NULL, attr2};
            rc = tc_buf_oom(&name) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_entry(tg->c, &e2, d);
        }
    }
    tc_buf_free(&top);
    tc_buf_free(&name);
    free(names);
    return rc;
}

/* ---- indexing ------------------------------------------------------------------ */

typedef struct gctx {
    tc_ckpt *c;
    tc_diag *d;
    tc_buf name;
} gctx;

static void count_global(void *ctx, pk_obj *o)
{
    gctx *g = ctx;
    if (o->kind != PK_GLOBAL || g->d->code)
        return;
    tc_buf_reset(&g->name);
    pk_global_qualname(o, false, &g->name);
    if (tc_buf_oom(&g->name))
        tc_fail(g->d, TC_ERR_NOMEM, "out of memory");
    else
        tc_ckpt_add_global(g->c, tc_buf_str(&g->name), g->d);
}

/* Storages no tensor views may still be reached (torch.save(storage), a list of storages) or lie only
 * in objects the pickle discarded: which, asked only when there are such storages. */
static int mark_unreached(tc_torch_graph *tg, tc_diag *d)
{
    tc_ckpt *c = tg->c;
    size_t ns = tc_ckpt_nstorages(c), bare = 0;
    for (size_t i = 0; i < ns; i++)
        bare += tc_ckpt_storage(c, i)->ntensors == 0;
    if (!bare)
        return 0;
    bool *keep = calloc(ns + 1, sizeof *keep);
    if (!keep)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_torch_reach(tg, keep, d);
    for (size_t i = 0; i < ns && !rc; i++)
        tc_ckpt_storage_mut(c, i)->unreached = !keep[i];
    free(keep);
    return rc;
}

int tc_torch_index(tc_torch_graph *tg, tc_diag *d)
{
    tc_ckpt *c = tg->c;
    tc_ckpt_set_objects(c, true);
    if (tg->long_digits) {
        /* two readings of one pickle: the verdict is the longer one's, which the reader took */
        char text[400];
        snprintf(text, sizeof text,
                 "an integer of %" PRIu64 " decimal digits: Python 3.11 and later (3.10.7, 3.9.14, 3.8.14, 3.7.14) "
                 "stop loading there (int_max_str_digits), older Pythons read on; judged as they read it",
                 tg->long_digits);
        int rc = tc_ckpt_add_fact(c, "python_int_digits", text, d);
        if (rc)
            return rc;
    }
    gctx g = {c, d, TC_BUF_INIT(0)};
    pk_graph_foreach(tg->g, count_global, &g);
    tc_buf_free(&g.name);
    if (d->code)
        return d->code;
    tc_ckpt_sort_globals(c);
    int rc;
    if ((rc = tc_torch_walk(tg, d)) || (rc = mark_unreached(tg, d)))
        return rc;
    return add_entries(tg, d);
}
