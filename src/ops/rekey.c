#include "rekey.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "plan.h"
#include "strmap.h"

enum { ITEM_NONE, ITEM_KEEP, ITEM_DROP };

void tc_rekey_free(tc_rekey *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nedits; i++)
        free((char *)r->edits[i].key);
    free(r->edits);
    for (size_t i = 0; i < r->n; i++)
        free(r->names[i]);
    free(r->names);
    memset(r, 0, sizeof *r);
}

static bool selected(const tc_keyops *k, const char *name)
{
    return (!k->nonly || tc_glob_any(k->only, k->nonly, name)) && !tc_glob_any(k->drop, k->ndrop, name);
}

static const char *const to_extract =
    "'tensorctl extract' writes the weights as a plain state_dict, where key surgery applies";

/* name with its last len bytes replaced by key (NULL: out of memory) */
static char *with_key(const char *name, size_t len, const char *key)
{
    size_t keep = strlen(name) - len, kl = strlen(key);
    char *s = malloc(keep + kl + 1);
    if (s) {
        memcpy(s, name, keep);
        memcpy(s + keep, key, kl + 1);
    }
    return s;
}

typedef struct rk {
    const tc_ckpt *c;
    const tc_keyops *k;
    tc_diag *d;
    size_t *off;        /* per keyed container: where its items start in st/first/newkey */
    unsigned char *st;  /* per item: ITEM_* */
    long *first;        /* per item: the first tensor named by it */
    char **newkey;      /* per item: its new key, NULL when unchanged */
    size_t stripped, nedits;
} rk;

/* --strip-prefix, --rename, --add-prefix on the kept tensor keys of container k. */
static int rename_keys(rk *R, size_t kx)
{
    const tc_keyed *K = tc_ckpt_keyed(R->c, kx);
    const tc_keyops *k = R->k;
    size_t base = R->off[kx], n = 0;
    const char **names = malloc((K->nkeys + 1) * sizeof *names);
    size_t *at = malloc((K->nkeys + 1) * sizeof *at);
    tc_keymap km = {0};
    tc_strmap others = {0};
    int rc = 0;
    if (!names || !at) {
        rc = tc_fail(R->d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < K->nkeys; i++)
        if (R->st[base + i] == ITEM_KEEP) {
            at[n] = i;
            names[n++] = K->keys[i];
        }
    char shared[512];
    tc_keyops kk = {.strip = k->strip, .strip_prefix = k->strip_prefix, .add_prefix = k->add_prefix,
                    .rename = k->rename, .nrename = k->nrename};
    if (kk.strip && !kk.strip_prefix) {
        if (tc_keys_shared_prefix(names, n, shared, sizeof shared))
            kk.strip_prefix = shared;
        else
            kk.strip = false;
    }
    if (n && tc_keyops_any(&kk) && (rc = tc_keymap_make(&kk, names, n, &km, R->d))) {
        if (rc == TC_ERR_USAGE) { /* say which dict */
            char was[sizeof R->d->msg];
            memcpy(was, R->d->msg, sizeof was);
            tc_diag_clear(R->d);
            rc = tc_fail(R->d, TC_ERR_USAGE, "in %s%s%s: %s", K->name[0] ? "'" : "",
                         K->name[0] ? K->name : "the top-level dict", K->name[0] ? "'" : "", was);
        }
        goto done;
    }
    bool any = false;
    for (size_t j = 0; j < km.n; j++) {
        size_t i = at[j];
        if (!strcmp(km.name[j], K->keys[i]))
            continue;
        const tc_tensor *t = tc_ckpt_tensor(R->c, (size_t)R->first[base + i]);
        if (K->attrs) {
            rc = tc_fail(R->d, TC_ERR_USAGE,
                         "tensor '%s' is an attribute of a pickled object (an nn.Module's parameter or buffer), not "
                         "a key of a dict: a whole rewrite cannot rename it; %s",
                         t->name, to_extract);
            goto done;
        }
        if (!K->text[i]) {
            rc = tc_fail(R->d, TC_ERR_USAGE,
                         "tensor '%s': its key is not a str of at most 255 bytes; key surgery does not rename it", t->name);
            goto done;
        }
        R->newkey[base + i] = km.name[j];
        km.name[j] = NULL;
        any = true;
        R->nedits++;
    }
    if (any && kk.strip && kk.strip_prefix)
        R->stripped++;
    /* a renamed key must not land on a key the dict keeps */
    for (size_t i = 0; any && i < K->nkeys; i++)
        if (K->text[i] && R->st[base + i] == ITEM_NONE && tc_strmap_put(&others, K->keys[i], i, NULL) < 0) {
            rc = tc_fail(R->d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
    for (size_t i = 0; any && i < K->nkeys; i++) {
        size_t was;
        if (!R->newkey[base + i] || !tc_strmap_get(&others, R->newkey[base + i], &was))
            continue;
        const tc_tensor *t = tc_ckpt_tensor(R->c, (size_t)R->first[base + i]);
        rc = tc_fail(R->d, TC_ERR_USAGE, "the key surgery renames '%s' onto the key '%s%s%s' the dict already has",
                     t->name, K->name, K->name[0] ? "." : "", K->keys[was]);
        goto done;
    }
done:
    tc_strmap_free(&others);
    tc_keymap_free(&km);
    free(names);
    free(at);
    return rc;
}

int tc_rekey_make(const tc_ckpt *c, const tc_keyops *k, tc_rekey *out, tc_diag *d)
{
    memset(out, 0, sizeof *out);
    size_t nk = tc_ckpt_nkeyed(c), nt = tc_ckpt_ntensors(c), total = 0;
    rk R = {.c = c, .k = k, .d = d};
    tc_strmap byname = {0};
    int rc = 0;
    if (!(R.off = malloc((nk + 1) * sizeof *R.off)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nk; i++) {
        R.off[i] = total;
        total += tc_ckpt_keyed(c, i)->nkeys;
    }
    R.st = calloc(total + 1, 1);
    R.first = malloc((total + 1) * sizeof *R.first);
    R.newkey = calloc(total + 1, sizeof *R.newkey);
    out->names = calloc(nt + 1, sizeof *out->names);
    out->n = nt;
    if (!R.st || !R.first || !R.newkey || !out->names) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* which items stay: every name of an item must agree */
    for (size_t t = 0; t < nt; t++) {
        const tc_tensor *x = tc_ckpt_tensor(c, t);
        if (x->keyed < 0)
            continue;
        const tc_keyed *K = tc_ckpt_keyed(c, (size_t)x->keyed);
        size_t at = R.off[x->keyed] + x->item;
        unsigned char want = selected(k, x->name) ? ITEM_KEEP : ITEM_DROP;
        if (want == ITEM_DROP && K->attrs) {
            rc = tc_fail(d, TC_ERR_USAGE,
                         "tensor '%s' is an attribute of a pickled object (an nn.Module's parameter or buffer), not a "
                         "key of a dict: a whole rewrite cannot remove it; %s",
                         x->name, to_extract);
            goto done;
        }
        if (R.st[at] == ITEM_NONE) {
            R.st[at] = want;
            R.first[at] = (long)t;
        } else if (R.st[at] != want) {
            const char *a = tc_ckpt_tensor(c, (size_t)R.first[at])->name;
            rc = tc_fail(d, TC_ERR_USAGE,
                         "'%s' and '%s' are one item of one dict (reached by two paths): --drop and --only-keys must "
                         "remove both or neither",
                         R.st[at] == ITEM_DROP ? a : x->name, R.st[at] == ITEM_DROP ? x->name : a);
            goto done;
        }
        if (tc_strmap_put(&byname, x->name, t, NULL) < 0) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    /* renames, dict by dict */
    bool renames = k->strip || k->add_prefix || k->nrename;
    for (size_t i = 0; i < nk && renames; i++)
        if ((rc = rename_keys(&R, i)))
            goto done;
    if (k->strip && !k->strip_prefix && !R.stripped) {
        rc = tc_fail(d, TC_ERR_USAGE,
                     "--strip-prefix: in no dict do the tensor keys share a first component to take off (give "
                     "--strip-prefix=P)");
        goto done;
    }
    /* the edits, in order, and every tensor's new name */
    for (size_t i = 0; i < total; i++)
        R.nedits += R.st[i] == ITEM_DROP;
    if (!(out->edits = calloc(R.nedits + 1, sizeof *out->edits))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t kx = 0; kx < nk; kx++)
        for (size_t i = 0; i < tc_ckpt_keyed(c, kx)->nkeys; i++) {
            size_t at = R.off[kx] + i;
            if (R.st[at] == ITEM_DROP)
                out->edits[out->nedits++] = (tc_keyedit){kx, i, NULL};
            else if (R.newkey[at]) {
                out->edits[out->nedits++] = (tc_keyedit){kx, i, R.newkey[at]};
                R.newkey[at] = NULL;
                out->nrenamed++;
            }
        }
    out->nstripped = R.stripped;
    for (size_t t = 0; t < nt; t++) {
        const tc_tensor *x = tc_ckpt_tensor(c, t);
        const tc_tensor *owner = x;
        if (x->keyed < 0) { /* a part of a tensor (scales, sparse indices): follows it */
            const char *dot = strrchr(x->name, '.');
            size_t p;
            char *pre = dot ? strndup(x->name, (size_t)(dot - x->name)) : NULL;
            if (dot && !pre) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                goto done;
            }
            owner = pre && tc_strmap_get(&byname, pre, &p) ? tc_ckpt_tensor(c, p) : NULL;
            free(pre);
            if (!owner) {
                if (!selected(k, x->name)) {
                    rc = tc_fail(d, TC_ERR_USAGE,
                                 "tensor '%s' is not under a key of a dict (a list or tuple element): --drop and "
                                 "--only-keys cannot remove it from a whole rewrite; %s",
                                 x->name, to_extract);
                    goto done;
                }
                if (!(out->names[t] = strdup(x->name))) {
                    rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                    goto done;
                }
                continue;
            }
        }
        size_t at = R.off[owner->keyed] + owner->item;
        const tc_keyed *K = tc_ckpt_keyed(c, (size_t)owner->keyed);
        if (R.st[at] == ITEM_DROP) {
            out->ndropped++;
            continue;
        }
        const char *nk2 = NULL;
        /* the new key of its item, from the edits (sorted: binary search) */
        size_t lo = 0, hi = out->nedits;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            const tc_keyedit *m = &out->edits[mid];
            if (m->keyed < (size_t)owner->keyed || (m->keyed == (size_t)owner->keyed && m->item < owner->item))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < out->nedits && out->edits[lo].keyed == (size_t)owner->keyed && out->edits[lo].item == owner->item)
            nk2 = out->edits[lo].key;
        if (!nk2) {
            out->names[t] = strdup(x->name);
        } else {
            /* owner's name ends with its old key; x's name is owner's, or owner's + ".part" */
            size_t ol = strlen(owner->name), klen = strlen(K->keys[owner->item]);
            char *on = with_key(owner->name, klen, nk2);
            if (on && x != owner) {
                tc_buf full = TC_BUF_INIT(0);
                tc_buf_puts(&full, on);
                tc_buf_puts(&full, x->name + ol);
                free(on);
                on = tc_buf_take(&full);
            }
            out->names[t] = on;
        }
        if (!out->names[t]) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
done:
    for (size_t i = 0; R.newkey && i < total; i++)
        free(R.newkey[i]);
    free(R.newkey);
    free(R.st);
    free(R.first);
    free(R.off);
    tc_strmap_free(&byname);
    if (rc)
        tc_rekey_free(out);
    return rc;
}
