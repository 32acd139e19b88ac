/* Pickle reader: a stack machine over every opcode of protocols 0 to 5 that
 * builds inert pk_obj nodes. Nothing here imports, calls or evaluates. */
#include "pickle.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pk_obj *pk_new_bytes_kind(pk_graph *g, pk_kind kind, const void *s, size_t len);

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
    pk_obj **memo;
    size_t memo_cap;
    uint8_t op;
} rd;

#define FAIL(r, code, ...) fail_at(r, code, __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static int fail_at(rd *r, int code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tc_fail(r->d, code, "%s offset 0x%llx (opcode 0x%02x): %s", r->o->what ? r->o->what : "pickle",
                   (unsigned long long)(r->o->base_offset + r->op_pos), r->op, msg);
}

static int oom(rd *r) { return FAIL(r, TC_ERR_NOMEM, "out of memory"); }

static int need(rd *r, size_t k)
{
    if (r->n - r->pos < k) {
        if (r->o->hit_end)
            *r->o->hit_end = true;
        return FAIL(r, TC_ERR_FORMAT, "needs %zu more bytes but the pickle ends (truncated?)", k);
    }
    return 0;
}

static pk_obj *mk(rd *r, pk_kind k)
{
    if (pk_graph_count(r->g) >= r->o->limits.max_objects) {
        FAIL(r, TC_ERR_LIMIT, "more than %llu objects (raise with --max-objects)",
             (unsigned long long)r->o->limits.max_objects);
        return NULL;
    }
    pk_obj *o = pk_new(r->g, k);
    if (!o)
        oom(r);
    return o;
}

static int push(rd *r, pk_obj *o)
{
    if (!o)
        return r->d->code ? r->d->code : oom(r);
    if (o->depth > r->o->limits.max_depth)
        return FAIL(r, TC_ERR_LIMIT, "objects nested deeper than %u (raise with --max-depth)",
                    r->o->limits.max_depth);
    if (r->sp == r->scap) {
        size_t cap = r->scap ? r->scap * 2 : 64;
        pk_obj **p = realloc(r->stack, cap * sizeof *p);
        if (!p)
            return oom(r);
        r->stack = p;
        r->scap = cap;
    }
    r->stack[r->sp++] = o;
    return 0;
}

static size_t stack_floor(rd *r) { return r->mp ? r->marks[r->mp - 1] : 0; }

static int pop(rd *r, pk_obj **out)
{
    if (r->sp <= stack_floor(r))
        return FAIL(r, TC_ERR_FORMAT, "stack underflow (corrupt pickle)");
    *out = r->stack[--r->sp];
    return 0;
}

static int top(rd *r, pk_obj **out)
{
    if (r->sp <= stack_floor(r))
        return FAIL(r, TC_ERR_FORMAT, "stack underflow (corrupt pickle)");
    *out = r->stack[r->sp - 1];
    return 0;
}

/* Pop to the last MARK; items are stack[*base .. sp). */
static int pop_mark(rd *r, size_t *base)
{
    if (!r->mp)
        return FAIL(r, TC_ERR_FORMAT, "no MARK on the stack (corrupt pickle)");
    *base = r->marks[--r->mp];
    return 0;
}

static int memo_put(rd *r, uint64_t idx)
{
    pk_obj *o;
    int rc = top(r, &o);
    if (rc)
        return rc;
    if (idx >= r->o->limits.max_memo)
        return FAIL(r, TC_ERR_LIMIT, "memo index %llu is over the limit of %llu (raise with --max-objects)",
                    (unsigned long long)idx, (unsigned long long)r->o->limits.max_memo);
    if (idx > (uint64_t)r->pos + 1024)
        return FAIL(r, TC_ERR_LIMIT, "memo index %llu is implausibly large", (unsigned long long)idx);
    if (idx >= r->memo_cap) {
        size_t cap = r->memo_cap ? r->memo_cap : 256;
        while (cap <= idx)
            cap *= 2;
        pk_obj **p = realloc(r->memo, cap * sizeof *p);
        if (!p)
            return oom(r);
        memset(p + r->memo_cap, 0, (cap - r->memo_cap) * sizeof *p);
        r->memo = p;
        r->memo_cap = cap;
    }
    r->memo[idx] = o;
    return 0;
}

static int memo_get(rd *r, uint64_t idx)
{
    if (idx >= r->memo_cap || !r->memo[idx])
        return FAIL(r, TC_ERR_FORMAT,
                    "memo slot %llu read but never set (file truncated or not a checkpoint?)",
                    (unsigned long long)idx);
    return push(r, r->memo[idx]);
}

/* A text line ending in '\n' starting at pos; returns its length without the newline. */
static int line(rd *r, const char **s, size_t *len)
{
    const uint8_t *p = r->buf + r->pos;
    const uint8_t *nl = memchr(p, '\n', r->n - r->pos);
    if (!nl && r->o->hit_end)
        *r->o->hit_end = true;
    if (!nl)
        return FAIL(r, TC_ERR_FORMAT, "text argument without a newline (truncated?)");
    *s = (const char *)p;
    *len = (size_t)(nl - p);
    r->pos += *len + 1;
    return 0;
}

static int parse_dec(rd *r, const char *s, size_t len, int64_t *v, bool *big)
{
    char tmp[64];
    *big = false;
    if (len && s[len - 1] == 'L')
        len--;
    if (len == 0 || len >= sizeof tmp) {
        if (len >= sizeof tmp) {
            *big = true;
            return 0;
        }
        return FAIL(r, TC_ERR_FORMAT, "empty number");
    }
    memcpy(tmp, s, len);
    tmp[len] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(tmp, &end, 10);
    if (*end)
        return FAIL(r, TC_ERR_FORMAT, "bad decimal number '%s'", tmp);
    if (errno == ERANGE) {
        *big = true;
        return 0;
    }
    *v = x;
    return 0;
}

/* A decimal too large for int64 becomes little-endian two's complement bytes. */
static pk_obj *big_from_dec(rd *r, const char *s, size_t len)
{
    bool neg = false;
    if (len && s[len - 1] == 'L')
        len--;
    if (len && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        s++;
        len--;
    }
    if (len == 0 || len > 4096) {
        FAIL(r, TC_ERR_LIMIT, "decimal number of %zu digits", len);
        return NULL;
    }
    size_t cap = len / 2 + 2;
    uint8_t *mag = calloc(cap, 1);
    if (!mag) {
        oom(r);
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            free(mag);
            FAIL(r, TC_ERR_FORMAT, "bad decimal number");
            return NULL;
        }
        unsigned carry = (unsigned)(s[i] - '0');
        for (size_t j = 0; j < cap; j++) {
            unsigned v = mag[j] * 10u + carry;
            mag[j] = (uint8_t)v;
            carry = v >> 8;
        }
    }
    if (neg) { /* two's complement */
        unsigned carry = 1;
        for (size_t j = 0; j < cap; j++) {
            unsigned v = (uint8_t)~mag[j] + carry;
            mag[j] = (uint8_t)v;
            carry = v >> 8;
        }
    }
    pk_obj *o = pk_new_bytes_kind(r->g, PK_BIGINT, mag, cap);
    free(mag);
    if (!o)
        oom(r);
    return o;
}

static pk_obj *int_from_le(rd *r, const uint8_t *p, size_t k)
{
    if (k <= 8) {
        uint64_t v = 0;
        for (size_t i = 0; i < k; i++)
            v |= (uint64_t)p[i] << (8 * i);
        if (k && k < 8 && (p[k - 1] & 0x80))
            v |= ~0ULL << (8 * k);
        pk_obj *o = mk(r, PK_INT);
        if (o)
            o->i = (int64_t)v;
        return o;
    }
    pk_obj *o = pk_new_bytes_kind(r->g, PK_BIGINT, p, k);
    if (!o)
        oom(r);
    return o;
}

static void put_utf8(char *out, size_t *k, uint32_t c)
{
    if (c < 0x80) {
        out[(*k)++] = (char)c;
    } else if (c < 0x800) {
        out[(*k)++] = (char)(0xC0 | c >> 6);
        out[(*k)++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out[(*k)++] = (char)(0xE0 | c >> 12);
        out[(*k)++] = (char)(0x80 | (c >> 6 & 0x3F));
        out[(*k)++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[(*k)++] = (char)(0xF0 | c >> 18);
        out[(*k)++] = (char)(0x80 | (c >> 12 & 0x3F));
        out[(*k)++] = (char)(0x80 | (c >> 6 & 0x3F));
        out[(*k)++] = (char)(0x80 | (c & 0x3F));
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Protocol 0 UNICODE: raw-unicode-escape (\uXXXX, \UXXXXXXXX; other bytes latin-1). */
static pk_obj *unicode_raw(rd *r, const char *s, size_t len)
{
    char *out = malloc(len * 4 + 1);
    if (!out) {
        oom(r);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' && i + 1 < len && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
            size_t w = s[i + 1] == 'u' ? 4 : 8;
            uint32_t v = 0;
            bool ok = i + 2 + w <= len;
            for (size_t j = 0; ok && j < w; j++) {
                int h = hexval(s[i + 2 + j]);
                ok = h >= 0;
                v = v << 4 | (uint32_t)(h < 0 ? 0 : h);
            }
            if (ok && v <= 0x10FFFF) {
                put_utf8(out, &k, v);
                i += 1 + w;
                continue;
            }
        }
        put_utf8(out, &k, c);
    }
    pk_obj *o = pk_new_bytes_kind(r->g, PK_STR, out, k);
    free(out);
    if (!o)
        oom(r);
    return o;
}

/* Protocol 0 STRING: a Python repr in quotes. */
static pk_obj *string_repr(rd *r, const char *s, size_t len)
{
    if (len < 2 || s[0] != s[len - 1] || (s[0] != '\'' && s[0] != '"')) {
        FAIL(r, TC_ERR_FORMAT, "STRING argument is not quoted");
        return NULL;
    }
    s++;
    len -= 2;
    char *out = malloc(len + 1);
    if (!out) {
        oom(r);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 == len) {
            out[k++] = c;
            continue;
        }
        c = s[++i];
        switch (c) {
        case 'n': out[k++] = '\n'; break;
        case 't': out[k++] = '\t'; break;
        case 'r': out[k++] = '\r'; break;
        case '0': out[k++] = '\0'; break;
        case 'x':
            if (i + 2 < len + 0 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
                out[k++] = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
                i += 2;
            } else {
                out[k++] = 'x';
            }
            break;
        default: out[k++] = c; break;
        }
    }
    pk_obj *o = pk_new_bytes_kind(r->g, PK_BYTES, out, k);
    free(out);
    if (!o)
        oom(r);
    return o;
}

static pk_obj *mk_seq(rd *r, pk_kind kind, size_t base)
{
    pk_obj *o = mk(r, kind);
    if (!o)
        return NULL;
    for (size_t i = base; i < r->sp; i++)
        if (pk_push(r->g, o, r->stack[i]) < 0) {
            oom(r);
            return NULL;
        }
    r->sp = base;
    return o;
}

static pk_obj *mk_global(rd *r, const char *mod, size_t ml, const char *name, size_t nl)
{
    char m[512], n[512];
    if (ml >= sizeof m || nl >= sizeof n) {
        FAIL(r, TC_ERR_FORMAT, "global name longer than 511 bytes");
        return NULL;
    }
    memcpy(m, mod, ml);
    m[ml] = 0;
    memcpy(n, name, nl);
    n[nl] = 0;
    if (memchr(m, 0, ml) || memchr(n, 0, nl)) {
        FAIL(r, TC_ERR_FORMAT, "global name contains a NUL byte");
        return NULL;
    }
    /* written back as GLOBAL text lines, a newline would smuggle opcodes into the output */
    if (memchr(m, '\n', ml) || memchr(n, '\n', nl)) {
        FAIL(r, TC_ERR_FORMAT, "global name contains a newline (crafted to hide opcodes in a rewrite?)");
        return NULL;
    }
    if (pk_graph_count(r->g) >= r->o->limits.max_objects) {
        FAIL(r, TC_ERR_LIMIT, "more than %llu objects (raise with --max-objects)",
             (unsigned long long)r->o->limits.max_objects);
        return NULL;
    }
    pk_obj *o = pk_new_global(r->g, m, n);
    if (!o)
        oom(r);
    return o;
}

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

static void raise_depth(pk_obj *o, const pk_obj *child)
{
    if (child && child->depth + 1 > o->depth)
        o->depth = child->depth + 1;
}

/* SETITEM(S) / APPEND(S) target: a dict/list, or a call result (dict or list subclass). */
static int add_items(rd *r, pk_obj *target, size_t base, bool dict)
{
    size_t cnt = r->sp - base;
    if (dict && cnt % 2)
        return FAIL(r, TC_ERR_FORMAT, "SETITEMS with an odd number of items");
    if (target->kind == PK_CALL) {
        int want = dict ? PK_ITEMS_DICT : PK_ITEMS_LIST;
        if (target->items_kind && target->items_kind != want)
            return FAIL(r, TC_ERR_FORMAT, "object receives both list and dict items");
        target->items_kind = (uint8_t)want;
    } else if (target->kind == (dict ? PK_DICT : PK_LIST)) {
        /* fine */
    } else if (!dict && target->kind == PK_SET) {
        /* ADDITEMS */
    } else {
        return FAIL(r, TC_ERR_FORMAT, "%s on an object that is not a %s",
                    dict ? "SETITEM" : "APPEND", dict ? "dict" : "list");
    }
    for (size_t i = base; i < r->sp; i++)
        if (pk_push(r->g, target, r->stack[i]) < 0)
            return oom(r);
    r->sp = base;
    if (target->depth > r->o->limits.max_depth)
        return FAIL(r, TC_ERR_LIMIT, "objects nested deeper than %u (raise with --max-depth)",
                    r->o->limits.max_depth);
    return 0;
}

static int do_persid(rd *r, pk_obj *pid)
{
    pk_obj *o = mk(r, PK_PERSID);
    if (!o)
        return r->d->code;
    o->args = pid;
    raise_depth(o, pid);
    if (r->o->on_persid) {
        int rc = r->o->on_persid(r->o->ctx, o, r->d);
        if (rc)
            return rc;
    }
    return push(r, o);
}

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

static int bytes_op(rd *r, pk_kind kind, size_t lenbytes)
{
    int rc = need(r, lenbytes);
    if (rc)
        return rc;
    uint64_t len = 0;
    for (size_t i = 0; i < lenbytes; i++)
        len |= (uint64_t)r->buf[r->pos + i] << (8 * i);
    if (lenbytes == 4 && kind == PK_BYTES && r->op == BINSTRING && (len & 0x80000000u))
        return FAIL(r, TC_ERR_FORMAT, "negative BINSTRING length");
    r->pos += lenbytes;
    if (len > r->n - r->pos && r->o->hit_end)
        *r->o->hit_end = true;
    if (len > r->n - r->pos)
        return FAIL(r, TC_ERR_FORMAT,
                    "string of %llu bytes but only %zu remain in the pickle (truncated?)",
                    (unsigned long long)len, r->n - r->pos);
    pk_obj *o = pk_new_bytes_kind(r->g, kind, r->buf + r->pos, (size_t)len);
    r->pos += (size_t)len;
    return push(r, o);
}

static int step(rd *r, bool *stop)
{
    int rc;
    pk_obj *a, *b, *c;
    size_t base = 0;
    const char *s, *s2;
    size_t len, len2;
    int64_t v;
    bool big;

    r->op_pos = r->pos;
    if ((rc = need(r, 1)))
        return rc;
    r->op = r->buf[r->pos++];
    const uint8_t *p = r->buf + r->pos;

    switch (r->op) {
    case PROTO:
        if ((rc = need(r, 1)))
            return rc;
        if (p[0] > 5)
            return FAIL(r, TC_ERR_UNSUPPORTED, "pickle protocol %d is newer than 5", p[0]);
        r->pos++;
        return 0;
    case FRAME:
        if ((rc = need(r, 8)))
            return rc;
        r->pos += 8; /* frames only group opcodes; the stream reads the same without them */
        return 0;
    case STOP:
        *stop = true;
        return 0;
    case MARK:
        if (r->mp >= r->o->limits.max_depth * 4ULL + 64)
            return FAIL(r, TC_ERR_LIMIT, "more than %llu nested MARKs (raise with --max-depth)",
                        r->o->limits.max_depth * 4ULL + 64);
        if (r->mp == r->mcap) {
            size_t cap = r->mcap ? r->mcap * 2 : 32;
            size_t *m = realloc(r->marks, cap * sizeof *m);
            if (!m)
                return oom(r);
            r->marks = m;
            r->mcap = cap;
        }
        r->marks[r->mp++] = r->sp;
        return 0;
    case POP:
        if (r->sp > stack_floor(r))
            r->sp--;
        else if (r->mp)
            r->mp--; /* pickle pops a MARK when the stack top is one */
        else
            return FAIL(r, TC_ERR_FORMAT, "POP on an empty stack");
        return 0;
    case POP_MARK:
        return pop_mark(r, &base) ? r->d->code : (r->sp = base, 0);
    case DUP:
        if ((rc = top(r, &a)))
            return rc;
        return push(r, a);

    case NONE: return push(r, mk(r, PK_NONE));
    case NEWTRUE:
    case NEWFALSE:
        if (!(a = mk(r, PK_BOOL)))
            return r->d->code;
        a->i = r->op == NEWTRUE;
        return push(r, a);
    case BININT:
        if ((rc = need(r, 4)))
            return rc;
        r->pos += 4;
        return push(r, int_from_le(r, p, 4));
    case BININT1:
        if ((rc = need(r, 1)))
            return rc;
        r->pos += 1;
        if (!(a = mk(r, PK_INT)))
            return r->d->code;
        a->i = p[0];
        return push(r, a);
    case BININT2:
        if ((rc = need(r, 2)))
            return rc;
        r->pos += 2;
        if (!(a = mk(r, PK_INT)))
            return r->d->code;
        a->i = p[0] | p[1] << 8;
        return push(r, a);
    case LONG1:
    case LONG4: {
        size_t lb = r->op == LONG1 ? 1 : 4;
        if ((rc = need(r, lb)))
            return rc;
        uint64_t k = r->op == LONG1 ? p[0] : (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
        r->pos += lb;
        if (k > r->n - r->pos && r->o->hit_end)
            *r->o->hit_end = true;
        if (k > r->n - r->pos)
            return FAIL(r, TC_ERR_FORMAT, "integer of %llu bytes past the end of the pickle",
                        (unsigned long long)k);
        a = int_from_le(r, r->buf + r->pos, (size_t)k);
        r->pos += (size_t)k;
        return push(r, a);
    }
    case INT:
    case LONG:
        if ((rc = line(r, &s, &len)))
            return rc;
        if (r->op == INT && len == 2 && (!memcmp(s, "00", 2) || !memcmp(s, "01", 2))) {
            if (!(a = mk(r, PK_BOOL)))
                return r->d->code;
            a->i = s[1] == '1';
            return push(r, a);
        }
        if ((rc = parse_dec(r, s, len, &v, &big)))
            return rc;
        if (big)
            return push(r, big_from_dec(r, s, len));
        return push(r, (a = mk(r, PK_INT)) ? (a->i = v, a) : NULL);
    case FLOAT: {
        if ((rc = line(r, &s, &len)))
            return rc;
        char tmp[64];
        if (len == 0 || len >= sizeof tmp)
            return FAIL(r, TC_ERR_FORMAT, "bad FLOAT text");
        memcpy(tmp, s, len);
        tmp[len] = 0;
        char *end;
        double f = strtod(tmp, &end);
        if (*end)
            return FAIL(r, TC_ERR_FORMAT, "bad FLOAT text '%s'", tmp);
        if (!(a = mk(r, PK_FLOAT)))
            return r->d->code;
        a->f = f;
        return push(r, a);
    }
    case BINFLOAT: {
        if ((rc = need(r, 8)))
            return rc;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | p[i];
        r->pos += 8;
        if (!(a = mk(r, PK_FLOAT)))
            return r->d->code;
        memcpy(&a->f, &bits, 8);
        return push(r, a);
    }

    case STRING:
        if ((rc = line(r, &s, &len)))
            return rc;
        return push(r, string_repr(r, s, len));
    case UNICODE:
        if ((rc = line(r, &s, &len)))
            return rc;
        return push(r, unicode_raw(r, s, len));
    case BINSTRING: return bytes_op(r, PK_BYTES, 4);
    case SHORT_BINSTRING: return bytes_op(r, PK_BYTES, 1);
    case BINBYTES: return bytes_op(r, PK_BYTES, 4);
    case SHORT_BINBYTES: return bytes_op(r, PK_BYTES, 1);
    case BINBYTES8: return bytes_op(r, PK_BYTES, 8);
    case BYTEARRAY8: return bytes_op(r, PK_BYTEARRAY, 8);
    case BINUNICODE: return bytes_op(r, PK_STR, 4);
    case SHORT_BINUNICODE: return bytes_op(r, PK_STR, 1);
    case BINUNICODE8: return bytes_op(r, PK_STR, 8);

    case EMPTY_TUPLE: return push(r, mk(r, PK_TUPLE));
    case EMPTY_LIST: return push(r, mk(r, PK_LIST));
    case EMPTY_DICT: return push(r, mk(r, PK_DICT));
    case EMPTY_SET: return push(r, mk(r, PK_SET));
    case TUPLE1:
    case TUPLE2:
    case TUPLE3: {
        size_t k = (size_t)(r->op - TUPLE1 + 1);
        if (r->sp < stack_floor(r) + k)
            return FAIL(r, TC_ERR_FORMAT, "stack underflow (corrupt pickle)");
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
    case FROZENSET:
        if ((rc = pop_mark(r, &base)))
            return rc;
        return push(r, mk_seq(r, PK_FROZENSET, base));
    case DICT:
        if ((rc = pop_mark(r, &base)))
            return rc;
        if ((r->sp - base) % 2)
            return FAIL(r, TC_ERR_FORMAT, "DICT with an odd number of items");
        return push(r, mk_seq(r, PK_DICT, base));

    case APPEND:
    case SETITEM: {
        size_t k = r->op == APPEND ? 1 : 2;
        if (r->sp < stack_floor(r) + k + 1)
            return FAIL(r, TC_ERR_FORMAT, "stack underflow (corrupt pickle)");
        return add_items(r, r->stack[r->sp - k - 1], r->sp - k, r->op == SETITEM);
    }
    case APPENDS:
    case SETITEMS:
    case ADDITEMS:
        if ((rc = pop_mark(r, &base)))
            return rc;
        if (base == 0 || base <= stack_floor(r))
            return FAIL(r, TC_ERR_FORMAT, "no target object below the MARK");
        return add_items(r, r->stack[base - 1], base, r->op == SETITEMS);

    case GET:
        if ((rc = line(r, &s, &len)) || (rc = parse_dec(r, s, len, &v, &big)))
            return rc;
        if (big || v < 0)
            return FAIL(r, TC_ERR_FORMAT, "bad memo index");
        return memo_get(r, (uint64_t)v);
    case BINGET:
        if ((rc = need(r, 1)))
            return rc;
        r->pos++;
        return memo_get(r, p[0]);
    case LONG_BINGET:
        if ((rc = need(r, 4)))
            return rc;
        r->pos += 4;
        return memo_get(r, (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24);
    case PUT:
        if ((rc = line(r, &s, &len)) || (rc = parse_dec(r, s, len, &v, &big)))
            return rc;
        if (big || v < 0)
            return FAIL(r, TC_ERR_FORMAT, "bad memo index");
        return memo_put(r, (uint64_t)v);
    case BINPUT:
        if ((rc = need(r, 1)))
            return rc;
        r->pos++;
        return memo_put(r, p[0]);
    case LONG_BINPUT:
        if ((rc = need(r, 4)))
            return rc;
        r->pos += 4;
        return memo_put(r, (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24);
    case MEMOIZE: {
        size_t next = 0;
        for (size_t i = r->memo_cap; i > 0; i--)
            if (r->memo[i - 1]) {
                next = i;
                break;
            }
        return memo_put(r, next);
    }

    case GLOBAL:
    case INST:
        if ((rc = line(r, &s, &len)) || (rc = line(r, &s2, &len2)))
            return rc;
        if (!(a = mk_global(r, s, len, s2, len2)))
            return r->d->code;
        if (r->op == GLOBAL)
            return push(r, a);
        if ((rc = pop_mark(r, &base)))
            return rc;
        if (!(b = mk_seq(r, PK_TUPLE, base)))
            return r->d->code;
        /* as CPython's _instantiate: cls(*args), or cls.__new__(cls) without arguments */
        return push(r, mk_call(r, a, b, b->n == 0));
    case STACK_GLOBAL:
        if ((rc = pop(r, &b)) || (rc = pop(r, &a)))
            return rc;
        if (a->kind != PK_STR || b->kind != PK_STR)
            return FAIL(r, TC_ERR_FORMAT, "STACK_GLOBAL needs two strings");
        return push(r, mk_global(r, a->s, a->len, b->s, b->len));
    case OBJ:
        if ((rc = pop_mark(r, &base)))
            return rc;
        if (r->sp == base)
            return FAIL(r, TC_ERR_FORMAT, "OBJ without a class");
        a = r->stack[base];
        if (!(b = mk_seq(r, PK_TUPLE, base + 1)))
            return r->d->code;
        r->sp = base;
        return push(r, mk_call(r, a, b, b->n == 0));
    case EXT1:
    case EXT2:
    case EXT4: {
        size_t k = r->op == EXT1 ? 1 : r->op == EXT2 ? 2 : 4;
        if ((rc = need(r, k)))
            return rc;
        uint32_t code = 0;
        for (size_t i = 0; i < k; i++)
            code |= (uint32_t)p[i] << (8 * i);
        r->pos += k;
        char nm[32];
        snprintf(nm, sizeof nm, "extension_%u", code);
        return push(r, mk_global(r, "copyreg", 7, nm, strlen(nm)));
    }

    case REDUCE:
        if ((rc = pop(r, &b)) || (rc = pop(r, &a)))
            return rc;
        return push(r, mk_call(r, a, b, false));
    case NEWOBJ:
        if ((rc = pop(r, &b)) || (rc = pop(r, &a)))
            return rc;
        return push(r, mk_call(r, a, b, true));
    case NEWOBJ_EX:
        if ((rc = pop(r, &c)) || (rc = pop(r, &b)) || (rc = pop(r, &a)))
            return rc;
        {
            pk_obj *o = mk_call(r, a, b, true);
            if (o) {
                o->kwargs = c;
                raise_depth(o, c);
            }
            return push(r, o);
        }
    case BUILD:
        if ((rc = pop(r, &b)) || (rc = top(r, &a)))
            return rc;
        if (a->kind != PK_CALL)
            return FAIL(r, TC_ERR_UNSUPPORTED, "BUILD on an object that no call created");
        if (a->state)
            return FAIL(r, TC_ERR_UNSUPPORTED, "BUILD applied twice to one object");
        a->state = b;
        raise_depth(a, b);
        if (a->depth > r->o->limits.max_depth)
            return FAIL(r, TC_ERR_LIMIT, "objects nested deeper than %u (raise with --max-depth)",
                        r->o->limits.max_depth);
        return 0;

    case PERSID:
        if ((rc = line(r, &s, &len)))
            return rc;
        if (!(a = pk_new_bytes_kind(r->g, PK_STR, s, len)))
            return oom(r);
        return do_persid(r, a);
    case BINPERSID:
        if ((rc = pop(r, &a)))
            return rc;
        return do_persid(r, a);

    case NEXT_BUFFER:
    case READONLY_BUFFER:
        return FAIL(r, TC_ERR_UNSUPPORTED, "out-of-band buffers cannot appear in a file");
    default:
        return FAIL(r, TC_ERR_FORMAT, "unknown opcode (not a pickle, or corrupt)");
    }
}

int pk_read(pk_graph *g, const uint8_t *buf, size_t n, const pk_read_opts *opts, pk_obj **out,
            size_t *used, tc_diag *d)
{
    rd r = {.g = g, .buf = buf, .n = n, .o = opts, .d = d};
    bool stop = false;
    int rc = 0;
    while (!stop && !(rc = step(&r, &stop)))
        ;
    if (!rc) {
        if (r.sp != 1 || r.mp)
            rc = FAIL(&r, TC_ERR_FORMAT, "STOP with %zu objects and %zu marks on the stack", r.sp, r.mp);
        else {
            *out = r.stack[0];
            if (used)
                *used = r.pos;
        }
    }
    free(r.stack);
    free(r.marks);
    free(r.memo);
    return rc;
}
