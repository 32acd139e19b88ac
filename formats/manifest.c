#include "manifest.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_file.h"
#include "shard_index.h"

bool tc_manifest_probe(const char *path)
{
    if (tc_index_path(path))
        return false;
    tc_src src = {.fd = -1};
    tc_diag d = TC_DIAG_INIT;
    if (tc_src_open_file(&src, path, &d))
        return false;
    char head[256];
    size_t n = src.size < sizeof head ? (size_t)src.size : sizeof head;
    bool yes = false;
    if (!tc_src_read(&src, 0, head, n, "header", &d))
        for (size_t i = 0; i < n; i++) {
            if (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')
                continue;
            yes = head[i] == '{';
            break;
        }
    tc_src_close(&src);
    return yes;
}

void tc_manifest_free(tc_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].name);
        free(m->e[i].device);
    }
    free(m->e);
    tc_strmap_free(&m->names);
    free(m->path);
    free(m->file);
    free(m->format);
    free(m);
}

/* A whole number in [0, 2^53) (larger ones lose digits in a double). */
static bool whole(const cJSON *x, int64_t *out)
{
    if (!cJSON_IsNumber(x))
        return false;
    double f = x->valuedouble;
    if (!(f >= 0) || f >= 9007199254740992.0 || f != (double)(int64_t)f)
        return false;
    *out = (int64_t)f;
    return true;
}

/* A list of at most TC_MAX_DIMS whole numbers into v; its length, or -1. */
static int dims(const cJSON *a, int64_t *v)
{
    if (!cJSON_IsArray(a))
        return -1;
    int n = 0;
    for (const cJSON *x = a->child; x; x = x->next)
        if (n == TC_MAX_DIMS || !whole(x, &v[n++]))
            return -1;
    return n;
}

static char *str_or_null(const cJSON *j, const char *key, bool *oom)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    char *s = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    if (cJSON_IsString(v) && !s)
        *oom = true;
    return s;
}

static int entry(tc_manifest_entry *e, const cJSON *o, size_t i, tc_diag *d)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name))
        return tc_fail(d, TC_ERR_FORMAT, "tensors[%zu] has no \"name\" (not a manifest from inspect --json?)", i);
    if (!(e->name = strdup(name->valuestring)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
    if (!cJSON_IsString(dt) || (e->dtype = tc_dtype_from_name(dt->valuestring)) == TC_DT_INVALID)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': \"dtype\" is not a dtype tensorctl knows", e->name);
    if ((e->ndim = dims(cJSON_GetObjectItemCaseSensitive(o, "shape"), e->shape)) < 0)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': \"shape\" is not a list of whole numbers", e->name);
    e->numel = 1;
    for (int k = 0; k < e->ndim; k++)
        e->numel = e->shape[k] && e->numel > UINT64_MAX / (uint64_t)e->shape[k] ? UINT64_MAX
                                                                                 : e->numel * (uint64_t)e->shape[k];
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stride"), *off = cJSON_GetObjectItemCaseSensitive(o, "storage_offset");
    if (st || off) {
        if (dims(st, e->stride) != e->ndim || !whole(off, &e->offset))
            return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': \"stride\" or \"storage_offset\" malformed", e->name);
        e->has_stride = true;
    }
    const cJSON *storage = cJSON_GetObjectItemCaseSensitive(o, "storage"), *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    e->has_data = !cJSON_IsNull(storage) && !(cJSON_IsString(kind) && !strcmp(kind->valuestring, "meta"));
    bool oom = false;
    e->device = str_or_null(o, "device", &oom);
    if (oom)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(o, "sha256");
    if (sha && !cJSON_IsNull(sha)) {
        const char *h = cJSON_IsString(sha) ? sha->valuestring : "";
        bool ok = strlen(h) == 64;
        for (size_t k = 0; ok && k < 64; k++)
            ok = (h[k] >= '0' && h[k] <= '9') || (h[k] >= 'a' && h[k] <= 'f') || (h[k] >= 'A' && h[k] <= 'F');
        if (!ok)
            return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': \"sha256\" is not 64 hex digits", e->name);
        for (size_t k = 0; k < 64; k++)
            e->sha256[k] = (char)(h[k] >= 'A' && h[k] <= 'F' ? h[k] - 'A' + 'a' : h[k]);
        e->has_sha = true;
    }
    return 0;
}

int tc_manifest_open(tc_manifest **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_manifest *m = calloc(1, sizeof *m);
    cJSON *j = NULL;
    int rc = 0;
    static const tc_json_file_msgs msgs = {
        "manifest", "--max-header-size", "not a checkpoint, and not a valid JSON manifest: error at byte %zu"};
    if (!m || !(m->path = strdup(path))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_json_file_read(path, lim->max_header, &msgs, &j, d)))
        goto done;
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    if (!cJSON_IsArray(ts)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "JSON without a \"tensors\" list: not a manifest from 'tensorctl inspect --json'");
        goto done;
    }
    bool oom = false;
    m->file = str_or_null(j, "file", &oom);
    m->format = str_or_null(j, "format", &oom);
    size_t n = (size_t)cJSON_GetArraySize(ts);
    if (n > lim->max_entries) {
        rc = tc_fail(d, TC_ERR_LIMIT, "manifest lists %zu tensors, over the limit of %" PRIu64
                     " (raise with --max-entries)", n, lim->max_entries);
        goto done;
    }
    if (oom || !(m->e = calloc(n + 1, sizeof *m->e))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t i = 0;
    for (const cJSON *o = ts->child; o && !rc; o = o->next, i++) {
        m->n = i + 1;
        if ((rc = entry(&m->e[i], o, i, d)))
            break;
        size_t old;
        int put = tc_strmap_put(&m->names, m->e[i].name, i, &old);
        if (put < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else if (put == 0)
            rc = tc_fail(d, TC_ERR_FORMAT, "tensor '%s' is listed twice", m->e[i].name);
    }
done:
    cJSON_Delete(j);
    if (rc) {
        tc_diag_subject(d, path);
        tc_manifest_free(m);
        return rc;
    }
    *out = m;
    return 0;
}
