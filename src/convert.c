#include "convert.h"
#include "xfer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shard_index.h"
#include "cast.h"
#include "outfile.h"

#define CHUNK (4u << 20)        /* elements gathered per cast/write step, in bytes */
#define WHOLE_MAX (32u << 20)   /* strided views of storages up to this size are read whole */

void tc_convert_report_free(tc_convert_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ndropped; i++)
        free(r->dropped[i]);
    free(r->dropped);
    memset(r, 0, sizeof *r);
}

static int drop(tc_convert_report *r, tc_diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int drop(tc_convert_report *r, tc_diag *d, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **p = realloc(r->dropped, (r->ndropped + 1) * sizeof *p);
    if (!p || !(p[r->ndropped] = strdup(buf))) {
        if (p)
            r->dropped = p;
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    r->dropped = p;
    r->ndropped++;
    return 0;
}

uint64_t tc_convert_tensor_bytes(const tc_tensor *t, tc_dtype dt) { return t->numel * tc_dtype_size(dt); }

static bool contiguous(const tc_tensor *t)
{
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want)
            return false;
        want *= t->shape[i];
    }
    return true;
}

/* ---- gathering a tensor's elements ------------------------------------------ */

/* Strided views of large raw storages are read through a 4-way set-associative
 * cache of 4 KiB blocks (32 MiB): a transposed matrix with up to ~8k columns
 * then reads each block about once. */
#define BLK 4096u
#define NSETS 2048u
#define WAYS 4u

typedef struct gather {
    const tc_ckpt *c;
    const tc_storage *s;
    uint8_t *win;           /* the whole storage (small ones), or the cache blocks */
    uint64_t wlen;
    bool whole;
    uint64_t *tag, *age, clock;
} gather;

static int block(gather *g, uint64_t b, const uint8_t **out, tc_diag *d)
{
    size_t set = (size_t)((b * 0x9E3779B97F4A7C15ull) >> 53) % NSETS, victim = set * WAYS;
    for (size_t w = set * WAYS; w < set * WAYS + WAYS; w++) {
        if (g->tag[w] == b + 1) {
            g->age[w] = ++g->clock;
            *out = g->win + w * BLK;
            return 0;
        }
        if (g->age[w] < g->age[victim])
            victim = w;
    }
    uint64_t off = b * BLK, n = g->s->nbytes - off < BLK ? g->s->nbytes - off : BLK;
    g->tag[victim] = 0;
    int rc = tc_src_read(&g->c->src, g->s->file_off + off, g->win + victim * BLK, (size_t)n, g->s->key, d);
    if (rc)
        return rc;
    g->tag[victim] = b + 1;
    g->age[victim] = ++g->clock;
    *out = g->win + victim * BLK;
    return 0;
}

static int fetch(gather *g, uint64_t off, size_t len, uint8_t *dst, tc_diag *d)
{
    if (g->whole) {
        memcpy(dst, g->win + off, len);
        return 0;
    }
    if (!g->s->raw)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' is compressed and too large to gather a view of",
                       g->s->key);
    if (len >= 16 * BLK)
        return tc_src_read(&g->c->src, g->s->file_off + off, dst, len, g->s->key, d);
    while (len) {
        const uint8_t *p;
        uint64_t b = off / BLK, in = off % BLK;
        size_t k = BLK - in < len ? (size_t)(BLK - in) : len;
        int rc = block(g, b, &p, d);
        if (rc)
            return rc;
        memcpy(dst, p + in, k);
        dst += k;
        off += k;
        len -= k;
    }
    return 0;
}

typedef struct out_stream {
    tc_sink_fn sink;
    void *ctx;
    tc_dtype from, to;
    uint8_t *cbuf;          /* cast output */
    tc_convert_report *rep;
} out_stream;

static int emit(out_stream *os, const uint8_t *buf, size_t n, tc_diag *d)
{
    if (!n)
        return 0;
    if (os->from == os->to)
        return os->sink(os->ctx, buf, n, d);
    size_t esz = tc_dtype_size(os->from), cnt = n / esz;
    tc_cast_stats cs = {0};
    if (tc_cast_cpu_counted(&cs, os->to, os->cbuf, os->from, buf, cnt))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot cast %s to %s", tc_dtype_name(os->from), tc_dtype_name(os->to));
    if (os->rep) {
        os->rep->overflow += cs.overflow;
        os->rep->underflow += cs.underflow;
    }
    return os->sink(os->ctx, os->cbuf, cnt * tc_dtype_size(os->to), d);
}

int tc_tensor_stream(const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_sink_fn sink, void *ctx,
                     tc_convert_report *rep, tc_diag *d)
{
    if (!t->numel)
        return 0;
    const tc_storage *s = &c->s[t->storage];
    size_t esz = tc_dtype_size(t->dtype);
    size_t chunk = CHUNK / esz * esz;
    out_stream os = {sink, ctx, t->dtype, to, NULL, rep};
    uint8_t *buf = malloc(chunk);
    int rc = 0;
    gather g = {.c = c, .s = s};
    if (!buf || (to != t->dtype && !(os.cbuf = malloc(chunk / esz * tc_dtype_size(to))))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (to != t->dtype && !tc_cast_supported(to, t->dtype)) {
        rc = tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': cannot cast %s to %s", t->name, tc_dtype_name(t->dtype),
                     tc_dtype_name(to));
        goto done;
    }
    uint64_t start = (uint64_t)t->offset * esz;
    if (contiguous(t)) {
        tc_srd r;
        if ((rc = tc_srd_open(&r, c, s, d)))
            goto done;
        if (!r.zip) {
            r.done = start;
        } else {
            for (uint64_t skip = start; skip && !rc;) {
                size_t got, want = skip < chunk ? (size_t)skip : chunk;
                if (!(rc = tc_srd_read(&r, buf, want, &got, d)) && !got)
                    rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", s->key);
                skip -= got;
            }
        }
        for (uint64_t left = t->nbytes; left && !rc;) {
            size_t got, want = left < chunk ? (size_t)left : chunk;
            if (!(rc = tc_srd_read(&r, buf, want, &got, d)) && got != want)
                rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", s->key);
            if (!rc)
                rc = emit(&os, buf, got, d);
            left -= got;
        }
        tc_srd_close(&r);
        goto done;
    }
    /* strided: the whole storage in memory when small, else a read window (raw storages) */
    if (s->nbytes <= WHOLE_MAX) {
        if (!(g.win = malloc(s->nbytes ? (size_t)s->nbytes : 1))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        tc_srd r;
        if ((rc = tc_srd_open(&r, c, s, d)))
            goto done;
        size_t got = 0;
        rc = tc_srd_read(&r, g.win, (size_t)s->nbytes, &got, d);
        tc_srd_close(&r);
        if (!rc && got != s->nbytes)
            rc = tc_fail(d, TC_ERR_FORMAT, "storage '%s' ends early", s->key);
        if (rc)
            goto done;
        g.whole = true;
        g.wlen = s->nbytes;
    } else if (!(g.win = malloc((size_t)NSETS * WAYS * BLK)) || !(g.tag = calloc(NSETS * WAYS, sizeof *g.tag)) ||
               !(g.age = calloc(NSETS * WAYS, sizeof *g.age))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    {
        int nd = t->ndim;
        int64_t idx[TC_MAX_DIMS] = {0};
        /* runs: the innermost dimension when it is contiguous, else single elements */
        bool inner = nd > 0 && t->stride[nd - 1] == 1;
        uint64_t run = inner ? (uint64_t)t->shape[nd - 1] : 1;
        int outer = inner ? nd - 1 : nd;
        size_t fill = 0;
        for (uint64_t done_el = 0; done_el < t->numel && !rc;) {
            uint64_t el = (uint64_t)t->offset;
            for (int k = 0; k < outer; k++)
                el += (uint64_t)idx[k] * (uint64_t)t->stride[k];
            for (uint64_t r0 = 0; r0 < run && !rc;) {
                uint64_t n = run - r0, room = (chunk - fill) / esz;
                if (n > room)
                    n = room;
                rc = fetch(&g, (el + r0) * esz, (size_t)(n * esz), buf + fill, d);
                fill += (size_t)(n * esz);
                r0 += n;
                if (!rc && fill == chunk) {
                    rc = emit(&os, buf, fill, d);
                    fill = 0;
                }
            }
            done_el += run;
            for (int k = outer - 1; k >= 0; k--) {
                if (++idx[k] < t->shape[k])
                    break;
                idx[k] = 0;
            }
        }
        if (!rc)
            rc = emit(&os, buf, fill, d);
    }
done:
    free(buf);
    free(os.cbuf);
    free(g.win);
    free(g.tag);
    free(g.age);
    return rc;
}

/* ---- safetensors writer ------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        sb_add(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* A JSON string, escaped as serde_json does. */
static void sb_json(sbuf *b, const char *s)
{
    sb_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_str(b, "\\\""); break;
        case '\\': sb_str(b, "\\\\"); break;
        case '\n': sb_str(b, "\\n"); break;
        case '\r': sb_str(b, "\\r"); break;
        case '\t': sb_str(b, "\\t"); break;
        case '\b': sb_str(b, "\\b"); break;
        case '\f': sb_str(b, "\\f"); break;
        default:
            if (*p < 0x20)
                sb_fmt(b, "\\u%04x", *p);
            else
                sb_add(b, (const char *)p, 1);
        }
    }
    sb_str(b, "\"");
}

static int cmp_item(const void *x, const void *y)
{
    const tc_st_item *a = x, *b = y;
    int ra = tc_st_dtype_of(a->out)->rank, rb = tc_st_dtype_of(b->out)->rank;
    if (ra != rb)
        return rb - ra;
    return strcmp(a->name, b->name);
}

typedef struct fdsink {
    int fd;
    uint8_t *buf;
    size_t n, cap;
    uint64_t written, total;
    const tc_rewrite_opts *ro;
    bool werr;              /* the output failed, not an input */
} fdsink;

static int fd_flush(fdsink *f, tc_diag *d)
{
    if (f->n && tc_write_all(f->fd, f->buf, f->n)) {
        f->werr = true;
        return tc_fail(d, TC_ERR_IO, "write failed: %s", strerror(errno));
    }
    f->n = 0;
    return 0;
}

static int fd_sink(void *ctx, const void *p, size_t n, tc_diag *d)
{
    fdsink *f = ctx;
    const uint8_t *b = p;
    while (n) {
        size_t k = f->cap - f->n < n ? f->cap - f->n : n;
        memcpy(f->buf + f->n, b, k);
        f->n += k;
        b += k;
        n -= k;
        f->written += k;
        if (f->n == f->cap && fd_flush(f, d))
            return d->code;
    }
    if (f->ro && f->ro->progress)
        f->ro->progress(f->ro->progress_ctx, f->written, f->total);
    return 0;
}

typedef struct st_prog {
    fdsink *f;
    size_t ein, eout;
} st_prog;

static void st_progress(void *ctx, uint64_t in_done)
{
    st_prog *p = ctx;
    p->f->ro->progress(p->f->ro->progress_ctx, p->f->written + in_done / p->ein * p->eout, p->f->total);
}

/* A contiguous tensor that lies whole in a stored record goes through
 * tc_xfer (parallel chunks written in place); 1 when it does not qualify. */
static int st_xfer(fdsink *f, const tc_st_item *it, tc_pool **pool, uint64_t data_start, tc_convert_report *rep,
                   tc_diag *d)
{
    const tc_tensor *t = it->t;
    const tc_storage *s = &it->c->s[t->storage];
    size_t esz = tc_dtype_size(t->dtype);
    uint64_t start = (uint64_t)t->offset * esz;
    if (!s->raw || !contiguous(t) || start > s->nbytes || t->nbytes > s->nbytes - start ||
        (it->out != t->dtype && !tc_cast_supported(it->out, t->dtype)))
        return 1;
    int rc = fd_flush(f, d);
    if (rc)
        return rc;
    if (!*pool && !(*pool = tc_pool_new(0)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    st_prog sp = {f, esz, tc_dtype_size(it->out)};
    tc_xfer x = {
        .src = &it->c->src, .in_off = s->file_off + start, .in_bytes = t->nbytes, .what = s->key,
        .out_fd = f->fd, .out_off = data_start + f->written, .from = t->dtype, .to = it->out,
        .progress = f->ro && f->ro->progress ? st_progress : NULL, .progress_ctx = &sp,
    };
    if ((rc = tc_xfer_run(*pool, &x, d))) {
        f->werr = x.werr;
        return rc;
    }
    if (lseek(f->fd, (off_t)(x.out_off + x.out_bytes), SEEK_SET) < 0) {
        f->werr = true;
        return tc_fail(d, TC_ERR_IO, "write failed: %s", strerror(errno));
    }
    f->written += x.out_bytes;
    if (rep) {
        rep->overflow += x.stats.overflow;
        rep->underflow += x.stats.underflow;
    }
    return 0;
}

/* tc_st_write; on failure *at is the item whose input failed, or n when the output did. */
static int st_write(tc_st_item *items, size_t n, const tc_kv *meta, size_t nmeta, int fd, tc_convert_report *rep,
                    const tc_rewrite_opts *ro, size_t *at, tc_diag *d)
{
    *at = n;
    for (size_t i = 0; i < n; i++)
        if (!tc_st_dtype_of(items[i].out))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': safetensors has no dtype for %s", items[i].name,
                           tc_dtype_name(items[i].out));
    qsort(items, n, sizeof *items, cmp_item);
    sbuf h = {0};
    sb_str(&h, "{");
    bool first = true;
    if (nmeta) {
        sb_str(&h, "\"__metadata__\":{");
        for (size_t i = 0; i < nmeta; i++) {
            if (i)
                sb_str(&h, ",");
            sb_json(&h, meta[i].key);
            sb_str(&h, ":");
            sb_json(&h, meta[i].value);
        }
        sb_str(&h, "}");
        first = false;
    }
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        tc_st_item *it = &items[i];
        it->begin = pos;
        pos += it->nbytes;
        if (!first)
            sb_str(&h, ",");
        first = false;
        sb_json(&h, it->name);
        sb_fmt(&h, ":{\"dtype\":\"%s\",\"shape\":[", tc_st_dtype_of(it->out)->name);
        for (int k = 0; k < it->t->ndim; k++)
            sb_fmt(&h, "%s%" PRId64, k ? "," : "", it->t->shape[k]);
        sb_fmt(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", it->begin, pos);
    }
    sb_str(&h, "}");
    while (!h.oom && h.n % 8)
        sb_str(&h, " ");
    if (h.oom) {
        free(h.p);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    fdsink f = {.fd = fd, .cap = CHUNK, .total = pos, .ro = ro};
    uint8_t len8[8];
    tc_put64(len8, h.n);
    int rc = 0;
    if (!(f.buf = malloc(f.cap)))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    else if (tc_write_all(fd, len8, 8) || tc_write_all(fd, h.p, h.n))
        rc = tc_fail(d, TC_ERR_IO, "write failed: %s", strerror(errno));
    free(h.p);
    tc_pool *pool = NULL;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t before = f.written;
        if ((rc = st_xfer(&f, &items[i], &pool, 8 + h.n, rep, d)) == 1)
            rc = tc_tensor_stream(items[i].c, items[i].t, items[i].out, fd_sink, &f, rep, d);
        if (!rc && f.written - before != items[i].nbytes)
            rc = tc_fail(d, TC_ERR_FORMAT, "tensor '%s': wrote %" PRIu64 " bytes, expected %" PRIu64, items[i].name,
                         f.written - before, items[i].nbytes);
        if (rc && !f.werr)
            *at = i;
    }
    if (!rc)
        rc = fd_flush(&f, d);
    tc_pool_free(pool);
    free(f.buf);
    if (!rc)
        rep->data_bytes += pos;
    return rc;
}

int tc_st_write(tc_st_item *items, size_t n, const tc_kv *meta, size_t nmeta, int fd, tc_convert_report *rep,
                const tc_rewrite_opts *ro, tc_diag *d)
{
    size_t at;
    return st_write(items, n, meta, nmeta, fd, rep, ro, &at, d);
}

/* ---- torch -> safetensors ------------------------------------------------------ */

static const pk_obj *dict_get(const pk_obj *o, const char *key)
{
    if (!o || !(o->kind == PK_DICT || (o->kind == PK_CALL && o->items_kind == PK_ITEMS_DICT)))
        return NULL;
    for (size_t i = 0; i + 1 < o->n; i += 2)
        if (pk_is_str(o->items[i], key))
            return o->items[i + 1];
    return NULL;
}

static bool dictlike(const pk_obj *o)
{
    return o && (o->kind == PK_DICT || (o->kind == PK_CALL && o->items_kind == PK_ITEMS_DICT));
}

static const char *kind_text(const tc_ckpt *c, const pk_obj *o)
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
        (void)c;
        return f ? f->name : "object";
    }
    default: return "object";
    }
}

/* Tensors whose name starts with prefix (prefix "" = all). */
static size_t count_under(const tc_ckpt *c, const char *prefix)
{
    size_t n = 0, l = strlen(prefix);
    for (size_t i = 0; i < c->nt; i++)
        if (!strncmp(c->t[i].name, prefix, l) && (!l || c->t[i].name[l] == '.' || !c->t[i].name[l]))
            n++;
    return n;
}

/* The entries without any tensor under the selected object go to the report. */
static int report_entries(const tc_ckpt *c, const char *key, tc_convert_report *rep, tc_diag *d)
{
    const pk_obj *o = c->root;
    if (key && o)
        o = dict_get(o, key);
    if (!dictlike(o))
        return 0;
    for (size_t i = 0; i + 1 < o->n; i += 2) {
        if (o->items[i]->kind != PK_STR)
            continue;
        char prefix[1024];
        snprintf(prefix, sizeof prefix, "%s%s%s", key ? key : "", key ? "." : "", o->items[i]->s);
        if (!count_under(c, prefix)) {
            int rc = drop(rep, d, "%s (%s)", prefix, kind_text(c, o->items[i + 1]));
            if (rc)
                return rc;
        }
    }
    return 0;
}

typedef struct sel {
    const char *name;     /* output name */
    tc_dtype out;
    int role;             /* 0 skip, 1 write, 2 alias, 3 write as a copy of a shared storage */
    long of;              /* alias: tensor index of the written one */
    bool same;
} sel;

static int key_check(const tc_ckpt *c, const tc_convert_opts *o, tc_diag *d)
{
    if (!o->key || count_under(c, o->key))
        return 0;
    char ents[512] = "";
    size_t el = 0;
    const pk_obj *r = c->root;
    for (size_t i = 0; dictlike(r) && i + 1 < r->n && el < sizeof ents - 64; i += 2)
        if (r->items[i]->kind == PK_STR)
            el += (size_t)snprintf(ents + el, sizeof ents - el, "%s%s", el ? ", " : "", r->items[i]->s);
    return tc_fail(d, TC_ERR_USAGE, "--key '%s': no tensors under that entry (top-level entries: %s)", o->key,
                   el ? ents : "none");
}

static const char *const kinds[] = {"dense", "quantized tensor", "meta tensor without data", "tensor subclass"};

/* The role of every tensor of c (sl: c->nt entries) in a safetensors output; what cannot be written goes to
 * rep as dropped, and ncopies counts the copies. */
static int st_select(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, sel *sl, tc_convert_report *rep,
                     tc_diag *d)
{
    int rc;
    size_t klen = o->key ? strlen(o->key) : 0;
    if ((rc = report_entries(c, o->key, rep, d)))
        return rc;
    for (size_t i = 0; i < c->nt; i++) {
        const tc_tensor *t = &c->t[i];
        sel *s = &sl[i];
        if (o->key) {
            if (strncmp(t->name, o->key, klen) || t->name[klen] != '.')
                continue;
            s->name = t->name + klen + 1;
        } else {
            s->name = t->name;
        }
        if (t->kind != TC_TENSOR_DENSE || t->storage < 0) {
            if ((rc = drop(rep, d, "%s (%s)", s->name, kinds[t->kind])))
                return rc;
            continue;
        }
        const tc_plan_st *ps = &p->st[t->storage];
        s->out = ps->cast ? ps->dtype : t->dtype;
        if (!tc_st_dtype_of(s->out)) {
            if ((rc = drop(rep, d, "%s (%s: safetensors has no such dtype)", s->name, tc_dtype_name(s->out))))
                return rc;
            continue;
        }
        s->role = 1;
        if (t->alias_of >= 0 && sl[t->alias_of].role == 1) {
            s->role = 2;
            s->of = t->alias_of;
            s->same = true;
        }
    }
    /* views sharing a storage: aliases of the one tensor covering it whole */
    for (size_t i = 0; i < c->nt; i++) {
        const tc_tensor *t = &c->t[i];
        if (sl[i].role != 1 || c->s[t->storage].ntensors < 2)
            continue;
        long cover = -1;
        size_t nshare = 0;
        bool same_dtype = true;
        for (size_t k = 0; k < c->nt; k++) {
            if (sl[k].role != 1 || c->t[k].storage != t->storage)
                continue;
            nshare++;
            same_dtype &= c->t[k].dtype == t->dtype;
            if (cover < 0 && c->t[k].offset == 0 && contiguous(&c->t[k]) &&
                c->t[k].nbytes == c->s[t->storage].nbytes)
                cover = (long)k;
        }
        if (nshare < 2)
            continue;
        for (size_t k = 0; k < c->nt; k++) {
            if (sl[k].role != 1 || c->t[k].storage != t->storage)
                continue;
            if (cover >= 0 && same_dtype) {
                if ((long)k != cover) {
                    sl[k].role = 2;
                    sl[k].of = cover;
                }
            } else {
                sl[k].role = 3;
            }
        }
    }
    for (size_t i = 0; i < c->nt; i++)
        rep->ncopies += sl[i].role == 3;
    return 0;
}

/* Record tensor i of c (an alias, sl[i].role 2) in the aliases object. */
static int add_alias(cJSON *aliases, const tc_ckpt *c, const sel *sl, size_t i, tc_diag *d)
{
    const tc_tensor *t = &c->t[i];
    cJSON *a = cJSON_CreateObject(), *sh = cJSON_CreateArray(), *st = cJSON_CreateArray();
    if (!a || !sh || !st) {
        cJSON_Delete(a);
        cJSON_Delete(sh);
        cJSON_Delete(st);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    bool ok = cJSON_AddStringToObject(a, "of", sl[sl[i].of].name) &&
              cJSON_AddNumberToObject(a, "offset", (double)t->offset);
    for (int k = 0; k < t->ndim; k++) {
        cJSON *x = cJSON_CreateNumber((double)t->shape[k]), *y = cJSON_CreateNumber((double)t->stride[k]);
        ok &= x && y;
        if (x)
            cJSON_AddItemToArray(sh, x);
        if (y)
            cJSON_AddItemToArray(st, y);
    }
    cJSON_AddItemToObject(a, "shape", sh);
    cJSON_AddItemToObject(a, "stride", st);
    ok &= cJSON_AddBoolToObject(a, "same", sl[i].same) != NULL;
    cJSON_AddItemToObject(aliases, sl[i].name, a);
    return ok ? 0 : tc_fail(d, TC_ERR_NOMEM, "out of memory");
}

/* "format": "pt", then extra (less "format" and, when aliases are given, an older alias record), then the
 * aliases; *text receives the printed aliases (the caller frees it). meta must hold nextra + 2 entries. */
static int st_meta(const tc_kv *extra, size_t nextra, const cJSON *aliases, tc_kv *meta, size_t *nmeta, char **text,
                   tc_diag *d)
{
    size_t n = 0;
    bool has = aliases && aliases->child;
    *text = NULL;
    meta[n++] = (tc_kv){"format", "pt"};
    for (size_t i = 0; i < nextra; i++)
        if (strcmp(extra[i].key, "format") && (strcmp(extra[i].key, TC_ST_ALIASES_KEY) || !has))
            meta[n++] = extra[i];
    if (has) {
        if (!(*text = cJSON_PrintUnformatted(aliases)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        meta[n++] = (tc_kv){TC_ST_ALIASES_KEY, *text};
    }
    *nmeta = n;
    return 0;
}

int tc_convert_to_safetensors(tc_ckpt *c, const tc_convert_opts *o, const tc_kv *extra_meta, size_t nextra,
                              int fd, tc_convert_report *rep, tc_diag *d)
{
    tc_plan p = {0};
    sel *sl = NULL;
    tc_st_item *items = NULL;
    tc_kv *meta = NULL;
    cJSON *aliases = NULL;
    char *alias_text = NULL;
    int rc = key_check(c, o, d);
    if (rc || (rc = tc_plan_make(&p, c, &o->ro, d)))
        return rc;
    rep->ncast = p.ncast;
    rep->nkept = p.nkept;
    if (!(sl = calloc(c->nt + 1, sizeof *sl)) || !(items = calloc(c->nt + 1, sizeof *items)) ||
        !(aliases = cJSON_CreateObject()) || !(meta = calloc(nextra + 2, sizeof *meta))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = st_select(c, o, &p, sl, rep, d)))
        goto done;
    size_t n = 0, nmeta = 0;
    for (size_t i = 0; i < c->nt && !rc; i++) {
        const tc_tensor *t = &c->t[i];
        if (sl[i].role == 1 || sl[i].role == 3) {
            items[n++] = (tc_st_item){c, t, sl[i].name, sl[i].out, tc_convert_tensor_bytes(t, sl[i].out), 0};
        } else if (sl[i].role == 2) {
            rc = add_alias(aliases, c, sl, i, d);
            rep->naliases++;
        }
    }
    rep->ntensors = n - rep->ncopies;
    if (!rc && !(rc = st_meta(extra_meta, nextra, aliases, meta, &nmeta, &alias_text, d)))
        rc = tc_st_write(items, n, meta, nmeta, fd, rep, &o->ro, d);
done:
    tc_plan_free(&p);
    free(sl);
    free(items);
    free(meta);
    free(alias_text);
    cJSON_Delete(aliases);
    return rc;
}

/* ---- safetensors -> torch ------------------------------------------------------ */

typedef struct gb {
    pk_graph *g;
    tc_diag *d;
    pk_obj *s_storage, *od, *v2, *v3, *untyped, *loc, *f;
    bool oom;
} gb;

static pk_obj *chk(gb *b, pk_obj *o)
{
    if (!o)
        b->oom = true;
    return o;
}

static pk_obj *int_tuple(gb *b, const int64_t *v, int n)
{
    pk_obj *t = chk(b, pk_new(b->g, PK_TUPLE));
    for (int i = 0; t && i < n; i++)
        if (pk_push(b->g, t, chk(b, pk_new_int(b->g, v[i]))))
            b->oom = true;
    return t;
}

/* _rebuild_tensor_v2/v3 call for a view of the storage saved under key, nbytes long; *pid receives the
 * persistent-id tuple. */
static pk_obj *rebuild_at(gb *b, const char *key, uint64_t nbytes, tc_dtype dt, int64_t offset, const int64_t *shape,
                          const int64_t *stride, int nd, bool requires_grad, pk_obj **pid_out)
{
    bool v3 = tc_dtype_is_v3(dt);
    pk_obj *type = v3 ? b->untyped : chk(b, pk_new_global(b->g, "torch", tc_dtype_get(dt)->storage));
    pk_obj *it[5] = {b->s_storage, type, chk(b, pk_new_str(b->g, key, strlen(key))), b->loc,
                     chk(b, pk_new_int(b->g, (int64_t)(v3 ? nbytes : nbytes / tc_dtype_size(dt))))};
    pk_obj *tup = b->oom ? NULL : chk(b, pk_new_tuple(b->g, 5, it));
    pk_obj *pid = chk(b, pk_new(b->g, PK_PERSID));
    pk_obj *hooks = chk(b, pk_new(b->g, PK_CALL)), *empty = chk(b, pk_new(b->g, PK_TUPLE));
    pk_obj *call = chk(b, pk_new(b->g, PK_CALL));
    pk_obj *f = chk(b, pk_new(b->g, PK_BOOL));
    if (b->oom)
        return NULL;
    f->i = requires_grad;
    pid->args = tup;
    hooks->func = b->od;
    hooks->args = empty;
    pk_obj *a[7] = {pid, chk(b, pk_new_int(b->g, offset)), int_tuple(b, shape, nd), int_tuple(b, stride, nd), f,
                    hooks, v3 ? chk(b, pk_new_global(b->g, "torch", tc_dtype_name(dt))) : NULL};
    if (b->oom || !(call->args = chk(b, pk_new_tuple(b->g, v3 ? 7 : 6, a))))
        return NULL;
    call->func = v3 ? b->v3 : b->v2;
    *pid_out = tup;
    return call;
}

/* _rebuild_tensor_v2/v3 call for a view of storage si. */
static pk_obj *rebuild_call(gb *b, tc_ckpt *c, long si, tc_dtype dt, int64_t offset, const int64_t *shape,
                            const int64_t *stride, int nd)
{
    tc_storage *s = &c->s[si];
    pk_obj *tup = NULL;
    pk_obj *call = rebuild_at(b, s->key, s->nbytes, dt, offset, shape, stride, nd, false, &tup);
    if (!call || tc_storage_add_pid(s, tup, b->d))
        return NULL;
    return call;
}

/* The globals and constants every state_dict pickle uses, made in b->g. */
static int gb_init(gb *b, const char *device)
{
    b->s_storage = chk(b, pk_new_str(b->g, "storage", 7));
    b->od = chk(b, pk_new_global(b->g, "collections", "OrderedDict"));
    b->v2 = chk(b, pk_new_global(b->g, "torch._utils", "_rebuild_tensor_v2"));
    b->v3 = chk(b, pk_new_global(b->g, "torch._utils", "_rebuild_tensor_v3"));
    b->untyped = chk(b, pk_new_global(b->g, "torch.storage", "UntypedStorage"));
    b->loc = chk(b, pk_new_str(b->g, device, strlen(device)));
    return b->oom ? tc_fail(b->d, TC_ERR_NOMEM, "out of memory") : 0;
}

/* An empty OrderedDict call, the root of a state_dict. */
static pk_obj *od_root(gb *b)
{
    pk_obj *root = chk(b, pk_new(b->g, PK_CALL)), *empty = chk(b, pk_new(b->g, PK_TUPLE));
    if (b->oom)
        return NULL;
    root->func = b->od;
    root->args = empty;
    root->items_kind = PK_ITEMS_DICT;
    return root;
}

static int json_i64s(const cJSON *a, int64_t *out, int *n)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > TC_MAX_DIMS)
        return -1;
    int k = 0;
    for (const cJSON *x = a->child; x; x = x->next) {
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 9007199254740992.0 ||
            x->valuedouble != (double)(int64_t)x->valuedouble)
            return -1;
        out[k++] = (int64_t)x->valuedouble;
    }
    *n = k;
    return 0;
}

static long find_tensor(const tc_ckpt *c, const char *name, size_t upto)
{
    for (size_t i = 0; i < upto; i++)
        if (!strcmp(c->t[i].name, name))
            return (long)i;
    return -1;
}

/* Restore the aliases recorded by tc_convert_to_safetensors. */
static int restore_aliases(gb *b, tc_ckpt *c, pk_obj *root, size_t nst, tc_convert_report *rep, tc_diag *d)
{
    const char *text = NULL;
    for (size_t i = 0; i < c->nmeta; i++)
        if (!strcmp(c->meta[i].key, TC_ST_ALIASES_KEY))
            text = c->meta[i].value;
    if (!text)
        return 0;
    cJSON *j = cJSON_Parse(text);
    int rc = 0;
    if (!cJSON_IsObject(j)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "__metadata__ %s is not a JSON object", TC_ST_ALIASES_KEY);
        goto done;
    }
    for (const cJSON *a = j->child; a && !rc; a = a->next) {
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(a, "of");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(a, "offset");
        const cJSON *same = cJSON_GetObjectItemCaseSensitive(a, "same");
        int64_t shape[TC_MAX_DIMS], stride[TC_MAX_DIMS];
        int nd = 0, nd2 = 0;
        long base = cJSON_IsString(of) ? find_tensor(c, of->valuestring, nst) : -1;
        if (base < 0 || !cJSON_IsNumber(off) || off->valuedouble < 0 ||
            json_i64s(cJSON_GetObjectItemCaseSensitive(a, "shape"), shape, &nd) ||
            json_i64s(cJSON_GetObjectItemCaseSensitive(a, "stride"), stride, &nd2) || nd != nd2) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' is malformed or names a tensor not in the file",
                         TC_ST_ALIASES_KEY, a->string);
            break;
        }
        if (find_tensor(c, a->string, c->nt) >= 0) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' is also a tensor of the file", TC_ST_ALIASES_KEY,
                         a->string);
            break;
        }
        /* bounds: the view must stay inside the storage */
        const tc_tensor *bt0 = &c->t[base];
        const tc_storage *s = &c->s[bt0->storage];
        uint64_t last = (uint64_t)off->valuedouble, numel = 1;
        bool bad = false;
        for (int k = 0; k < nd; k++) {
            uint64_t span;
            bad |= __builtin_mul_overflow(numel, (uint64_t)shape[k], &numel);
            if (shape[k])
                bad |= __builtin_mul_overflow((uint64_t)(shape[k] - 1), (uint64_t)stride[k], &span) ||
                       __builtin_add_overflow(last, span, &last);
        }
        if (bad || (numel && last >= s->nbytes / tc_dtype_size(bt0->dtype))) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: alias '%s' reaches past tensor '%s'", TC_ST_ALIASES_KEY, a->string,
                         of->valuestring);
            break;
        }
        tc_tensor *bt = &c->t[base];
        pk_obj *node = cJSON_IsTrue(same) ? bt->node
                                           : rebuild_call(b, c, bt->storage, bt->dtype, (int64_t)off->valuedouble,
                                                          shape, stride, nd);
        if (!node) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        tc_tensor *t = tc_ckpt_new_tensor(c, a->string, d);
        if (!t) {
            rc = d->code;
            break;
        }
        bt = &c->t[base];
        t->kind = TC_TENSOR_DENSE;
        t->dtype = bt->dtype;
        t->ndim = nd;
        memcpy(t->shape, shape, sizeof shape[0] * (size_t)nd);
        memcpy(t->stride, stride, sizeof stride[0] * (size_t)nd);
        t->offset = (int64_t)off->valuedouble;
        t->storage = bt->storage;
        t->numel = numel;
        t->nbytes = numel * tc_dtype_size(t->dtype);
        t->node = node;
        if (cJSON_IsTrue(same))
            t->alias_of = base;
        else
            c->s[bt->storage].ntensors++;
        if (pk_push(b->g, root, chk(b, pk_new_str(b->g, a->string, strlen(a->string)))) ||
            pk_push(b->g, root, node) || b->oom) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        rep->naliases++;
    }
done:
    cJSON_Delete(j);
    return rc;
}

/* Give a safetensors checkpoint the pickle graph torch.save would write for its state_dict. */
static int build_graph(tc_ckpt *c, const char *device, tc_convert_report *rep, tc_diag *d)
{
    gb b = {.g = c->g, .d = d};
    pk_obj *root;
    if (gb_init(&b, device) || !(root = od_root(&b)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t nst = c->nt;
    for (size_t i = 0; i < nst; i++) {
        tc_tensor *t = &c->t[i];
        pk_obj *call = rebuild_call(&b, c, t->storage, t->dtype, 0, t->shape, t->stride, t->ndim);
        if (!call || pk_push(c->g, root, chk(&b, pk_new_str(c->g, t->name, strlen(t->name)))) ||
            pk_push(c->g, root, call) || b.oom)
            return d->code ? d->code : tc_fail(d, TC_ERR_NOMEM, "out of memory");
        t->node = call;
        if (tc_dtype_is_v3(t->dtype)) { /* as torch saves them: an UntypedStorage counted in bytes */
            tc_storage *s = &c->s[t->storage];
            s->untyped = true;
            s->dtype = TC_DT_U8;
            s->numel = s->nbytes;
        }
    }
    rep->ntensors = nst;
    int rc = restore_aliases(&b, c, root, nst, rep, d);
    if (rc)
        return rc;
    c->root = root;
    return 0;
}

int tc_convert_to_torch(tc_ckpt *c, const tc_convert_opts *o, int fd, const char *out_path, tc_convert_report *rep,
                        tc_diag *d)
{
    const char *dev = o->device ? o->device : "cpu";
    int rc;
    if (o->key && c->root)
        return tc_fail(d, TC_ERR_USAGE, "--key applies to conversions to safetensors");
    if (!c->root) {
        if (o->key)
            return tc_fail(d, TC_ERR_USAGE, "--key selects an entry of a .pt checkpoint; %s files have none",
                           tc_ckpt_format(c));
        if ((rc = build_graph(c, dev, rep, d)))
            return rc;
    } else {
        rep->ntensors = c->nt;
    }
    tc_rewrite_opts ro = o->ro;
    ro.all_to = dev;
    ro.maps = NULL;
    ro.nmaps = 0;
    tc_plan p;
    if ((rc = tc_plan_make(&p, c, &ro, d)))
        return rc;
    rep->ncast = p.ncast;
    rep->nkept = p.nkept;
    rc = tc_write_torch(c, &p, &ro, fd, out_path, d);
    if (!rc) {
        rep->data_bytes = p.out_bytes;
        for (size_t i = 0; i < c->ns; i++) {
            rep->overflow += p.st[i].overflow;
            rep->underflow += p.st[i].underflow;
        }
    }
    tc_plan_free(&p);
    return rc;
}

/* ---- sharded sets ---------------------------------------------------------------- */

typedef struct set_in {
    tc_ckpt *c;
    tc_plan p;
    bool planned;
    sel *sl;              /* to safetensors: the role of every tensor */
    long *grp;            /* the unit of every tensor, -1 when not written */
} set_in;

typedef struct set_unit {
    size_t in;
    long t;               /* the written tensor (safetensors), the first on the storage (torch) */
    uint64_t bytes;       /* output bytes */
    size_t shard;
    size_t key;           /* torch: record data/<key> of its shard */
} set_unit;

typedef struct set_name {
    const char *name;
    size_t shard;
    bool alias;           /* in the shard's __metadata__, not its header */
} set_name;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const set_name *)a)->name, ((const set_name *)b)->name);
}

typedef struct set {
    const tc_set_opts *o;
    tc_set_report *rep;
    tc_index *ix;
    set_in *in;
    set_unit *u;
    size_t nu, ucap;
    tc_rewrite_opts ro;   /* what the plans were made with */
    const char *dev;
} set;

static int set_where(tc_set_report *r, const char *path, int rc)
{
    free(r->where);
    r->where = path ? strdup(path) : NULL;
    return rc;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int add_unit(set *S, size_t in, long t, uint64_t bytes, long *out, tc_diag *d)
{
    if (S->nu == S->ucap) {
        size_t cap = S->ucap ? S->ucap * 2 : 64;
        set_unit *u = realloc(S->u, cap * sizeof *u);
        if (!u)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        S->u = u;
        S->ucap = cap;
    }
    S->u[S->nu] = (set_unit){in, t, bytes, 0, 0};
    *out = (long)S->nu++;
    return 0;
}

/* Bytes storage si of c takes in the output, cast as planned. */
static uint64_t storage_out_bytes(const tc_ckpt *c, const tc_plan *p, long si, const tc_tensor *t)
{
    const tc_plan_st *ps = &p->st[si];
    uint64_t n = c->s[si].nbytes;
    return ps->cast ? n / tc_dtype_size(t->dtype) * tc_dtype_size(ps->dtype) : n;
}

/* Open, check and plan input shard i, and cut it into units. */
static int set_open_input(set *S, size_t i, tc_diag *d)
{
    const tc_set_opts *o = S->o;
    tc_convert_report *sum = &S->rep->sum;
    set_in *in = &S->in[i];
    int rc = tc_index_open_shard(S->ix, i, &o->lim, &in->c, d);
    if (rc)
        return set_where(S->rep, S->ix->path, rc);
    tc_ckpt *c = in->c;
    if (tc_ckpt_has_dangerous(c) && !o->allow_unsafe) {
        for (size_t g = 0; g < c->ngl; g++)
            if (c->gl[g].dangerous) {
                tc_fail(d, TC_ERR_UNSAFE, "refusing to convert: it names the dangerous global %s, which runs when the "
                        "file is unpickled (inspect it; --allow-unsafe converts it anyway)", c->gl[g].name);
                break;
            }
        return set_where(S->rep, S->ix->sh[i].path, TC_ERR_UNSAFE);
    }
    if (!o->to_safetensors && !c->root) {
        tc_convert_report scratch = {0};
        rc = build_graph(c, S->dev, &scratch, d);
        tc_convert_report_free(&scratch);
        if (rc)
            return set_where(S->rep, S->ix->sh[i].path, rc);
    }
    if ((rc = tc_plan_make(&in->p, c, &S->ro, d)))
        return set_where(S->rep, S->ix->sh[i].path, rc);
    in->planned = true;
    sum->ncast += in->p.ncast;
    sum->nkept += in->p.nkept;
    if (!(in->grp = malloc((c->nt + 1) * sizeof *in->grp)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < c->nt; k++)
        in->grp[k] = -1;
    if (o->to_safetensors) {
        if (!(in->sl = calloc(c->nt + 1, sizeof *in->sl)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        if ((rc = st_select(c, &o->co, &in->p, in->sl, sum, d)))
            return set_where(S->rep, S->ix->sh[i].path, rc);
        for (size_t k = 0; k < c->nt && !rc; k++) {
            const sel *s = &in->sl[k];
            if (s->role == 1 || s->role == 3)
                rc = add_unit(S, i, (long)k, tc_convert_tensor_bytes(&c->t[k], s->out), &in->grp[k], d);
            sum->ntensors += s->role == 1;
            sum->naliases += s->role == 2;
        }
        for (size_t k = 0; k < c->nt; k++)
            if (in->sl[k].role == 2)
                in->grp[k] = in->grp[in->sl[k].of];
        return rc;
    }
    /* to torch: one unit per storage, in the order its first tensor comes */
    long *first = malloc((c->ns + 1) * sizeof *first);
    if (!first)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < c->ns; s++)
        first[s] = -1;
    rc = report_entries(c, NULL, sum, d);
    for (size_t k = 0; k < c->nt && !rc; k++) {
        const tc_tensor *t = &c->t[k];
        if (t->kind != TC_TENSOR_DENSE || t->storage < 0) {
            rc = drop(sum, d, "%s (%s)", t->name, kinds[t->kind]);
            continue;
        }
        if (first[t->storage] < 0) {
            rc = add_unit(S, i, (long)k, storage_out_bytes(c, &in->p, t->storage, t), &first[t->storage], d);
            sum->ntensors++;
        } else {
            sum->naliases++;
        }
        in->grp[k] = first[t->storage];
    }
    free(first);
    return rc;
}

/* Every output name with its shard, sorted; a name given twice is an error. */
static int set_names(set *S, set_name **out, size_t *nout, tc_diag *d)
{
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < S->ix->nsh; i++)
        cap += S->in[i].c->nt;
    set_name *v = malloc((cap + 1) * sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < S->ix->nsh; i++) {
        const set_in *in = &S->in[i];
        for (size_t k = 0; k < in->c->nt; k++) {
            if (in->grp[k] >= 0)
                v[n++] = (set_name){in->sl ? in->sl[k].name : in->c->t[k].name, S->u[in->grp[k]].shard,
                                    in->sl && in->sl[k].role == 2};
        }
    }
    qsort(v, n, sizeof *v, cmp_name);
    for (size_t k = 1; k < n; k++)
        if (!strcmp(v[k].name, v[k - 1].name)) {
            int rc = tc_fail(d, TC_ERR_FORMAT, "two input shards hold a tensor named '%s'", v[k].name);
            free(v);
            return set_where(S->rep, S->ix->path, rc);
        }
    *out = v;
    *nout = n;
    return 0;
}

/* Shard k as a safetensors file into fd. */
static int set_write_st(set *S, size_t k, int fd, tc_diag *d)
{
    size_t nin = S->ix->nsh, n = 0, nextra = 0, nmeta = 0, at = 0;
    tc_st_item *items = NULL;
    tc_kv *extra = NULL, *meta = NULL;
    char *alias_text = NULL;
    cJSON *aliases = cJSON_CreateObject();
    int rc = 0;
    size_t cap = 0;
    for (size_t u = 0; u < S->nu; u++)
        cap += S->u[u].shard == k;
    for (size_t i = 0; i < nin; i++)
        nextra += S->in[i].c->root ? 0 : S->in[i].c->nmeta;
    if (!aliases || !(items = calloc(cap + 1, sizeof *items)) || !(extra = calloc(nextra + 1, sizeof *extra)) ||
        !(meta = calloc(nextra + 2, sizeof *meta))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    nextra = 0;
    for (size_t u = 0; u < S->nu; u++) {
        const set_unit *su = &S->u[u];
        if (su->shard != k)
            continue;
        const set_in *in = &S->in[su->in];
        const sel *s = &in->sl[su->t];
        items[n++] = (tc_st_item){in->c, &in->c->t[su->t], s->name, s->out, su->bytes, 0};
    }
    /* the aliases of its tensors, and the __metadata__ of the safetensors shards it draws from */
    for (size_t i = 0; i < nin && !rc; i++) {
        const set_in *in = &S->in[i];
        bool used = false;
        for (size_t t = 0; t < in->c->nt && !rc; t++) {
            if (in->grp[t] < 0 || S->u[in->grp[t]].shard != k)
                continue;
            used = true;
            if (in->sl[t].role == 2)
                rc = add_alias(aliases, in->c, in->sl, t, d);
        }
        for (size_t m = 0; used && !in->c->root && m < in->c->nmeta; m++) {
            bool seen = false;
            for (size_t q = 0; q < nextra && !seen; q++)
                seen = !strcmp(extra[q].key, in->c->meta[m].key);
            if (!seen)
                extra[nextra++] = in->c->meta[m];
        }
    }
    if (!rc && !(rc = st_meta(extra, nextra, aliases, meta, &nmeta, &alias_text, d)))
        rc = st_write(items, n, meta, nmeta, fd, &S->rep->sum, &S->o->co.ro, &at, d);
    if (rc && at < n)
        set_where(S->rep, items[at].c->path, rc);
done:
    free(items);
    free(extra);
    free(meta);
    free(alias_text);
    cJSON_Delete(aliases);
    return rc;
}

/* The state_dict pickle of shard k, in the order of the input. */
static int set_pickle(set *S, size_t k, uint8_t **pkl, size_t *plen, tc_diag *d)
{
    pk_graph *g = pk_graph_new();
    gb b = {.g = g, .d = d};
    pk_obj *root = NULL, **nodes = NULL, *param = NULL;
    int rc = 0;
    if (!g || gb_init(&b, S->dev) || !(root = od_root(&b)) ||
        !(param = chk(&b, pk_new_global(g, "torch._utils", "_rebuild_parameter")))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < S->ix->nsh && !rc; i++) {
        const set_in *in = &S->in[i];
        const tc_ckpt *c = in->c;
        free(nodes);
        if (!(nodes = calloc(c->nt + 1, sizeof *nodes))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t t = 0; t < c->nt && !rc; t++) {
            if (in->grp[t] < 0 || S->u[in->grp[t]].shard != k)
                continue;
            const tc_tensor *x = &c->t[t];
            const set_unit *u = &S->u[in->grp[t]];
            const tc_plan_st *ps = &in->p.st[x->storage];
            pk_obj *node = x->alias_of >= 0 ? nodes[x->alias_of] : NULL, *pid;
            if (!node) {
                char key[32];
                snprintf(key, sizeof key, "%zu", u->key);
                node = rebuild_at(&b, key, u->bytes, ps->cast ? ps->dtype : x->dtype, x->offset, x->shape, x->stride,
                                  x->ndim, x->parameter ? false : x->requires_grad, &pid);
                if (node && x->parameter) { /* _rebuild_parameter(tensor, requires_grad, OrderedDict()) */
                    pk_obj *p = chk(&b, pk_new(g, PK_CALL)), *rg = chk(&b, pk_new(g, PK_BOOL)), *h = od_root(&b);
                    if (p && rg && h) {
                        h->items_kind = PK_ITEMS_NONE;
                        rg->i = x->requires_grad;
                        p->func = param;
                        p->args = chk(&b, pk_new_tuple(g, 3, (pk_obj *[]){node, rg, h}));
                    }
                    node = b.oom ? NULL : p;
                }
            }
            nodes[t] = node;
            if (!node || pk_push(g, root, chk(&b, pk_new_str(g, x->name, strlen(x->name)))) ||
                pk_push(g, root, node) || b.oom)
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
    }
    if (!rc)
        rc = pk_write(g, root, S->o->co.ro.max_depth ? S->o->co.ro.max_depth : 1000, pkl, plen, d);
done:
    free(nodes);
    pk_graph_free(g);
    return rc;
}

/* Shard k as a torch zip into fd; path names its archive folder. */
static int set_write_torch(set *S, size_t k, int fd, const char *path, tc_diag *d)
{
    uint8_t *pkl = NULL;
    size_t plen = 0, key = 0;
    uint64_t total = 0, done = 0;
    for (size_t u = 0; u < S->nu; u++)
        if (S->u[u].shard == k) {
            S->u[u].key = key++;
            total += S->u[u].bytes;
        }
    int rc = set_pickle(S, k, &pkl, &plen, d);
    if (rc)
        return rc;
    tc_zipw w;
    rc = tc_torch_zip_open(&w, fd, path, pkl, plen, d);
    for (size_t u = 0; u < S->nu && !rc; u++) {
        const set_unit *su = &S->u[u];
        if (su->shard != k)
            continue;
        set_in *in = &S->in[su->in];
        long si = in->c->t[su->t].storage;
        bool werr;
        rc = tc_torch_zip_storage(&w, in->c, &in->p, (size_t)si, su->key, &S->ro, &done, total, &werr, d);
        if (rc && !werr)
            set_where(S->rep, in->c->path, rc);
        if (!rc)
            S->rep->sum.data_bytes += su->bytes;
    }
    return tc_torch_zip_close(&w, rc, d);
}

/* The index: metadata (total_size first), then weight_map sorted, as transformers writes it. */
static int set_write_index(set *S, const set_name *v, size_t n, tc_diag *d)
{
    tc_set_report *rep = S->rep;
    sbuf b = {0};
    sb_fmt(&b, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64, rep->sum.data_bytes);
    for (size_t i = 0; i < S->ix->nmeta; i++) {
        if (!strcmp(S->ix->meta[i].key, "total_size"))
            continue;
        sb_str(&b, ",\n    ");
        sb_json(&b, S->ix->meta[i].key);
        sb_str(&b, ": ");
        sb_json(&b, S->ix->meta[i].value);
    }
    sb_str(&b, "\n  },\n  \"weight_map\": {");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (v[i].alias)
            continue;
        sb_str(&b, first ? "\n    " : ",\n    ");
        first = false;
        sb_json(&b, v[i].name);
        sb_str(&b, ": ");
        sb_json(&b, base_name(rep->shards[v[i].shard]));
    }
    sb_str(&b, "\n  }\n}\n");
    if (b.oom) {
        free(b.p);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    tc_outfile of = {.fd = -1};
    int rc = tc_out_open(&of, rep->index_path, S->o->force, d);
    if (!rc && tc_write_all(of.fd, b.p, b.n))
        rc = tc_fail(d, TC_ERR_IO, "write failed: %s", strerror(errno));
    if (!rc)
        rc = tc_out_commit(&of, d);
    else
        tc_out_abort(&of);
    free(b.p);
    return rc ? set_where(rep, rep->index_path, rc) : 0;
}

/* The output paths: the index, and the shards once their count is known. */
static int set_paths(set *S, const char *out, size_t nshards, tc_diag *d)
{
    tc_set_report *rep = S->rep;
    bool st = S->o->to_safetensors;
    const char *base = st ? "model" : "pytorch_model", *ext = st ? ".safetensors" : ".bin";
    char *dir;
    if (tc_index_path(out)) {
        const char *slash = strrchr(out, '/');
        dir = slash ? strndup(out, (size_t)(slash - out)) : strdup(".");
        rep->index_path = strdup(out);
    } else {
        size_t n = strlen(out) + 64, l = strlen(out);
        while (l > 1 && out[l - 1] == '/')
            l--;
        dir = strndup(out, l);
        if (dir && (rep->index_path = malloc(n)))
            snprintf(rep->index_path, n, "%s/%s%s.index.json", dir, base, ext);
    }
    if (!dir || !rep->index_path || !(rep->shards = calloc(nshards + 1, sizeof *rep->shards))) {
        free(dir);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    int rc = 0;
    for (size_t k = 0; k < nshards && !rc; k++) {
        size_t n = strlen(dir) + 64;
        if (!(rep->shards[k] = malloc(n))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(rep->shards[k], n, "%s/%s-%05zu-of-%05zu%s", dir, base, k + 1, nshards, ext);
        rep->nshards = k + 1;
    }
    free(dir);
    return rc;
}

/* Refuse, before writing anything, outputs that exist (without force) or that are input shards. */
static int set_check_outputs(set *S, tc_diag *d)
{
    tc_set_report *rep = S->rep;
    for (size_t k = 0; k <= rep->nshards; k++) {
        const char *p = k < rep->nshards ? rep->shards[k] : rep->index_path;
        struct stat st;
        if (!S->o->force && lstat(p, &st) == 0)
            return set_where(rep, p, tc_fail(d, TC_ERR_USAGE, "%s exists (use --force to replace it)", p));
        for (size_t i = 0; i < S->ix->nsh; i++)
            if (!strcmp(p, S->ix->sh[i].path) || tc_same_file(p, S->ix->sh[i].path))
                return set_where(rep, p, tc_fail(d, TC_ERR_USAGE, "the output would replace input shard %s; "
                                                 "write elsewhere", S->ix->sh[i].file));
        if (tc_same_file(p, S->ix->path))
            return set_where(rep, p, tc_fail(d, TC_ERR_USAGE, "the output would replace the input index; "
                                             "write elsewhere"));
    }
    return 0;
}

int tc_convert_set(const char *in, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d)
{
    set S = {.o = o, .rep = rep, .ro = o->co.ro, .dev = o->co.device ? o->co.device : "cpu"};
    set_name *names = NULL;
    size_t nnames = 0, written = 0;
    uint64_t max = o->max_shard ? o->max_shard : TC_DEFAULT_MAX_SHARD;
    int rc = tc_index_open(&S.ix, in, &o->lim, d);
    if (rc)
        return set_where(rep, in, rc);
    rep->ninputs = S.ix->nsh;
    if (!o->to_safetensors) {
        S.ro.all_to = S.dev;
        S.ro.maps = NULL;
        S.ro.nmaps = 0;
    }
    if (!(S.in = calloc(S.ix->nsh + 1, sizeof *S.in))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < S.ix->nsh && !rc; i++)
        rc = set_open_input(&S, i, d);
    if (!rc && o->co.key) { /* --key: some shard must have tensors under it */
        bool any = false;
        for (size_t i = 0; i < S.ix->nsh && !any; i++)
            any = count_under(S.in[i].c, o->co.key) > 0;
        if (!any && S.ix->nsh)
            rc = set_where(rep, S.ix->sh[0].path, key_check(S.in[0].c, &o->co, d));
    }
    if (rc)
        goto done;
    /* the plan: greedy, in input order */
    size_t nshards = 0;
    uint64_t fill = 0;
    for (size_t u = 0; u < S.nu; u++) {
        if (!nshards || (fill && fill + S.u[u].bytes > max)) {
            nshards++;
            fill = 0;
        }
        S.u[u].shard = nshards - 1;
        fill += S.u[u].bytes;
    }
    if (!nshards) {
        rc = set_where(rep, in, tc_fail(d, TC_ERR_USAGE, "no tensor of the set can be written as %s",
                                        o->to_safetensors ? "safetensors" : "a torch checkpoint"));
        goto done;
    }
    if ((rc = set_paths(&S, out, nshards, d)) || (rc = set_names(&S, &names, &nnames, d)) ||
        (rc = set_check_outputs(&S, d)))
        goto done;
    for (size_t k = 0; k < nshards && !rc; k++) {
        tc_outfile of = {.fd = -1};
        if ((rc = tc_out_open(&of, rep->shards[k], o->force, d))) {
            set_where(rep, rep->shards[k], rc);
            break;
        }
        free(rep->where);
        rep->where = NULL;
        rc = o->to_safetensors ? set_write_st(&S, k, of.fd, d) : set_write_torch(&S, k, of.fd, rep->shards[k], d);
        if (!rc)
            rc = tc_out_commit(&of, d);
        else
            tc_out_abort(&of);
        if (rc && !rep->where)
            set_where(rep, rep->shards[k], rc);
        written += !rc;
    }
    if (!rc)
        rc = set_write_index(&S, names, nnames, d);
    if (!rc && !o->to_safetensors)
        for (size_t i = 0; i < S.ix->nsh; i++)
            for (size_t s = 0; s < S.in[i].c->ns; s++) {
                rep->sum.overflow += S.in[i].p.st[s].overflow;
                rep->sum.underflow += S.in[i].p.st[s].underflow;
            }
    if (rc)
        for (size_t k = 0; k < written; k++)
            unlink(rep->shards[k]);
done:
    free(names);
    for (size_t i = 0; S.in && i < S.ix->nsh; i++) {
        if (S.in[i].planned)
            tc_plan_free(&S.in[i].p);
        free(S.in[i].sl);
        free(S.in[i].grp);
        tc_ckpt_close(S.in[i].c);
    }
    free(S.in);
    free(S.u);
    tc_index_free(S.ix);
    return rc;
}

void tc_set_report_free(tc_set_report *r)
{
    if (!r)
        return;
    tc_convert_report_free(&r->sum);
    for (size_t k = 0; k < r->nshards; k++)
        free(r->shards[k]);
    free(r->shards);
    free(r->index_path);
    free(r->where);
    memset(r, 0, sizeof *r);
}
