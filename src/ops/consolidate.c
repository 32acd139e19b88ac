#include "consolidate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "rewrite.h"
#include "safety.h"
#include "stream.h"

void tc_consolidate_report_free(tc_consolidate_report *r)
{
    if (r) {
        tc_set_report_free(&r->set);
        r->ncarried = 0;
    }
}

/* name relative to key ("key.X" -> "X"), or NULL when it is not under key (key NULL: name). */
static const char *under(const char *name, const char *key)
{
    if (!key)
        return name;
    size_t l = strlen(key);
    return !strncmp(name, key, l) && name[l] == '.' && name[l + 1] ? name + l + 1 : NULL;
}


/* c as one .pt file: a flat state_dict of its tensors and the pickled items that can be carried. */
static int write_pt(tc_ckpt *c, const tc_convert_opts *co, tc_dst *dst, tc_consolidate_report *rep, tc_diag *d)
{
    tc_convert_report *sum = &rep->set.sum;
    size_t nt = tc_ckpt_ntensors(c), no = tc_ckpt_nobjects(c), n = 0, nb = 0, ni = 0, nobj = 0, nalias = 0;
    tc_rewrite_opts ro = co->ro;
    ro.all_to = co->device ? co->device : "cpu";
    ro.maps = NULL;
    ro.nmaps = 0;
    tc_plan p = {0};
    tc_keymap km = {0};
    const char **names = calloc(nt + no + 1, sizeof *names);
    long *src = malloc((nt + no + 1) * sizeof *src); /* per name: its tensor, or -1 - its object */
    long *item_of = malloc((nt + 1) * sizeof *item_of); /* per tensor: its item, or -1 */
    tc_witem *items = calloc(nt + 1, sizeof *items);
    tc_wblock *blocks = calloc(nt + 1, sizeof *blocks);
    size_t *blk = calloc(nt + 1, sizeof *blk);
    size_t ns = tc_ckpt_nstorages(c);
    long *block_of = malloc((ns + 1) * sizeof *block_of); /* per storage: its block once written, else -1 */
    const char **on = calloc(no + 1, sizeof *on);
    const uint8_t **ov = calloc(no + 1, sizeof *ov);
    size_t *ol = calloc(no + 1, sizeof *ol);
    int rc = 0;
    if (!names || !src || !item_of || !items || !blocks || !blk || !block_of || !on || !ov || !ol) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_convert_key_check(c, co, d)) || (rc = tc_plan_make(&p, c, &ro, d)))
        goto done;
    sum->ncast = p.ncast;
    sum->nkept = p.nkept;
    for (size_t s = 0; s < ns; s++)
        block_of[s] = -1;
    for (size_t i = 0; i < nt; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        const char *rel = under(t->name, co->key);
        item_of[i] = -1;
        if (!rel)
            continue;
        if (t->kind != TC_TENSOR_DENSE || t->storage < 0) {
            rc = tc_fail_at(d, TC_ERR_UNSUPPORTED, tc_ckpt_path(c), TC_NO_OFFSET, "tensor '%s' has no data", t->name);
            goto done;
        }
        src[n] = (long)i;
        names[n++] = rel;
    }
    for (size_t i = 0; i < no; i++) {
        const char *rel = under(tc_ckpt_object(c, i)->name, co->key);
        if (rel) {
            src[n] = -1 - (long)i;
            names[n++] = rel;
        }
    }
    if ((rc = tc_keymap_make(&co->keys, names, n, &km, d)))
        goto done;
    for (size_t k = 0; k < n && !rc; k++) {
        const char *name = km.name[k];
        if (!name) {
            sum->nleft_out++;
            continue;
        }
        if (src[k] < 0) {
            const tc_object *ob = tc_ckpt_object(c, (size_t)(-1 - src[k]));
            if (ob->pickle) {
                on[nobj] = name;
                ol[nobj] = ob->pickle_len;
                ov[nobj++] = ob->pickle;
            } else {
                rc = tc_convert_drop(sum, d, "%s (%s: %s)", names[k], ob->kind, ob->why_not);
            }
            continue;
        }
        const tc_tensor *t = tc_ckpt_tensor(c, (size_t)src[k]);
        const tc_out_storage *ps = &p.out[t->storage];
        /* another name for a tensor written already (tied weights): the same object, one storage; a
           tensor whose storage holds others too (a ZeRO parameter group's): a view into its one block */
        long same = t->alias_of >= 0 ? item_of[t->alias_of] : -1, b = block_of[t->storage];
        item_of[src[k]] = (long)ni;
        items[ni] = (tc_witem){name, same >= 0 ? items[same].block : b >= 0 ? (size_t)b : nb, ps->dtype, t->ndim,
                               t->shape, t->stride, t->offset, t->requires_grad, t->parameter, same};
        ni++;
        nalias += same >= 0;
        if (same >= 0 || b >= 0)
            continue;
        block_of[t->storage] = (long)nb;
        blocks[nb] = (tc_wblock){ps->nbytes, ps->dtype, ps->location, ps->cast};
        blk[nb] = (size_t)t->storage;
        sum->data_bytes += ps->nbytes;
        p.total += tc_ckpt_storage(c, (size_t)t->storage)->nbytes;
        nb++;
    }
    if (rc)
        goto done;
    if (!ni && !nobj) {
        rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET, "nothing to write: every name is left out");
        goto done;
    }
    sum->ntensors = ni - nalias;
    sum->naliases = nalias;
    rep->ncarried = nobj;
    tc_storage_data pd = {&p, c, blk}; /* block k of the .pt output is storage blk[k] of c */
    tc_write_job job = {.items = items, .nitems = ni, .blocks = blocks, .nblocks = nb, .data = tc_storage_data_fn,
                        .origin = tc_storage_origin_fn, .ctx = &pd, .max_depth = ro.max_depth, .obj_names = on, .obj_pickles = ov, .obj_lens = ol, .nobjs = nobj,
                        .plain_dict = true};
    if ((rc = tc_format_write(TC_CAP_WRITES_TORCH, &job, dst, d)))
        goto done;
    tc_plan_totals(&p, &sum->overflow, &sum->underflow);
    sum->shared_bytes += p.shared;
    sum->copied_bytes += p.copied;
done:
    tc_plan_free(&p);
    tc_keymap_free(&km);
    free(names);
    free(src);
    free(item_of);
    free(items);
    free(blocks);
    free(blk);
    free(block_of);
    free(on);
    free(ov);
    free(ol);
    return rc;
}

int tc_consolidate(const char *in, const char *out, const tc_consolidate_opts *o, tc_consolidate_report *rep,
                   tc_diag *d)
{
    const tc_set_opts *so = &o->set;
    tc_ckpt *c = NULL;
    tc_dst dst = TC_DST_INIT;
    char *tagged = NULL;
    if (o->tag) { /* a save folder's step other than the one its 'latest' names */
        tc_buf b = TC_BUF_INIT(0);
        struct stat st;
        tc_buf_puts(&b, in);
        tc_buf_putc(&b, '/');
        tc_buf_puts(&b, o->tag);
        if (!(tagged = tc_buf_take(&b)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        if (stat(tagged, &st) < 0 || !S_ISDIR(st.st_mode)) {
            free(tagged);
            return tc_fail_at(d, TC_ERR_USAGE, in, TC_NO_OFFSET, "--tag %s: no folder '%s' here", o->tag, o->tag);
        }
        in = tagged;
    }
    int rc = tc_open(&c, in, &so->lim, d);
    if (rc) {
        free(tagged);
        return rc;
    }
    if (!tc_ckpt_distributed(c)) {
        rc = tc_fail_at(d, TC_ERR_USAGE, in, TC_NO_OFFSET,
                        "not a distributed checkpoint but a %s file ('tensorctl convert' rewrites those)",
                        tc_ckpt_format(c));
        goto done;
    }
    if (o->exclude_frozen && (rc = tc_ckpt_drop_frozen(c, d)))
        goto done;
    tc_ckpt_admit(c, so->safe_globals, so->nsafe);
    if ((rc = tc_safety_gate(c, TC_KEEPS_TENSORS, "consolidate", so->allow_unsafe, d)))
        goto done;
    tc_set_opts sets = *so; /* a checkpoint without pickled items (ZeRO): its entries describe the files, and no
                               consolidation carries them, so none is reported dropped */
    sets.co.no_entries = so->co.no_entries || !tc_ckpt_nobjects(c);
    so = &sets;
    if (o->sharded) {
        /* tensors only: the pickled items are left out, as in a set converted from a .pt */
        for (size_t i = 0; o->format == TC_OUT_PT && i < tc_ckpt_nobjects(c) && !rc; i++) {
            const tc_object *ob = tc_ckpt_object(c, i);
            if (under(ob->name, so->co.key))
                rc = tc_convert_drop(&rep->set.sum, d, "%s (%s: a sharded set holds tensors only)",
                                     under(ob->name, so->co.key), ob->kind);
        }
        if (rc)
            goto done;
        rc = tc_set_run_ckpt(c, out, so, &rep->set, d);
        goto done;
    }
    if ((rc = tc_dst_open(&dst, out, so->dst_flags, d)))
        goto done;
    if (o->format == TC_OUT_ST)
        rc = tc_convert_to_safetensors(c, &so->co, NULL, 0, &dst, &rep->set.sum, d);
    else
        rc = write_pt(c, &so->co, &dst, rep, d);
    rep->set.file_bytes = dst.pos;
    if (rc)
        goto done;
    rc = tc_dst_commit(&dst, d);
done:
    tc_dst_abort(&dst);
    tc_ckpt_close(c);
    free(tagged);
    return rc;
}
