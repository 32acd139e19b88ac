#include "unit_util.h"

#include "zip.h"
#include "vec.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void oom(void)
{
    fprintf(stderr, "unit tests: out of memory\n");
    abort();
}

static void *xmalloc(size_t n)
{
    void *q = malloc(n ? n : 1);
    if (!q)
        oom();
    return q;
}

void bb_put(bbuf *b, const void *p, size_t n)
{
    if (tc_grow(&b->p, &b->cap, b->n + n, 1))
        oom();
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

void bb_u8(bbuf *b, uint8_t v) { bb_put(b, &v, 1); }
void bb_u16(bbuf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    bb_put(b, x, 2);
}
void bb_u32(bbuf *b, uint32_t v)
{
    bb_u16(b, (uint16_t)v);
    bb_u16(b, (uint16_t)(v >> 16));
}
void bb_u64(bbuf *b, uint64_t v)
{
    bb_u32(b, (uint32_t)v);
    bb_u32(b, (uint32_t)(v >> 32));
}
void bb_str(bbuf *b, const char *s) { bb_put(b, s, strlen(s)); }
void bb_free(bbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    bbuf b = {0};
    uint8_t tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0)
        bb_put(&b, tmp, k);
    fclose(f);
    bb_put(&b, "", 1); /* a terminator past the bytes, for text */
    *n = b.n - 1;
    return b.p;
}

void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        fprintf(stderr, "unit tests: cannot write %s\n", path);
        abort();
    }
}

static const char *joined(const char *env, const char *fallback, const char *name)
{
    static char bufs[8][4096];
    static int k;
    const char *dir = getenv(env);
    char *b = bufs[k++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", dir && *dir ? dir : fallback, name);
    return b;
}

const char *data_path(const char *name) { return joined("UNIT_DATA", "tests/unit/data", name); }
const char *corpus_path(const char *name)
{
    /* "torch-1/" and "torch-2/" name the corpus's folder of files torch 1.x and 2.x wrote */
    if (!strncmp(name, "torch-1/", 8))
        return joined("CORPUS_TORCH1", "sample_models/corpus/torch-1.13", name + 8);
    if (!strncmp(name, "torch-2/", 8))
        return joined("CORPUS_TORCH2", "sample_models/corpus/torch-2.15", name + 8);
    return joined("CORPUS_DIR", "sample_models/corpus", name);
}

char *tmpdir_new(void)
{
    /* $TMPDIR, else /dev/shm (the truncation tests write many files), else /tmp */
    const char *t = getenv("TMPDIR");
    if (!t || !*t)
        t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/tc-unit-XXXXXX", t);
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        abort();
    }
    return strdup(d);
}

static void rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st))
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dh = opendir(path);
        struct dirent *e;
        while (dh && (e = readdir(dh))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_rf(sub);
        }
        if (dh)
            closedir(dh);
        rmdir(path);
    } else {
        unlink(path);
    }
}

void tmpdir_rm(char *dir)
{
    if (dir)
        rm_rf(dir);
    free(dir);
}

const char *in_dir(const char *dir, const char *name)
{
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

void xorshift_bytes(uint8_t *out, size_t n, uint32_t seed)
{
    uint32_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out[i] = (uint8_t)x;
    }
}

uint8_t *zip_record(const char *path, const char *suffix, size_t *len)
{
    size_t n;
    uint8_t *file = slurp(path, &n), *out = NULL;
    if (!file)
        return NULL;
    tc_src src;
    tc_src_init_mem(&src, file, n, path);
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits zl = {.max_entries = 100000};
    if (tc_zip_open(&z, &src, &zl, &d) == 0) {
        size_t sl = strlen(suffix);
        for (size_t i = 0; i < z.n; i++) {
            size_t nl = strlen(z.e[i].name);
            if (nl >= sl && !strcmp(z.e[i].name + nl - sl, suffix)) {
                if (tc_zip_read_all(&z, &z.e[i], 1u << 30, true, &out, len, &d))
                    out = NULL;
                break;
            }
        }
        tc_zip_free(&z);
    }
    free(file);
    return out;
}

static uint64_t le(const uint8_t *p, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_le(uint8_t *p, uint64_t v, int k)
{
    for (int i = 0; i < k; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

bool zip_find_ends(const uint8_t *f, size_t n, zip_ends *e)
{
    if (n < 22 + 20 + 56)
        return false;
    e->eocd_off = n - 22;
    e->loc_off = n - 22 - 20;
    if (le(f + e->eocd_off, 4) != 0x06054b50u || le(f + e->loc_off, 4) != 0x07064b50u)
        return false;
    e->z64_off = le(f + e->loc_off + 8, 8);
    if (e->z64_off + 56 > n || le(f + e->z64_off, 4) != 0x06064b50u)
        return false;
    e->n = le(f + e->z64_off + 32, 8);
    e->cd_size = le(f + e->z64_off + 40, 8);
    e->cd_off = le(f + e->z64_off + 48, 8);
    return e->cd_off <= e->z64_off;
}

uint8_t *zip_cut(const uint8_t *f, size_t n, size_t cut, size_t *out_n)
{
    zip_ends e;
    if (!zip_find_ends(f, n, &e) || cut > e.cd_off)
        return NULL;
    size_t tail = n - (size_t)e.cd_off, shift = (size_t)e.cd_off - cut;
    uint8_t *o = xmalloc(cut + tail);
    memcpy(o, f, cut);
    memcpy(o + cut, f + e.cd_off, tail);
    uint64_t z64 = e.z64_off - shift, loc = e.loc_off - shift, eocd = e.eocd_off - shift;
    put_le(o + z64 + 48, cut, 8);
    put_le(o + loc + 8, z64, 8);
    if (le(o + eocd + 16, 4) != 0xFFFFFFFFu)
        put_le(o + eocd + 16, cut, 4);
    *out_n = cut + tail;
    return o;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t zip_boundaries(const uint8_t *f, size_t n, uint64_t *out, size_t max)
{
    size_t k = 0;
#define ADD(v)                                                                                     \
    do {                                                                                           \
        if (k < max && (v) <= n)                                                                   \
            out[k++] = (v);                                                                        \
    } while (0)
    zip_ends e;
    out[k++] = 0;
    ADD(n);
    if (zip_find_ends(f, n, &e)) {
        ADD(e.cd_off);
        ADD(e.z64_off);
        ADD(e.loc_off);
        ADD(e.eocd_off);
        uint64_t p = e.cd_off;
        for (uint64_t i = 0; i < e.n && p + 46 <= n; i++) {
            const uint8_t *h = f + p;
            uint64_t csize = le(h + 20, 4), lfh = le(h + 42, 4);
            uint16_t flags = (uint16_t)le(h + 8, 2);
            size_t nl = le(h + 28, 2), xl = le(h + 30, 2), cl = le(h + 32, 2);
            /* ZIP64 extra */
            for (const uint8_t *x = h + 46 + nl, *xe = x + xl; xe - x >= 4; x += 4 + le(x + 2, 2)) {
                if (le(x, 2) != 1)
                    continue;
                const uint8_t *v = x + 4;
                if (le(h + 24, 4) == 0xFFFFFFFFu)
                    v += 8;
                if (csize == 0xFFFFFFFFu) {
                    csize = le(v, 8);
                    v += 8;
                }
                if (lfh == 0xFFFFFFFFu)
                    lfh = le(v, 8);
            }
            ADD(p);
            ADD(p + 46);
            ADD(lfh);
            ADD(lfh + 30);
            if (lfh + 30 <= n) {
                uint64_t data = lfh + 30 + le(f + lfh + 26, 2) + le(f + lfh + 28, 2);
                ADD(data);
                ADD(data + csize);
                if ((flags & 8) && csize)
                    ADD(data + csize + 16);
            }
            p += 46 + nl + xl + cl;
        }
        ADD(p);
    }
#undef ADD
    qsort(out, k, sizeof *out, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || out[u - 1] != out[i])
            out[u++] = out[i];
    return u;
}

int read_pk(pk_graph *g, const void *p, size_t n, const pk_limits *lim, pk_obj **out, tc_diag *d)
{
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = "test.pkl"};
    if (lim)
        o.limits = *lim;
    size_t used = 0;
    return pk_read(g, p, n, &o, out, &used, d);
}

/* ---- canonical text ---------------------------------------------------- */

typedef struct sb {
    char *p;
    size_t n, cap;
} sb;

static void sb_put(sb *s, const char *p, size_t n)
{
    if (tc_grow(&s->p, &s->cap, s->n + n + 1, 1))
        oom();
    memcpy(s->p + s->n, p, n);
    s->n += n;
    s->p[s->n] = 0;
}

static void sb_cat(sb *s, const char *t) { sb_put(s, t, strlen(t)); }

static void sb_hex(sb *s, const uint8_t *p, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        char c[2] = {hx[p[i] >> 4], hx[p[i] & 15]};
        sb_put(s, c, 2);
    }
}

/* Python's hex() of a little-endian two's complement integer. */
static void sb_int_le(sb *s, const uint8_t *p, size_t n)
{
    uint8_t *m = xmalloc(n);
    memcpy(m, p, n);
    bool neg = n && (m[n - 1] & 0x80);
    if (neg) {
        unsigned carry = 1;
        for (size_t i = 0; i < n; i++) {
            unsigned v = (uint8_t)~m[i] + carry;
            m[i] = (uint8_t)v;
            carry = v >> 8;
        }
    }
    sb_cat(s, neg ? "-0x" : "0x");
    size_t top = n;
    while (top && m[top - 1] == 0)
        top--;
    if (!top) {
        sb_cat(s, "0");
    } else {
        char t[3];
        snprintf(t, sizeof t, "%x", m[top - 1]);
        sb_cat(s, t);
        for (size_t i = top - 1; i-- > 0;) {
            snprintf(t, sizeof t, "%02x", m[i]);
            sb_cat(s, t);
        }
    }
    free(m);
}

static bool global_is(const pk_obj *g, const char *mod, const char *name)
{
    return pk_is_global(g, mod, name);
}

/* UTF-8 text whose code points are all < 256, as latin-1 bytes. */
static bool latin1_of(const pk_obj *str, bbuf *out)
{
    if (!str || str->kind != PK_STR)
        return false;
    const uint8_t *p = (const uint8_t *)str->s;
    for (size_t i = 0; i < str->len;) {
        if (p[i] < 0x80) {
            bb_u8(out, p[i]);
            i++;
        } else if ((p[i] & 0xE0) == 0xC0 && p[i] <= 0xC3 && i + 1 < str->len) {
            bb_u8(out, (uint8_t)((p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F)));
            i += 2;
        } else {
            return false;
        }
    }
    return true;
}

static bool is_latin1_name(const pk_obj *o) { return pk_is_str(o, "latin1") || pk_is_str(o, "latin-1"); }

/* bytes however they were written: BINBYTES & co, STRING, _codecs.encode(text,
 * 'latin1'), or builtins.bytes(). */
static bool bytes_of(const pk_obj *o, bbuf *out)
{
    if (o->kind == PK_BYTES) {
        bb_put(out, o->s, o->len);
        return true;
    }
    const pk_obj *f = pk_call_global(o);
    if (!f || o->state || o->items_kind || o->kwargs || !o->args || o->args->kind != PK_TUPLE)
        return false;
    const pk_obj *a = o->args;
    if (global_is(f, "builtins", "bytes") && a->n == 0)
        return true;
    if (global_is(f, "_codecs", "encode") && a->n == 2 && is_latin1_name(a->items[1]))
        return latin1_of(a->items[0], out);
    return false;
}

static bool bytearray_of(const pk_obj *o, bbuf *out)
{
    if (o->kind == PK_BYTEARRAY) {
        bb_put(out, o->s, o->len);
        return true;
    }
    const pk_obj *f = pk_call_global(o);
    if (!f || !global_is(f, "builtins", "bytearray") || o->state || o->items_kind || o->kwargs || !o->args ||
        o->args->kind != PK_TUPLE)
        return false;
    const pk_obj *a = o->args;
    if (a->n == 0)
        return true;
    if (a->n == 2 && is_latin1_name(a->items[1]))
        return latin1_of(a->items[0], out);
    if (a->n == 1)
        return bytes_of(a->items[0], out);
    return false;
}

static void canon_rec(sb *s, pk_obj *o, uint32_t *next, int depth);

static void canon_items(sb *s, pk_obj **it, size_t n, bool dict, uint32_t *next, int depth)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_cat(s, dict && (i & 1) ? ":" : ",");
        canon_rec(s, it[i], next, depth + 1);
    }
}

/* set/frozenset written as builtins.set(list) (protocols < 4). */
static bool set_call(const pk_obj *o, const char **kind, pk_obj ***items, size_t *n)
{
    const pk_obj *f = pk_call_global(o);
    if (!f || o->state || o->items_kind || o->kwargs || !o->args || o->args->kind != PK_TUPLE)
        return false;
    if (global_is(f, "builtins", "set"))
        *kind = "set[";
    else if (global_is(f, "builtins", "frozenset"))
        *kind = "fset[";
    else
        return false;
    const pk_obj *a = o->args;
    if (a->n == 0) {
        *items = NULL;
        *n = 0;
        return true;
    }
    if (a->n == 1 && (a->items[0]->kind == PK_LIST || a->items[0]->kind == PK_TUPLE)) {
        *items = a->items[0]->items;
        *n = a->items[0]->n;
        return true;
    }
    return false;
}

static bool label(sb *s, pk_obj *o, uint32_t *next)
{
    char t[32];
    if (o->memo) {
        snprintf(t, sizeof t, "#%u#", o->memo);
        sb_cat(s, t);
        return true;
    }
    o->memo = ++*next;
    snprintf(t, sizeof t, "#%u=", o->memo);
    sb_cat(s, t);
    return false;
}

static void canon_rec(sb *s, pk_obj *o, uint32_t *next, int depth)
{
    char t[64];
    if (!o) {
        sb_cat(s, "<null>");
        return;
    }
    if (depth > 20000) {
        sb_cat(s, "<too deep>");
        return;
    }
    bbuf b = {0};
    const char *sk;
    pk_obj **items;
    size_t n;
    switch (o->kind) {
    case PK_NONE: sb_cat(s, "N"); return;
    case PK_BOOL: sb_cat(s, o->i ? "T" : "F"); return;
    case PK_INT: {
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)((uint64_t)o->i >> (8 * i));
        sb_cat(s, "i:");
        sb_int_le(s, le, 8);
        return;
    }
    case PK_BIGINT:
        sb_cat(s, "i:");
        sb_int_le(s, (const uint8_t *)o->s, o->len);
        return;
    case PK_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &o->f, 8);
        snprintf(t, sizeof t, "f:%016" PRIx64, bits);
        sb_cat(s, t);
        return;
    }
    case PK_STR:
        sb_cat(s, "s:");
        sb_hex(s, (const uint8_t *)o->s, o->len);
        return;
    case PK_BYTES:
        sb_cat(s, "b:");
        sb_hex(s, (const uint8_t *)o->s, o->len);
        return;
    case PK_BYTEARRAY:
        sb_cat(s, "ba:");
        sb_hex(s, (const uint8_t *)o->s, o->len);
        return;
    case PK_TUPLE:
        sb_cat(s, "(");
        canon_items(s, o->items, o->n, false, next, depth);
        sb_cat(s, ")");
        return;
    case PK_LIST:
        if (label(s, o, next))
            return;
        sb_cat(s, "[");
        canon_items(s, o->items, o->n, false, next, depth);
        sb_cat(s, "]");
        return;
    case PK_DICT:
        if (label(s, o, next))
            return;
        sb_cat(s, "{");
        canon_items(s, o->items, o->n, true, next, depth);
        sb_cat(s, "}");
        return;
    case PK_SET:
    case PK_FROZENSET:
        sb_cat(s, o->kind == PK_SET ? "set[" : "fset[");
        canon_items(s, o->items, o->n, false, next, depth);
        sb_cat(s, "]");
        return;
    case PK_GLOBAL:
        snprintf(t, sizeof t, "G:");
        sb_cat(s, t);
        sb_cat(s, pk_module_py3(o->s));
        sb_cat(s, ".");
        sb_cat(s, o->name);
        return;
    case PK_PERSID:
        sb_cat(s, "P(");
        canon_rec(s, o->args, next, depth + 1);
        sb_cat(s, ")");
        return;
    case PK_CALL:
        if (bytes_of(o, &b)) {
            sb_cat(s, "b:");
            sb_hex(s, b.p, b.n);
            bb_free(&b);
            return;
        }
        bb_free(&b);
        if (bytearray_of(o, &b)) {
            sb_cat(s, "ba:");
            sb_hex(s, b.p, b.n);
            bb_free(&b);
            return;
        }
        bb_free(&b);
        if (set_call(o, &sk, &items, &n)) {
            sb_cat(s, sk);
            canon_items(s, items, n, false, next, depth);
            sb_cat(s, "]");
            return;
        }
        if (label(s, o, next))
            return;
        snprintf(t, sizeof t, "C%d(", o->newobj ? 1 : 0);
        sb_cat(s, t);
        canon_rec(s, o->func, next, depth + 1);
        sb_cat(s, ";");
        canon_rec(s, o->args, next, depth + 1);
        sb_cat(s, ";");
        if (o->state)
            canon_rec(s, o->state, next, depth + 1);
        sb_cat(s, ";");
        if (o->items_kind == PK_ITEMS_DICT) {
            sb_cat(s, "{");
            canon_items(s, o->items, o->n, true, next, depth);
            sb_cat(s, "}");
        } else if (o->items_kind == PK_ITEMS_LIST) {
            sb_cat(s, "[");
            canon_items(s, o->items, o->n, false, next, depth);
            sb_cat(s, "]");
        }
        if (o->kwargs) {
            sb_cat(s, ";");
            canon_rec(s, o->kwargs, next, depth + 1);
        }
        sb_cat(s, ")");
        return;
    default:
        snprintf(t, sizeof t, "<kind %d>", o->kind);
        sb_cat(s, t);
        return;
    }
}

char *canon(pk_graph *g, pk_obj *root)
{
    sb s = {0};
    uint32_t next = 0;
    pk_graph_clear_marks(g);
    canon_rec(&s, root, &next, 0);
    pk_graph_clear_marks(g);
    if (!s.p)
        sb_put(&s, "", 0);
    return s.p;
}

/* ---- opcode walker ------------------------------------------------------- */

enum { A_NONE, A_FIX, A_LEN1, A_LEN4, A_LEN8, A_LINE, A_LINE2, A_BAD };

static int arg_kind(uint8_t op, size_t *fix)
{
    *fix = 0;
    switch (op) {
    case '(': case '.': case '0': case '1': case '2': case 'N': case 'Q': case 'R': case 'a': case 'b':
    case 'd': case '}': case 'e': case 'l': case ']': case 'o': case 's': case 't': case ')': case 'u':
    case 0x81: case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91:
    case 0x92: case 0x93: case 0x94: case 0x97: case 0x98:
        return A_NONE;
    case 0x80: case 'K': case 'h': case 'q': case 0x82: *fix = 1; return A_FIX;
    case 'M': case 0x83: *fix = 2; return A_FIX;
    case 'J': case 'j': case 'r': case 0x84: *fix = 4; return A_FIX;
    case 'G': case 0x95: *fix = 8; return A_FIX;
    case 'U': case 'C': case 0x8c: case 0x8a: return A_LEN1;
    case 'T': case 'B': case 'X': case 0x8b: return A_LEN4;
    case 0x8d: case 0x8e: case 0x96: return A_LEN8;
    case 'I': case 'L': case 'F': case 'S': case 'V': case 'g': case 'p': case 'P': return A_LINE;
    case 'c': case 'i': return A_LINE2;
    default: return A_BAD;
    }
}

int walk_ops(const uint8_t *p, size_t n, op_fn fn, void *ctx, char *err, size_t errlen)
{
    size_t pos = 0;
    while (pos < n) {
        uint8_t op = p[pos];
        size_t at = pos++, fix;
        uint64_t arg = 0;
        switch (arg_kind(op, &fix)) {
        case A_NONE: break;
        case A_FIX:
            if (n - pos < fix)
                goto trunc;
            for (size_t i = 0; i < fix; i++)
                arg |= (uint64_t)p[pos + i] << (8 * i);
            if (op == 'G')
                arg = 0;
            pos += fix;
            break;
        case A_LEN1:
        case A_LEN4:
        case A_LEN8: {
            int k = arg_kind(op, &fix);
            size_t lb = k == A_LEN1 ? 1 : k == A_LEN4 ? 4 : 8;
            if (n - pos < lb)
                goto trunc;
            for (size_t i = 0; i < lb; i++)
                arg |= (uint64_t)p[pos + i] << (8 * i);
            pos += lb;
            if (arg > n - pos)
                goto trunc;
            pos += (size_t)arg;
            break;
        }
        case A_LINE:
        case A_LINE2: {
            int lines = arg_kind(op, &fix) == A_LINE2 ? 2 : 1;
            for (int l = 0; l < lines; l++) {
                const uint8_t *nl = memchr(p + pos, '\n', n - pos);
                if (!nl)
                    goto trunc;
                if (l == 0 && (op == 'g' || op == 'p'))
                    arg = strtoull((const char *)p + pos, NULL, 10);
                pos = (size_t)(nl - p) + 1;
            }
            break;
        }
        default:
            snprintf(err, errlen, "unknown opcode 0x%02x at offset %zu", op, at);
            return -1;
        }
        if (fn)
            fn(ctx, op, at, arg);
        if (op == '.') {
            if (pos != n) {
                snprintf(err, errlen, "%zu bytes after STOP", n - pos);
                return -1;
            }
            return 0;
        }
        continue;
    trunc:
        snprintf(err, errlen, "opcode 0x%02x at offset %zu is truncated", op, at);
        return -1;
    }
    snprintf(err, errlen, "no STOP");
    return -1;
}

bool weights_only_op(uint8_t op)
{
    static const uint8_t ok[] = {
        0x80 /* PROTO */, '.' /* STOP */, 'c' /* GLOBAL */, 0x81 /* NEWOBJ */, 'R' /* REDUCE */,
        'b' /* BUILD */, 'a' /* APPEND */, 'e' /* APPENDS */, 's' /* SETITEM */, 'u' /* SETITEMS */,
        '(' /* MARK */, 't' /* TUPLE */, 0x85, 0x86, 0x87 /* TUPLE1-3 */, 'N' /* NONE */,
        0x89 /* NEWFALSE */, 0x88 /* NEWTRUE */, ')' /* EMPTY_TUPLE */, ']' /* EMPTY_LIST */,
        '}' /* EMPTY_DICT */, 0x8f /* EMPTY_SET */, 'J' /* BININT */, 'K' /* BININT1 */,
        'M' /* BININT2 */, 0x8a /* LONG1 */, 'G' /* BINFLOAT */, 'X' /* BINUNICODE */,
        'U' /* SHORT_BINSTRING */, 'Q' /* BINPERSID */, 'h' /* BINGET */, 'j' /* LONG_BINGET */,
        'q' /* BINPUT */, 'r' /* LONG_BINPUT */,
    };
    for (size_t i = 0; i < sizeof ok; i++)
        if (ok[i] == op)
            return true;
    return false;
}
