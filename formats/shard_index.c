/* Sharded checkpoints: an index JSON ({"metadata": {...}, "weight_map":
 * {name: shard file}}) beside its shards. As a format it lists the whole
 * model, opening and checking one shard at a time; tensor data stays in the
 * shards (the storages here are not readable: convert reads the shards). */
#include "format.h"
#include "shard_index.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INDEX (256u << 20)

bool tc_index_path(const char *path)
{
    size_t l = path ? strlen(path) : 0;
    return l > 11 && !strcmp(path + l - 11, ".index.json");
}

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
    free(ix->path);
    free(ix);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tc_index_entry *)a)->name, ((const tc_index_entry *)b)->name);
}

static int add_shard(tc_index *ix, const char *file, size_t *out, tc_diag *d)
{
    for (size_t i = 0; i < ix->nsh; i++)
        if (!strcmp(ix->sh[i].file, file)) {
            *out = i;
            return 0;
        }
    if (!*file || file[0] == '/' || strstr(file, "..") || strchr(file, '\\'))
        return tc_fail(d, TC_ERR_FORMAT, "weight_map names shard '%s', which is not a file beside the index", file);
    tc_shard *s = realloc(ix->sh, (ix->nsh + 1) * sizeof *s);
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    ix->sh = s;
    const char *slash = strrchr(ix->path, '/');
    size_t dl = slash ? (size_t)(slash - ix->path + 1) : 0;
    size_t n = dl + strlen(file) + 1;
    s[ix->nsh].file = strdup(file);
    s[ix->nsh].path = malloc(n);
    s[ix->nsh].ntensors = 0;
    if (!s[ix->nsh].file || !s[ix->nsh].path) {
        free(s[ix->nsh].file);
        free(s[ix->nsh].path);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    snprintf(s[ix->nsh].path, n, "%.*s%s", (int)dl, ix->path, file);
    *out = ix->nsh++;
    return 0;
}

int tc_index_open(tc_index **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_src src;
    int rc = tc_src_open_file(&src, path, d);
    if (rc)
        return rc;
    tc_index *ix = calloc(1, sizeof *ix);
    char *buf = NULL;
    cJSON *j = NULL;
    if (!ix || !(ix->path = strdup(path))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (src.size > MAX_INDEX) {
        rc = tc_fail(d, TC_ERR_LIMIT, "index is %" PRIu64 " bytes, over the limit of %u", src.size, MAX_INDEX);
        goto done;
    }
    if (!(buf = malloc((size_t)src.size + 1))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_src_read(&src, 0, buf, (size_t)src.size, "index", d)))
        goto done;
    buf[src.size] = 0;
    if (!(j = cJSON_ParseWithLength(buf, (size_t)src.size))) {
        const char *ep = cJSON_GetErrorPtr();
        rc = tc_fail(d, TC_ERR_FORMAT, "index is not valid JSON: error at byte %zu",
                     ep && ep >= buf ? (size_t)(ep - buf) : 0);
        goto done;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    if (!cJSON_IsObject(wm)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "index has no \"weight_map\" object (not a shard index?)");
        goto done;
    }
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
        tc_kv *kv = realloc(ix->meta, (ix->nmeta + 1) * sizeof *kv);
        if (kv)
            ix->meta = kv;
        if (!kv || !v || !(kv[ix->nmeta].key = strdup(m->string)) || !(kv[ix->nmeta].value = strdup(v))) {
            if (kv && v && kv[ix->nmeta].key)
                free(kv[ix->nmeta].key);
            free(printed);
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        ix->nmeta++;
        free(printed);
    }
    size_t n = (size_t)cJSON_GetArraySize(wm);
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
        ix->e[ix->n++].shard = si;
        ix->sh[si].ntensors++;
    }
    tc_index_entry *sorted = malloc((ix->n + 1) * sizeof *sorted);
    if (!sorted) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    memcpy(sorted, ix->e, ix->n * sizeof *sorted);
    qsort(sorted, ix->n, sizeof *sorted, cmp_entry);
    for (size_t i = 1; i < ix->n && !rc; i++)
        if (!strcmp(sorted[i].name, sorted[i - 1].name))
            rc = tc_fail(d, TC_ERR_FORMAT, "weight_map names tensor '%s' twice", sorted[i].name);
    free(sorted);
done:
    cJSON_Delete(j);
    free(buf);
    tc_src_close(&src);
    if (rc)
        tc_index_free(ix);
    else
        *out = ix;
    return rc;
}

int tc_index_open_shard(const tc_index *ix, size_t i, const tc_limits *lim, tc_ckpt **out, tc_diag *d)
{
    *out = NULL;
    const tc_shard *sh = &ix->sh[i];
    tc_ckpt *c;
    int rc = tc_ckpt_open(&c, sh->path, lim, d);
    if (rc) {
        char msg[sizeof d->msg];
        snprintf(msg, sizeof msg, "%s", d->msg);
        tc_diag_clear(d);
        return tc_fail(d, rc, "shard %s: %s", sh->file, msg);
    }
    /* exactly the names the index gives this shard */
    for (size_t k = 0; k < ix->n; k++) {
        if (ix->e[k].shard != i)
            continue;
        bool found = false;
        for (size_t t = 0; t < c->nt && !found; t++)
            found = !strcmp(c->t[t].name, ix->e[k].name);
        if (!found) {
            tc_ckpt_close(c);
            return tc_fail(d, TC_ERR_FORMAT, "shard %s: the index maps tensor '%s' to it, but it is not there",
                           sh->file, ix->e[k].name);
        }
    }
    for (size_t t = 0; t < c->nt; t++) {
        long at = -1;
        for (size_t k = 0; k < ix->n && at < 0; k++)
            if (!strcmp(c->t[t].name, ix->e[k].name))
                at = (long)k;
        if (at < 0 || ix->e[at].shard != i) {
            const char *name = c->t[t].name;
            char msg[600];
            if (at < 0)
                snprintf(msg, sizeof msg, "shard %s holds tensor '%s', which the index does not list", sh->file, name);
            else
                snprintf(msg, sizeof msg, "shard %s holds tensor '%s', which the index puts in %s", sh->file, name,
                         ix->sh[ix->e[at].shard].file);
            tc_ckpt_close(c);
            return tc_fail(d, TC_ERR_FORMAT, "%s", msg);
        }
    }
    *out = c;
    return 0;
}

/* ---- as a format: the whole model, one shard at a time --------------------------- */

static bool probe_st(const uint8_t *h, size_t n, const char *path)
{
    (void)h;
    (void)n;
    size_t l = path ? strlen(path) : 0;
    return l > 23 && !strcmp(path + l - 23, ".safetensors.index.json");
}

static bool probe_pt(const uint8_t *h, size_t n, const char *path)
{
    (void)h;
    (void)n;
    return tc_index_path(path) && !probe_st(h, n, path);
}

static int open_ix(tc_ckpt *c, tc_diag *d)
{
    tc_index *ix;
    int rc = tc_index_open(&ix, c->path, &c->lim, d);
    if (rc)
        return rc;
    char v[64];
    snprintf(v, sizeof v, "%zu", ix->nsh);
    if ((rc = tc_ckpt_add_fact(c, "shards", v, d)))
        goto done;
    uint64_t total = 0;
    for (size_t i = 0; i < ix->nsh && !rc; i++) {
        tc_ckpt *s;
        if ((rc = tc_index_open_shard(ix, i, &c->lim, &s, d)))
            break;
        long base = (long)c->ns;
        for (size_t k = 0; k < s->ns && !rc; k++) {
            char key[1200];
            snprintf(key, sizeof key, "%s:%s", ix->sh[i].file, s->s[k].key);
            long si = tc_ckpt_new_storage(c, key, d);
            if (si < 0) {
                rc = d->code;
                break;
            }
            tc_storage *st = &c->s[si];
            if (!(st->location = strdup(s->s[k].location)))
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            st->dtype = s->s[k].dtype;
            st->untyped = s->s[k].untyped;
            st->numel = s->s[k].numel;
            st->nbytes = s->s[k].nbytes;
            st->ntensors = s->s[k].ntensors;
            total += st->nbytes;
        }
        for (size_t k = 0; k < s->nt && !rc; k++) {
            tc_tensor *t = tc_ckpt_new_tensor(c, s->t[k].name, d);
            if (!t) {
                rc = d->code;
                break;
            }
            char *name = t->name;
            *t = s->t[k];
            t->name = name;
            t->node = t->param = NULL;
            if (t->storage >= 0)
                t->storage += base;
            if (t->alias_of >= 0)
                t->alias_of += (long)(c->nt - 1 - k);
        }
        char fk[32];
        snprintf(fk, sizeof fk, "shard%zu", i + 1);
        snprintf(v, sizeof v, "%zu tensors", s->nt);
        char fv[1200];
        snprintf(fv, sizeof fv, "%s (%s, %s, ok)", ix->sh[i].file, tc_ckpt_format(s), v);
        if (!rc)
            rc = tc_ckpt_add_fact(c, fk, fv, d);
        tc_ckpt_close(s);
    }
    if (!rc && ix->has_total_size && ix->total_size != total) {
        snprintf(v, sizeof v, "%" PRIu64 " (tensors hold %" PRIu64 ")", ix->total_size, total);
        rc = tc_ckpt_add_fact(c, "total_size_mismatch", v, d);
    }
    for (size_t i = 0; i < ix->nmeta && !rc; i++) {
        tc_kv *m = realloc(c->meta, (c->nmeta + 1) * sizeof *m);
        if (!m) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        c->meta = m;
        m[c->nmeta].key = strdup(ix->meta[i].key);
        m[c->nmeta].value = strdup(ix->meta[i].value);
        c->nmeta++;
        if (!m[c->nmeta - 1].key || !m[c->nmeta - 1].value)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
done:
    tc_index_free(ix);
    return rc;
}

const char *tc_index_shard_of(const tc_ckpt *c, const tc_tensor *t)
{
    static char buf[1024];
    if (!c->fmt || strcmp(c->fmt->name + strlen(c->fmt->name) - 6, "-index") || t->storage < 0)
        return NULL;
    const char *key = c->s[t->storage].key, *colon = strchr(key, ':');
    snprintf(buf, sizeof buf, "%.*s", colon ? (int)(colon - key) : 0, key);
    return buf;
}

const tc_format tc_format_shard_index = {"safetensors-index", probe_st, open_ix};
const tc_format tc_format_torch_index = {"torch-index", probe_pt, open_ix};
