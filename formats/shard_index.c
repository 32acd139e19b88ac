/* Sharded checkpoints: an index JSON beside its shards. As a format it lists
 * the whole model, opening and checking one shard at a time; a storage's
 * bytes are read through the shard that holds it. */
#include "shard_index.h"

#include "json_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "format.h"
#include "vec.h"

#define MAX_INDEX (256u << 20)

extern const tc_format tc_format_safetensors_index, tc_format_torch_index;

static bool ends_with(const char *s, const char *suf)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suf);
    return a > b && !strcmp(s + a - b, suf);
}

bool tc_index_path(const char *path) { return ends_with(path, ".index.json"); }

void tc_index_free(tc_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nmeta; i++) {
        free(ix->meta[i].key);
        free(ix->meta[i].value);
    }
    free(ix->meta);
    for (size_t i = 0; i < ix->n; i++)
        free(ix->e[i].name);
    free(ix->e);
    for (size_t i = 0; i < ix->nsh; i++) {
        free(ix->sh[i].file);
        free(ix->sh[i].path);
    }
    free(ix->sh);
    tc_strmap_free(&ix->names);
    tc_strmap_free(&ix->files);
    free(ix->path);
    free(ix);
}

/* A shard file name: a relative path of plain components under the index's folder. */
static const char *bad_shard_name(const char *file)
{
    if (!*file)
        return "is empty";
    if (file[0] == '/')
        return "is an absolute path";
    if (strchr(file, '\\'))
        return "contains a backslash";
    if (tc_index_path(file))
        return "is itself an index (an index may name only shards)";
    for (const char *p = file; *p;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || (l == 1 && p[0] == '.'))
            return "has an empty or '.' component";
        if (l == 2 && p[0] == '.' && p[1] == '.')
            return "leaves the index's folder ('..')";
        p += l + (e ? 1 : 0);
    }
    return NULL;
}

static int add_shard(tc_index *ix, const char *file, size_t *out, tc_diag *d)
{
    if (tc_strmap_get(&ix->files, file, out))
        return 0;
    const char *why = bad_shard_name(file);
    if (why)
        return tc_fail(d, TC_ERR_FORMAT, "weight_map names shard '%.200s', which %s", file, why);
    if (tc_grow(&ix->sh, &ix->shcap, ix->nsh + 1, sizeof *ix->sh))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_shard *s = &ix->sh[ix->nsh];
    const char *slash = strrchr(ix->path, '/');
    size_t dl = slash ? (size_t)(slash - ix->path + 1) : 0;
    size_t n = dl + strlen(file) + 1;
    s->file = strdup(file);
    s->path = malloc(n);
    s->ntensors = 0;
    if (!s->file || !s->path || tc_strmap_put(&ix->files, s->file, ix->nsh, NULL) < 0) {
        free(s->file);
        free(s->path);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    snprintf(s->path, n, "%.*s%s", (int)dl, ix->path, file);
    *out = ix->nsh++;
    return 0;
}

static int read_meta(tc_index *ix, const cJSON *md, tc_diag *d)
{
    for (const cJSON *m = cJSON_IsObject(md) ? md->child : NULL; m; m = m->next) {
        char num[64];
        const char *v = NULL;
        char *printed = NULL;
        if (cJSON_IsString(m)) {
            v = m->valuestring;
        } else if (cJSON_IsNumber(m)) {
            snprintf(num, sizeof num, "%.0f", m->valuedouble);
            v = num;
        } else {
            v = printed = cJSON_PrintUnformatted(m);
        }
        if (!strcmp(m->string, "total_size") && cJSON_IsNumber(m) && m->valuedouble >= 0) {
            ix->total_size = (uint64_t)m->valuedouble;
            ix->has_total_size = true;
        }
        tc_kv *kv = tc_grow(&ix->meta, &ix->metacap, ix->nmeta + 1, sizeof *ix->meta) ? NULL : ix->meta;
        if (!kv || !v || !(kv[ix->nmeta].key = strdup(m->string)) || !(kv[ix->nmeta].value = strdup(v))) {
            if (kv && v && kv[ix->nmeta].key)
                free(kv[ix->nmeta].key);
            free(printed);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        ix->nmeta++;
        free(printed);
    }
    return 0;
}

int tc_index_open(tc_index **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_index *ix = calloc(1, sizeof *ix);
    cJSON *j = NULL;
    int rc = 0;
    static const tc_json_file_msgs msgs = {"index", NULL, "index is not valid JSON: error at byte %zu"};
    if (!ix || !(ix->path = strdup(path))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_json_file_read(path, MAX_INDEX, &msgs, &j, d)))
        goto done;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    if (!cJSON_IsObject(wm)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "index has no \"weight_map\" object (not a shard index?)");
        goto done;
    }
    if ((rc = read_meta(ix, cJSON_GetObjectItemCaseSensitive(j, "metadata"), d)))
        goto done;
    size_t n = 0;
    for (const cJSON *w = wm->child; w; w = w->next)
        n++;
    if (n > lim->max_entries) {
        rc = tc_fail(d, TC_ERR_LIMIT, "weight_map has %zu entries, over the limit of %" PRIu64 " (raise with --max-entries)", n, lim->max_entries);
        goto done;
    }
    if (!(ix->e = calloc(n + 1, sizeof *ix->e))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (const cJSON *w = wm->child; w; w = w->next) {
        if (!cJSON_IsString(w)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "weight_map: tensor '%s' maps to a non-string", w->string);
            goto done;
        }
        size_t si = 0;
        if ((rc = add_shard(ix, w->valuestring, &si, d)))
            goto done;
        if (!(ix->e[ix->n].name = strdup(w->string))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        int put = tc_strmap_put(&ix->names, ix->e[ix->n].name, ix->n, NULL);
        if (put < 0) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (put == 0) {
            rc = tc_fail(d, TC_ERR_FORMAT, "weight_map names tensor '%s' twice", w->string);
            free(ix->e[ix->n].name);
            goto done;
        }
        ix->e[ix->n++].shard = si;
        ix->sh[si].ntensors++;
    }
done:
    cJSON_Delete(j);
    if (rc) {
        tc_diag_subject(d, path);
        tc_index_free(ix);
    } else {
        *out = ix;
    }
    return rc;
}

int tc_index_check_shards(const tc_index *ix, tc_diag *d)
{
    for (size_t i = 0; i < ix->nsh; i++)
        if (access(ix->sh[i].path, R_OK) < 0) {
            int e = errno;
            return tc_fail_at(d, e == ENOENT ? TC_ERR_FORMAT : TC_ERR_IO, ix->path, TC_NO_OFFSET,
                              "shard %s, which the index lists, cannot be read: %s (incomplete download?)",
                              ix->sh[i].file, strerror(e));
        }
    return 0;
}

int tc_index_open_shard_by(const tc_index *ix, size_t i, tc_opener opener, const tc_limits *lim, tc_ckpt **out,
                           tc_diag *d)
{
    *out = NULL;
    const tc_shard *sh = &ix->sh[i];
    tc_ckpt *c;
    int rc = opener(&c, sh->path, lim, d);
    if (rc)
        return rc;
    /* exactly the names the index gives this shard: each of its tensors is one of them, and as many */
    size_t matched = 0;
    for (size_t t = 0; t < tc_ckpt_ntensors(c); t++) {
        const char *name = tc_ckpt_tensor(c, t)->name;
        size_t at;
        char msg[600] = "";
        bool listed = tc_strmap_get(&ix->names, name, &at);
        if (!listed && tc_ckpt_tensor(c, t)->restored) /* a view of the shard's own tensor */
            continue;
        if (!listed)
            snprintf(msg, sizeof msg, "holds tensor '%s', which the index does not list", name);
        else if (ix->e[at].shard != i)
            snprintf(msg, sizeof msg, "holds tensor '%s', which the index puts in %s", name,
                     ix->sh[ix->e[at].shard].file);
        if (msg[0]) {
            tc_ckpt_close(c);
            return tc_fail_at(d, TC_ERR_FORMAT, sh->path, TC_NO_OFFSET, "%s", msg);
        }
        matched += tc_ckpt_find_tensor(c, name) == (long)t; /* a name given twice counts once */
    }
    if (matched != sh->ntensors)
        for (size_t k = 0; k < ix->n; k++)
            if (ix->e[k].shard == i && tc_ckpt_find_tensor(c, ix->e[k].name) < 0) {
                tc_ckpt_close(c);
                return tc_fail_at(d, TC_ERR_FORMAT, sh->path, TC_NO_OFFSET,
                                  "the index maps tensor '%s' to it, but it is not there", ix->e[k].name);
            }
    *out = c;
    return 0;
}

/* ---- writing ---------------------------------------------------------------------- */

typedef tc_buf jbuf; /* the index's text, on the heap without a limit */

static void puts_(jbuf *b, const char *s) { tc_buf_puts(b, s); }

/* A JSON string, escaped by cJSON. */
static void put_string(jbuf *b, const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (t)
        puts_(b, t);
    else
        b->oom = true;
    free(t);
    cJSON_Delete(j);
}

int tc_index_write(tc_dst *dst, uint64_t total_size, const tc_kv *meta, size_t nmeta, const char *const *names,
                   const char *const *files, size_t n, tc_diag *d)
{
    jbuf b = TC_BUF_INIT(0);
    char num[64];
    snprintf(num, sizeof num, "%" PRIu64, total_size);
    puts_(&b, "{\n  \"metadata\": {\n    \"total_size\": ");
    puts_(&b, num);
    for (size_t i = 0; i < nmeta; i++) {
        if (!strcmp(meta[i].key, "total_size"))
            continue;
        puts_(&b, ",\n    ");
        put_string(&b, meta[i].key);
        puts_(&b, ": ");
        put_string(&b, meta[i].value);
    }
    puts_(&b, "\n  },\n  \"weight_map\": {");
    for (size_t i = 0; i < n; i++) {
        puts_(&b, i ? ",\n    " : "\n    ");
        put_string(&b, names[i]);
        puts_(&b, ": ");
        put_string(&b, files[i]);
    }
    puts_(&b, "\n  }\n}\n");
    int rc = tc_buf_oom(&b) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_dst_write(dst, tc_buf_str(&b), tc_buf_len(&b), d);
    tc_buf_free(&b);
    return rc;
}

/* ---- as a format: the whole model, one shard at a time ---------------------------- */

typedef struct ipriv {
    tc_index *ix;
    size_t *local;        /* per storage: its index within its shard */
    size_t localcap;
    tc_ckpt *open;        /* the shard last read from, kept open */
    long open_k;
    size_t readers;       /* readers of open not yet closed */
    tc_opener opener;     /* how the shards open: the one the index's checkpoint was handed */
} ipriv;

static void ipriv_free(void *p)
{
    ipriv *x = p;
    if (!x)
        return;
    tc_index_free(x->ix);
    free(x->local);
    tc_ckpt_close(x->open);
    free(x);
}

static bool probe_st(const tc_probe *p) { return ends_with(p->path, ".safetensors.index.json"); }

static bool probe_pt(const tc_probe *p) { return tc_index_path(p->path) && !probe_st(p); }

/* Shard i's storages and tensors into c. */
static int add_shard_contents(tc_ckpt *c, ipriv *x, size_t i, const tc_ckpt *s, uint64_t *total, tc_diag *d)
{
    long base = (long)tc_ckpt_nstorages(c), sh = tc_ckpt_add_shard(c, x->ix->sh[i].file, d);
    if (sh < 0)
        return d->code;
    size_t ns = tc_ckpt_nstorages(s);
    if (tc_grow(&x->local, &x->localcap, (size_t)base + ns + 1, sizeof *x->local))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t *local = x->local;
    for (size_t k = 0; k < ns; k++) {
        const tc_storage *from = tc_ckpt_storage(s, k);
        char key[1200];
        snprintf(key, sizeof key, "%s:%s", x->ix->sh[i].file, from->key); /* unique across shards */
        long si = tc_ckpt_add_storage(c, key, d);
        if (si < 0)
            return d->code;
        if (tc_ckpt_set_location(c, (size_t)si, from->location, d))
            return d->code;
        tc_storage *st = tc_ckpt_storage_mut(c, (size_t)si);
        st->dtype = from->dtype;
        st->untyped = from->untyped;
        st->numel = from->numel;
        st->nbytes = from->nbytes;
        st->enc = from->enc;
        st->enc_bytes = from->enc_bytes;
        st->ntensors = from->ntensors;
        st->crc_known = from->crc_known;
        st->crc = from->crc;
        st->shard = sh;
        local[si] = k;
        *total += st->nbytes;
    }
    long tbase = (long)tc_ckpt_ntensors(c);
    for (size_t k = 0; k < tc_ckpt_ntensors(s); k++) {
        const tc_tensor *from = tc_ckpt_tensor(s, k);
        long ti = tc_ckpt_add_tensor(c, from->name, d);
        if (ti < 0)
            return d->code;
        tc_tensor *t = tc_ckpt_tensor_mut(c, (size_t)ti);
        char *name = t->name;
        *t = *from;
        t->name = name; /* the name and dimensions are this checkpoint's own (the shard's are closed with it) */
        if (tc_ckpt_set_dims(c, (size_t)ti, from->ndim, from->shape, from->stride, d))
            return d->code;
        if (t->storage >= 0)
            t->storage += base;
        if (t->alias_of >= 0)
            t->alias_of += tbase;
    }
    return 0;
}

/* Shard i (open as s): its tensors, its line among the facts, its globals. */
static int take_shard(tc_ckpt *c, ipriv *x, size_t i, const tc_ckpt *s, uint64_t *total, tc_diag *d)
{
    int rc;
    if ((rc = add_shard_contents(c, x, i, s, total, d)))
        return rc;
    char fk[32], fv[1200];
    snprintf(fk, sizeof fk, "shard%zu", i + 1);
    snprintf(fv, sizeof fv, "%s (%s, %zu tensors, ok)", x->ix->sh[i].file, tc_ckpt_format(s), tc_ckpt_ntensors(s));
    if ((rc = tc_ckpt_add_fact(c, fk, fv, d)))
        return rc;
    for (size_t g = 0; g < tc_ckpt_nglobals(s) && !rc; g++)
        for (uint32_t n = 0; n < tc_ckpt_global(s, g)->count && !rc; n++)
            rc = tc_ckpt_add_global(c, tc_ckpt_global(s, g)->name, d);
    return rc;
}

static int open_ix(tc_ckpt *c, tc_diag *d)
{
    bool st = probe_st(&(tc_probe){.path = tc_ckpt_path(c)});
    const tc_format *f = st ? &tc_format_safetensors_index : &tc_format_torch_index;
    if (!tc_ckpt_opener(c))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "an index opened with no way to open the shards it lists");
    ipriv *x = calloc(1, sizeof *x);
    if (!x)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    x->open_k = -1;
    x->opener = tc_ckpt_opener(c);
    tc_ckpt_set_driver(c, f, x, ipriv_free);
    int rc = tc_index_open(&x->ix, tc_ckpt_path(c), tc_ckpt_limits(c), d);
    if (rc)
        return rc;
    const tc_index *ix = x->ix;
    if ((rc = tc_index_check_shards(ix, d)))
        return rc;
    char v[64];
    snprintf(v, sizeof v, "%zu", ix->nsh);
    if ((rc = tc_ckpt_add_fact(c, "shards", v, d)))
        return rc;
    uint64_t total = 0;
    for (size_t i = 0; i < ix->nsh; i++) {
        tc_ckpt *s;
        if ((rc = tc_index_open_shard_by(ix, i, x->opener, tc_ckpt_limits(c), &s, d)))
            return rc;
        rc = take_shard(c, x, i, s, &total, d);
        tc_ckpt_close(s);
        if (rc)
            return rc;
    }
    tc_ckpt_sort_globals(c);
    if (ix->has_total_size && ix->total_size != total) {
        snprintf(v, sizeof v, "%" PRIu64 " (tensors hold %" PRIu64 ")", ix->total_size, total);
        rc = tc_ckpt_add_fact(c, "total_size_mismatch", v, d);
    }
    for (size_t i = 0; i < ix->nmeta && !rc; i++)
        rc = tc_ckpt_add_meta(c, ix->meta[i].key, ix->meta[i].value, d);
    return rc;
}

/* A reader of a shard's storage; the shard stays open until its last reader closes. */
typedef struct ird {
    tc_rd inner;
    ipriv *x;
    tc_ckpt *own;         /* a shard opened for this reader alone, or NULL */
} ird;

static int ird_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    ird *s = r->state;
    return tc_rd_read(&s->inner, buf, n, got, d);
}

static void ird_close(tc_rd *r)
{
    ird *s = r->state;
    tc_rd_close(&s->inner);
    if (s->own)
        tc_ckpt_close(s->own);
    else
        s->x->readers--;
    free(s);
    r->state = NULL;
}

static int open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    ipriv *x = tc_ckpt_priv(c);
    const tc_storage *st = tc_ckpt_storage(c, i);
    ird *s = calloc(1, sizeof *s);
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    s->x = x;
    tc_ckpt *shard = x->open;
    int rc;
    if (x->open_k != st->shard) {
        if (x->readers) { /* the cached shard is in use: this reader gets its own */
            if ((rc = tc_index_open_shard_by(x->ix, (size_t)st->shard, x->opener, tc_ckpt_limits(c), &s->own, d)))
                goto fail;
            shard = s->own;
        } else {
            tc_ckpt_close(x->open);
            x->open = NULL;
            x->open_k = -1;
            if ((rc = tc_index_open_shard_by(x->ix, (size_t)st->shard, x->opener, tc_ckpt_limits(c), &x->open, d)))
                goto fail;
            x->open_k = st->shard;
            shard = x->open;
        }
    }
    if ((rc = tc_storage_open(shard, x->local[i], &s->inner, d)))
        goto fail;
    if (!s->own)
        x->readers++;
    /* a plain range stays a plain range: parallel readers use the shard's file directly */
    r->src = s->inner.src;
    r->off = s->inner.off;
    r->size = s->inner.size;
    r->read = ird_read;
    r->close = ird_close;
    r->state = s;
    return 0;
fail:
    if (s->own)
        tc_ckpt_close(s->own);
    free(s);
    return rc;
}

const tc_format tc_format_safetensors_index = {.name = "safetensors-index", .probe = probe_st, .open = open_ix,
                                               .open_storage = open_storage,
                                               .caps = TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER};
const tc_format tc_format_torch_index = {.name = "torch-index", .probe = probe_pt, .open = open_ix,
                                         .open_storage = open_storage,
                                         .caps = TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER};
