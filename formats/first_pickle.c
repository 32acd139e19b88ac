/* The pickle at byte 0 of a file's bytes, read as CPython's unpickler reads
 * it as far as it goes, and the first global it names that the allowlist
 * does not allow. Below the readings (readings.c, which judge a file's
 * second readings by it) and the torch drivers that judge their own
 * pickle at byte 0 by it. */
#include "first_pickle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verdict.h"

typedef struct scan {
    char *out;
    size_t n;
} scan;

static void note_global(void *ctx, pk_obj *o)
{
    scan *sc = ctx;
    if (o->kind != PK_GLOBAL || sc->out[0])
        return;
    char name[1100];
    snprintf(name, sizeof name, "%s.%s", pk_module_py3(o->s), o->name);
    if (!tc_verdict_of(name).allowed)
        snprintf(sc->out, sc->n, "%s", name);
}

void tc_first_unsafe_global(pk_graph *g, char *out, size_t n)
{
    scan sc = {out, n};
    out[0] = 0;
    pk_graph_foreach(g, note_global, &sc);
}

/* The first len bytes of src read into g as CPython's unpickler reads them:
 * their value (*root, NULL when it does not end or fails) and whether the
 * reading ran into the end of those bytes (*hit_end). */
static int read_head(const tc_src *src, const tc_limits *lim, uint64_t len, pk_graph *g, pk_obj **root,
                     bool *hit_end, tc_diag *d)
{
    bool end = false;
    pk_obj *r = NULL;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_src_read(src, 0, buf, len, "a pickle read from byte 0", d);
    if (rc)
        goto done;
    pk_read_opts o = {.limits = {lim->max_objects, lim->max_depth, lim->max_objects},
                      .what = "a pickle read from byte 0", .hit_end = &end};
    tc_diag scratch = TC_DIAG_INIT; /* where it stops is not the point: what it named before */
    if (pk_read(g, buf, (size_t)len, &o, &r, NULL, &scratch))
        r = NULL;
    *root = r;
    *hit_end = end;
done:
    free(buf);
    return rc;
}

int tc_first_pickle(const tc_src *src, const tc_limits *lim, pk_graph **out, pk_obj **root, tc_diag *d)
{
    uint64_t cap = 8u << 10; /* most are short: a longer one is read again, in a prefix 8 times as long */
    for (;;) {
        uint64_t len = src->size < cap ? src->size : cap;
        pk_graph *g = pk_graph_new();
        if (!g)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        pk_obj *r;
        bool hit_end;
        int rc = read_head(src, lim, len, g, &r, &hit_end, d);
        if (rc) {
            pk_graph_free(g);
            return rc;
        }
        if (hit_end && len < src->size && cap < lim->max_pickle_bytes) {
            pk_graph_free(g);
            cap = cap * 8 < lim->max_pickle_bytes ? cap * 8 : lim->max_pickle_bytes;
            continue;
        }
        *out = g;
        *root = r;
        return 0;
    }
}

int tc_pickle_at_zero(const tc_src *src, const tc_limits *lim, char *unsafe, size_t n, tc_diag *d)
{
    pk_graph *g;
    pk_obj *root;
    int rc = tc_first_pickle(src, lim, &g, &root, d);
    if (rc)
        return rc;
    tc_first_unsafe_global(g, unsafe, n);
    pk_graph_free(g);
    return 0;
}
