#include "weights.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format.h"
#include "keys.h"
#include "strmap.h"
#include "vec.h"

/* ---- measuring prefixes ------------------------------------------------------------ */

typedef struct byname {
    const tc_ckpt *c;
    size_t *ix;          /* tensor indices sorted by name */
    size_t n;
    size_t *stamp;       /* per storage: the last measure (+1) that counted it */
} byname;

static int cmp_ix(const void *a, const void *b, void *c)
{
    return strcmp(tc_ckpt_tensor(c, *(const size_t *)a)->name, tc_ckpt_tensor(c, *(const size_t *)b)->name);
}

static int byname_make(byname *b, const tc_ckpt *c, tc_diag *d)
{
    memset(b, 0, sizeof *b);
    b->c = c;
    b->n = tc_ckpt_ntensors(c);
    b->ix = malloc((b->n + 1) * sizeof *b->ix);
    b->stamp = calloc(tc_ckpt_nstorages(c) + 1, sizeof *b->stamp);
    if (!b->ix || !b->stamp) {
        free(b->ix);
        free(b->stamp);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    size_t k = 1;
    for (size_t i = 0; i < b->n; i++)
        b->ix[i] = i;
    while (k < b->n && cmp_ix(&b->ix[k - 1], &b->ix[k], (void *)c) < 0) /* (names already in order need no sort) */
        k++;
    if (k < b->n)
        qsort_r(b->ix, b->n, sizeof *b->ix, cmp_ix, (void *)c);
    return 0;
}

static void byname_free(byname *b)
{
    free(b->ix);
    free(b->stamp);
}

/* The first sorted position whose name is not below key (only its first kl bytes compared when prefix). */
static size_t lower(const byname *b, const char *key, size_t kl)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strncmp(tc_ckpt_tensor(b->c, b->ix[mid])->name, key, kl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void count(byname *b, size_t from, size_t to, size_t mark, size_t *nt, uint64_t *bytes)
{
    for (size_t k = from; k < to; k++) {
        const tc_tensor *t = tc_ckpt_tensor(b->c, b->ix[k]);
        (*nt)++;
        if (t->storage >= 0 && b->stamp[t->storage] != mark) {
            b->stamp[t->storage] = mark;
            *bytes += tc_ckpt_storage(b->c, (size_t)t->storage)->nbytes;
        }
    }
}

/* Measure i of a batch: what is under prefix p. */
static void measure(byname *b, const char *p, size_t mark, size_t *nt, uint64_t *bytes)
{
    *nt = 0;
    *bytes = 0;
    size_t l = strlen(p);
    if (!l) {
        count(b, 0, b->n, mark, nt, bytes);
        return;
    }
    char *q = malloc(l + 2);
    if (!q)
        return;
    memcpy(q, p, l);
    q[l] = 0;
    size_t a = lower(b, q, l + 1), z = a; /* the name p itself */
    while (z < b->n && !strcmp(tc_ckpt_tensor(b->c, b->ix[z])->name, p))
        z++;
    count(b, a, z, mark, nt, bytes);
    q[l] = '.';
    q[l + 1] = 0;
    a = lower(b, q, l + 1);
    q[l] = '.' + 1;
    z = lower(b, q, l + 1);
    count(b, a, z, mark, nt, bytes);
    free(q);
}

int tc_weights_measure(const tc_ckpt *c, const char *const *prefixes, size_t n, size_t *ntensors, uint64_t *bytes,
                       tc_diag *d)
{
    byname b;
    int rc = byname_make(&b, c, d);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        measure(&b, prefixes[i], i + 1, &ntensors[i], &bytes[i]);
    byname_free(&b);
    return 0;
}

/* ---- what the keys say --------------------------------------------------------------- */

enum { K_OTHER, K_WEIGHTS, K_EMA, K_STATE };

static bool token(const char *key, const char *tok)
{
    /* tok as a whole component of key split at '_', '-', '.' (case-insensitive) */
    size_t tl = strlen(tok);
    for (const char *p = key; *p;) {
        size_t l = strcspn(p, "_-.");
        if (l == tl && !strncasecmp(p, tok, tl))
            return true;
        p += l;
        if (*p)
            p++;
    }
    return false;
}

static int classify(const char *key)
{
    static const char *const weights[] = {"state_dict", "model", "model_state_dict", "model_state", "module", "net",
                                          "network", "weights", "params", "model_weights", NULL};
    static const char *const ema[] = {"ema", "model_ema", "ema_model", "ema_state_dict", "state_dict_ema",
                                      "ema_state", "ema_weights", "model_ema_state_dict", "averaged_model",
                                      "ema_params", "shadow", NULL};
    for (const char *const *k = ema; *k; k++)
        if (!strcasecmp(key, *k))
            return K_EMA;
    if (token(key, "ema"))
        return K_EMA;
    for (const char *const *k = weights; *k; k++)
        if (!strcasecmp(key, *k))
            return K_WEIGHTS;
    static const char *const state[] = {"optimizer", "optimizers", "optimizer_states", "optimizer_state_dict",
                                        "optim", "optim_state", "scheduler", "schedulers", "lr_scheduler",
                                        "lr_schedulers", "scaler", "grad_scaler", "amp", "rng_state", "rng_states",
                                        "rng", "callbacks", "loops", "sampler", NULL};
    for (const char *const *k = state; *k; k++)
        if (!strcasecmp(key, *k))
            return K_STATE;
    if (token(key, "optimizer") || token(key, "optim") || token(key, "scheduler") || token(key, "rng") ||
        token(key, "scaler"))
        return K_STATE;
    return K_OTHER;
}

static bool optimizer_key(const char *key) { return token(key, "optimizer") || token(key, "optimizers") || token(key, "optim"); }

/* ---- finding them ----------------------------------------------------------------------- */

void tc_wcand_clear(tc_wcand *c)
{
    if (c) {
        free(c->prefix);
        memset(c, 0, sizeof *c);
    }
}

void tc_weights_free(tc_weights *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].prefix);
    free(w->v);
    memset(w, 0, sizeof *w);
}

static tc_wcand *add(tc_weights *w, size_t *cap, const char *prefix, tc_diag *d)
{
    if (tc_grow(&w->v, cap, w->n + 1, sizeof *w->v))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), NULL;
    tc_wcand *c = &w->v[w->n];
    memset(c, 0, sizeof *c);
    if (!(c->prefix = strdup(prefix)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"), NULL;
    w->n++;
    return c;
}

/* The first component of a name (up to its first '.'), into buf. */
static const char *first_comp(const char *name, char *buf, size_t n)
{
    size_t l = strcspn(name, ".");
    snprintf(buf, n, "%.*s", (int)(l < n ? l : n - 1), name);
    return buf;
}

/* The shared first component of a candidate's names (as --strip-prefix would take it off). */
static void shared_of(byname *b, tc_wcand *c)
{
    size_t l = strlen(c->prefix), a = 0, z = b->n;
    if (l) {
        char *q = malloc(l + 2);
        if (!q)
            return;
        memcpy(q, c->prefix, l);
        q[l] = '.';
        q[l + 1] = 0;
        a = lower(b, q, l + 1);
        q[l] = '.' + 1;
        z = lower(b, q, l + 1);
        free(q);
        l++;
    }
    if (a >= z)
        return;
    /* sorted: the first and the last name decide what all share */
    const char *first = tc_ckpt_tensor(b->c, b->ix[a])->name + l, *last = tc_ckpt_tensor(b->c, b->ix[z - 1])->name + l;
    const char *v[2] = {first, last};
    char sh[64];
    if (tc_keys_shared_prefix(v, 2, sh, sizeof sh))
        snprintf(c->shared, sizeof c->shared, "%s", sh);
}

/* A training checkpoint may nest the state_dict one level down (chgnet:
 * ckpt["model"]["state_dict"]): when every tensor under w's prefix P sits in
 * dicts under one item K of P that names weights (state_dict, model, ...),
 * the weights are P.K, named as that state_dict names them. Flat keys that
 * merely start with such a word ("model.layer.weight" of a state_dict) hold
 * their tensors in P itself and are left alone. */
static int descend(byname *b, tc_wcand *w, tc_diag *d)
{
    for (int depth = 0; depth < 4 && w->prefix[0] && !w->cls; depth++) {
        size_t l = strlen(w->prefix), a, z, k2 = 0;
        char *q = malloc(l + 2);
        if (!q)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        memcpy(q, w->prefix, l);
        memcpy(q + l, ".", 2);
        a = lower(b, q, l + 1);
        q[l] = '.' + 1;
        z = lower(b, q, l + 1);
        free(q);
        const char *item = NULL;
        for (size_t k = a; k < z; k++) {
            const tc_tensor *t = tc_ckpt_tensor(b->c, b->ix[k]);
            const char *box = t->keyed >= 0 ? tc_ckpt_keyed(b->c, (size_t)t->keyed)->name : NULL;
            /* its dict lies under P.K: box is P.K or P.K.more */
            if (!box || strncmp(box, w->prefix, l) || box[l] != '.')
                return 0;
            const char *kk = box + l + 1;
            size_t kl = strcspn(kk, ".");
            if (!item) {
                item = kk;
                k2 = kl;
            } else if (kl != k2 || strncmp(kk, item, kl)) {
                return 0;
            }
        }
        char key[128];
        if (!item || k2 >= sizeof key)
            return 0;
        memcpy(key, item, k2);
        key[k2] = 0;
        if (classify(key) != K_WEIGHTS)
            return 0;
        size_t nl = l + 1 + k2 + 1;
        char *np = malloc(nl);
        if (!np)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        snprintf(np, nl, "%s.%s", w->prefix, key);
        free(w->prefix);
        w->prefix = np;
        size_t rl = strlen(w->reason);
        if (rl + 1 < sizeof w->reason)
            snprintf(w->reason + rl, sizeof w->reason - rl, "%s its state_dict '%s'", depth ? "," : ":", np);
    }
    return 0;
}

int tc_weights_find(const tc_ckpt *c, tc_weights *out, tc_diag *d)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0, nt = tc_ckpt_ntensors(c);
    byname b;
    tc_strmap cands = {0};
    int rc = byname_make(&b, c, d);
    if (rc)
        return rc;
    for (size_t i = 0; i < tc_ckpt_nstorages(c); i++)
        out->total_bytes += tc_ckpt_storage(c, i)->nbytes;
    const tc_module *root = NULL;
    for (size_t i = 0; i < tc_ckpt_nmodules(c) && !root; i++)
        if (!tc_ckpt_module(c, i)->prefix[0])
            root = tc_ckpt_module(c, i);
    tc_wcand *w;
    bool script = tc_ckpt_can(c, TC_CAP_TORCHSCRIPT);
    if (!tc_ckpt_has_objects(c) || root) {
        if (nt && !(w = add(out, &cap, "", d))) {
            rc = d->code;
            goto done;
        }
        if (nt && root) {
            w->cls = root->cls;
            snprintf(w->reason, sizeof w->reason, "%s %s", script ? "a TorchScript module" : "a pickled nn.Module",
                     root->cls);
        } else if (nt) {
            snprintf(w->reason, sizeof w->reason, "a %s file", tc_ckpt_format(c));
        }
        goto measure;
    }
    /* the top-level entries */
    size_t direct = 0, others = 0;
    for (size_t i = 0; i < tc_ckpt_nentries(c) && !rc; i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        if (e->depth != 1 || !e->ntensors)
            continue;
        if (e->is_tensor) {
            direct++;
            continue;
        }
        int k = classify(e->name);
        if (k == K_STATE && optimizer_key(e->name)) {
            size_t n1;
            uint64_t by;
            measure(&b, e->name, SIZE_MAX - 1, &n1, &by);
            out->optimizer_bytes += by;
        }
        if (k == K_OTHER)
            others++;
        if (k != K_WEIGHTS && k != K_EMA)
            continue;
        if (!(w = add(out, &cap, e->name, d)) || tc_strmap_put(&cands, w->prefix, out->n - 1, NULL) < 0) {
            rc = w ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : d->code;
            break;
        }
        w->ema = k == K_EMA;
        snprintf(w->reason, sizeof w->reason, "%s '%s'", w->ema ? "the EMA copy under" : "the usual key", e->name);
    }
    /* nn.Modules pickled whole, not under a candidate or training state */
    for (size_t i = 0; i < tc_ckpt_nmodules(c) && !rc; i++) {
        const tc_module *m = tc_ckpt_module(c, i);
        char top[256];
        size_t at;
        first_comp(m->prefix, top, sizeof top);
        if (tc_strmap_get(&cands, m->prefix, &at)) { /* the usual key holds a module */
            w = &out->v[at];
            w->cls = m->cls;
            size_t l = strlen(w->reason);
            snprintf(w->reason + l, sizeof w->reason - l, ": a pickled nn.Module %s", m->cls);
            continue;
        }
        if (tc_strmap_get(&cands, top, &at) || classify(top) == K_STATE)
            continue;
        if (!(w = add(out, &cap, m->prefix, d))) {
            rc = d->code;
            break;
        }
        w->cls = m->cls;
        w->ema = classify(top) == K_EMA;
        snprintf(w->reason, sizeof w->reason, "a pickled nn.Module %s", m->cls);
    }
    if (rc)
        goto done;
    out->training = out->n > 0;
    if (!out->n && direct) {
        if (!(w = add(out, &cap, "", d))) {
            rc = d->code;
            goto done;
        }
        snprintf(w->reason, sizeof w->reason, "a state_dict");
    } else if (!out->n && others) {
        for (size_t i = 0; i < tc_ckpt_nentries(c) && !rc; i++) {
            const tc_entry *e = tc_ckpt_entry(c, i);
            if (e->depth != 1 || !e->ntensors || e->is_tensor || classify(e->name) != K_OTHER)
                continue;
            if (!(w = add(out, &cap, e->name, d))) {
                rc = d->code;
                break;
            }
            snprintf(w->reason, sizeof w->reason, "a top-level entry holding tensors");
            out->training = true;
        }
    } else if (!out->n && nt && !tc_ckpt_nentries(c)) {
        if (!(w = add(out, &cap, "", d))) {
            rc = d->code;
            goto done;
        }
        snprintf(w->reason, sizeof w->reason, "every tensor of the file");
    }
measure:
    for (size_t i = 0; i < out->n && !rc; i++) {
        if ((rc = descend(&b, &out->v[i], d)))
            break;
        measure(&b, out->v[i].prefix, i + 1, &out->v[i].ntensors, &out->v[i].bytes);
        shared_of(&b, &out->v[i]);
    }
done:
    byname_free(&b);
    tc_strmap_free(&cands);
    if (rc)
        tc_weights_free(out);
    return rc;
}

/* A state_dict nested under the entry out names, and what it holds; an entry
 * of a pickled class, or one whose name cannot be copied, stays as it is. */
static int nested(byname *b, tc_wcand *out, tc_diag *d)
{
    char *was = out->cls ? NULL : strdup(out->prefix);
    int rc;
    if (!was)
        return 0;
    if ((rc = descend(b, out, d)))
        goto done;
    if (strcmp(was, out->prefix)) { /* its names, as for an entry found */
        size_t n1;
        measure(b, out->prefix, SIZE_MAX - 2, &n1, &out->bytes);
        out->ntensors = n1;
    }
done:
    free(was);
    return rc;
}

int tc_weights_pick(const tc_weights *w, const tc_ckpt *c, const char *from, bool ema, tc_wcand *out, tc_diag *d)
{
    memset(out, 0, sizeof *out);
    if (from) {
        const char *p = !strcmp(from, ".") ? "" : from;
        size_t nt;
        uint64_t by;
        int rc = tc_weights_measure(c, &p, 1, &nt, &by, d);
        if (rc)
            return rc;
        /* tensors under it, not the entry itself being one */
        long self = *p ? tc_ckpt_find_tensor(c, p) : -1;
        if (!nt || (nt == 1 && self >= 0))
            return tc_fail(d, TC_ERR_USAGE, "--from '%s': no tensors under that name", from);
        for (size_t i = 0; i < w->n; i++)
            if (!strcmp(w->v[i].prefix, p)) {
                *out = w->v[i];
                break;
            }
        if (!out->reason[0])
            snprintf(out->reason, sizeof out->reason, "--from '%s'", from);
        out->ntensors = nt - (self >= 0);
        out->bytes = by;
        if (!(out->prefix = strdup(p)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        /* a state_dict nested under the entry given: its names, as for an entry found */
        byname b;
        if ((rc = byname_make(&b, c, d)))
            return rc;
        rc = nested(&b, out, d);
        byname_free(&b);
        if (rc)
            tc_wcand_clear(out);
        return rc;
    }
    const tc_wcand *one = NULL;
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++)
        if (!ema || w->v[i].ema) {
            one = &w->v[i];
            n++;
        }
    if (n != 1) {
        if (ema && n)
            return tc_fail(d, TC_ERR_USAGE, "--ema: %zu EMA copies; choose one with --from KEY", n);
        if (ema)
            return tc_fail(d, TC_ERR_USAGE, "--ema: no EMA copy of the weights found (--from KEY picks an entry)");
        if (!w->n)
            return tc_fail(d, TC_ERR_USAGE, "no weights found (no tensors outside optimizer and training state); "
                                            "--from KEY picks an entry");
        return tc_fail(d, TC_ERR_USAGE, "%zu sets of weights; choose one with --from KEY%s", w->n,
                       ema ? "" : " (or --ema)");
    }
    *out = *one;
    if (!(out->prefix = strdup(one->prefix)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
}
