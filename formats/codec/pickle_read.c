/* Pickle reader: CPython 3.11's C unpickler (Modules/_pickle.c) opcode by
 * opcode, building inert pk_obj nodes. Nothing here imports, calls or
 * evaluates; where CPython would, a node records the request (pickle.h).
 *
 * Longer than our other files on purpose: it is one machine, the reader's
 * state (stack, marks, memo, frame) and the 68 opcodes that act on it, read
 * top to bottom against _pickle.c's load loop. Text parsing (pickle_text.c),
 * key equality (pickle_keys.c) and the fix_imports tables (pickle_compat.c)
 * live apart. */
#include "pickle.h"
#include "buf.h"
#include "pickle_internal.h"
#include "vec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd {
    pk_graph *g;
    const uint8_t *buf;
    size_t n, pos, op_pos;
    const pk_read_opts *o;
    tc_diag *d;
    pk_obj **stack;
    size_t sp, scap;
    size_t *marks;
    size_t mp, mcap;
    pk_obj **memo; /* dense part of the memo */
    size_t memo_cap;
    tc_map sparse;     /* memo indexes past the dense part */
    uint64_t memo_len; /* memo entries set, as CPython counts them for MEMOIZE */
    int proto;         /* the last PROTO's argument; 0 without one */
    size_t fend;       /* end of the FRAME being read from (0: none) */
    uint8_t op;
    uint64_t big_digits; /* decimal digits read in integers past int_max_str_digits */
    pk_keys *keys;
    char *line; /* the current text argument, newline kept, NUL-terminated */
    size_t llen, lcap;
    char *tmp;
    size_t tcap;
    char shown[4 * 40 + 8];
    /* None, False, True and the ints 0..SMALL_INTS-1 of BININT*: one node each.
     * Nothing changes a scalar once made, and the writer writes scalars by value,
     * so sharing them changes no reading (CPython shares small ints too) and
     * saves a tensor's graph about a third of its nodes. Each reuse still
     * counts as an object against the limit. */
    pk_obj *small[256], *none, *bools[2], *empty_tuple;
    uint64_t reused;
} rd;

#define SMALL_INTS 256

enum {
    MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
    BININT = 'J', BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P',
    BINPERSID = 'Q', REDUCE = 'R', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
    UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd',
    EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j',
    LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
    SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
    PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
    TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
    BINBYTES = 'B', SHORT_BINBYTES = 'C', SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
    BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92,
    STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95, BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97,
    READONLY_BUFFER = 0x98,
};

/* Records the failure and yields code itself, a constant at every use: the
 * compiler then sees that a step which failed returns non-zero (tc_fail's
 * result lies in another file) and that what it did not set is not read. */
#define FAIL(r, code, ...) (fail_at(r, code, __VA_ARGS__), (code))

__attribute__((format(printf, 3, 4))) static void fail_at(rd *r, int code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tc_fail(r->d, code, "%s offset 0x%llx (opcode 0x%02x): %s", r->o->what ? r->o->what : "pickle",
            (unsigned long long)(r->o->base_offset + r->op_pos), r->op, msg);
}

static int oom(rd *r) { return FAIL(r, TC_ERR_NOMEM, "out of memory"); }

/* The code a failed step left, or a fresh out-of-memory failure. */
static int failed(rd *r) { return r->d->code ? r->d->code : oom(r); }

static const char *kname(const pk_obj *o)
{
    static const char *const names[] = {"NoneType", "bool", "int", "int", "float", "str", "bytes",
                                        "bytearray", "tuple", "list", "dict", "set", "frozenset",
                                        "global", "object", "persistent id"};
    return o->kind < sizeof names / sizeof *names ? names[o->kind] : "?";
}

/* Objects the reader cannot know (what a global, a call or persistent_load
 * returns): callable, classes for NEWOBJ, hashable by identity. */
static bool standin(const pk_obj *o) { return o->kind == PK_GLOBAL || o->kind == PK_CALL || o->kind == PK_PERSID; }

static int truncated(rd *r)
{
    if (r->o->hit_end)
        *r->o->hit_end = true;
    return 1;
}

/* torch.load reads through a file object, and CPython's unpickler then reads
 * a FRAME into a buffer of its own: a read that starts inside that buffer but
 * does not fit in it is served from the file after the frame, and the
 * frame's remaining bytes are skipped (pickle.loads on bytes reads them).
 * A pickle whose reads cross a frame's end has two readings: refused. */
static int frame_check(rd *r, size_t k)
{
    if (!r->fend)
        return 0;
    if (r->pos >= r->fend) {
        r->fend = 0;
        return 0;
    }
    if (k > r->fend - r->pos)
        return FAIL(r, TC_ERR_UNSUPPORTED,
                    "a read of %zu bytes crosses the end of a FRAME %zu bytes on (torch.load would skip "
                    "those bytes, pickle.loads would not)", k, r->fend - r->pos);
    return 0;
}

static int need(rd *r, size_t k)
{
    int rc = frame_check(r, k);
    if (rc)
        return rc;
    if (r->n - r->pos < k) {
        truncated(r);
        return FAIL(r, TC_ERR_FORMAT, "needs %zu more bytes but the pickle ends (truncated?)", k);
    }
    return 0;
}

static uint64_t le(const uint8_t *p, size_t k)
{
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- nodes and the stack ---------------------------------------------------------- */

static bool over_objects(rd *r)
{
    if (pk_graph_count(r->g) + r->reused < r->o->limits.max_objects)
        return false;
    fail_at(r, TC_ERR_LIMIT, "more than %llu objects (raise with --max-objects)",
            (unsigned long long)r->o->limits.max_objects);
    return true;
}

static pk_obj *mk(rd *r, pk_kind k)
{
    if (over_objects(r))
        return NULL;
    pk_obj *o = pk_new(r->g, k);
    if (!o)
        oom(r);
    return o;
}

/* A shared scalar node: *slot made the first time (i its value), counted each time. */
static pk_obj *shared(rd *r, pk_obj **slot, pk_kind k, int64_t i)
{
    if (*slot) {
        if (over_objects(r))
            return NULL;
        r->reused++;
        return *slot;
    }
    pk_obj *o = mk(r, k);
    if (o) {
        o->i = i;
        *slot = o;
    }
    return o;
}

static pk_obj *mk_bytes(rd *r, pk_kind kind, const void *s, size_t len)
{
    if (over_objects(r))
        return NULL;
    pk_obj *o = pk_new_bytes_kind(r->g, kind, s, len);
    if (!o)
        oom(r);
    return o;
}

static int too_deep(rd *r, const pk_obj *o)
{
    if (o->depth <= r->o->limits.max_depth)
        return 0;
    return FAIL(r, TC_ERR_LIMIT, "objects nested deeper than %u (raise with --max-depth)", r->o->limits.max_depth);
}

static int push(rd *r, pk_obj *o)
{
    if (!o)
        return failed(r);
    int rc = too_deep(r, o);
    if (rc)
        return rc;
    if (tc_grow(&r->stack, &r->scap, r->sp + 1, sizeof *r->stack))
        return oom(r);
    r->stack[r->sp++] = o;
    return 0;
}

/* The top MARK's position (CPython's fence): nothing below it can be popped. */
static size_t fence(const rd *r) { return r->mp ? r->marks[r->mp - 1] : 0; }

static int underflow(rd *r)
{
    return FAIL(r, TC_ERR_FORMAT, r->mp && r->sp == fence(r) ? "unexpected MARK found (stack underflow)"
                                                             : "stack underflow (corrupt pickle)");
}

static int pop(rd *r, pk_obj **out)
{
    if (r->sp <= fence(r))
        return underflow(r);
    *out = r->stack[--r->sp];
    return 0;
}

static int top(rd *r, pk_obj **out)
{
    if (r->sp <= fence(r))
        return underflow(r);
    *out = r->stack[r->sp - 1];
    return 0;
}

/* Pop the top MARK; its items are stack[*base .. sp). */
static int pop_mark(rd *r, size_t *base)
{
    if (!r->mp)
        return FAIL(r, TC_ERR_FORMAT, "no MARK on the stack (could not find MARK)");
    *base = r->marks[--r->mp];
    return 0;
}

static int grow_child(rd *r, pk_obj *o, const pk_obj *child)
{
    if (child && child->depth + 1 > o->depth)
        o->depth = child->depth + 1;
    return too_deep(r, o);
}

/* stack[base..sp) into a new tuple, list or (keys not yet deduplicated) sequence */
static pk_obj *mk_seq(rd *r, pk_kind kind, size_t base)
{
    pk_obj *o = mk(r, kind);
    if (!o)
        return NULL;
    /* (an empty stack may be no array at all: no pointer arithmetic on it then) */
    if (r->sp > base && pk_set_items(r->g, o, r->stack + base, r->sp - base)) {
        oom(r);
        return NULL;
    }
    r->sp = base;
    return o;
}

/* ---- the memo ------------------------------------------------------------------------ */

static pk_obj *memo_get(const rd *r, uint64_t idx)
{
    if (idx < r->memo_cap && r->memo[idx])
        return r->memo[idx];
    uint64_t *v = tc_map_find2(&r->sparse, idx, 0);
    return v ? (pk_obj *)(uintptr_t)*v : NULL;
}

/* CPython's memo is an array of 2*idx slots; here slots stay dense only while
 * they are about as many as the entries set, the rest go to a hash map. */
static int memo_put(rd *r, uint64_t idx)
{
    pk_obj *o = NULL;
    int rc = top(r, &o);
    if (rc)
        return rc;
    if (idx >= r->o->limits.max_memo)
        return FAIL(r, TC_ERR_LIMIT, "memo index %llu is over the limit of %llu (raise with --max-objects)",
                    (unsigned long long)idx, (unsigned long long)r->o->limits.max_memo);
    bool known = memo_get(r, idx) != NULL;
    if (idx >= r->memo_cap && idx < 2 * (r->memo_len + 1024)) {
        size_t was = r->memo_cap;
        if (tc_grow(&r->memo, &r->memo_cap, idx < 1024 ? 1024 : (size_t)idx + 1, sizeof *r->memo))
            return oom(r);
        memset(r->memo + was, 0, (r->memo_cap - was) * sizeof *r->memo);
    }
    if (idx < r->memo_cap)
        r->memo[idx] = o;
    else if (pk_map_set(&r->sparse, idx, 0, (uint64_t)(uintptr_t)o))
        return oom(r);
    if (!known)
        r->memo_len++;
    return 0;
}

static int memo_push(rd *r, uint64_t idx)
{
    pk_obj *o = memo_get(r, idx);
    if (!o)
        return FAIL(r, TC_ERR_FORMAT, "memo slot %llu read but never set (file truncated or not a checkpoint?)",
                    (unsigned long long)idx);
    return push(r, o);
}

/* ---- text arguments ------------------------------------------------------------------ */

/* The next line, newline included, copied to r->line (NUL-terminated) as
 * CPython copies it: a NUL inside ends what the number parsers see. */
static int read_line(rd *r)
{
    const uint8_t *p = r->buf + r->pos;
    const uint8_t *nl = memchr(p, '\n', r->n - r->pos);
    if (!nl) {
        truncated(r);
        return FAIL(r, TC_ERR_FORMAT, "text argument without a newline (truncated?)");
    }
    size_t len = (size_t)(nl - p) + 1;
    int rc = frame_check(r, len);
    if (rc)
        return rc;
    if (tc_grow(&r->line, &r->lcap, len + 1, 1))
        return oom(r);
    memcpy(r->line, p, len);
    r->line[len] = 0;
    r->llen = len;
    r->pos += len;
    return 0;
}

/* A line with something before its newline (CPython: len < 2 is bad_readline). */
static int read_arg_line(rd *r)
{
    int rc = read_line(r);
    if (rc)
        return rc;
    if (r->llen < 2)
        return FAIL(r, TC_ERR_FORMAT, "empty text argument (pickle data was truncated)");
    return 0;
}

/* The current text argument for a message: at most 40 bytes, no newline,
 * other bytes outside printable ASCII as \xHH. */
static const char *shown(rd *r)
{
    tc_buf b = tc_buf_fixed(r->shown, sizeof r->shown);
    for (size_t i = 0; i + 1 < r->llen && i < 40; i++) {
        uint8_t c = (uint8_t)r->line[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            tc_buf_putc(&b, (char)c);
        else
            tc_buf_printf(&b, "\\x%02x", c);
    }
    if (r->llen > 41)
        tc_buf_puts(&b, "...");
    return r->shown;
}

static char *scratch(rd *r, size_t n)
{
    if (tc_grow(&r->tmp, &r->tcap, n, 1)) {
        oom(r);
        return NULL;
    }
    return r->tmp;
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* An integer given as two's complement little-endian bytes: PK_INT when it fits
 * 64 bits, else PK_BIGINT with the fewest bytes. */
static pk_obj *int_le(rd *r, const uint8_t *p, size_t k)
{
    while (k > 1 && ((p[k - 1] == 0 && !(p[k - 2] & 0x80)) || (p[k - 1] == 0xFF && (p[k - 2] & 0x80))))
        k--;
    if (k <= 8) {
        uint64_t v = le(p, k);
        if (k && k < 8 && (p[k - 1] & 0x80))
            v |= ~0ULL << (8 * k);
        pk_obj *o = mk(r, PK_INT);
        if (o)
            o->i = (int64_t)v;
        return o;
    }
    return mk_bytes(r, PK_BIGINT, p, k);
}

static pk_obj *int_big(rd *r, const pkt_big *b)
{
    uint8_t *p;
    size_t k;
    if (pkt_big_to_le(b, &p, &k)) {
        oom(r);
        return NULL;
    }
    pk_obj *o = int_le(r, p, k);
    free(p);
    return o;
}

/* Text integers past Python 3.11's int_max_str_digits are read as older
 * Pythons read them (the longer reading: what follows is read and judged
 * too), each up to this many digits and so many in all, where the
 * conversion's quadratic cost stays small; beyond, the pickle is refused as
 * one older Pythons read further than tensorctl does. */
#define BIG_DIGITS 100000
#define BIG_DIGITS_TOTAL (1u << 20)

static int pylong_line(rd *r, const char *s, int base, pk_obj **out)
{
    *out = NULL;
    pkt_big b = {0};
    const char *why;
    size_t nd = 0;
    int rc = pkt_pylong(s, base, BIG_DIGITS, &b, &nd, &why);
    if (rc < 0) {
        pkt_big_free(&b);
        return oom(r);
    }
    if (nd > PKT_PY_MAX_STR_DIGITS) {
        r->big_digits += nd;
        if (r->o->long_digits && *r->o->long_digits < nd)
            *r->o->long_digits = nd;
        if (rc == 2 || r->big_digits > BIG_DIGITS_TOTAL) {
            pkt_big_free(&b);
            return FAIL(r, TC_ERR_UNSAFE,
                        "an integer of %zu decimal digits (%s): Python 3.11 stops there (int_max_str_digits), but "
                        "Pythons before 3.10.7 (3.9.14, 3.8.14, 3.7.14) read on, and tensorctl does not read "
                        "integers of more than %u digits (%u in all) to judge what follows",
                        nd, rc == 2 ? "more than tensorctl reads" : "past what tensorctl reads in all", BIG_DIGITS,
                        BIG_DIGITS_TOTAL);
        }
    }
    if (rc) {
        pkt_big_free(&b);
        return FAIL(r, TC_ERR_FORMAT, "%s: '%s'", why, shown(r));
    }
    *out = int_big(r, &b);
    pkt_big_free(&b);
    return *out ? 0 : failed(r);
}

/* INT: strtol base 0 first; on overflow or trailing text, int(text, 0). "00"
 * and "01" (any two-byte text strtol reads as 0 or 1) are False and True. */
static int op_int(rd *r)
{
    int rc = read_arg_line(r);
    if (rc)
        return rc;
    const char *end;
    bool ovf;
    int64_t x = pkt_strtol0(r->line, &end, &ovf);
    pk_obj *o;
    if (ovf || (*end != '\n' && *end != '\0')) {
        if ((rc = pylong_line(r, r->line, 0, &o)))
            return rc;
        return push(r, o);
    }
    if (r->llen == 3 && (x == 0 || x == 1)) {
        if (!(o = mk(r, PK_BOOL)))
            return failed(r);
    } else if (!(o = mk(r, PK_INT))) {
        return failed(r);
    }
    o->i = x;
    return push(r, o);
}

/* LONG: int(text, 0) after dropping one trailing 'L'. */
static int op_long(rd *r)
{
    int rc = read_arg_line(r);
    if (rc)
        return rc;
    if (r->line[r->llen - 2] == 'L')
        r->line[r->llen - 2] = 0;
    pk_obj *o;
    if ((rc = pylong_line(r, r->line, 0, &o)))
        return rc;
    return push(r, o);
}

static int op_float(rd *r)
{
    int rc = read_arg_line(r);
    if (rc)
        return rc;
    double v;
    const char *end, *why;
    if (pkt_pyfloat(r->line, &v, &end, &why) || (*end != '\n' && *end != '\0'))
        return FAIL(r, TC_ERR_FORMAT, "bad FLOAT text '%s' (%s)", shown(r),
                    *end == '\n' || *end == '\0' ? why : "could not convert string to float");
    pk_obj *o = mk(r, PK_FLOAT);
    if (!o)
        return failed(r);
    o->f = v;
    return push(r, o);
}

/* A memo index in GET/PUT text: int(text, 10) as a Py_ssize_t. */
static int memo_index(rd *r, bool put, uint64_t *idx)
{
    int rc = read_arg_line(r);
    if (rc)
        return rc;
    if (put && r->sp <= fence(r)) /* PUT checks its value before its argument */
        return underflow(r);
    pkt_big b = {0};
    const char *why;
    size_t nd = 0;
    rc = pkt_pylong(r->line, 10, PKT_PY_MAX_STR_DIGITS, &b, &nd, &why); /* past it no Python's Py_ssize_t holds it */
    if (rc < 0) {
        pkt_big_free(&b);
        return oom(r);
    }
    bool big = b.n > 2 || (b.n == 2 && b.d[1] >= 0x80000000u), neg = b.neg && b.n;
    uint64_t v = b.n == 0 ? 0 : b.n == 1 ? b.d[0] : (uint64_t)b.d[1] << 32 | b.d[0];
    pkt_big_free(&b);
    if (rc)
        return FAIL(r, TC_ERR_FORMAT, "bad memo index '%s' (%s)", shown(r), why);
    if (big)
        return FAIL(r, TC_ERR_FORMAT, "memo index '%s' does not fit a Py_ssize_t", shown(r));
    if (neg && put)
        return FAIL(r, TC_ERR_FORMAT, "negative PUT argument");
    if (neg)
        return FAIL(r, TC_ERR_FORMAT, "memo slot -%llu read but never set", (unsigned long long)v);
    *idx = v;
    return 0;
}

/* ---- strings ----------------------------------------------------------------------------- */

/* A Python 2 str (STRING, BINSTRING, SHORT_BINSTRING) as pk_read_opts says. */
static pk_obj *py2_string(rd *r, const char *s, size_t len)
{
    pk_obj *o = NULL;
    bool sur;
    size_t bad;
    switch (r->o->py2_strings) {
    case PK_PY2STR_BYTES: o = mk_bytes(r, PK_BYTES, s, len); break;
    case PK_PY2STR_ASCII:
        for (size_t i = 0; i < len; i++)
            if ((uint8_t)s[i] >= 0x80) {
                fail_at(r, TC_ERR_FORMAT, "Python 2 string is not ASCII (byte 0x%02x at %zu)", (uint8_t)s[i], i);
                return NULL;
            }
        o = mk_bytes(r, PK_STR, s, len);
        break;
    case PK_PY2STR_LATIN1: {
        char *u = malloc(2 * len + 1);
        if (!u) {
            oom(r);
            return NULL;
        }
        o = mk_bytes(r, PK_STR, u, pkt_latin1_to_utf8((const uint8_t *)s, len, u));
        free(u);
        break;
    }
    default:
        if (pkt_utf8_check((const uint8_t *)s, len, false, &sur, &bad)) {
            fail_at(r, TC_ERR_FORMAT,
                    "Python 2 string is not UTF-8 (byte 0x%02x at %zu; torch.load decodes them as UTF-8)",
                    (uint8_t)s[bad], bad);
            return NULL;
        }
        o = mk_bytes(r, PK_STR, s, len);
        break;
    }
    if (o)
        o->flags |= PK_F_PY2STR;
    return o;
}

static int op_string(rd *r)
{
    int rc = read_line(r);
    if (rc)
        return rc;
    size_t len = r->llen - 1;
    const char *s = r->line;
    if (len < 2 || s[0] != s[len - 1] || (s[0] != '\'' && s[0] != '"'))
        return FAIL(r, TC_ERR_FORMAT, "STRING argument is not quoted");
    char *out = scratch(r, len);
    if (!out)
        return failed(r);
    size_t k;
    const char *why;
    if (pkt_decode_escape(s + 1, len - 2, out, &k, &why))
        return FAIL(r, TC_ERR_FORMAT, "STRING argument: %s", why);
    return push(r, py2_string(r, out, k));
}

static int op_unicode(rd *r)
{
    int rc = read_line(r);
    if (rc)
        return rc;
    size_t len = r->llen - 1;
    char *out = scratch(r, 4 * len + 1);
    if (!out)
        return failed(r);
    size_t k;
    bool sur;
    const char *why;
    if (pkt_raw_unicode_escape(r->line, len, out, &k, &sur, &why))
        return FAIL(r, TC_ERR_FORMAT, "UNICODE argument: %s", why);
    pk_obj *o = mk_bytes(r, PK_STR, out, k);
    if (o && sur)
        o->flags |= PK_F_SURROGATE;
    return push(r, o);
}

/* Length-prefixed bytes of any kind; lengths are unsigned, as calc_binsize reads them. */
static int counted(rd *r, size_t lenbytes, const uint8_t **p, size_t *len)
{
    int rc = need(r, lenbytes);
    if (rc)
        return rc;
    uint64_t k = le(r->buf + r->pos, lenbytes);
    r->pos += lenbytes;
    if (k <= r->n - r->pos && (rc = frame_check(r, (size_t)k)))
        return rc;
    if (k > r->n - r->pos) {
        truncated(r);
        return FAIL(r, TC_ERR_FORMAT, "string of %llu bytes but only %zu remain in the pickle (truncated?)",
                    (unsigned long long)k, r->n - r->pos);
    }
    *p = r->buf + r->pos;
    *len = (size_t)k;
    r->pos += (size_t)k;
    return 0;
}

static int op_counted(rd *r, size_t lenbytes)
{
    const uint8_t *p = NULL;
    size_t len = 0;
    int rc = counted(r, lenbytes, &p, &len);
    if (rc)
        return rc;
    switch (r->op) {
    case BINSTRING:
    case SHORT_BINSTRING: return push(r, py2_string(r, (const char *)p, len));
    case BYTEARRAY8: return push(r, mk_bytes(r, PK_BYTEARRAY, p, len));
    case BINUNICODE:
    case SHORT_BINUNICODE:
    case BINUNICODE8: {
        bool sur;
        size_t bad;
        if (pkt_utf8_check(p, len, true, &sur, &bad))
            return FAIL(r, TC_ERR_FORMAT, "string is not UTF-8 (byte 0x%02x at %zu)", p[bad], bad);
        pk_obj *o = mk_bytes(r, PK_STR, p, len);
        if (o && sur)
            o->flags |= PK_F_SURROGATE;
        return push(r, o);
    }
    default: return push(r, mk_bytes(r, PK_BYTES, p, len));
    }
}

/* ---- globals --------------------------------------------------------------------------- */

/* A global as CPython's find_class resolves it: fix_imports below protocol 3,
 * attribute walk of dotted names from protocol 4. Names no import resolves
 * are refused (see pickle.h). */
static pk_obj *mk_global(rd *r, const char *mod, size_t ml, const char *name, size_t nl)
{
    if (!ml) {
        fail_at(r, TC_ERR_FORMAT, "empty module name");
        return NULL;
    }
    if (!nl) {
        fail_at(r, TC_ERR_UNSUPPORTED, "empty global name in module '%.60s'", mod);
        return NULL;
    }
    if (memchr(mod, 0, ml) || memchr(name, 0, nl)) {
        fail_at(r, TC_ERR_UNSUPPORTED, "global name contains a NUL byte (no import can resolve it)");
        return NULL;
    }
    if (memchr(mod, '\n', ml) || memchr(name, '\n', nl)) {
        fail_at(r, TC_ERR_UNSUPPORTED,
                "global name contains a newline (no import can resolve it; crafted to hide opcodes in a rewrite?)");
        return NULL;
    }
    if (over_objects(r))
        return NULL;
    char *m = pk_arena_str(r->g, mod, ml), *n = pk_arena_str(r->g, name, nl);
    if (!m || !n) {
        oom(r);
        return NULL;
    }
    const char *tm = m, *tn = n;
    bool remapped = r->proto < 3 && !r->o->no_fix_imports && pk_compat_map(m, n, &tm, &tn);
    bool dotted = r->proto >= 4 && strchr(tn, '.');
    if (dotted)
        for (const char *c = tn;;) {
            const char *dot = strchr(c, '.');
            size_t cl = dot ? (size_t)(dot - c) : strlen(c);
            if (cl == 8 && !memcmp(c, "<locals>", 8)) {
                fail_at(r, TC_ERR_FORMAT, "Can't get local attribute '%.80s' on module '%.60s'", tn, tm);
                return NULL;
            }
            if (!cl) {
                fail_at(r, TC_ERR_UNSUPPORTED, "global name '%.80s' has an empty attribute", tn);
                return NULL;
            }
            if (!dot)
                break;
            c = dot + 1;
        }
    pk_obj *o = pk_new_global(r->g, tm, tn);
    if (!o) {
        oom(r);
        return NULL;
    }
    if (remapped) {
        o->flags |= PK_F_REMAPPED;
        o->raw_module = m;
        o->raw_name = n;
    }
    if (dotted)
        o->flags |= PK_F_DOTTED;
    return o;
}

/* GLOBAL and INST: two text lines, UTF-8 (GLOBAL) or ASCII (INST). */
static pk_obj *global_lines(rd *r, bool ascii)
{
    char *mod = NULL;
    size_t ml = 0;
    pk_obj *o = NULL;
    for (int i = 0; i < 2; i++) {
        if (read_arg_line(r))
            goto done;
        size_t len = r->llen - 1;
        bool sur;
        size_t bad = 0;
        bool ok = true;
        if (ascii) {
            for (size_t j = 0; j < len && ok; j++)
                if ((uint8_t)r->line[j] >= 0x80) {
                    ok = false;
                    bad = j;
                }
        } else {
            ok = !pkt_utf8_check((const uint8_t *)r->line, len, false, &sur, &bad);
        }
        if (!ok) {
            fail_at(r, TC_ERR_FORMAT, "global name is not %s (byte 0x%02x at %zu)", ascii ? "ASCII" : "UTF-8",
                    (uint8_t)r->line[bad], bad);
            goto done;
        }
        if (i == 0) {
            if (!(mod = malloc(len + 1))) {
                oom(r);
                goto done;
            }
            memcpy(mod, r->line, len + 1);
            ml = len;
        } else {
            o = mk_global(r, mod, ml, r->line, len);
        }
    }
done:
    free(mod);
    return o;
}

/* EXT1/2/4 look codes up in copyreg's extension registry, empty in a fresh
 * interpreter (torch registers none): CPython fails on every code. */
static int op_ext(rd *r, size_t k)
{
    int rc = need(r, k);
    if (rc)
        return rc;
    uint64_t code = le(r->buf + r->pos, k);
    r->pos += k;
    if (k == 4 && (code & 0x80000000u))
        return FAIL(r, TC_ERR_FORMAT, "EXT specifies code <= 0");
    if (!code)
        return FAIL(r, TC_ERR_FORMAT, "EXT specifies code <= 0");
    return FAIL(r, TC_ERR_UNSUPPORTED,
                "EXT%zu code %llu: the extension registry is empty where torch.load runs (unregistered "
                "extension code)", k == 4 ? (size_t)4 : k, (unsigned long long)code);
}

/* ---- calls ----------------------------------------------------------------------------- */

static pk_obj *mk_call(rd *r, pk_obj *func, pk_obj *args, bool newobj)
{
    pk_obj *o = mk(r, PK_CALL);
    if (!o)
        return NULL;
    o->func = func;
    o->args = args;
    o->newobj = newobj;
    uint32_t d = args ? args->depth : 0;
    if (func && func->depth > d)
        d = func->depth;
    o->depth = d + 1;
    return o;
}

/* CPython's instantiate() for INST and OBJ: cls(*args), or cls.__new__(cls)
 * when there are no arguments and cls is a class. */
static int instantiate(rd *r, pk_obj *cls, pk_obj *args)
{
    if (!standin(cls))
        return FAIL(r, TC_ERR_FORMAT, "'%s' object is not callable", kname(cls));
    return push(r, mk_call(r, cls, args, args->n == 0));
}

static int op_reduce(rd *r)
{
    pk_obj *f, *args;
    int rc;
    if ((rc = pop(r, &args)) || (rc = pop(r, &f)))
        return rc;
    if (args->kind != PK_TUPLE)
        return FAIL(r, TC_ERR_FORMAT, "REDUCE argument list must be a tuple, not %s", kname(args));
    if (!standin(f))
        return FAIL(r, TC_ERR_FORMAT, "REDUCE on '%s' object: not callable", kname(f));
    return push(r, mk_call(r, f, args, false));
}

/* A dict as a call receives it through **kwargs: a copy, whatever later
 * happens to the pickled dict. Keys must be str. */
static pk_obj *kwargs_copy(rd *r, const pk_obj *d)
{
    pk_obj *c = mk(r, PK_DICT);
    if (!c)
        return NULL;
    for (size_t i = 0; i < d->n; i += 2) {
        if (d->items[i]->kind != PK_STR) {
            fail_at(r, TC_ERR_UNSUPPORTED, "NEWOBJ_EX keyword names must be str, not %s", kname(d->items[i]));
            return NULL;
        }
        if (pk_push(r->g, c, d->items[i]) || pk_push(r->g, c, d->items[i + 1])) {
            oom(r);
            return NULL;
        }
    }
    return c;
}

static int op_newobj(rd *r, bool ex)
{
    pk_obj *cls, *args, *kw = NULL;
    int rc;
    if ((ex && (rc = pop(r, &kw))) || (rc = pop(r, &args)) || (rc = pop(r, &cls)))
        return rc;
    const char *op = ex ? "NEWOBJ_EX" : "NEWOBJ";
    if (!standin(cls))
        return FAIL(r, TC_ERR_FORMAT, "%s class argument must be a type, not %s", op, kname(cls));
    if (args->kind != PK_TUPLE)
        return FAIL(r, TC_ERR_FORMAT, "%s args argument must be a tuple, not %s", op, kname(args));
    if (kw && kw->kind != PK_DICT)
        return FAIL(r, TC_ERR_FORMAT, "%s kwargs argument must be a dict, not %s", op, kname(kw));
    pk_obj *kc = NULL;
    if (kw && !(kc = kwargs_copy(r, kw)))
        return failed(r);
    pk_obj *o = mk_call(r, cls, args, true);
    if (!o)
        return failed(r);
    if (kc) {
        o->kwargs = kc;
        if ((rc = grow_child(r, o, kc)))
            return rc;
    }
    return push(r, o);
}

static int do_persid(rd *r, pk_obj *pid)
{
    pk_obj *o = mk(r, PK_PERSID);
    if (!o)
        return failed(r);
    o->args = pid;
    int rc = grow_child(r, o, pid);
    if (rc)
        return rc;
    if (r->o->on_persid && (rc = r->o->on_persid(r->o->ctx, o, r->d)))
        return rc;
    return push(r, o);
}

static int op_persid(rd *r)
{
    int rc = read_line(r);
    if (rc)
        return rc;
    for (size_t i = 0; i + 1 < r->llen; i++)
        if ((uint8_t)r->line[i] >= 0x80)
            return FAIL(r, TC_ERR_FORMAT, "persistent IDs in protocol 0 must be ASCII strings");
    pk_obj *pid = mk_bytes(r, PK_STR, r->line, r->llen - 1);
    return pid ? do_persid(r, pid) : failed(r);
}

/* ---- containers ---------------------------------------------------------------------------- */

static int key_id(rd *r, const pk_obj *key, uint64_t *vid)
{
    const char *kind;
    int rc = pkk_vid(r->keys, key, vid, &kind);
    if (rc < 0)
        return oom(r);
    if (rc)
        return FAIL(r, TC_ERR_FORMAT, "unhashable type: '%s' (as a dict key or set member)", kind);
    return 0;
}

/* d[key] = value as a dict does it: an equal key keeps its first object and
 * its place, and takes the new value. */
static int dict_set(rd *r, pk_obj *d, pk_obj *key, pk_obj *value)
{
    uint64_t vid;
    size_t pos;
    bool found;
    int rc = key_id(r, key, &vid);
    if (rc)
        return rc;
    if (pkk_slot(r->keys, d, vid, d->n / 2, &pos, &found))
        return oom(r);
    if (found) {
        d->items[2 * pos + 1] = value;
    } else if (pk_push(r->g, d, key) || pk_push(r->g, d, value)) {
        return oom(r);
    }
    return grow_child(r, d, value);
}

/* set.add(item): an equal member stays as it is. */
static int set_add(rd *r, pk_obj *s, pk_obj *item)
{
    uint64_t vid;
    size_t pos;
    bool found;
    int rc = key_id(r, item, &vid);
    if (rc)
        return rc;
    if (pkk_slot(r->keys, s, vid, s->n, &pos, &found))
        return oom(r);
    if (!found && pk_push(r->g, s, item))
        return oom(r);
    return too_deep(r, s);
}

/* An int usable as a sequence index of a sequence of n: CPython's
 * PyNumber_AsSsize_t and the negative-index rule. */
static int seq_index(rd *r, const pk_obj *key, size_t n, const char *what, size_t *out)
{
    if (key->kind != PK_INT && key->kind != PK_BOOL) {
        if (key->kind == PK_BIGINT)
            return FAIL(r, TC_ERR_FORMAT, "cannot fit 'int' into an index-sized integer");
        return FAIL(r, TC_ERR_FORMAT, "%s indices must be integers, not %s", what, kname(key));
    }
    int64_t i = key->i;
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n)
        return FAIL(r, TC_ERR_FORMAT, "%s assignment index out of range", what);
    *out = (size_t)i;
    return 0;
}

static int byte_value(rd *r, const pk_obj *v, uint8_t *out)
{
    if (v->kind != PK_INT && v->kind != PK_BOOL) {
        if (v->kind == PK_BIGINT)
            return FAIL(r, TC_ERR_FORMAT, "byte must be in range(0, 256)");
        return FAIL(r, TC_ERR_FORMAT, "'%s' object cannot be interpreted as an integer", kname(v));
    }
    if (v->i < 0 || v->i > 255)
        return FAIL(r, TC_ERR_FORMAT, "byte must be in range(0, 256)");
    *out = (uint8_t)v->i;
    return 0;
}

/* What a call result can record: items of one kind, then one BUILD. */
static int call_items(rd *r, pk_obj *t, int want)
{
    if (t->state)
        return FAIL(r, TC_ERR_UNSUPPORTED, "%s after BUILD on one object (the graph keeps items, then state)",
                    want == PK_ITEMS_DICT ? "SETITEMS" : "APPENDS");
    if (t->items_kind && t->items_kind != want)
        return FAIL(r, TC_ERR_UNSUPPORTED, "object receives both list and dict items");
    t->items_kind = (uint8_t)want;
    return 0;
}

/* APPEND(S): stack[x..sp) onto stack[x-1] as do_append does: list.extend,
 * bytearray.extend, or the object's extend. */
static int do_append(rd *r, size_t x)
{
    if (x > r->sp || x <= fence(r))
        return underflow(r);
    if (x == r->sp) /* nothing to do, whatever the target */
        return 0;
    pk_obj *t = r->stack[x - 1];
    int rc = 0;
    if (t->kind == PK_LIST || t->kind == PK_CALL) {
        if (t->kind == PK_CALL && (rc = call_items(r, t, PK_ITEMS_LIST)))
            return rc;
        for (size_t i = x; i < r->sp; i++)
            if (pk_push(r->g, t, r->stack[i]))
                return oom(r);
        rc = too_deep(r, t);
    } else if (t->kind == PK_BYTEARRAY) {
        for (size_t i = x; i < r->sp && !rc; i++) {
            uint8_t b;
            if (!(rc = byte_value(r, r->stack[i], &b)) && pk_bytes_append(r->g, t, &b, 1))
                rc = oom(r);
        }
    } else if (t->kind == PK_GLOBAL || t->kind == PK_PERSID) {
        rc = FAIL(r, TC_ERR_UNSUPPORTED, "APPENDS on a %s", t->kind == PK_GLOBAL ? "global" : "persistent id");
    } else {
        rc = FAIL(r, TC_ERR_FORMAT, "APPEND on a %s ('%s' object has no attribute 'extend')", kname(t), kname(t));
    }
    r->sp = x;
    return rc;
}

/* SETITEM(S): pairs of stack[x..sp) into stack[x-1] as do_setitems does:
 * obj[key] = value, pair by pair. */
static int do_setitems(rd *r, size_t x)
{
    if (x > r->sp || x <= fence(r))
        return underflow(r);
    if (x == r->sp)
        return 0;
    if ((r->sp - x) % 2)
        return FAIL(r, TC_ERR_FORMAT, "odd number of items for SETITEMS");
    pk_obj *t = r->stack[x - 1];
    int rc = 0;
    if (t->kind == PK_CALL && (rc = call_items(r, t, PK_ITEMS_DICT)))
        return rc;
    for (size_t i = x; i < r->sp && !rc; i += 2) {
        pk_obj *k = r->stack[i], *v = r->stack[i + 1];
        size_t at;
        uint8_t b;
        switch (t->kind) {
        case PK_DICT: rc = dict_set(r, t, k, v); break;
        case PK_CALL:
            if (pk_push(r->g, t, k) || pk_push(r->g, t, v))
                return oom(r);
            rc = too_deep(r, t);
            break;
        case PK_LIST:
            if (!(rc = seq_index(r, k, t->n, "list", &at))) {
                t->items[at] = v;
                rc = grow_child(r, t, v);
            }
            break;
        case PK_BYTEARRAY:
            if (!(rc = seq_index(r, k, t->len, "bytearray", &at)) && !(rc = byte_value(r, v, &b)))
                t->s[at] = (char)b;
            break;
        case PK_GLOBAL:
        case PK_PERSID:
            rc = FAIL(r, TC_ERR_UNSUPPORTED, "SETITEMS on a %s",
                      t->kind == PK_GLOBAL ? "global" : "persistent id");
            break;
        default:
            rc = FAIL(r, TC_ERR_FORMAT, "SETITEM on a %s ('%s' object does not support item assignment)",
                      kname(t), kname(t));
            break;
        }
    }
    r->sp = x;
    return rc;
}

static int op_additems(rd *r)
{
    size_t x = 0;
    int rc = pop_mark(r, &x);
    if (rc)
        return rc;
    if (x > r->sp || x <= fence(r))
        return underflow(r);
    if (x == r->sp)
        return 0;
    pk_obj *t = r->stack[x - 1];
    if (t->kind != PK_SET) {
        r->sp = x;
        if (t->kind == PK_CALL || t->kind == PK_GLOBAL || t->kind == PK_PERSID)
            return FAIL(r, TC_ERR_UNSUPPORTED, "ADDITEMS on an object other than a set");
        return FAIL(r, TC_ERR_FORMAT, "ADDITEMS on a %s ('%s' object has no attribute 'add')", kname(t), kname(t));
    }
    for (size_t i = x; i < r->sp && !rc; i++)
        rc = set_add(r, t, r->stack[i]);
    r->sp = x;
    return rc;
}

static int op_dict(rd *r)
{
    size_t base = 0;
    int rc = pop_mark(r, &base);
    if (rc)
        return rc;
    if ((r->sp - base) % 2)
        return FAIL(r, TC_ERR_FORMAT, "odd number of items for DICT");
    pk_obj *d = mk(r, PK_DICT);
    if (!d)
        return failed(r);
    for (size_t i = base; i < r->sp && !rc; i += 2)
        rc = dict_set(r, d, r->stack[i], r->stack[i + 1]);
    r->sp = base;
    return rc ? rc : push(r, d);
}

static int op_frozenset(rd *r)
{
    size_t base = 0;
    int rc = pop_mark(r, &base);
    if (rc)
        return rc;
    pk_obj *s = mk(r, PK_FROZENSET);
    if (!s)
        return failed(r);
    for (size_t i = base; i < r->sp && !rc; i++)
        rc = set_add(r, s, r->stack[i]);
    r->sp = base;
    return rc ? rc : push(r, s);
}

/* BUILD: a call result records its state; on anything else CPython's default
 * __setstate__ runs, which builtin objects survive only when it does nothing:
 * state None, or (None, {}) with an empty slot dict. */
static int op_build(rd *r)
{
    pk_obj *st = NULL, *t = NULL;
    int rc;
    if (r->sp < fence(r) + 2)
        return underflow(r);
    if ((rc = pop(r, &st)) || (rc = top(r, &t)))
        return rc;
    if (t->kind == PK_CALL) {
        if (t->state)
            return FAIL(r, TC_ERR_UNSUPPORTED, "BUILD applied twice to one object");
        t->state = st;
        return grow_child(r, t, st);
    }
    if (t->kind == PK_GLOBAL || t->kind == PK_PERSID)
        return FAIL(r, TC_ERR_UNSUPPORTED, "BUILD on a %s (sets attributes of an imported object)",
                    t->kind == PK_GLOBAL ? "global" : "persistent id");
    const pk_obj *slot = NULL;
    if (st->kind == PK_TUPLE && st->n == 2) {
        slot = st->items[1];
        st = st->items[0];
    }
    if (st->kind != PK_NONE) {
        if (st->kind != PK_DICT)
            return FAIL(r, TC_ERR_FORMAT, "BUILD: state is not a dictionary");
        return FAIL(r, TC_ERR_FORMAT, "BUILD on a %s ('%s' object has no attribute '__dict__')", kname(t), kname(t));
    }
    if (slot && slot->kind != PK_DICT)
        return FAIL(r, TC_ERR_FORMAT, "BUILD: slot state is not a dictionary");
    if (slot && slot->n)
        return FAIL(r, TC_ERR_FORMAT, "BUILD on a %s: cannot set attributes of a '%s' object", kname(t), kname(t));
    return 0;
}

/* READONLY_BUFFER: memoryview(top), read-only. A bytes object stays itself; a
 * bytearray would become a memoryview, which the graph has no kind for. */
static int op_readonly_buffer(rd *r)
{
    pk_obj *t = NULL;
    int rc = top(r, &t);
    if (rc)
        return rc;
    if (t->kind == PK_BYTES)
        return 0;
    if (t->kind == PK_BYTEARRAY)
        return FAIL(r, TC_ERR_UNSUPPORTED, "READONLY_BUFFER on a bytearray (makes a memoryview)");
    return FAIL(r, TC_ERR_FORMAT, "READONLY_BUFFER: a bytes-like object is required, not '%s'", kname(t));
}

/* ---- the machine ------------------------------------------------------------------------------ */

static int step(rd *r, bool *stop)
{
    int rc;
    pk_obj *a = NULL, *b = NULL;
    size_t base = 0;

    r->op_pos = r->pos;
    r->op = 0;
    if ((rc = frame_check(r, 1)))
        return rc;
    if (r->pos >= r->n) {
        truncated(r);
        return FAIL(r, TC_ERR_FORMAT, "the pickle ends before STOP (truncated?)");
    }
    r->op = r->buf[r->pos++];
    const uint8_t *p = r->buf + r->pos;
    if (r->o->ops_seen)
        r->o->ops_seen[r->op >> 3] |= (uint8_t)(1u << (r->op & 7));

    switch (r->op) {
    case PROTO:
        if ((rc = need(r, 1)))
            return rc;
        if (p[0] > 5)
            return FAIL(r, TC_ERR_UNSUPPORTED, "pickle protocol %d is newer than 5", p[0]);
        r->proto = p[0];
        r->pos++;
        return 0;
    case FRAME: {
        if ((rc = need(r, 8)))
            return rc;
        uint64_t len = le(p, 8);
        r->pos += 8;
        if (len <= r->n - r->pos && (rc = frame_check(r, (size_t)len)))
            return rc;
        if (len > r->n - r->pos) { /* CPython reads the whole frame, then rewinds */
            truncated(r);
            return FAIL(r, TC_ERR_FORMAT, "frame of %llu bytes but only %zu remain (truncated?)",
                        (unsigned long long)len, r->n - r->pos);
        }
        if (!r->fend) /* a frame inside a frame's buffer is read from that buffer */
            r->fend = r->pos + (size_t)len;
        return 0;
    }
    case STOP: *stop = true; return 0;
    case MARK:
        if (r->mp >= r->o->limits.max_depth * 4ULL + 64)
            return FAIL(r, TC_ERR_LIMIT, "more than %llu nested MARKs (raise with --max-depth)",
                        r->o->limits.max_depth * 4ULL + 64);
        if (tc_grow(&r->marks, &r->mcap, r->mp + 1, sizeof *r->marks))
            return oom(r);
        r->marks[r->mp++] = r->sp;
        return 0;
    case POP: /* the top MARK goes first when nothing is above it */
        if (r->mp && r->marks[r->mp - 1] == r->sp)
            r->mp--;
        else if (r->sp <= fence(r))
            return underflow(r);
        else
            r->sp--;
        return 0;
    case POP_MARK:
        if ((rc = pop_mark(r, &base)))
            return rc;
        r->sp = base;
        return 0;
    case DUP:
        if ((rc = top(r, &a)))
            return rc;
        return push(r, a);

    case NONE:
        if (!(a = shared(r, &r->none, PK_NONE, 0)))
            return failed(r);
        return push(r, a);
    case NEWTRUE:
    case NEWFALSE:
        if (!(a = shared(r, &r->bools[r->op == NEWTRUE], PK_BOOL, r->op == NEWTRUE)))
            return failed(r);
        return push(r, a);
    case BININT:
    case BININT1:
    case BININT2: {
        size_t k = r->op == BININT ? 4 : r->op == BININT1 ? 1 : 2;
        if ((rc = need(r, k)))
            return rc;
        r->pos += k;
        int64_t v = k == 4 ? (int64_t)(int32_t)(uint32_t)le(p, 4) : (int64_t)le(p, k);
        if (v >= 0 && v < SMALL_INTS)
            a = shared(r, &r->small[v], PK_INT, v);
        else if ((a = mk(r, PK_INT)))
            a->i = v;
        if (!a)
            return failed(r);
        return push(r, a);
    }
    case LONG1:
    case LONG4: {
        size_t lb = r->op == LONG1 ? 1 : 4;
        if ((rc = need(r, lb)))
            return rc;
        uint64_t k = le(p, lb);
        r->pos += lb;
        if (lb == 4 && (k & 0x80000000u))
            return FAIL(r, TC_ERR_FORMAT, "LONG pickle has negative byte count");
        if (k <= r->n - r->pos && (rc = frame_check(r, (size_t)k)))
            return rc;
        if (k > r->n - r->pos) {
            truncated(r);
            return FAIL(r, TC_ERR_FORMAT, "integer of %llu bytes past the end of the pickle (truncated?)",
                        (unsigned long long)k);
        }
        if (!k)
            a = mk(r, PK_INT);
        else
            a = int_le(r, r->buf + r->pos, (size_t)k);
        r->pos += (size_t)k;
        return push(r, a);
    }
    case INT: return op_int(r);
    case LONG: return op_long(r);
    case FLOAT: return op_float(r);
    case BINFLOAT: {
        if ((rc = need(r, 8)))
            return rc;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | p[i];
        r->pos += 8;
        if (!(a = mk(r, PK_FLOAT)))
            return failed(r);
        memcpy(&a->f, &bits, 8);
        return push(r, a);
    }

    case STRING: return op_string(r);
    case UNICODE: return op_unicode(r);
    case BINSTRING: return op_counted(r, 4);
    case SHORT_BINSTRING: return op_counted(r, 1);
    case BINBYTES: return op_counted(r, 4);
    case SHORT_BINBYTES: return op_counted(r, 1);
    case BINBYTES8: return op_counted(r, 8);
    case BYTEARRAY8: return op_counted(r, 8);
    case BINUNICODE: return op_counted(r, 4);
    case SHORT_BINUNICODE: return op_counted(r, 1);
    case BINUNICODE8: return op_counted(r, 8);

    case EMPTY_TUPLE: /* CPython's () is one object, and a graph of many calls holds many */
        if (!(a = shared(r, &r->empty_tuple, PK_TUPLE, 0)))
            return failed(r);
        return push(r, a);
    case EMPTY_LIST: return push(r, mk(r, PK_LIST));
    case EMPTY_DICT: return push(r, mk(r, PK_DICT));
    case EMPTY_SET: return push(r, mk(r, PK_SET));
    case TUPLE1:
    case TUPLE2:
    case TUPLE3: {
        size_t k = (size_t)(r->op - TUPLE1 + 1);
        if (r->sp < fence(r) + k)
            return underflow(r);
        return push(r, mk_seq(r, PK_TUPLE, r->sp - k));
    }
    case TUPLE:
        if ((rc = pop_mark(r, &base)))
            return rc;
        return push(r, mk_seq(r, PK_TUPLE, base));
    case LIST:
        if ((rc = pop_mark(r, &base)))
            return rc;
        return push(r, mk_seq(r, PK_LIST, base));
    case DICT: return op_dict(r);
    case FROZENSET: return op_frozenset(r);

    case APPEND:
        if (r->sp < fence(r) + 2)
            return underflow(r);
        return do_append(r, r->sp - 1);
    case APPENDS:
        if ((rc = pop_mark(r, &base)))
            return rc;
        return do_append(r, base);
    case SETITEM:
        if (r->sp < 2)
            return underflow(r);
        return do_setitems(r, r->sp - 2);
    case SETITEMS:
        if ((rc = pop_mark(r, &base)))
            return rc;
        return do_setitems(r, base);
    case ADDITEMS: return op_additems(r);

    case GET: {
        uint64_t idx;
        if ((rc = memo_index(r, false, &idx)))
            return rc;
        return memo_push(r, idx);
    }
    case BINGET:
    case LONG_BINGET: {
        size_t k = r->op == BINGET ? 1 : 4;
        if ((rc = need(r, k)))
            return rc;
        r->pos += k;
        return memo_push(r, le(p, k));
    }
    case PUT: {
        uint64_t idx;
        if ((rc = memo_index(r, true, &idx)))
            return rc;
        return memo_put(r, idx);
    }
    case BINPUT:
    case LONG_BINPUT: {
        size_t k = r->op == BINPUT ? 1 : 4;
        if ((rc = need(r, k)))
            return rc;
        r->pos += k;
        return memo_put(r, le(p, k));
    }
    case MEMOIZE: return memo_put(r, r->memo_len);

    case GLOBAL: return push(r, global_lines(r, false));
    case INST:
        if ((rc = pop_mark(r, &base)))
            return rc;
        if (!(a = global_lines(r, true)) || !(b = mk_seq(r, PK_TUPLE, base)))
            return failed(r);
        return instantiate(r, a, b);
    case STACK_GLOBAL:
        if ((rc = pop(r, &b)) || (rc = pop(r, &a)))
            return rc;
        if (a->kind != PK_STR || b->kind != PK_STR)
            return FAIL(r, TC_ERR_FORMAT, "STACK_GLOBAL requires str (got %s and %s)", kname(a), kname(b));
        return push(r, mk_global(r, a->s, a->len, b->s, b->len));
    case OBJ:
        if ((rc = pop_mark(r, &base)))
            return rc;
        if (r->sp == base)
            return FAIL(r, TC_ERR_FORMAT, "OBJ without a class (stack underflow)");
        a = r->stack[base];
        if (!(b = mk_seq(r, PK_TUPLE, base + 1)))
            return failed(r);
        r->sp = base;
        return instantiate(r, a, b);
    case EXT1: return op_ext(r, 1);
    case EXT2: return op_ext(r, 2);
    case EXT4: return op_ext(r, 4);

    case REDUCE: return op_reduce(r);
    case NEWOBJ: return op_newobj(r, false);
    case NEWOBJ_EX: return op_newobj(r, true);
    case BUILD: return op_build(r);

    case PERSID: return op_persid(r);
    case BINPERSID:
        if ((rc = pop(r, &a)))
            return rc;
        return do_persid(r, a);

    case NEXT_BUFFER:
        return FAIL(r, TC_ERR_UNSUPPORTED, "out-of-band buffers cannot appear in a file (NEXT_BUFFER)");
    case READONLY_BUFFER: return op_readonly_buffer(r);
    default: return FAIL(r, TC_ERR_FORMAT, "unknown opcode (not a pickle, or corrupt)");
    }
}

int pk_read(pk_graph *g, const uint8_t *buf, size_t n, const pk_read_opts *opts, pk_obj **out,
            size_t *used, tc_diag *d)
{
    rd r = {.g = g, .buf = buf, .n = n, .o = opts, .d = d};
    bool stop = false;
    pk_obj *root;
    int rc = 0;
    if (!(r.keys = pkk_new())) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    while (!rc && !stop)
        rc = step(&r, &stop);
    if (rc || (rc = pop(&r, &root)))
        goto done;
    *out = root;
    if (used)
        *used = r.pos;
done:
    free(r.stack);
    free(r.marks);
    free(r.memo);
    tc_map_free(&r.sparse);
    pkk_free(r.keys);
    free(r.line);
    free(r.tmp);
    return rc;
}
