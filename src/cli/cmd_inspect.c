#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard_index.h"
#include "tensor_data.h"
#include "cli.h"

static const tc_opt opts[] = {
    {OPT_HELP, 'h', "help", NULL, "show this help", false},
    {OPT_JSON, 0, "json", NULL, "print one JSON document instead of the table", false},
    {OPT_HASH, 0, "hash", NULL, "add each tensor's SHA-256 (its elements in C order, as torch's .contiguous()); reads the data", false},
    {OPT_QUIET, 'q', "quiet", NULL, "print only errors; the exit status tells the verdict", false},
    {OPT_VERBOSE, 'v', "verbose", NULL, "also list every global and storage", false},
    TC_LIMIT_OPTS,
    {0, 0, NULL, NULL, NULL, false},
};

/* A copy of s fit for a terminal: control bytes become \n, \r, \t or \xNN. */
static const char *esc(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    for (; *s && k + 5 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7f) {
            buf[k++] = (char)c;
        } else {
            const char *e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            k += (size_t)(e ? snprintf(buf + k, n - k, "%s", e) : snprintf(buf + k, n - k, "\\x%02x", c));
        }
    }
    buf[k] = 0;
    return buf;
}

/* ---- short descriptions of non-tensor objects ------------------------------- */

typedef struct sbuf {
    char b[160];
    size_t n;
} sbuf;

static void sput(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sput(sbuf *s, const char *fmt, ...)
{
    if (s->n >= sizeof s->b - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->b + s->n, sizeof s->b - s->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        s->n += (size_t)k;
    if (s->n >= sizeof s->b - 1) {
        s->n = sizeof s->b - 1;
        memcpy(s->b + sizeof s->b - 4, "...", 4);
    }
}

static void describe(const tc_ckpt *c, const pk_obj *o, sbuf *s, int depth);

static void describe_items(const tc_ckpt *c, pk_obj *const *it, size_t n, bool dict, sbuf *s, int depth)
{
    for (size_t i = 0; i < n; i += dict ? 2 : 1) {
        if (i)
            sput(s, ", ");
        if (s->n > 120) {
            sput(s, "...");
            return;
        }
        if (dict) {
            describe(c, it[i], s, depth + 1);
            sput(s, ": ");
            describe(c, it[i + 1], s, depth + 1);
        } else {
            describe(c, it[i], s, depth + 1);
        }
    }
}

static void describe(const tc_ckpt *c, const pk_obj *o, sbuf *s, int depth)
{
    if (o->memo && o->memo <= c->nt) {
        const tc_tensor *t = &c->t[o->memo - 1];
        sput(s, "tensor %s[", tc_dtype_name(t->dtype));
        for (int i = 0; i < t->ndim; i++)
            sput(s, "%s%" PRId64, i ? "," : "", t->shape[i]);
        sput(s, "]");
        return;
    }
    switch (o->kind) {
    case PK_NONE: sput(s, "None"); break;
    case PK_BOOL: sput(s, o->i ? "True" : "False"); break;
    case PK_INT: sput(s, "%" PRId64, o->i); break;
    case PK_BIGINT: sput(s, "<%zu-byte int>", o->len); break;
    case PK_FLOAT: sput(s, "%g", o->f); break;
    case PK_STR: {
        char e[200];
        sput(s, "'%.40s%s'", esc(o->s, e, sizeof e), o->len > 40 ? "..." : "");
        break;
    }
    case PK_BYTES:
    case PK_BYTEARRAY: sput(s, "<%zu bytes>", o->len); break;
    case PK_GLOBAL: {
        char e1[200], e2[200];
        sput(s, "%s.%s", esc(o->s, e1, sizeof e1), esc(o->name, e2, sizeof e2));
        break;
    }
    case PK_PERSID: sput(s, "<storage>"); break;
    case PK_DICT:
        if (depth >= 2 && o->n) {
            sput(s, "{%zu items}", o->n / 2);
            break;
        }
        sput(s, "{");
        describe_items(c, o->items, o->n, true, s, depth);
        sput(s, "}");
        break;
    case PK_LIST:
    case PK_TUPLE:
    case PK_SET:
    case PK_FROZENSET: {
        const char *br = o->kind == PK_LIST ? "[]" : o->kind == PK_TUPLE ? "()" : "{}";
        if (depth >= 2 && o->n) {
            sput(s, "%c%zu items%c", br[0], o->n, br[1]);
            break;
        }
        sput(s, "%c", br[0]);
        describe_items(c, o->items, o->n, false, s, depth);
        sput(s, "%c", br[1]);
        break;
    }
    case PK_CALL: {
        const pk_obj *f = pk_call_global(o);
        if (f && !strcmp(f->s, "collections") && !strcmp(f->name, "OrderedDict") && !o->n) {
            sput(s, "OrderedDict()");
            break;
        }
        char e[200];
        sput(s, "%s", f ? esc(f->name, e, sizeof e) : "<call>");
        if (o->items_kind) {
            sput(s, o->items_kind == PK_ITEMS_DICT ? "{" : "[");
            if (depth >= 2)
                sput(s, "%zu items", o->items_kind == PK_ITEMS_DICT ? o->n / 2 : o->n);
            else
                describe_items(c, o->items, o->n, o->items_kind == PK_ITEMS_DICT, s, depth);
            sput(s, o->items_kind == PK_ITEMS_DICT ? "}" : "]");
        } else {
            sput(s, "(...)");
        }
        break;
    }
    default: sput(s, "?"); break;
    }
}

/* Count tensors whose name starts with prefix + "." (or equals it). */
static size_t tensors_under(const tc_ckpt *c, const char *prefix)
{
    size_t n = 0, l = strlen(prefix);
    for (size_t i = 0; i < c->nt; i++)
        if (!strncmp(c->t[i].name, prefix, l) && (c->t[i].name[l] == '.' || !c->t[i].name[l]))
            n++;
    return n;
}

/* The key/value items of a dict or dict-like object, or NULL. */
static pk_obj *const *kv_items(const pk_obj *o, size_t *n)
{
    if (o->kind == PK_DICT || (o->kind == PK_CALL && o->items_kind == PK_ITEMS_DICT)) {
        *n = o->n;
        return o->items;
    }
    if (o->kind == PK_CALL && o->state && o->state->kind == PK_DICT && !o->memo) {
        *n = o->state->n;
        return o->state->items;
    }
    *n = 0;
    return NULL;
}

static void content_line(const char *name, const char *text, cJSON *json, bool *header)
{
    if (json) {
        cJSON_AddStringToObject(json, name, text);
        return;
    }
    if (!*header)
        printf("\ncontents:\n");
    *header = true;
    char e[512];
    printf("  %-24s %s\n", esc(name, e, sizeof e), text);
}

/* One line per top-level entry that is not all tensors; for an entry holding
 * many tensors (a state_dict, an optimizer), its count and then its entries
 * without tensors (param_groups, hyper-parameters), one level down. */
static void contents(const tc_ckpt *c, cJSON *json)
{
    size_t n;
    pk_obj *const *it = kv_items(c->root, &n);
    bool header = false;
    for (size_t i = 0; i + 1 < n; i += 2) {
        if (it[i]->kind != PK_STR || it[i + 1]->memo)
            continue;
        size_t k = tensors_under(c, it[i]->s), m;
        sbuf s = {.n = 0};
        pk_obj *const *sub = kv_items(it[i + 1], &m);
        if (k > 8 || (k && sub)) {
            sput(&s, "<%zu tensors>", k);
            content_line(it[i]->s, s.b, json, &header);
            for (size_t j = 0; sub && j + 1 < m; j += 2) {
                char name[512];
                if (sub[j]->kind != PK_STR || sub[j + 1]->memo)
                    continue;
                snprintf(name, sizeof name, "%s.%s", it[i]->s, sub[j]->s);
                if (tensors_under(c, name))
                    continue;
                sbuf t = {.n = 0};
                describe(c, sub[j + 1], &t, 0);
                content_line(name, t.b, json, &header);
            }
            continue;
        }
        describe(c, it[i + 1], &s, 0);
        content_line(it[i]->s, s.b, json, &header);
    }
}

/* ---- tables ---------------------------------------------------------------- */

static const char *device_of(const tc_ckpt *c, const tc_tensor *t)
{
    return t->storage >= 0 ? c->s[t->storage].location : t->device;
}

typedef struct agg {
    char key[64];
    uint64_t bytes;
    size_t count;
} agg;

static void agg_add(agg *a, size_t *n, size_t cap, const char *key, uint64_t bytes)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(a[i].key, key)) {
            a[i].bytes += bytes;
            a[i].count++;
            return;
        }
    if (*n < cap) {
        snprintf(a[*n].key, sizeof a[*n].key, "%s", key);
        a[*n].bytes = bytes;
        a[*n].count = 1;
        (*n)++;
    }
}


/* The name of the first tensor before i on the same storage, or NULL. */
static const char *shares_with(const tc_ckpt *c, size_t i)
{
    const tc_tensor *t = &c->t[i];
    if (t->storage < 0 || c->s[t->storage].ntensors < 2)
        return NULL;
    for (size_t k = 0; k < i; k++)
        if (c->t[k].storage == t->storage)
            return c->t[k].name;
    return NULL;
}

static bool want_hash;

/* SHA-256 of tensor i, or NULL after printing why not. */
static const char *tensor_hash(const tc_ckpt *c, size_t i, char hex[65])
{
    tc_diag d = {0};
    if (c->t[i].storage < 0)
        return NULL;
    if (tc_tensor_sha256(c, &c->t[i], hex, &d)) {
        tc_err(c->path, "%s", d.msg);
        return NULL;
    }
    return hex;
}

static void print_text(const tc_ckpt *c)
{
    char e1[1024], e2[1024];
    printf("%s: %s", esc(c->path, e1, sizeof e1), tc_ckpt_format(c));
    for (size_t i = 0; i < c->nfacts; i++)
        printf(", %s %s", esc(c->facts[i].key, e1, sizeof e1), esc(c->facts[i].value, e2, sizeof e2));
    printf("\n\n");
    size_t w = 4;
    for (size_t i = 0; i < c->nt; i++)
        if (strlen(c->t[i].name) > w)
            w = strlen(c->t[i].name);
    if (w > 60)
        w = 60;
    printf("%-*s  %-9s %-18s %-8s %10s  %s\n", (int)w, "name", "dtype", "shape", "device", "bytes", "notes");
    agg dev[64], dt[64];
    size_t ndev = 0, ndt = 0, nparam = 0;
    uint64_t pnumel = 0;
    for (size_t i = 0; i < c->nt; i++) {
        const tc_tensor *t = &c->t[i];
        char shape[64] = "[";
        size_t sl = 1;
        for (int k = 0; k < t->ndim && sl < sizeof shape - 8; k++)
            sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%" PRId64, k ? ", " : "", t->shape[k]);
        snprintf(shape + sl, sizeof shape - sl, "]");
        char notes[256] = "";
        size_t nl = 0;
        if (t->parameter)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "param ");
        if (t->alias_of >= 0)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "same tensor as %s ",
                                   esc(c->t[t->alias_of].name, e1, sizeof e1));
        else if (shares_with(c, i))
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "shares storage with %s ",
                                   esc(shares_with(c, i), e1, sizeof e1));
        if (t->kind == TC_TENSOR_QUANT)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "quantized ");
        if (t->kind == TC_TENSOR_META)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "no data ");
        if (t->kind == TC_TENSOR_OTHER)
            nl += (size_t)snprintf(notes + nl, sizeof notes - nl, "tensor subclass (not rewritten) ");
        if (tc_index_shard_of(c, t))
            snprintf(notes + nl, sizeof notes - nl, "in %s ", esc(tc_index_shard_of(c, t), e2, sizeof e2));
        char hex[65];
        const char *h = want_hash ? tensor_hash(c, i, hex) : NULL;
        printf("%-*s  %-9s %-18s %-8s %10" PRIu64 "  %s%s\n", (int)w, esc(t->name, e1, sizeof e1),
               tc_dtype_name(t->dtype), shape, esc(device_of(c, t), e2, sizeof e2), t->nbytes, notes, h ? h : "");
        if (t->alias_of < 0) {
            if (t->parameter) {
                nparam++;
                pnumel += t->numel;
            }
        }
    }
    for (size_t i = 0; i < c->ns; i++) {
        agg_add(dev, &ndev, 64, c->s[i].location, c->s[i].nbytes);
        agg_add(dt, &ndt, 64, tc_dtype_name(c->s[i].untyped ? TC_DT_U8 : c->s[i].dtype), c->s[i].nbytes);
    }
    uint64_t total = 0;
    for (size_t i = 0; i < c->ns; i++)
        total += c->s[i].nbytes;
    char h[32];
    tc_human_bytes(total, h, sizeof h);
    printf("\n%zu tensors on %zu storages, %s of tensor data", c->nt, c->ns, h);
    if (nparam)
        printf("; %zu nn.Parameter objects with %" PRIu64 " elements", nparam, pnumel);
    printf("\nbytes per device:");
    for (size_t i = 0; i < ndev; i++) {
        tc_human_bytes(dev[i].bytes, h, sizeof h);
        printf("  %s %s (%zu storages)", esc(dev[i].key, e1, sizeof e1), h, dev[i].count);
    }
    printf("\nbytes per dtype: ");
    for (size_t i = 0; i < ndt; i++) {
        tc_human_bytes(dt[i].bytes, h, sizeof h);
        printf("  %s %s", dt[i].key, h);
    }
    printf("\n");
    if (c->nmeta) {
        printf("\nmetadata:\n");
        for (size_t i = 0; i < c->nmeta; i++)
            printf("  %-24s %s\n", esc(c->meta[i].key, e1, sizeof e1), esc(c->meta[i].value, e2, sizeof e2));
    }
    if (c->root)
        contents(c, NULL);
    bool cuda = false;
    for (size_t i = 0; i < ndev; i++)
        cuda |= !strncmp(dev[i].key, "cuda", 4);
    if (ndev > 1)
        printf("\nwarning: storages are on %zu different devices; loading gives tensors on mixed devices "
               "(device-mismatch errors in the model). 'tensorctl to-cpu' or 'to-cuda' puts them on one.\n",
               ndev);
    if (cuda)
        printf("\nnote: CUDA-tagged storages: torch.load fails on a machine without CUDA (or with fewer GPUs) "
               "unless given map_location; 'tensorctl to-cpu' writes a file that loads anywhere.\n");
    size_t nunsafe = 0;
    for (size_t i = 0; i < c->ngl; i++)
        nunsafe += !c->gl[i].allowed;
    printf("\nsafety: %zu globals, %zu outside torch's weights_only allowlist", c->ngl, nunsafe);
    printf("%s\n", tc_ckpt_has_dangerous(c) ? ", DANGEROUS ones present:" : "");
    for (size_t i = 0; i < c->ngl; i++)
        if (!c->gl[i].allowed || tc_verbosity > 1)
            printf("  %-10s %s\n", c->gl[i].dangerous ? "DANGEROUS" : c->gl[i].allowed ? "ok" : "unsafe",
                   esc(c->gl[i].name, e1, sizeof e1));
    if (tc_ckpt_has_dangerous(c))
        printf("This file runs code when loaded with torch.load(weights_only=False) or pickle; tensorctl never "
               "executes it.\n");
}

static cJSON *int_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void print_json(const tc_ckpt *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "file", c->path);
    cJSON_AddStringToObject(j, "format", tc_ckpt_format(c));
    cJSON *facts = cJSON_AddObjectToObject(j, "records");
    for (size_t i = 0; i < c->nfacts; i++)
        cJSON_AddStringToObject(facts, c->facts[i].key, c->facts[i].value);
    cJSON *ts = cJSON_AddArrayToObject(j, "tensors");
    for (size_t i = 0; i < c->nt; i++) {
        const tc_tensor *t = &c->t[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", tc_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", int_array(t->shape, t->ndim));
        cJSON_AddItemToObject(o, "stride", int_array(t->stride, t->ndim));
        cJSON_AddNumberToObject(o, "storage_offset", (double)t->offset);
        cJSON_AddStringToObject(o, "device", device_of(c, t));
        if (t->storage >= 0)
            cJSON_AddStringToObject(o, "storage", c->s[t->storage].key);
        else
            cJSON_AddNullToObject(o, "storage");
        cJSON_AddNumberToObject(o, "nbytes", (double)t->nbytes);
        cJSON_AddBoolToObject(o, "parameter", t->parameter);
        cJSON_AddBoolToObject(o, "requires_grad", t->requires_grad);
        static const char *const kinds[] = {"dense", "quantized", "meta", "other"};
        cJSON_AddStringToObject(o, "kind", kinds[t->kind]);
        if (t->alias_of >= 0)
            cJSON_AddStringToObject(o, "same_as", c->t[t->alias_of].name);
        if (tc_index_shard_of(c, t))
            cJSON_AddStringToObject(o, "shard", tc_index_shard_of(c, t));
        char hex[65];
        if (want_hash && tensor_hash(c, i, hex))
            cJSON_AddStringToObject(o, "sha256", hex);
        cJSON_AddItemToArray(ts, o);
    }
    cJSON *ss = cJSON_AddArrayToObject(j, "storages");
    for (size_t i = 0; i < c->ns; i++) {
        const tc_storage *s = &c->s[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", s->key);
        cJSON_AddStringToObject(o, "device", s->location);
        cJSON_AddStringToObject(o, "dtype", s->untyped ? "untyped" : tc_dtype_name(s->dtype));
        cJSON_AddNumberToObject(o, "nbytes", (double)s->nbytes);
        cJSON *names = cJSON_AddArrayToObject(o, "tensors");
        for (size_t k = 0; k < c->nt; k++)
            if (c->t[k].storage == (long)i)
                cJSON_AddItemToArray(names, cJSON_CreateString(c->t[k].name));
        cJSON_AddItemToArray(ss, o);
    }
    cJSON *gl = cJSON_AddArrayToObject(j, "globals"), *ug = cJSON_AddArrayToObject(j, "unsafe_globals"),
          *dg = cJSON_AddArrayToObject(j, "dangerous_globals");
    for (size_t i = 0; i < c->ngl; i++) {
        cJSON_AddItemToArray(gl, cJSON_CreateString(c->gl[i].name));
        if (!c->gl[i].allowed)
            cJSON_AddItemToArray(ug, cJSON_CreateString(c->gl[i].name));
        if (c->gl[i].dangerous)
            cJSON_AddItemToArray(dg, cJSON_CreateString(c->gl[i].name));
    }
    if (c->nmeta || !c->root) {
        cJSON *m = cJSON_AddObjectToObject(j, "metadata");
        for (size_t i = 0; i < c->nmeta; i++)
            cJSON_AddStringToObject(m, c->meta[i].key, c->meta[i].value);
    }
    if (c->root)
        contents(c, cJSON_AddObjectToObject(j, "contents"));
    char *s = cJSON_Print(j);
    if (s)
        puts(s);
    free(s);
    cJSON_Delete(j);
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    int ex = TC_EXIT_OK;
    tc_limits lim;
    if (a.npos < 1) {
        tc_err(NULL, "inspect: no FILE given (see 'tensorctl inspect --help')");
        ex = TC_EXIT_USAGE;
        goto out;
    }
    if (tc_limits_from_args(&a, &lim)) {
        ex = TC_EXIT_USAGE;
        goto out;
    }
    want_hash = a.set[OPT_HASH];
    for (int i = 0; i < a.npos; i++) {
        tc_ckpt *c;
        tc_diag d = {0};
        int rc = tc_ckpt_open(&c, a.pos[i], &lim, &d);
        if (rc) {
            tc_err(a.pos[i], "%s", d.msg);
            if (ex == TC_EXIT_OK || tc_exit_for(rc) > ex)
                ex = tc_exit_for(rc);
            continue;
        }
        if (a.set[OPT_JSON])
            print_json(c);
        else if (tc_verbosity > 0)
            print_text(c);
        if (tc_ckpt_has_dangerous(c)) {
            for (size_t g = 0; g < c->ngl; g++)
                if (c->gl[g].dangerous)
                    tc_err(a.pos[i], "DANGEROUS global %s: loading this file with pickle would run it", c->gl[g].name);
            ex = TC_EXIT_UNSAFE;
        }
        tc_ckpt_close(c);
    }
out:
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_inspect = {
    "inspect", "inspect [options] FILE...",
    "List every tensor of a checkpoint (name, dtype, shape, saved device, bytes), the sharing between\n"
    "them, a summary per device and dtype, the non-tensor contents, and every Python global the file\n"
    "names with a safety verdict. Reads metadata only; never executes anything in the file.",
    opts, run};
