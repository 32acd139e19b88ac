#include "convert.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "rekey.h"
#include "step.h"
#include "rewrite.h"
#include "stream.h"
#include "vec.h"

void tc_convert_report_free(tc_convert_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->ndropped; i++)
        free(r->dropped[i]);
    free(r->dropped);
    memset(r, 0, sizeof *r);
}

int tc_convert_drop(tc_convert_report *r, tc_diag *d, const char *fmt, ...)
{
    tc_buf b = TC_BUF_INIT(0);
    va_list ap;
    va_start(ap, fmt);
    tc_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    char *text = tc_buf_take(&b);
    if (!text || tc_grow(&r->dropped, &r->dropcap, r->ndropped + 1, sizeof *r->dropped)) {
        free(text);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    r->dropped[r->ndropped++] = text;
    return 0;
}

/* Tensors whose name is prefix or starts with prefix + "." (prefix "" = all). */
static size_t count_under(const tc_ckpt *c, const char *prefix)
{
    size_t n = 0, l = strlen(prefix);
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
        const char *name = tc_ckpt_tensor(c, i)->name;
        n += !strncmp(name, prefix, l) && (!l || name[l] == '.' || !name[l]);
    }
    return n;
}

/* The entries without any tensor under the selected object (the root, or its item key) go to the report. */
static int report_entries(const tc_ckpt *c, const char *key, tc_convert_report *rep, tc_diag *d)
{
    size_t kl = key ? strlen(key) : 0;
    bool parent_ok = !key;
    for (size_t i = 0; key && i < tc_ckpt_nentries(c); i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        parent_ok |= e->depth == 1 && !e->attr && !strcmp(e->name, key);
    }
    for (size_t i = 0; parent_ok && i < tc_ckpt_nentries(c); i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        if (e->attr || e->ntensors || e->depth != (key ? 2 : 1))
            continue;
        if (key && (strncmp(e->name, key, kl) || e->name[kl] != '.'))
            continue;
        int rc = tc_convert_drop(rep, d, "%s (%s)", e->name, e->kind);
        if (rc)
            return rc;
    }
    return 0;
}

int tc_convert_key_check(const tc_ckpt *c, const tc_convert_opts *o, tc_diag *d)
{
    const char *key = o->key;
    if (!key || count_under(c, key))
        return 0;
    char ents[512];
    tc_buf b = tc_buf_fixed(ents, sizeof ents);
    for (size_t i = 0; i < tc_ckpt_nentries(c) && !tc_buf_cut(&b); i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        if (e->depth == 1 && !e->attr) {
            tc_buf_sep(&b, ", ");
            tc_buf_puts(&b, e->name);
        }
    }
    return tc_fail(d, TC_ERR_USAGE, "%s '%s': no tensors under that entry (top-level entries: %s)",
                   o->key_opt ? o->key_opt : "--key", key, tc_buf_len(&b) ? ents : "none");
}

static const char *const kinds[] = {"dense", "quantized tensor", "meta tensor without data", "tensor subclass"};

/* Whether --drop/--only-keys leave the tensor named name out. */
static bool left_out(const tc_keyops *k, const char *name)
{
    return (k->nonly && !tc_glob_any(k->only, k->nonly, name)) || tc_glob_any(k->drop, k->ndrop, name);
}

/* Why safetensors cannot hold tensor t (as dtype out), or NULL. */
static const char *cannot_hold(const tc_ckpt *c, const tc_tensor *t, const char *name, tc_dtype out,
                               uint64_t max_expand, char *why, size_t n)
{
    if (t->kind != TC_TENSOR_DENSE || t->storage < 0)
        snprintf(why, n, "is a %s, which safetensors cannot hold", kinds[t->kind]);
    else if (!tc_dtype_get(out)->st_name)
        snprintf(why, n, "is %s, which safetensors cannot hold", tc_dtype_name(out));
    else if (!strcmp(name, "__metadata__"))
        snprintf(why, n, "has the name safetensors keeps for its metadata");
    else {
        uint64_t sbytes = tc_ckpt_storage(c, (size_t)t->storage)->nbytes, limit = tc_expand_limit(sbytes, max_expand);
        uint64_t want = tc_tensor_bytes_as(t, out);
        if (want <= limit)
            return NULL;
        snprintf(why, n,
                 "is a view of %" PRIu64 " bytes of storage that writes out as %" PRIu64
                 " bytes (stride 0 or overlapping strides; --max-expand %" PRIu64 " allows more than %" PRIu64 "x)",
                 sbytes, want, want / (sbytes ? sbytes : 1) + 1, max_expand);
    }
    return why;
}

int tc_safetensors_select(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, tc_sel *sl,
                          tc_convert_report *rep, tc_diag *d)
{
    int rc;
    size_t klen = o->key ? strlen(o->key) : 0, nt = tc_ckpt_ntensors(c);
    uint64_t max_expand = o->max_expand ? o->max_expand : TC_DEFAULT_MAX_EXPAND;
    if (!o->no_entries && (rc = report_entries(c, o->key, rep, d)))
        return rc;
    for (size_t i = 0; i < nt; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        tc_sel *s = &sl[i];
        if (o->key) {
            if (strncmp(t->name, o->key, klen) || t->name[klen] != '.')
                continue;
            s->name = t->name + klen + 1;
        } else {
            s->name = t->name;
        }
        s->out = t->storage >= 0 && p->out[t->storage].cast ? p->out[t->storage].dtype : t->dtype;
        char why[256];
        bool drop = left_out(&o->keys, s->name);
        if (!drop && t->badkey)
            return tc_badkey_fail(c, t, s->name, d);
        if (drop || cannot_hold(c, t, s->name, s->out, max_expand, why, sizeof why)) {
            if (!drop)
                return tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET, "tensor '%s' %s; --drop '%s' leaves it out",
                                  s->name, why, s->name);
            rep->nleft_out++;
            continue;
        }
        s->role = TC_SEL_WRITE;
        if (t->alias_of >= 0 && sl[t->alias_of].role == TC_SEL_WRITE) {
            s->role = TC_SEL_ALIAS;
            s->of = t->alias_of;
            s->same = true;
        }
    }
    /* views sharing a storage: aliases of the one tensor covering it whole */
    long *cover = malloc((tc_ckpt_nstorages(c) + 1) * sizeof *cover);
    size_t *nshare = calloc(tc_ckpt_nstorages(c) + 1, sizeof *nshare);
    bool *mixed = calloc(tc_ckpt_nstorages(c) + 1, sizeof *mixed);
    tc_dtype *first = malloc((tc_ckpt_nstorages(c) + 1) * sizeof *first);
    if (!cover || !nshare || !mixed || !first) {
        free(cover);
        free(nshare);
        free(mixed);
        free(first);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    for (size_t s = 0; s < tc_ckpt_nstorages(c); s++)
        cover[s] = -1;
    for (size_t k = 0; k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (sl[k].role != TC_SEL_WRITE)
            continue;
        size_t s = (size_t)t->storage;
        if (nshare[s]++ == 0)
            first[s] = t->dtype;
        mixed[s] |= first[s] != t->dtype;
        if (cover[s] < 0 && t->offset == 0 && tc_tensor_contiguous(t) && t->nbytes == tc_ckpt_storage(c, s)->nbytes)
            cover[s] = (long)k;
    }
    for (size_t k = 0; k < nt; k++) {
        size_t s = (size_t)tc_ckpt_tensor(c, k)->storage;
        if (sl[k].role != TC_SEL_WRITE || nshare[s] < 2)
            continue;
        if (cover[s] >= 0 && !mixed[s]) {
            if ((long)k != cover[s]) {
                sl[k].role = TC_SEL_ALIAS;
                sl[k].of = cover[s];
            }
        } else {
            sl[k].role = TC_SEL_COPY;
        }
    }
    free(cover);
    free(nshare);
    free(mixed);
    free(first);
    for (size_t i = 0; i < nt; i++)
        rep->ncopies += sl[i].role == TC_SEL_COPY;
    return 0;
}

/* ---- key surgery -------------------------------------------------------------------- */

int tc_sel_rename(const tc_keyops *keys, tc_sel *const *sl, const size_t *n, size_t nsel, tc_keymap *km, tc_diag *d)
{
    memset(km, 0, sizeof *km);
    if (!tc_keyops_any(keys))
        return 0;
    size_t total = 0, k = 0;
    for (size_t s = 0; s < nsel; s++)
        total += n[s];
    const char **names = malloc((total + 1) * sizeof *names);
    if (!names)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < nsel; s++)
        for (size_t i = 0; i < n[s]; i++)
            if (sl[s][i].role != TC_SEL_SKIP)
                names[k++] = sl[s][i].name;
    int rc = tc_keymap_make_any(keys, names, k, km, d); /* names checked once renamed: tc_out_names_check */
    free(names);
    k = 0;
    for (size_t s = 0; s < nsel && !rc; s++)
        for (size_t i = 0; i < n[s]; i++)
            if (sl[s][i].role != TC_SEL_SKIP)
                sl[s][i].name = km->name[k++];
    return rc;
}

int tc_items_rename(const tc_keyops *keys, tc_sd_items *const *it, size_t nit, tc_keymap *km, tc_diag *d)
{
    memset(km, 0, sizeof *km);
    if (!tc_keyops_any(keys))
        return 0;
    size_t total = 0, k = 0;
    for (size_t s = 0; s < nit; s++)
        total += it[s]->n;
    const char **names = malloc((total + 1) * sizeof *names);
    if (!names)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < nit; s++)
        for (size_t i = 0; i < it[s]->n; i++)
            names[k++] = it[s]->v[i].name;
    int rc = tc_keymap_make_any(keys, names, k, km, d); /* names checked once renamed: tc_out_names_check */
    free(names);
    k = 0;
    for (size_t s = 0; s < nit && !rc; s++)
        for (size_t i = 0; i < it[s]->n; i++)
            it[s]->v[i].name = km->name[k++];
    return rc;
}

int tc_out_names_check(const tc_convert_opts *o, const tc_ckpt *const *c, tc_sel *const *sl, const size_t *nsl,
                       tc_sd_items *const *it, size_t n, tc_diag *d)
{
    size_t total = 0, k = 0, klen = o->key ? strlen(o->key) + 1 : 0;
    for (size_t s = 0; s < n; s++)
        total += sl ? nsl[s] : it[s]->n;
    tc_outname *v = malloc((total + 1) * sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < n; s++) {
        size_t m = sl ? nsl[s] : it[s]->n;
        for (size_t i = 0; i < m; i++) {
            if (sl && sl[s][i].role == TC_SEL_SKIP)
                continue;
            size_t t = sl ? i : it[s]->tensor[i];
            const char *name = sl ? sl[s][i].name : it[s]->v[i].name, *was = tc_ckpt_tensor(c[s], t)->name;
            if (klen && strlen(was) > klen)
                was += klen;
            v[k++] = (tc_outname){name, strcmp(name, was) ? was : NULL, c[s], t};
        }
    }
    int rc = tc_outnames_check(v, k, d);
    free(v);
    return rc;
}

/* ---- the aliases record -------------------------------------------------------------- */

struct tc_aliases {
    cJSON *obj;
    char *text;
};

tc_aliases *tc_aliases_new(void)
{
    tc_aliases *a = calloc(1, sizeof *a);
    if (a && !(a->obj = cJSON_CreateObject())) {
        free(a);
        a = NULL;
    }
    return a;
}

void tc_aliases_free(tc_aliases *a)
{
    if (a) {
        cJSON_Delete(a->obj);
        free(a->text);
        free(a);
    }
}

int tc_aliases_add(tc_aliases *al, const tc_ckpt *c, const tc_sel *sl, size_t i, tc_diag *d)
{
    const tc_tensor *t = tc_ckpt_tensor(c, i);
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
    cJSON_AddItemToObject(al->obj, sl[i].name, a);
    return ok ? 0 : tc_fail(d, TC_ERR_NOMEM, "out of memory");
}

int tc_aliases_meta(tc_aliases *a, const tc_kv *extra, size_t nextra, tc_kv *meta, size_t *nmeta, tc_diag *d)
{
    size_t n = 0;
    bool has = a && a->obj->child;
    meta[n++] = (tc_kv){"format", "pt"};
    for (size_t i = 0; i < nextra; i++) /* an input's aliases are its tensors now: the record is made anew */
        if (strcmp(extra[i].key, "format") && strcmp(extra[i].key, TC_ST_ALIASES_KEY))
            meta[n++] = extra[i];
    if (has) {
        free(a->text);
        if (!(a->text = cJSON_PrintUnformatted(a->obj)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        meta[n++] = (tc_kv){TC_ST_ALIASES_KEY, a->text};
    }
    *nmeta = n;
    return 0;
}

/* ---- torch -> safetensors -------------------------------------------------------------- */

/* Block k is tensor item_t[k] of c, contiguous and cast to its item's dtype. */
typedef struct tensor_data {
    tc_plan *p;
    const tc_ckpt *c;
    const size_t *item_t;
    const tc_witem *items;
    tc_convert_report *rep;
} tensor_data;

static int tensor_data_fn(void *ctx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    tensor_data *td = ctx;
    tc_cast_stats cs = {0};
    int rc = tc_stream_tensor(td->p, td->c, tc_ckpt_tensor(td->c, td->item_t[k]), td->items[k].dtype, dst, off, crc,
                              &cs, d);
    td->rep->overflow += cs.overflow;
    td->rep->underflow += cs.underflow;
    return rc;
}

int tc_convert_to_safetensors(tc_ckpt *c, const tc_convert_opts *o, const tc_kv *extra_meta, size_t nextra,
                              tc_dst *dst, tc_convert_report *rep, tc_diag *d)
{
    tc_plan p = {0};
    size_t nt = tc_ckpt_ntensors(c), n = 0, nmeta = 0;
    tc_sel *sl = NULL;
    tc_witem *items = NULL;
    tc_wblock *blocks = NULL;
    size_t *item_t = NULL;
    tc_kv *meta = NULL;
    tc_aliases *aliases = NULL;
    tc_keymap km = {0};
    int rc = tc_convert_key_check(c, o, d);
    if (rc || (rc = tc_plan_make(&p, c, &o->ro, d)))
        return rc;
    rep->ncast = p.ncast;
    rep->nkept = p.nkept;
    if (!(sl = calloc(nt + 1, sizeof *sl)) || !(items = calloc(nt + 1, sizeof *items)) ||
        !(blocks = calloc(nt + 1, sizeof *blocks)) || !(item_t = calloc(nt + 1, sizeof *item_t)) ||
        !(aliases = tc_aliases_new()) || !(meta = calloc(nextra + 2, sizeof *meta))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    const tc_ckpt *cs = c;
    if ((rc = tc_safetensors_select(c, o, &p, sl, rep, d)) || (rc = tc_sel_rename(&o->keys, &sl, &nt, 1, &km, d)) ||
        (rc = tc_out_names_check(o, &cs, &sl, &nt, NULL, 1, d)))
        goto done;
    for (size_t i = 0; i < nt && !rc; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        if (sl[i].role == TC_SEL_WRITE || sl[i].role == TC_SEL_COPY) {
            blocks[n] = (tc_wblock){tc_tensor_bytes_as(t, sl[i].out), sl[i].out, NULL, sl[i].out != t->dtype};
            items[n] = (tc_witem){sl[i].name, n, sl[i].out, t->ndim, t->shape, t->stride, 0, false, false, -1};
            item_t[n] = i;
            rep->data_bytes += blocks[n].nbytes;
            n++;
        } else if (sl[i].role == TC_SEL_ALIAS) {
            rc = tc_aliases_add(aliases, c, sl, i, d);
            rep->naliases++;
        }
    }
    rep->ntensors = n - rep->ncopies;
    if (rc || (rc = tc_aliases_meta(aliases, extra_meta, nextra, meta, &nmeta, d)))
        goto done;
    tensor_data td = {&p, c, item_t, items, rep};
    tc_write_job job = {.items = items, .nitems = n, .blocks = blocks, .nblocks = n, .meta = meta,
                        .nmeta = nmeta, .data = tensor_data_fn, .ctx = &td};
    p.total = rep->data_bytes;
    rc = tc_format_write(TC_CAP_WRITES_SAFETENSORS, &job, dst, d);
    rep->shared_bytes += p.shared;
    rep->copied_bytes += p.copied;
done:
    tc_plan_free(&p);
    tc_keymap_free(&km);
    free(sl);
    free(items);
    free(blocks);
    free(item_t);
    free(meta);
    tc_aliases_free(aliases);
    return rc;
}

/* ---- safetensors -> torch --------------------------------------------------------------- */

/* Of items over storages (blocks) of c: how many are the first on their block, how many views after it. */
static int count_items(const tc_ckpt *c, const tc_witem *v, size_t n, size_t *firsts, size_t *views, tc_diag *d)
{
    bool *seen = calloc(tc_ckpt_nstorages(c) + 1, sizeof *seen);
    if (!seen)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    *firsts = *views = 0;
    for (size_t i = 0; i < n; i++) {
        *(seen[v[i].block] ? views : firsts) += 1;
        seen[v[i].block] = true;
    }
    free(seen);
    return 0;
}

/* The items of a checkpoint without an object graph (a safetensors file):
 * its tensors, those the aliases record restores (format.h) included, each
 * over the block of its storage. */
static int st_items(const tc_ckpt *c, const tc_plan *p, tc_sd_items *out, tc_convert_report *rep, tc_diag *d)
{
    /* count_items sets firsts and views on success; that tc_fail's status is nonzero lies in
     * another file, where the compiler cannot see it */
    size_t nt = tc_ckpt_ntensors(c), firsts = 0, views = 0;
    tc_witem *it = calloc(nt + 1, sizeof *it);
    size_t *of = malloc((nt + 1) * sizeof *of);
    if (!it || !of) {
        free(it);
        free(of);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nt; i++) {
        of[i] = i;
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        const tc_out_storage *ps = &p->out[t->storage];
        it[i] = (tc_witem){t->name, (size_t)t->storage, ps->dtype, t->ndim, t->shape, t->stride, t->offset, false,
                           false, t->alias_of};
    }
    int rc = count_items(c, it, nt, &firsts, &views, d); /* the file's own tensor comes first, its views after */
    if (rc) {
        free(it);
        free(of);
        return rc;
    }
    rep->ntensors += firsts;
    rep->naliases += views;
    *out = (tc_sd_items){it, of, nt, NULL, NULL};
    return 0;
}

/* The dense tensors of a checkpoint with an object graph, as a flat state_dict. */
static int graph_items(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, tc_sd_items *out,
                       tc_convert_report *rep, tc_diag *d)
{
    size_t nt = tc_ckpt_ntensors(c), n = 0, klen = o->key ? strlen(o->key) : 0;
    tc_witem *it = calloc(nt + 1, sizeof *it);
    size_t *of = malloc((nt + 1) * sizeof *of);
    long *at = malloc((nt + 1) * sizeof *at);  /* tensor -> its item */
    bool *seen = calloc(tc_ckpt_nstorages(c) + 1, sizeof *seen);
    int rc = it && of && at && seen ? (o->no_entries ? 0 : report_entries(c, o->key, rep, d))
                                    : tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < nt && !rc; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        const char *name = t->name;
        at[k] = -1;
        if (o->key) {
            if (strncmp(name, o->key, klen) || name[klen] != '.')
                continue;
            name += klen + 1;
        }
        if (left_out(&o->keys, name)) {
            rep->nleft_out++;
            continue;
        }
        if (t->badkey) {
            rc = tc_badkey_fail(c, t, name, d);
            break;
        }
        if (t->kind != TC_TENSOR_DENSE || t->storage < 0) {
            rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                            "tensor '%s' is a %s, which a state_dict of plain tensors cannot hold; --drop '%s' "
                            "leaves it out", name, kinds[t->kind], name);
            break;
        }
        const tc_out_storage *ps = &p->out[t->storage];
        rep->ntensors += !seen[t->storage];
        rep->naliases += seen[t->storage];
        seen[t->storage] = true;
        at[k] = (long)n;
        of[n] = k;
        it[n++] = (tc_witem){name, (size_t)t->storage, ps->cast ? ps->dtype : t->dtype, t->ndim, t->shape,
                             t->stride, t->offset, o->plain ? false : t->requires_grad, o->plain ? false : t->parameter,
                             t->alias_of >= 0 ? at[t->alias_of] : -1};
    }
    free(at);
    free(seen);
    if (rc) {
        free(it);
        free(of);
        return rc;
    }
    *out = (tc_sd_items){it, of, n, NULL, NULL};
    return 0;
}

/* Name relative to key: name without "key." when it starts so, else NULL. */
static const char *under_key(const char *name, const char *key)
{
    size_t l = strlen(key);
    return !strncmp(name, key, l) && name[l] == '.' && name[l + 1] ? name + l + 1 : NULL;
}

/* The items of a checkpoint without an object graph (the graph's items are
 * chosen as they are made) that are kept: with key, those under entry key,
 * named relative to it; then those --drop/--only-keys keep (the others are
 * counted, not listed: asked for). A view of an item left out stays, a
 * tensor of its own. */
static int items_keep(const tc_ckpt *c, tc_sd_items *it, const char *key, const tc_keyops *keys,
                      tc_convert_report *rep, tc_diag *d)
{
    size_t t0 = 0, a0 = 0, t1 = 0, a1 = 0; /* set by count_items on success, as in st_items */
    long *map = malloc((it->n + 1) * sizeof *map);
    int rc = map ? count_items(c, it->v, it->n, &t0, &a0, d) : tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < it->n && !rc; i++) {
        const char *name = key ? under_key(it->v[i].name, key) : it->v[i].name;
        map[i] = -1;
        if (!name || left_out(keys, name)) {
            rep->nleft_out += name != NULL;
            continue;
        }
        map[i] = (long)n;
        it->tensor[n] = it->tensor[i];
        it->v[n] = it->v[i];
        it->v[n].name = name;
        it->v[n].same_as = it->v[i].same_as >= 0 ? map[it->v[i].same_as] : -1;
        n++;
    }
    if (rc || (rc = count_items(c, it->v, n, &t1, &a1, d)))
        goto done;
    it->n = n;
    rep->ntensors -= t0 - t1 < rep->ntensors ? t0 - t1 : rep->ntensors;
    rep->naliases -= a0 - a1 < rep->naliases ? a0 - a1 : rep->naliases;
done:
    free(map);
    return rc;
}

int tc_sd_items_make(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, tc_sd_items *out,
                     tc_convert_report *rep, tc_diag *d)
{
    memset(out, 0, sizeof *out);
    if (tc_ckpt_has_objects(c))
        return graph_items(c, o, p, out, rep, d);
    int rc = st_items(c, p, out, rep, d);
    if (rc)
        return rc;
    return items_keep(c, out, o->key, &o->keys, rep, d);
}

void tc_sd_items_free(tc_sd_items *s)
{
    if (s) {
        free(s->v);
        free(s->tensor);
        free(s->mem);
        cJSON_Delete(s->json);
        memset(s, 0, sizeof *s);
    }
}

/* A checkpoint without an object graph (safetensors) as a torch state_dict of its kept tensors, over p. */
static int items_to_torch(const tc_ckpt *c, const tc_convert_opts *o, tc_plan *p, uint32_t max_depth, tc_dst *dst,
                          tc_convert_report *rep, tc_diag *d)
{
    tc_sd_items items = {0}, *one = &items;
    tc_keymap km = {0};
    size_t ns = tc_ckpt_nstorages(c);
    tc_wblock *blocks = calloc(ns + 1, sizeof *blocks);
    const tc_ckpt *cs = c;
    int rc;
    if (!blocks) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < ns; k++)
        blocks[k] = (tc_wblock){p->out[k].nbytes, p->out[k].dtype, p->out[k].location, p->out[k].cast};
    if ((rc = st_items(c, p, &items, rep, d)) || (rc = items_keep(c, &items, NULL, &o->keys, rep, d)) ||
        (rc = tc_items_rename(&o->keys, &one, 1, &km, d)) || (rc = tc_out_names_check(o, &cs, NULL, NULL, &one, 1, d)))
        goto done;
    tc_storage_data sd = {p, c, NULL};
    tc_write_job job = {.items = items.v, .nitems = items.n, .blocks = blocks, .nblocks = ns,
                        .data = tc_storage_data_fn, .origin = tc_storage_origin_fn, .ctx = &sd,
                        .max_depth = max_depth};
    p->total = p->in_bytes;
    tc_step_cache_on(p); /* the write's steps run on this thread */
    rc = tc_format_write(TC_CAP_WRITES_TORCH, &job, dst, d);
    tc_step_cache_off(p);
done:
    tc_sd_items_free(&items);
    tc_keymap_free(&km);
    free(blocks);
    return rc;
}

int tc_convert_to_torch(tc_ckpt *c, const tc_convert_opts *o, tc_dst *dst, tc_convert_report *rep, tc_diag *d)
{
    const char *dev = o->device ? o->device : "cpu";
    if (o->key && tc_ckpt_has_objects(c))
        return tc_fail(d, TC_ERR_USAGE, "--key applies to conversions to safetensors");
    if (o->key)
        return tc_fail(d, TC_ERR_USAGE, "--key selects an entry of a .pt checkpoint; %s files have none",
                       tc_ckpt_format(c));
    tc_rewrite_opts ro = o->ro;
    ro.keys = tc_ckpt_has_objects(c) && tc_keyops_any(&o->keys) ? &o->keys : NULL; /* whole rewrites: rekey.h */
    ro.all_to = dev;
    ro.maps = NULL;
    ro.nmaps = 0;
    tc_plan p;
    tc_rekey rk = {0};
    int rc = 0;
    if (ro.keys && (rc = tc_rekey_make(c, ro.keys, &rk, d))) {
        tc_diag_subject(d, tc_ckpt_path(c));
        return rc;
    }
    if ((rc = tc_plan_make_less(&p, c, &ro, ro.keys ? rk.names : NULL, d))) {
        tc_rekey_free(&rk);
        return rc;
    }
    rep->ncast = p.ncast;
    rep->nkept = p.nkept;
    if (tc_ckpt_has_objects(c)) {
        /* the tensors written: those key surgery keeps */
        rep->ntensors = tc_ckpt_ntensors(c) - rk.ndropped;
        rep->nleft_out += rk.ndropped;
        rc = tc_rewrite_keyed(c, &p, &rk, dst, d);
    } else {
        rc = items_to_torch(c, o, &p, ro.max_depth, dst, rep, d);
    }
    if (rc)
        goto done;
    rep->data_bytes = p.out_bytes;
    rep->shared_bytes += p.shared;
    rep->copied_bytes += p.copied;
    tc_plan_totals(&p, &rep->overflow, &rep->underflow);
done:
    tc_plan_free(&p);
    tc_rekey_free(&rk);
    return rc;
}
