#include "extract.h"

#include <stdlib.h>
#include <string.h>

#include "rewrite.h"
#include "step.h"
#include "stream.h"

void tc_extract_report_free(tc_extract_report *r)
{
    if (!r)
        return;
    tc_convert_report_free(&r->conv);
    for (size_t i = 0; i < r->nleft; i++) {
        free(r->left[i].name);
        free(r->left[i].kind);
    }
    free(r->left);
    memset(r, 0, sizeof *r);
}

int tc_extract_left(const tc_ckpt *c, const tc_wcand *w, tc_extract_report *rep, tc_diag *d)
{
    const char *p = w->prefix;
    size_t pl = strlen(p), top = strcspn(p, "."), ne = tc_ckpt_nentries(c), n = 0;
    const tc_entry **pick = malloc((ne + 1) * sizeof *pick);
    if (!pick)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ne; i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        if (!pl) { /* the whole file: what is no tensor at the top (a module's own attributes are not state) */
            if (e->depth == 1 && !e->ntensors && !e->is_tensor && !(w->cls && e->attr))
                pick[n++] = e;
        } else if (e->depth == 1) { /* every other top-level entry */
            if (strlen(e->name) != top || strncmp(e->name, p, top))
                pick[n++] = e;
        } else if (!strncmp(e->name, p, top) && e->name[top] == '.') { /* under the chosen entry's top */
            if (top == pl ? !e->ntensors && !e->is_tensor && !(w->cls && e->attr)
                          : strncmp(e->name, p, pl) || (e->name[pl] && e->name[pl] != '.'))
                pick[n++] = e;
        }
    }
    const char **names = malloc((n + 1) * sizeof *names);
    size_t *nt = malloc((n + 1) * sizeof *nt);
    uint64_t *by = malloc((n + 1) * sizeof *by);
    int rc;
    if (!names || !nt || !by) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = pick[i]->name;
    if ((rc = tc_weights_measure(c, names, n, nt, by, d)))
        goto done;
    if (n && !(rep->left = calloc(n, sizeof *rep->left))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        tc_left *l = &rep->left[rep->nleft];
        if (!(l->name = strdup(names[i])) || !(l->kind = strdup(pick[i]->is_tensor ? "tensor" : pick[i]->kind))) {
            free(l->name);
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        l->ntensors = nt[i];
        l->bytes = by[i];
        rep->nleft++;
    }
done:
    free(pick);
    free(names);
    free(nt);
    free(by);
    return rc;
}

/* ---- a torch state_dict of items over some of c's storages ---------------------------------- */

/* Only the storages the items view become records, each once, in the order the items first view them. */
static int write_torch(const tc_ckpt *c, tc_plan *p, tc_sd_items *it, const char *device, uint32_t max_depth,
                       tc_dst *dst, uint64_t *bytes, tc_diag *d)
{
    size_t ns = tc_ckpt_nstorages(c), nb = 0;
    long *block = malloc((ns + 1) * sizeof *block);
    size_t *storage = malloc((ns + 1) * sizeof *storage);
    tc_wblock *blocks = calloc(ns + 1, sizeof *blocks);
    int rc;
    *bytes = 0;
    p->total = 0;
    if (!block || !storage || !blocks) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t s = 0; s < ns; s++)
        block[s] = -1;
    for (size_t i = 0; i < it->n; i++) {
        size_t s = it->v[i].block;
        if (block[s] < 0) {
            block[s] = (long)nb;
            storage[nb] = s;
            blocks[nb] = (tc_wblock){p->out[s].nbytes, p->out[s].dtype, device, p->out[s].cast};
            *bytes += p->out[s].nbytes;
            p->total += tc_ckpt_storage(c, s)->nbytes;
            nb++;
        }
        it->v[i].block = (size_t)block[s];
    }
    tc_storage_data x = {p, c, storage};
    tc_write_job job = {.items = it->v, .nitems = it->n, .blocks = blocks, .nblocks = nb,
                        .data = tc_storage_data_fn, .origin = tc_storage_origin_fn, .ctx = &x,
                        .max_depth = max_depth};
    tc_step_cache_on(p); /* the write's steps run on this thread */
    rc = tc_format_write(TC_CAP_WRITES_TORCH, &job, dst, d);
    tc_step_cache_off(p);
done:
    free(block);
    free(storage);
    free(blocks);
    return rc;
}

/* co for w: its tensors, named relative to its prefix, the rest unreported here (tc_extract_left says it). */
static tc_convert_opts opts_for(const tc_wcand *w, const tc_extract_opts *o)
{
    tc_convert_opts co = o->co;
    co.key = w->prefix[0] ? w->prefix : NULL;
    co.no_entries = true;
    co.plain = true;
    return co;
}

static int check(const tc_ckpt *c, const tc_wcand *w, tc_diag *d)
{
    if (w->prefix[0] && !tc_ckpt_has_objects(c))
        return tc_fail(d, TC_ERR_USAGE,
                       "--from '%s': a %s file is one state_dict already (--only-keys and --strip-prefix choose and "
                       "rename its tensors)",
                       w->prefix, tc_ckpt_format(c));
    return 0;
}

int tc_extract(tc_ckpt *c, const tc_wcand *w, const tc_extract_opts *o, tc_dst *dst, tc_extract_report *rep,
               tc_diag *d)
{
    tc_convert_opts co = opts_for(w, o);
    int rc = check(c, w, d);
    if (rc)
        return rc;
    if (o->safetensors) {
        size_t nm = tc_ckpt_has_objects(c) ? 0 : tc_ckpt_nmeta(c); /* a safetensors input's own __metadata__ carries over */
        tc_kv *meta = calloc(nm + 1, sizeof *meta);
        if (!meta)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < nm; i++)
            meta[i] = *tc_ckpt_meta(c, i);
        rc = tc_convert_to_safetensors(c, &co, meta, nm, dst, &rep->conv, d);
        free(meta);
        return rc;
    }
    tc_rewrite_opts ro = co.ro;
    ro.all_to = co.device ? co.device : "cpu";
    ro.maps = NULL;
    ro.nmaps = 0;
    ro.keys = NULL;
    tc_plan p = {0};
    tc_sd_items items = {0}, *one = &items;
    tc_keymap km = {0};
    if ((rc = tc_plan_make(&p, c, &ro, d)))
        return rc;
    rep->conv.ncast = p.ncast;
    rep->conv.nkept = p.nkept;
    const tc_ckpt *cs = c;
    if ((rc = tc_sd_items_make(c, &co, &p, &items, &rep->conv, d)) ||
        (rc = tc_items_rename(&co.keys, &one, 1, &km, d)) ||
        (rc = tc_out_names_check(&co, &cs, NULL, NULL, &one, 1, d)))
        goto done;
    if (!items.n) {
        rc = tc_fail(d, TC_ERR_USAGE, "no tensor is left to write (--drop and --only-keys left out all %zu)",
                     w->ntensors);
        goto done;
    }
    if ((rc = write_torch(c, &p, &items, ro.all_to, ro.max_depth, dst, &rep->conv.data_bytes, d)))
        goto done;
    tc_plan_totals(&p, &rep->conv.overflow, &rep->conv.underflow);
done:
    tc_sd_items_free(&items);
    tc_keymap_free(&km);
    tc_plan_free(&p);
    return rc;
}

int tc_extract_set(tc_ckpt *c, const tc_wcand *w, const tc_extract_opts *o, const tc_set_opts *so, const char *out,
                   tc_set_report *rep, tc_diag *d)
{
    int rc = check(c, w, d);
    if (rc)
        return rc;
    tc_set_opts s = *so;
    s.mode = o->safetensors ? TC_SET_SAFETENSORS : TC_SET_TORCH;
    s.co = opts_for(w, o);
    return tc_set_run_ckpt(c, out, &s, rep, d);
}
