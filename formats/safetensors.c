/* safetensors: u64 LE header length N, N bytes of JSON, then the data
 * buffer. Every tensor is one raw storage; the buffer must be covered
 * exactly, as the reference library requires. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "vec.h"

extern const tc_format tc_format_safetensors;

static bool probe(const tc_probe *p)
{
    size_t pl = p->path ? strlen(p->path) : 0;
    if (pl > 12 && !strcmp(p->path + pl - 12, ".safetensors"))
        return true;
    if (p->n < 9 || p->head[8] != '{')
        return false;
    uint64_t len = tc_le64(p->head);
    return len >= 2 && len < (1ull << 40);
}

#define MAX_EXACT 9007199254740992.0 /* 2^53: larger JSON numbers lose digits in a double */

/* A non-negative integer from a JSON number; -1 when it is not one. */
static int json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double x = v->valuedouble;
    if (!(x >= 0) || x >= MAX_EXACT || x != (double)(uint64_t)x)
        return -1;
    *out = (uint64_t)x;
    return 0;
}

static const char *json_kind(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "invalid";
}

/* The JSON text of v, cut to fit a message. */
static void json_brief(const cJSON *v, char *buf, size_t n)
{
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!s) {
        snprintf(buf, n, "?");
        return;
    }
    if (strlen(s) >= n && n > 4)
        snprintf(buf, n, "%.*s...", (int)(n - 4), s);
    else
        snprintf(buf, n, "%s", s);
    free(s);
}

typedef struct span {
    uint64_t b, e;
    size_t t;
} span;

static int cmp_span(const void *x, const void *y)
{
    const span *a = x, *b = y;
    if (a->b != b->b)
        return a->b < b->b ? -1 : 1;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return 0;
}

static int read_metadata(tc_ckpt *c, const cJSON *m, tc_diag *d)
{
    if (!cJSON_IsObject(m))
        return tc_fail(d, TC_ERR_FORMAT, "__metadata__ is %s, not an object of strings", json_kind(m));
    for (const cJSON *v = m->child; v; v = v->next) {
        if (!cJSON_IsString(v)) {
            char b[64];
            json_brief(v, b, sizeof b);
            return tc_fail(d, TC_ERR_FORMAT, "__metadata__ value of '%s' is %s (%s), not a string", v->string,
                           json_kind(v), b);
        }
        if (tc_ckpt_meta_get(c, v->string))
            return tc_fail(d, TC_ERR_FORMAT, "__metadata__ has the key '%s' twice", v->string);
        int rc = tc_ckpt_add_meta(c, v->string, v->valuestring, d);
        if (rc)
            return rc;
    }
    return 0;
}

/* One tensor entry: dtype, shape, data_offsets. */
static int read_tensor(tc_ckpt *c, const char *name, const cJSON *v, uint64_t data_size, span *sp, tc_diag *d)
{
    if (!cJSON_IsObject(v))
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': entry is %s, not an object", name, json_kind(v));
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(v, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(v, "data_offsets");
    if (!jd || !js || !jo)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': no \"%s\" field", name,
                       !jd ? "dtype" : !js ? "shape" : "data_offsets");
    char b[96];
    if (!cJSON_IsString(jd)) {
        json_brief(jd, b, sizeof b);
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': dtype %s is not a string", name, b);
    }
    tc_dtype dt = tc_dtype_from_st(jd->valuestring);
    unsigned foreign = tc_dtype_st_foreign_bits(jd->valuestring);
    if (foreign)
        return tc_fail(d, TC_ERR_UNSUPPORTED,
                       "tensor '%s': dtype %s (%u-bit elements) has no torch dtype tensorctl supports", name,
                       jd->valuestring, foreign);
    if (dt == TC_DT_INVALID)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': unknown dtype '%.40s' (not a safetensors 0.8 dtype)",
                       name, jd->valuestring);
    const char *stname = tc_dtype_get(dt)->st_name;
    if (!cJSON_IsArray(js)) {
        json_brief(js, b, sizeof b);
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': shape %s is not an array", name, b);
    }
    int nd = cJSON_GetArraySize(js);
    if (nd > TC_MAX_DIMS)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': %d dimensions (at most %d)", name, nd, TC_MAX_DIMS);
    int64_t shape[TC_MAX_DIMS];
    uint64_t numel = 1;
    bool ovf = false;
    int k = 0;
    for (const cJSON *x = js->child; x; x = x->next, k++) {
        uint64_t u;
        if (json_u64(x, &u) || u > INT64_MAX) {
            json_brief(x, b, sizeof b);
            return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': shape[%d] is %s, not a non-negative integer", name, k,
                           b);
        }
        shape[k] = (int64_t)u;
        ovf |= __builtin_mul_overflow(numel, u, &numel);
    }
    uint64_t nbytes = 0;
    ovf |= __builtin_mul_overflow(numel, (uint64_t)tc_dtype_size(dt), &nbytes);
    char shp[96]; /* the shape's text, for a message: made only for one (printing it costs more than reading it) */
    if (ovf) {
        json_brief(js, shp, sizeof shp);
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': shape %s x %s overflows a 64-bit byte count", name, shp,
                       stname);
    }
    uint64_t off[2];
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || json_u64(jo->child, &off[0]) ||
        json_u64(jo->child->next, &off[1])) {
        json_brief(jo, b, sizeof b);
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': data_offsets %s is not a pair of non-negative integers",
                       name, b);
    }
    if (off[0] > off[1])
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                       name, off[0], off[1]);
    if (off[1] > data_size)
        return tc_fail(d, TC_ERR_FORMAT,
                       "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] reach past the end of the data (%" PRIu64
                       " bytes; file truncated?)",
                       name, off[0], off[1], data_size);
    if (off[1] - off[0] != nbytes) {
        json_brief(js, shp, sizeof shp);
        return tc_fail(d, TC_ERR_FORMAT,
                       "tensor '%s': shape %s x %s is %" PRIu64 " bytes but data_offsets [%" PRIu64 ", %" PRIu64
                       "] hold %" PRIu64,
                       name, shp, stname, nbytes, off[0], off[1], off[1] - off[0]);
    }

    long si = tc_ckpt_add_storage(c, name, d);
    if (si < 0)
        return d->code;
    tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
    if (tc_ckpt_set_location(c, (size_t)si, "-", d))
        return d->code;
    s->dtype = dt;
    s->numel = numel;
    s->nbytes = nbytes;
    s->stored = true;
    s->ntensors = 1;
    long ti = tc_ckpt_add_tensor(c, name, d);
    if (ti < 0)
        return d->code;
    tc_tensor *t = tc_ckpt_tensor_mut(c, (size_t)ti);
    t->kind = TC_TENSOR_DENSE;
    t->dtype = dt;
    if (tc_ckpt_set_dims(c, (size_t)ti, nd, shape, NULL, d))
        return d->code;
    t->storage = si;
    t->numel = numel;
    t->nbytes = nbytes;
    t->device = "-";
    sp->b = off[0];
    sp->e = off[1];
    sp->t = (size_t)ti;
    return 0;
}

/* A JSON array of at most TC_MAX_DIMS whole numbers >= 0 into out, *n of them; -1 when not. */
static int json_dims(const cJSON *a, int64_t *out, int *n)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > TC_MAX_DIMS)
        return -1;
    int k = 0;
    for (const cJSON *x = a->child; x; x = x->next) {
        uint64_t v;
        if (json_u64(x, &v) || v > INT64_MAX)
            return -1;
        out[k++] = (int64_t)v;
    }
    *n = k;
    return 0;
}

/* The tensors tensorctl recorded as views of another's storage (TC_ST_ALIASES_KEY), after the
 * file's own nreal tensors: each checked against its tensor and kept inside its storage. */
static int read_aliases(tc_ckpt *c, size_t nreal, tc_diag *d)
{
    const char *text = tc_ckpt_meta_get(c, TC_ST_ALIASES_KEY);
    if (!text)
        return 0;
    cJSON *j = cJSON_Parse(text);
    int rc = 0;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tc_fail(d, TC_ERR_FORMAT, "__metadata__ %s is not a JSON object", TC_ST_ALIASES_KEY);
    }
    for (const cJSON *a = j->child; a && !rc; a = a->next) {
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(a, "of");
        const cJSON *same = cJSON_GetObjectItemCaseSensitive(a, "same");
        int64_t shape[TC_MAX_DIMS], stride[TC_MAX_DIMS];
        int nd = 0, nd2 = 0;
        uint64_t off;
        long base = cJSON_IsString(of) ? tc_ckpt_find_tensor(c, of->valuestring) : -1;
        if (base < 0 || (size_t)base >= nreal || json_u64(cJSON_GetObjectItemCaseSensitive(a, "offset"), &off) ||
            off > INT64_MAX || json_dims(cJSON_GetObjectItemCaseSensitive(a, "shape"), shape, &nd) ||
            json_dims(cJSON_GetObjectItemCaseSensitive(a, "stride"), stride, &nd2) || nd != nd2) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' is malformed or names a tensor not in the file",
                         TC_ST_ALIASES_KEY, a->string);
            break;
        }
        if (tc_ckpt_find_tensor(c, a->string) >= 0) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' is also a tensor of the file", TC_ST_ALIASES_KEY,
                         a->string);
            break;
        }
        const tc_tensor *bt = tc_ckpt_tensor(c, (size_t)base);
        tc_storage *s = tc_ckpt_storage_mut(c, (size_t)bt->storage);
        uint64_t last = off, numel = 1, esize = tc_dtype_size(bt->dtype);
        bool bad = false;
        for (int k = 0; k < nd; k++) {
            uint64_t span;
            bad |= __builtin_mul_overflow(numel, (uint64_t)shape[k], &numel);
            if (shape[k])
                bad |= __builtin_mul_overflow((uint64_t)(shape[k] - 1), (uint64_t)stride[k], &span) ||
                       __builtin_add_overflow(last, span, &last);
        }
        if (bad || (numel && last >= s->nbytes / esize)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' reaches past tensor '%s'", TC_ST_ALIASES_KEY, a->string,
                         of->valuestring);
            break;
        }
        long ti = tc_ckpt_add_tensor(c, a->string, d);
        if (ti < 0) {
            rc = d->code;
            break;
        }
        bt = tc_ckpt_tensor(c, (size_t)base); /* the table may have moved */
        if (tc_ckpt_set_dims(c, (size_t)ti, nd, shape, stride, d)) {
            rc = d->code;
            break;
        }
        tc_tensor *t = tc_ckpt_tensor_mut(c, (size_t)ti);
        t->kind = TC_TENSOR_DENSE;
        t->dtype = bt->dtype;
        t->offset = (int64_t)off;
        t->storage = bt->storage;
        t->numel = numel;
        t->nbytes = numel * esize;
        t->alias_of = cJSON_IsTrue(same) ? base : -1;
        t->restored = true;
        t->device = "-";
        s->ntensors++;
    }
    cJSON_Delete(j);
    return rc;
}

/* ---- the header, a member at a time ------------------------------------------------- *
 * A header of N tensors parsed whole by cJSON is a tree of about 600 bytes
 * per tensor (eight nodes and their strings). It is read instead in windows
 * and parsed one top-level member ("name": value) at a time, cJSON parsing
 * the key and the value apart: only a member's text need be in memory. The
 * members are found as cJSON's object parser finds them (whitespace is any
 * byte up to 0x20, a string ends at a '"' no backslash escapes), so a header
 * is accepted exactly when cJSON accepts it whole; the value's span ends at
 * the first ',' or '}' outside strings and brackets, which no valid value
 * holds. */

typedef struct hwin {
    const tc_src *src;
    uint64_t n;           /* header bytes */
    uint64_t base;        /* header offset of buf[0] */
    char *buf;
    size_t len, cap;
    char first;           /* the header's first byte */
} hwin;

#define WINDOW ((size_t)1 << 20)

/* Hold header bytes [from, from + want) (fewer at the header's end); nothing before from is kept. */
static int hold(hwin *w, uint64_t from, size_t want, tc_diag *d)
{
    if (from + want > w->n)
        want = (size_t)(w->n - from);
    if (from >= w->base && from + want <= w->base + w->len)
        return 0;
    size_t keep = from >= w->base && from < w->base + w->len ? (size_t)(w->base + w->len - from) : 0;
    if (keep)
        memmove(w->buf, w->buf + (from - w->base), keep);
    w->base = from;
    w->len = keep;
    /* a window, or the rest of a smaller header (a small file's header costs its size, not a MiB) */
    uint64_t left = w->n - w->base; /* at least want */
    size_t need = left < WINDOW ? (size_t)left : WINDOW;
    if (need < want)
        need = want;
    if (!need)
        need = 1;
    if (need > w->cap && tc_grow(&w->buf, &w->cap, need, 1) < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory for a %zu-byte piece of the header", need);
    size_t more = w->cap - w->len;
    if (more > w->n - (w->base + w->len))
        more = (size_t)(w->n - (w->base + w->len));
    int rc;
    if (more && (rc = tc_src_read(w->src, 8 + w->base + w->len, w->buf + w->len, more, "header", d)))
        return rc;
    w->len += more;
    return 0;
}

/* A first pass: no NUL byte anywhere (as the whole header is checked before it is parsed), and how many
 * members the top-level object has (for the --max-entries message). */
static int prescan(hwin *w, size_t *count, tc_diag *d)
{
    int depth = 0;
    bool str = false, esc = false, any = false;
    size_t n = 0;
    for (uint64_t off = 0; off < w->n; off += w->len) {
        int rc = hold(w, off, WINDOW, d);
        if (rc)
            return rc;
        const char *z = memchr(w->buf, 0, w->len);
        if (z) {
            uint64_t at = off + (uint64_t)(z - w->buf);
            return tc_fail(d, TC_ERR_FORMAT, "safetensors header has a NUL byte at header byte %" PRIu64
                           " (file offset %" PRIu64 ")", at, at + 8);
        }
        if (!off)
            w->first = w->buf[0];
        for (size_t i = 0; i < w->len; i++) {
            char ch = w->buf[i];
            if (str) {
                esc = !esc && ch == '\\';
                str = esc || ch != '"';
                continue;
            }
            if (depth == 1 && (uint8_t)ch > ' ' && ch != '}')
                any = true;
            if (ch == '"')
                str = true;
            else if (ch == '{' || ch == '[')
                depth++;
            else if (ch == '}' || ch == ']')
                depth--;
            else if (ch == ',' && depth == 1)
                n++;
        }
    }
    *count = n + any;
    return 0;
}

static int bad_json(hwin *w, uint64_t at, tc_diag *d)
{
    char near[24];
    size_t k = 0;
    if (!hold(w, at, sizeof near, NULL))
        for (uint64_t i = at; i < w->base + w->len && k < sizeof near - 1; i++) {
            char ch = w->buf[i - w->base];
            near[k++] = ch >= 0x20 && ch < 0x7f ? ch : '?';
        }
    near[k] = 0;
    return tc_fail(d, TC_ERR_FORMAT,
                   "safetensors header is not valid JSON: error at header byte %" PRIu64 " (file offset %" PRIu64
                   ") near '%s'",
                   at, at + 8, near);
}

typedef struct member {
    uint64_t kb, ke, vb, ve; /* the key's text (quotes included) and the value's */
    uint64_t next;           /* after the ',' or '}' that ends it */
    bool end;                /* no member: the object is empty, its '}' at next - 1 */
    bool last;               /* the object's '}' ends it */
} member;

static bool ws(char ch) { return (uint8_t)ch <= ' '; }

/* Scan one member from at (after '{' or ','), within what w holds; 1 when more bytes are needed. */
static int scan(const hwin *w, uint64_t at, bool first, member *m, uint64_t *err)
{
    const char *b = w->buf - w->base;
    uint64_t e = w->base + w->len, i = at;
    while (i < e && ws(b[i]))
        i++;
    if (i == e)
        return e < w->n ? 1 : (*err = i, -1);
    if (first && b[i] == '}') {
        *m = (member){.next = i + 1, .end = true};
        return 0;
    }
    if (b[i] != '"')
        return *err = i, -1;
    m->kb = i++;
    for (; i < e && b[i] != '"'; i++)
        if (b[i] == '\\')
            i++;
    if (i >= e)
        return e < w->n ? 1 : (*err = e, -1);
    m->ke = ++i;
    while (i < e && ws(b[i]))
        i++;
    if (i == e)
        return e < w->n ? 1 : (*err = i, -1);
    if (b[i] != ':')
        return *err = i, -1;
    i++;
    while (i < e && ws(b[i]))
        i++;
    m->vb = i;
    int depth = 0;
    for (; i < e; i++) {
        char ch = b[i];
        if (ch == '"') {
            for (i++; i < e && b[i] != '"'; i++)
                if (b[i] == '\\')
                    i++;
            if (i >= e)
                break;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if ((ch == '}' || ch == ']') && depth) {
            depth--;
        } else if ((ch == ',' || ch == '}') && !depth) {
            break;
        } else if (ch == ']') {
            return *err = i, -1;
        }
    }
    if (i >= e)
        return e < w->n ? 1 : (*err = e, -1);
    uint64_t ve = i;
    while (ve > m->vb && ws(b[ve - 1]))
        ve--;
    if (ve == m->vb)
        return *err = m->vb, -1;
    m->ve = ve;
    m->next = i + 1;
    m->end = false;
    m->last = b[i] == '}';
    return 0;
}

/* The next member from at, or the end of the object. */
static int next_member(hwin *w, uint64_t at, bool first, member *m, tc_diag *d)
{
    /* a member longer than the window: the window doubles until it holds it */
    for (size_t want = 64 << 10;; want *= 2) {
        uint64_t err = 0;
        int rc = hold(w, at, want, d);
        if (rc)
            return rc;
        rc = scan(w, at, first, m, &err);
        if (rc < 0)
            return bad_json(w, err, d);
        if (rc == 0)
            return 0;
    }
}

/* Parse header bytes [b, e) (held) alone with cJSON. */
static int parse_part(hwin *w, uint64_t b, uint64_t e, cJSON **out, tc_diag *d)
{
    int rc = hold(w, b, (size_t)(e - b), d);
    if (rc)
        return rc;
    const char *p = w->buf + (b - w->base), *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(p, (size_t)(e - b), &end, 0);
    if (!v || end != p + (e - b)) {
        const char *ep = v ? end : cJSON_GetErrorPtr();
        uint64_t at = ep && ep >= p && ep <= p + (e - b) ? b + (uint64_t)(ep - p) : b;
        cJSON_Delete(v);
        return bad_json(w, at, d);
    }
    *out = v;
    return 0;
}

/* After the object: nothing but whitespace. */
static int trailing(hwin *w, uint64_t at, tc_diag *d)
{
    for (uint64_t off = at; off < w->n;) {
        int rc = hold(w, off, WINDOW, d);
        if (rc)
            return rc;
        for (uint64_t i = off; i < w->base + w->len; i++) {
            char ch = w->buf[i - w->base];
            if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
                return tc_fail(d, TC_ERR_FORMAT,
                               "safetensors header has bytes after its JSON object at header byte %" PRIu64
                               " (file offset %" PRIu64 ")",
                               i, i + 8);
        }
        off = w->base + w->len;
    }
    return 0;
}

static int cmp_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* No name twice (the names sorted as pointers: no detour through the tensor table per comparison).
 * Names in strictly rising order, as writers sort them, are unique without a sort. */
static int unique_names(const tc_ckpt *c, tc_diag *d)
{
    size_t n = tc_ckpt_ntensors(c), k = 1;
    while (k < n && strcmp(tc_ckpt_tensor(c, k - 1)->name, tc_ckpt_tensor(c, k)->name) < 0)
        k++;
    if (k >= n)
        return 0;
    const char **v = malloc((n + 1) * sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = tc_ckpt_tensor(c, i)->name;
    qsort(v, n, sizeof *v, cmp_name);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++)
        if (!strcmp(v[i], v[i - 1]))
            rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header names tensor '%s' twice", v[i]);
    free(v);
    return rc;
}

typedef TC_VEC(span) spans;

/* The header's length, the file's first 8 bytes: within the limit and the file, and room for a JSON object. */
static int header_length(const tc_src *src, const tc_limits *lim, uint64_t *out, tc_diag *d)
{
    uint64_t size = src->size;
    uint8_t h8[8];
    if (size < 8)
        return tc_fail(d, TC_ERR_FORMAT, "file is %" PRIu64 " bytes, too short for a safetensors header length",
                       size);
    int rc = tc_src_read(src, 0, h8, 8, "header length", d);
    if (rc)
        return rc;
    uint64_t n = tc_le64(h8);
    if (n > lim->max_header)
        return tc_fail(d, TC_ERR_LIMIT, "safetensors header length %" PRIu64 " is over the limit of %" PRIu64
                       " bytes (corrupt file? --max-header-size raises it)", n, lim->max_header);
    if (n > size - 8)
        return tc_fail(d, TC_ERR_FORMAT,
                       "safetensors header length %" PRIu64 " runs past the end of the file (%" PRIu64
                       " bytes; truncated or not safetensors?)",
                       n, size);
    if (n < 2)
        return tc_fail(d, TC_ERR_FORMAT, "safetensors header length %" PRIu64 " is too small for a JSON object", n);
    *out = n;
    return 0;
}

/* One member of the header: __metadata__, or a tensor (its span of the data appended to sp). */
static int read_member(tc_ckpt *c, hwin *w, const member *m, uint64_t data_size, spans *sp, uint64_t *nmeta,
                       tc_diag *d)
{
    cJSON *key = NULL, *val = NULL;
    int rc;
    if ((rc = parse_part(w, m->kb, m->ke, &key, d)) || (rc = parse_part(w, m->vb, m->ve, &val, d)))
        goto done;
    const char *name = key->valuestring;
    if (!strcmp(name, "__metadata__")) {
        rc = (*nmeta)++ ? tc_fail(d, TC_ERR_FORMAT, "safetensors header names tensor '%s' twice", name)
                        : read_metadata(c, val, d);
    } else {
        span *x = tc_vec_extend(sp, 1);
        rc = x ? read_tensor(c, name, val, data_size, x, d) : tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
done:
    cJSON_Delete(key);
    cJSON_Delete(val);
    return rc;
}

/* The header object, one member at a time ("key": value, each parsed with
 * cJSON alone), and nothing but white space after it. */
static int read_header(tc_ckpt *c, hwin *w, uint64_t data_size, spans *sp, tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(c);
    size_t count = 0;
    int rc = prescan(w, &count, d);
    if (rc)
        return rc;
    if (w->first != '{')
        return tc_fail(d, TC_ERR_FORMAT, "safetensors header starts with byte 0x%02x, not '{'", (uint8_t)w->first);
    uint64_t at = 1, nmeta = 0;
    for (bool first = true;; first = false) {
        member m = {0};
        if ((rc = next_member(w, at, first, &m, d)))
            return rc;
        at = m.next;
        if (m.end)
            break;
        if (count > lim->max_entries + 1 || sp->n + nmeta + 1 > lim->max_entries + 1)
            return tc_fail(d, TC_ERR_LIMIT, "safetensors header lists %zu tensors, over the limit of %" PRIu64
                           " (raise with --max-entries)", count, lim->max_entries);
        if ((rc = read_member(c, w, &m, data_size, sp, &nmeta, d)))
            return rc;
        if (m.last)
            break;
    }
    return trailing(w, at, d);
}

/* The data buffer covered exactly by the tensors' spans (no overlaps, no
 * gaps, nothing left over), each tensor's storage placed where its span
 * lies in the file (the header is n bytes). */
static int place_data(tc_ckpt *c, spans *sp, uint64_t n, uint64_t data_size, tc_diag *d)
{
    size_t k = 1; /* (spans already in order, as writers lay them out, stay as they are: a stable sort's order) */
    while (k < sp->n && cmp_span(&sp->v[k - 1], &sp->v[k]) <= 0)
        k++;
    if (k < sp->n)
        qsort(sp->v, sp->n, sizeof *sp->v, cmp_span);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < sp->n; i++) {
        const span *x = &sp->v[i];
        const char *nm = tc_ckpt_tensor(c, x->t)->name;
        if (x->b < pos)
            return tc_fail(d, TC_ERR_FORMAT,
                           "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor '%s', which ends at %" PRIu64,
                           nm, x->b, x->e, prev, pos);
        if (x->b > pos)
            return tc_fail(d, TC_ERR_FORMAT,
                           "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] leave bytes [%" PRIu64 ", %" PRIu64
                           ") of the data unused (%s%s%s; the data must be contiguous)",
                           nm, x->b, x->e, pos, x->b, prev ? "after tensor '" : "at the start", prev ? prev : "",
                           prev ? "'" : "");
        pos = x->e;
        prev = nm;
        tc_ckpt_storage_mut(c, (size_t)tc_ckpt_tensor(c, x->t)->storage)->file_off = 8 + n + x->b;
    }
    if (pos != data_size)
        return tc_fail(d, TC_ERR_FORMAT,
                       "the data is %" PRIu64 " bytes but the tensors cover %" PRIu64 " (%" PRIu64
                       " bytes at the end belong to no tensor)",
                       data_size, pos, data_size - pos);
    return 0;
}

/* What inspect shows of the file's layout: the header's and the data's sizes. */
static int add_sizes(tc_ckpt *c, uint64_t n, uint64_t data_size, tc_diag *d)
{
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, n);
    int rc = tc_ckpt_add_fact(c, "header_bytes", v, d);
    if (rc)
        return rc;
    snprintf(v, sizeof v, "%" PRIu64, data_size);
    return tc_ckpt_add_fact(c, "data_bytes", v, d);
}

static int open_st(tc_ckpt *c, tc_diag *d)
{
    tc_ckpt_set_driver(c, &tc_format_safetensors, NULL, NULL);
    const tc_src *src = tc_ckpt_src(c);
    uint64_t n = 0; /* set by header_length */
    int rc = header_length(src, tc_ckpt_limits(c), &n, d);
    if (rc)
        return rc;
    uint64_t data_size = src->size - 8 - n;
    hwin w = {.src = src, .n = n};
    spans sp = {0};
    if ((rc = read_header(c, &w, data_size, &sp, d)) || (rc = unique_names(c, d)) ||
        (rc = place_data(c, &sp, n, data_size, d)) || (rc = read_aliases(c, tc_ckpt_ntensors(c), d)))
        goto done;
    rc = add_sizes(c, n, data_size, d);
done:
    tc_vec_free(&sp);
    free(w.buf);
    return rc;
}

static int open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    (void)d;
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
    return 0;
}

/* ---- writing ---------------------------------------------------------------------- */

static int cmp_item(const void *x, const void *y, void *ctx)
{
    const tc_write_job *job = ctx;
    const tc_witem *a = &job->items[*(const size_t *)x], *b = &job->items[*(const size_t *)y];
    int ra = tc_dtype_get(a->dtype)->st_rank, rb = tc_dtype_get(b->dtype)->st_rank;
    if (ra != rb)
        return rb - ra;
    return strcmp(a->name, b->name);
}

/* A JSON number printed exactly (cJSON would print large ones through a double). */
static cJSON *exact(uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    return cJSON_CreateRaw(t);
}

/* One member of the header object, "key":value, as cJSON prints it inside the
 * whole object (the object {key: value} printed, its braces taken off). v is
 * consumed. A header of N tensors is made one tensor's tree at a time. */
static bool add_member(tc_buf *b, const char *key, cJSON *v)
{
    bool first = tc_buf_len(b) == 1; /* just the '{' */
    cJSON *o = cJSON_CreateObject();
    if (!o || !v) {
        cJSON_Delete(o);
        cJSON_Delete(v);
        return false;
    }
    cJSON_AddItemToObject(o, key, v);
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!t)
        return false;
    if (!first)
        tc_buf_putc(b, ',');
    tc_buf_add(b, t + 1, strlen(t) - 2);
    free(t);
    return !tc_buf_oom(b);
}

/* The header: __metadata__, then every tensor in the reference library's order. */
static char *header(const tc_write_job *job, const size_t *order, tc_diag *d)
{
    tc_buf b = TC_BUF_INIT(0);
    bool ok = true;
    tc_buf_putc(&b, '{');
    if (job->nmeta) {
        cJSON *m = cJSON_CreateObject();
        ok = m != NULL;
        for (size_t i = 0; ok && i < job->nmeta; i++)
            ok = cJSON_AddStringToObject(m, job->meta[i].key, job->meta[i].value) != NULL;
        ok = ok ? add_member(&b, "__metadata__", m) : (cJSON_Delete(m), false);
    }
    uint64_t pos = 0;
    for (size_t i = 0; ok && i < job->nitems; i++) {
        const tc_witem *it = &job->items[order[i]];
        uint64_t n = job->blocks[it->block].nbytes;
        cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        ok = t && shape && offs && cJSON_AddStringToObject(t, "dtype", tc_dtype_get(it->dtype)->st_name);
        for (int k = 0; ok && k < it->ndim; k++)
            ok = cJSON_AddItemToArray(shape, exact((uint64_t)it->shape[k]));
        ok = ok && cJSON_AddItemToArray(offs, exact(pos)) && cJSON_AddItemToArray(offs, exact(pos + n));
        if (ok) {
            cJSON_AddItemToObject(t, "shape", shape);
            cJSON_AddItemToObject(t, "data_offsets", offs);
            ok = add_member(&b, it->name, t);
        } else {
            cJSON_Delete(t);
            cJSON_Delete(shape);
            cJSON_Delete(offs);
        }
        pos += n;
    }
    tc_buf_putc(&b, '}');
    char *text = ok && !tc_buf_oom(&b) ? tc_buf_take(&b) : NULL;
    tc_buf_free(&b);
    if (!text)
        tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return text;
}

static int write_st(const tc_write_job *job, tc_dst *dst, tc_diag *d)
{
    for (size_t i = 0; i < job->nitems; i++)
        if (!tc_dtype_get(job->items[i].dtype)->st_name)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': safetensors has no dtype for %s", job->items[i].name,
                           tc_dtype_name(job->items[i].dtype));
    size_t *order = malloc((job->nitems + 1) * sizeof *order);
    if (!order)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < job->nitems; i++)
        order[i] = i;
    qsort_r(order, job->nitems, sizeof *order, cmp_item, (void *)job);
    char *h = header(job, order, d);
    int rc;
    if (!h) {
        rc = d->code;
        goto done;
    }
    size_t hl = strlen(h), padded = (hl + 7) / 8 * 8;
    uint8_t len8[8];
    tc_put64(len8, padded);
    if ((rc = tc_dst_write(dst, len8, 8, d)) || (rc = tc_dst_write(dst, h, hl, d)))
        goto done;
    /* the reference library pads the header to 8 bytes */
    if (padded > hl && (rc = tc_dst_write(dst, "       ", padded - hl, d)))
        goto done;
    uint64_t pos = dst->pos;
    for (size_t i = 0; i < job->nitems; i++) {
        const tc_witem *it = &job->items[order[i]];
        if ((rc = job->data(job->ctx, it->block, dst, pos, NULL, d)))
            goto done;
        pos += job->blocks[it->block].nbytes;
    }
    tc_dst_seek(dst, pos);
done:
    free(h);
    free(order);
    return rc;
}

const tc_format tc_format_safetensors = {.name = "safetensors", .probe = probe, .open = open_st,
                                         .open_storage = open_storage, .write = write_st,
                                         .caps = TC_CAP_WRITES_SAFETENSORS};
