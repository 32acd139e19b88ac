/* safetensors: u64 LE header length N, N bytes of JSON, then the data
 * buffer. Every tensor is one raw storage; the buffer must be covered
 * exactly, as the reference library requires. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

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

static int cmp_name(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
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
static int read_tensor(tc_ckpt *c, const cJSON *v, uint64_t data_size, span *sp, tc_diag *d)
{
    const char *name = v->string;
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
    char shp[96];
    json_brief(js, shp, sizeof shp);
    if (ovf)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': shape %s x %s overflows a 64-bit byte count", name, shp,
                       stname);
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
    if (off[1] - off[0] != nbytes)
        return tc_fail(d, TC_ERR_FORMAT,
                       "tensor '%s': shape %s x %s is %" PRIu64 " bytes but data_offsets [%" PRIu64 ", %" PRIu64
                       "] hold %" PRIu64,
                       name, shp, stname, nbytes, off[0], off[1], off[1] - off[0]);

    long si = tc_ckpt_add_storage(c, name, d);
    if (si < 0)
        return d->code;
    tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
    if (!(s->location = strdup("-")))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
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
    t->ndim = nd;
    int64_t stride = 1;
    for (int i = nd - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = stride;
        stride *= shape[i] ? shape[i] : 1;
    }
    t->storage = si;
    t->numel = numel;
    t->nbytes = nbytes;
    snprintf(t->device, sizeof t->device, "-");
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
        tc_tensor *t = tc_ckpt_tensor_mut(c, (size_t)ti);
        t->kind = TC_TENSOR_DENSE;
        t->dtype = bt->dtype;
        t->ndim = nd;
        memcpy(t->shape, shape, sizeof shape);
        memcpy(t->stride, stride, sizeof stride);
        t->offset = (int64_t)off;
        t->storage = bt->storage;
        t->numel = numel;
        t->nbytes = numel * esize;
        t->alias_of = cJSON_IsTrue(same) ? base : -1;
        t->restored = true;
        snprintf(t->device, sizeof t->device, "-");
        s->ntensors++;
    }
    cJSON_Delete(j);
    return rc;
}

static int open_st(tc_ckpt *c, tc_diag *d)
{
    tc_ckpt_set_driver(c, &tc_format_safetensors, tc_format_safetensors.name, NULL, NULL);
    const tc_src *src = tc_ckpt_src(c);
    const tc_limits *lim = tc_ckpt_limits(c);
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
    char *hdr = malloc(n + 1);
    if (!hdr)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory for a %" PRIu64 "-byte header", n);
    cJSON *root = NULL;
    span *sp = NULL;
    char **names = NULL;
    if ((rc = tc_src_read(src, 8, hdr, (size_t)n, "header", d)))
        goto done;
    hdr[n] = 0;
    if (hdr[0] != '{') {
        rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header starts with byte 0x%02x, not '{'", (uint8_t)hdr[0]);
        goto done;
    }
    if (memchr(hdr, 0, (size_t)n)) {
        size_t z = strlen(hdr);
        rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header has a NUL byte at header byte %zu (file offset %zu)", z,
                     z + 8);
        goto done;
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, (size_t)n, &end, 0);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = ep && ep >= hdr && ep <= hdr + n ? (size_t)(ep - hdr) : 0;
        char near[24];
        size_t k = 0;
        for (size_t i = at; i < n && k < sizeof near - 1; i++)
            near[k++] = hdr[i] >= 0x20 && hdr[i] < 0x7f ? hdr[i] : '?';
        near[k] = 0;
        rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header is not valid JSON: error at header byte %zu (file offset %zu) near '%s'",
                     at, at + 8, near);
        goto done;
    }
    for (const char *p = end; p && p < hdr + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            size_t at = (size_t)(p - hdr);
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "safetensors header has bytes after its JSON object at header byte %zu (file offset %zu)", at,
                         at + 8);
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header is %s, not a JSON object", json_kind(root));
        goto done;
    }
    uint64_t data_size = size - 8 - n;
    size_t count = (size_t)cJSON_GetArraySize(root);
    if (count > lim->max_entries + 1) {
        rc = tc_fail(d, TC_ERR_LIMIT, "safetensors header lists %zu tensors, over the limit of %" PRIu64 " (raise with --max-entries)", count,
                     lim->max_entries);
        goto done;
    }
    sp = calloc(count + 1, sizeof *sp);
    names = calloc(count + 1, sizeof *names);
    if (!sp || !names) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t nn = 0, ns = 0;
    bool have_meta = false;
    for (const cJSON *v = root->child; v; v = v->next)
        names[nn++] = v->string;
    qsort(names, nn, sizeof *names, cmp_name);
    for (size_t i = 1; i < nn; i++)
        if (!strcmp(names[i], names[i - 1])) {
            rc = tc_fail(d, TC_ERR_FORMAT, "safetensors header names tensor '%s' twice", names[i]);
            goto done;
        }
    for (const cJSON *v = root->child; v; v = v->next) {
        if (!strcmp(v->string, "__metadata__")) {
            have_meta = true;
            if ((rc = read_metadata(c, v, d)))
                goto done;
            continue;
        }
        if ((rc = read_tensor(c, v, data_size, &sp[ns], d)))
            goto done;
        ns++;
    }
    /* the buffer must be covered exactly: no overlaps, no gaps, nothing left over */
    qsort(sp, ns, sizeof *sp, cmp_span);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < ns; i++) {
        const char *nm = tc_ckpt_tensor(c, sp[i].t)->name;
        if (sp[i].b < pos) {
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor '%s', which ends at %" PRIu64,
                         nm, sp[i].b, sp[i].e, prev, pos);
            goto done;
        }
        if (sp[i].b > pos) {
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] leave bytes [%" PRIu64 ", %" PRIu64
                         ") of the data unused (%s%s%s; the data must be contiguous)",
                         nm, sp[i].b, sp[i].e, pos, sp[i].b, prev ? "after tensor '" : "at the start", prev ? prev : "",
                         prev ? "'" : "");
            goto done;
        }
        pos = sp[i].e;
        prev = nm;
        tc_ckpt_storage_mut(c, (size_t)tc_ckpt_tensor(c, sp[i].t)->storage)->file_off = 8 + n + sp[i].b;
    }
    if (pos != data_size) {
        rc = tc_fail(d, TC_ERR_FORMAT,
                     "the data is %" PRIu64 " bytes but the tensors cover %" PRIu64 " (%" PRIu64
                     " bytes at the end belong to no tensor)",
                     data_size, pos, data_size - pos);
        goto done;
    }
    if ((rc = read_aliases(c, tc_ckpt_ntensors(c), d)))
        goto done;
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, n);
    if ((rc = tc_ckpt_add_fact(c, "header_bytes", v, d)))
        goto done;
    snprintf(v, sizeof v, "%" PRIu64, data_size);
    if ((rc = tc_ckpt_add_fact(c, "data_bytes", v, d)))
        goto done;
    (void)have_meta;
done:
    cJSON_Delete(root);
    free(sp);
    free(names);
    free(hdr);
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

/* The header: __metadata__, then every tensor in the reference library's order. */
static char *header(const tc_write_job *job, const size_t *order, tc_diag *d)
{
    cJSON *h = cJSON_CreateObject();
    bool ok = h != NULL;
    if (ok && job->nmeta) {
        cJSON *m = cJSON_AddObjectToObject(h, "__metadata__");
        ok = m != NULL;
        for (size_t i = 0; ok && i < job->nmeta; i++)
            ok = cJSON_AddStringToObject(m, job->meta[i].key, job->meta[i].value) != NULL;
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
            cJSON_AddItemToObject(h, it->name, t);
        } else {
            cJSON_Delete(t);
            cJSON_Delete(shape);
            cJSON_Delete(offs);
        }
        pos += n;
    }
    char *text = ok ? cJSON_PrintUnformatted(h) : NULL;
    cJSON_Delete(h);
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
    int rc = h ? 0 : d->code;
    size_t hl = h ? strlen(h) : 0, padded = (hl + 7) / 8 * 8;
    if (!rc) {
        uint8_t len8[8];
        tc_put64(len8, padded);
        rc = tc_dst_write(dst, len8, 8, d);
        if (!rc)
            rc = tc_dst_write(dst, h, hl, d);
        if (!rc && padded > hl) /* the reference library pads the header to 8 bytes */
            rc = tc_dst_write(dst, "       ", padded - hl, d);
    }
    free(h);
    uint64_t pos = dst->pos;
    for (size_t i = 0; i < job->nitems && !rc; i++) {
        const tc_witem *it = &job->items[order[i]];
        rc = job->data(job->ctx, it->block, dst, pos, NULL, d);
        pos += job->blocks[it->block].nbytes;
    }
    if (!rc)
        tc_dst_seek(dst, pos);
    free(order);
    return rc;
}

const tc_format tc_format_safetensors = {"safetensors", probe, open_st, open_storage, write_st};
