/* pkdump: pk_read's graph of each pickle in a canonical text, one line per
 * pickle, for comparison with CPython's unpickler (pkdiff.py renders what
 * CPython builds in the same text).
 *
 *   pkdump [--write] [--py2 utf8|bytes|ascii|latin1] FILE...
 *   pkdump [--write] --batch FILE     FILE holds pickles as u32-LE length + bytes
 *   pkdump --bench [--max-depth N] [--max-objects N] FILE...
 *                                     time pk_read alone: "OK <seconds>" per pickle
 *
 * Each line is "OK <object>" or "ERR <code> <message>"; with --write, pk_write
 * rewrites every accepted graph and the line goes on with a tab and
 * "W <hex of the written pickle>" or "WERR <code> <message>".
 *
 * The text (the same in pkdiff.py):
 *   N T F                  None, True, False
 *   i0x1f i-0x1f           int, as Python's hex()
 *   f<16 hex digits>       float, its IEEE-754 bits
 *   u"..."                 str: code points 0x20-0x7e but " and \ as themselves, others \<hex>;
 *   b"..."                 bytes: 0x20-0x7e but " and \ as themselves, others \<2 hex>
 *   G"mod":"name"          a global as CPython imports it; ":path" after it when
 *                          the name is walked attribute by attribute (protocol 4)
 *   ()  fs{}               the empty tuple and frozenset
 * Objects with identity are written once, as #<n>=..., and @<n> after that:
 *   #n=a"..."              bytearray
 *   #n=(x,y)  #n=[x,y]  #n={k:v,k:v}  #n=set{x,y}  #n=fs{x,y}
 *   #n=P(pid)              what persistent_load returned
 *   #n=C<R|N>(func;args;kwargs;items;states)
 *                          a call's result: R for func(*args), N for
 *                          func.__new__(func, *args, **kwargs); kwargs {k:v,...}
 *                          or nothing; items L[x,...] (APPENDS) or D{k:v,...}
 *                          (SETITEMS) or nothing; states S<state> per BUILD.
 * Sets are written in the order of a key that ignores identity (ties keep
 * the reader's order). */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "vec.h"

typedef struct sb {
    char *p;
    size_t n, cap;
} sb;

static void put(sb *s, const void *p, size_t n)
{
    if (tc_grow(&s->p, &s->cap, s->n + n + 1, 1)) {
        fprintf(stderr, "pkdump: out of memory\n");
        exit(2);
    }
    memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
}

static void puts_(sb *s, const char *t) { put(s, t, strlen(t)); }

static void putf(sb *s, const char *fmt, unsigned long long v)
{
    char t[64];
    snprintf(t, sizeof t, fmt, v);
    puts_(s, t);
}

/* magnitude of two's complement little-endian bytes as 0x..., with sign */
static void put_int_le(sb *s, const uint8_t *p, size_t n)
{
    bool neg = n && (p[n - 1] & 0x80);
    uint8_t *m = malloc(n + 1);
    unsigned carry = 1;
    for (size_t i = 0; i < n; i++) {
        if (neg) {
            unsigned v = (uint8_t)~p[i] + carry;
            m[i] = (uint8_t)v;
            carry = v >> 8;
        } else {
            m[i] = p[i];
        }
    }
    size_t k = n;
    while (k && !m[k - 1])
        k--;
    puts_(s, neg ? "i-0x" : "i0x");
    if (!k)
        puts_(s, "0");
    for (size_t i = k; i-- > 0;) {
        char t[3];
        snprintf(t, sizeof t, i == k - 1 ? "%x" : "%02x", m[i]);
        puts_(s, t);
    }
    free(m);
}

static void put_text(sb *s, const char *p, size_t n)
{
    puts_(s, "u\"");
    const uint8_t *u = (const uint8_t *)p;
    for (size_t i = 0; i < n;) {
        uint32_t c = u[i];
        size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + k > n)
            k = 1;
        if (k == 2)
            c = (c & 0x1F) << 6 | (u[i + 1] & 0x3F);
        else if (k == 3)
            c = (c & 0x0F) << 12 | (uint32_t)(u[i + 1] & 0x3F) << 6 | (u[i + 2] & 0x3F);
        else if (k == 4)
            c = (c & 0x07) << 18 | (uint32_t)(u[i + 1] & 0x3F) << 12 | (uint32_t)(u[i + 2] & 0x3F) << 6 |
                (u[i + 3] & 0x3F);
        i += k;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            char ch = (char)c;
            put(s, &ch, 1);
        } else {
            putf(s, "\\%llx;", c);
        }
    }
    puts_(s, "\"");
}

static void put_bytes(sb *s, const char *pre, const char *p, size_t n)
{
    puts_(s, pre);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            put(s, &p[i], 1);
        else
            putf(s, "\\%02llx", c);
    }
    puts_(s, "\"");
}

static void put_global(sb *s, const pk_obj *o)
{
    puts_(s, "G");
    put_text(s, o->s, strlen(o->s));
    puts_(s, ":");
    put_text(s, o->name, strlen(o->name));
    if (o->flags & PK_F_DOTTED)
        puts_(s, ":path");
}

#define DETACHED_DEPTH 4

/* ---- the key sets are sorted by ---------------------------------------------------- */

static void detached(sb *s, const pk_obj *o, int depth);

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char **sorted_keys(pk_obj *const *items, size_t n, size_t **order, int depth)
{
    char **keys = malloc((n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        sb k = {0};
        detached(&k, items[i], depth);
        /* index suffix: ties stay in the reader's order */
        char t[32];
        snprintf(t, sizeof t, "\x01%012zu", i);
        puts_(&k, t);
        keys[i] = k.p;
    }
    qsort(keys, n, sizeof *keys, cmp_str);
    *order = malloc((n + 1) * sizeof **order);
    for (size_t i = 0; i < n; i++)
        (*order)[i] = (size_t)strtoull(strrchr(keys[i], '\x01') + 1, NULL, 10);
    return keys;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

static void atom(sb *s, const pk_obj *o)
{
    switch (o->kind) {
    case PK_NONE: puts_(s, "N"); break;
    case PK_BOOL: puts_(s, o->i ? "T" : "F"); break;
    case PK_INT: {
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
            b[i] = (uint8_t)((uint64_t)o->i >> (8 * i));
        put_int_le(s, b, 8);
        break;
    }
    case PK_BIGINT: put_int_le(s, (const uint8_t *)o->s, o->len); break;
    case PK_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &o->f, 8);
        putf(s, "f%016llx", bits);
        break;
    }
    case PK_STR: put_text(s, o->s, o->len); break;
    case PK_BYTES: put_bytes(s, "b\"", o->s, o->len); break;
    case PK_GLOBAL: put_global(s, o); break;
    default: break;
    }
}

/* Identity-free text, to a few levels (stand-ins' arguments too, so that
 * two results of one function sort apart). */
static void detached_seq(sb *s, pk_obj *const *items, size_t n, int depth, bool pairs)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            puts_(s, pairs && (i & 1) ? ":" : ",");
        detached(s, items[i], depth);
    }
}

static void detached(sb *s, const pk_obj *o, int depth)
{
    if (depth <= 0) {
        puts_(s, "~");
        return;
    }
    switch (o->kind) {
    case PK_TUPLE:
        puts_(s, "(");
        detached_seq(s, o->items, o->n, depth - 1, false);
        puts_(s, ")");
        break;
    case PK_LIST:
        puts_(s, "[");
        detached_seq(s, o->items, o->n, depth - 1, false);
        puts_(s, "]");
        break;
    case PK_DICT:
        puts_(s, "{");
        detached_seq(s, o->items, o->n, depth - 1, true);
        puts_(s, "}");
        break;
    case PK_BYTEARRAY: put_bytes(s, "a\"", o->s, o->len); break;
    case PK_SET:
    case PK_FROZENSET: {
        size_t *ord;
        char **keys = sorted_keys(o->items, o->n, &ord, depth - 1);
        puts_(s, o->kind == PK_SET ? "set{" : "fs{");
        for (size_t i = 0; i < o->n; i++) {
            if (i)
                puts_(s, ",");
            detached(s, o->items[ord[i]], depth - 1);
        }
        puts_(s, "}");
        free_keys(keys, o->n);
        free(ord);
        break;
    }
    case PK_CALL:
        puts_(s, o->newobj ? "CN" : "CR");
        detached(s, o->func, depth - 1);
        puts_(s, "(");
        detached_seq(s, o->args->items, o->args->n, depth - 1, false);
        puts_(s, ")");
        break;
    case PK_PERSID:
        puts_(s, "P(");
        detached(s, o->args, depth - 1);
        puts_(s, ")");
        break;
    default: atom(s, o); break;
    }
}

/* ---- the canonical text ----------------------------------------------------------------- */

typedef struct dumper {
    sb out;
    uint32_t next;
} dumper;

static void obj(dumper *d, pk_obj *o);

/* #n= the first time (true: write the body), @n after */
static bool label(dumper *d, pk_obj *o)
{
    if (o->memo) {
        putf(&d->out, "@%llu", o->memo);
        return false;
    }
    o->memo = ++d->next;
    putf(&d->out, "#%llu=", o->memo);
    return true;
}

static void seq(dumper *d, pk_obj *const *items, size_t n, bool pairs)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            puts_(&d->out, pairs && (i & 1) ? ":" : ",");
        obj(d, items[i]);
    }
}

static void set_items(dumper *d, pk_obj *o)
{
    size_t *ord;
    char **keys = sorted_keys(o->items, o->n, &ord, DETACHED_DEPTH);
    for (size_t i = 0; i < o->n; i++) {
        if (i)
            puts_(&d->out, ",");
        obj(d, o->items[ord[i]]);
    }
    free_keys(keys, o->n);
    free(ord);
}

static void obj(dumper *d, pk_obj *o)
{
    sb *s = &d->out;
    switch (o->kind) {
    case PK_BYTEARRAY:
        if (label(d, o))
            put_bytes(s, "a\"", o->s, o->len);
        return;
    case PK_TUPLE:
        if (!o->n) {
            puts_(s, "()");
            return;
        }
        if (label(d, o)) {
            puts_(s, "(");
            seq(d, o->items, o->n, false);
            puts_(s, ")");
        }
        return;
    case PK_LIST:
        if (label(d, o)) {
            puts_(s, "[");
            seq(d, o->items, o->n, false);
            puts_(s, "]");
        }
        return;
    case PK_DICT:
        if (label(d, o)) {
            puts_(s, "{");
            seq(d, o->items, o->n, true);
            puts_(s, "}");
        }
        return;
    case PK_SET:
        if (label(d, o)) {
            puts_(s, "set{");
            set_items(d, o);
            puts_(s, "}");
        }
        return;
    case PK_FROZENSET:
        if (!o->n) {
            puts_(s, "fs{}");
            return;
        }
        if (label(d, o)) {
            puts_(s, "fs{");
            set_items(d, o);
            puts_(s, "}");
        }
        return;
    case PK_PERSID:
        if (label(d, o)) {
            puts_(s, "P(");
            obj(d, o->args);
            puts_(s, ")");
        }
        return;
    case PK_CALL:
        if (!label(d, o))
            return;
        puts_(s, o->newobj ? "CN(" : "CR(");
        obj(d, o->func);
        puts_(s, ";");
        seq(d, o->args->items, o->args->n, false);
        puts_(s, ";");
        if (o->kwargs && o->kwargs->n) {
            puts_(s, "{");
            seq(d, o->kwargs->items, o->kwargs->n, true);
            puts_(s, "}");
        }
        puts_(s, ";");
        if (o->items_kind == PK_ITEMS_LIST) {
            puts_(s, "L[");
            seq(d, o->items, o->n, false);
            puts_(s, "]");
        } else if (o->items_kind == PK_ITEMS_DICT) {
            puts_(s, "D{");
            seq(d, o->items, o->n, true);
            puts_(s, "}");
        }
        puts_(s, ";");
        if (o->state) {
            puts_(s, "S");
            obj(d, o->state);
        }
        puts_(s, ")");
        return;
    default: atom(s, o); return;
    }
}

/* ---- driving ------------------------------------------------------------------------------- */

typedef struct opts {
    bool write, bench;
    uint8_t py2;
    pk_limits lim;
} opts;

static void one_line(sb *s, const char *msg)
{
    for (const char *c = msg; *c; c++)
        put(s, *c == '\n' || *c == '\t' ? " " : c, 1);
}

static void dump_one(const opts *op, const uint8_t *p, size_t n, FILE *out)
{
    pk_graph *g = pk_graph_new();
    pk_read_opts ro = {.limits = op->lim, .what = "pickle", .py2_strings = op->py2};
    tc_diag d = {0};
    pk_obj *root = NULL;
    size_t used = 0;
    dumper dm = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = pk_read(g, p, n, &ro, &root, &used, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (op->bench) { /* the read alone, timed */
        fprintf(out, "%s %.6f %s\n", rc ? "ERR" : "OK",
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, rc ? d.msg : "");
        pk_graph_free(g);
        return;
    }
    if (rc) {
        { char t[32]; snprintf(t, sizeof t, "ERR %d ", d.code); puts_(&dm.out, t); }
        one_line(&dm.out, d.msg);
    } else {
        pk_graph_clear_marks(g);
        puts_(&dm.out, "OK ");
        obj(&dm, root);
        if (op->write) {
            uint8_t *w = NULL;
            size_t wl = 0;
            tc_diag wd = {0};
            if (pk_write(g, root, ro.limits.max_depth + 16, &w, &wl, &wd)) {
                { char t[32]; snprintf(t, sizeof t, "\tWERR %d ", wd.code); puts_(&dm.out, t); }
                one_line(&dm.out, wd.msg);
            } else {
                puts_(&dm.out, "\tW ");
                for (size_t i = 0; i < wl; i++)
                    putf(&dm.out, "%02llx", w[i]);
            }
            free(w);
        }
    }
    fwrite(dm.out.p, 1, dm.out.n, out);
    fputc('\n', out);
    free(dm.out.p);
    pk_graph_free(g);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 0, len = 0;
    uint8_t *b = NULL;
    size_t k = 1;
    while (k > 0 && !tc_grow(&b, &cap, len + (1 << 16), 1) && (k = fread(b + len, 1, cap - len, f)) > 0)
        len += k;
    if (k > 0) { /* out of memory */
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = len;
    return b;
}

int main(int argc, char **argv)
{
    opts op = {.lim = PK_LIMITS_DEFAULT};
    const char *batch = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        if (!strcmp(argv[i], "--write"))
            op.write = true;
        else if (!strcmp(argv[i], "--bench"))
            op.bench = true;
        else if (!strcmp(argv[i], "--max-depth") && i + 1 < argc)
            op.lim.max_depth = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-objects") && i + 1 < argc)
            op.lim.max_objects = op.lim.max_memo = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = argv[++i];
        else if (!strcmp(argv[i], "--py2") && i + 1 < argc) {
            const char *v = argv[++i];
            op.py2 = !strcmp(v, "bytes")    ? PK_PY2STR_BYTES
                     : !strcmp(v, "ascii")  ? PK_PY2STR_ASCII
                     : !strcmp(v, "latin1") ? PK_PY2STR_LATIN1
                                            : PK_PY2STR_UTF8;
        } else {
            fprintf(stderr, "usage: pkdump [--write] [--bench] [--max-depth N] [--max-objects N] "
                            "[--py2 utf8|bytes|ascii|latin1] (--batch FILE | FILE...)\n");
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOFBF, 1 << 20);
    if (batch) {
        size_t n;
        uint8_t *b = slurp(batch, &n);
        if (!b) {
            fprintf(stderr, "pkdump: cannot read %s\n", batch);
            return 2;
        }
        for (size_t pos = 0; pos + 4 <= n;) {
            size_t len = (size_t)b[pos] | (size_t)b[pos + 1] << 8 | (size_t)b[pos + 2] << 16 | (size_t)b[pos + 3] << 24;
            pos += 4;
            if (len > n - pos) {
                fprintf(stderr, "pkdump: %s: record past the end\n", batch);
                return 2;
            }
            /* a copy of exactly the pickle, so that reading past it is caught */
            uint8_t *p = malloc(len ? len : 1);
            memcpy(p, b + pos, len);
            dump_one(&op, p, len, stdout);
            free(p);
            pos += len;
        }
        free(b);
    }
    for (; i < argc; i++) {
        size_t n;
        uint8_t *b = slurp(argv[i], &n);
        if (!b) {
            fprintf(stderr, "pkdump: cannot read %s\n", argv[i]);
            return 2;
        }
        dump_one(&op, b, n, stdout);
        free(b);
    }
    return fflush(stdout) ? 2 : 0;
}
