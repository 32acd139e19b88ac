/* Raw pickles and the pickles inside other files, judged as pickle.load
 * reads them (pickle_file.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "pickle.h"
#include "pickle_file.h"

typedef struct add_ctx {
    tc_ckpt *c;
    tc_diag *d;
    int rc;
    uint64_t n;
    tc_buf name;
} add_ctx;

/* A raw pickle is no format of the registry (no probe: scan opens one with
 * tc_open_pickle); its checkpoints still have a driver, which says what
 * they are and that they have no storages to read. */
static const tc_format tc_format_pickle = {.name = "pickle"};

static void add_global(void *ctx, pk_obj *o)
{
    add_ctx *a = ctx;
    if (o->kind != PK_GLOBAL || a->rc)
        return;
    tc_buf_reset(&a->name);
    tc_buf_printf(&a->name, "%s.%s", pk_module_py3(o->s), o->name);
    if (tc_buf_oom(&a->name))
        a->rc = tc_fail(a->d, TC_ERR_NOMEM, "out of memory");
    else
        a->rc = tc_ckpt_add_global(a->c, tc_buf_str(&a->name), a->d);
    a->n++;
}

/* One pickle at [off, off + left) of src, read as the unpickler reads it:
 * from 64 KiB, eight times more each time the bytes end mid-pickle, up to
 * the limit (the unpickler reads as far as it needs; so does this). Its
 * globals go into c whether or not it parses; *used is set when it does. */
static int one_pickle(tc_ckpt *c, const tc_src *src, uint64_t off, uint64_t left, bool *parsed, size_t *used,
                      bool *cut, tc_diag *why, add_ctx *a, tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(c);
    uint64_t cap = 1u << 16;
    for (;;) {
        uint64_t n = left < cap ? left : cap;
        if (n > lim->max_pickle_bytes)
            n = lim->max_pickle_bytes;
        uint8_t *buf = malloc(n ? (size_t)n : 1);
        pk_graph *g = pk_graph_new();
        if (!buf || !g) {
            free(buf);
            pk_graph_free(g);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        int rc = tc_src_read(src, off, buf, (size_t)n, "a pickle", d);
        if (rc) {
            free(buf);
            pk_graph_free(g);
            return rc;
        }
        bool hit_end = false;
        pk_read_opts o = {.limits = {lim->max_objects, lim->max_depth, lim->max_objects},
                          .what = "pickle", .base_offset = src->base + off, .hit_end = &hit_end,
                          .py2_strings = PK_PY2STR_LATIN1};
        pk_obj *root;
        tc_diag_clear(why);
        int prc = pk_read(g, buf, (size_t)n, &o, &root, used, why);
        free(buf);
        if (prc && hit_end && n < left && n < lim->max_pickle_bytes) {
            pk_graph_free(g);
            cap *= 8;
            continue;
        }
        *parsed = !prc;
        *cut = prc && hit_end && n < left;
        pk_graph_foreach(g, add_global, a);
        pk_graph_free(g);
        return a->rc;
    }
}

int tc_pickle_judge(tc_ckpt *c, const tc_src *src, uint64_t off, uint64_t len, bool consecutive, tc_pickle_seen *seen,
                    tc_diag *d)
{
    memset(seen, 0, sizeof *seen);
    tc_diag_clear(&seen->why);
    add_ctx a = {c, d, 0, 0, TC_BUF_INIT(4096)};
    uint64_t pos = 0;
    int rc = 0;
    for (;;) {
        bool parsed = false, cut = false;
        size_t used = 0;
        tc_diag why = TC_DIAG_INIT;
        if ((rc = one_pickle(c, src, off + pos, len - pos, &parsed, &used, &cut, &why, &a, d)))
            break;
        seen->cut |= cut;
        if (!seen->npickles && !parsed)
            seen->why = why;
        if (!parsed)
            break;
        if (!seen->npickles)
            seen->parsed = true;
        seen->npickles++;
        pos += used;
        uint8_t next;
        if (!consecutive || pos >= len || (rc = tc_src_read(src, off + pos, &next, 1, "a pickle", d)) || next != 0x80)
            break;
    }
    seen->globals = a.n;
    tc_buf_free(&a.name);
    return rc;
}

/* The fact "stops": where the unpickler stops (why), after importing what c lists. */
static int add_stops(tc_ckpt *c, const tc_diag *why, tc_diag *d)
{
    tc_buf t = TC_BUF_INIT(1000);
    tc_buf_printf(&t, "the unpickler stops (%s) after importing what is listed", why->msg);
    int rc = tc_buf_oom(&t) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_fact(c, "stops", tc_buf_str(&t), d);
    tc_buf_free(&t);
    return rc;
}

int tc_open_pickle(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    tc_ckpt *c;
    int rc = tc_ckpt_new_src(&c, name, src, lim, d);
    if (rc)
        return rc;
    tc_ckpt_set_driver(c, &tc_format_pickle, NULL, NULL);
    tc_pickle_seen seen;
    if ((rc = tc_pickle_judge(c, tc_ckpt_src(c), 0, src->size, true, &seen, d)))
        goto fail;
    bool safe = tc_ckpt_is_safe(c);
    if (!seen.parsed && safe) {
        rc = tc_fail(d, TC_ERR_FORMAT, "not a pickle: %s", seen.why.msg[0] ? seen.why.msg : "no bytes");
        goto fail;
    }
    if (seen.cut && safe) {
        rc = tc_fail(d, TC_ERR_LIMIT,
                     "a pickle longer than %llu bytes: pickle.load reads on, and what it would import there is not "
                     "judged (raise with --max-pickle-size)",
                     (unsigned long long)lim->max_pickle_bytes);
        goto fail;
    }
    char n[32];
    snprintf(n, sizeof n, "%zu", seen.npickles);
    if ((rc = tc_ckpt_add_fact(c, "pickles", n, d)))
        goto fail;
    if (!seen.parsed && (rc = add_stops(c, &seen.why, d)))
        goto fail;
    tc_ckpt_sort_globals(c);
    *out = c;
    return 0;
fail:
    tc_diag_subject(d, name);
    tc_ckpt_close(c);
    return rc;
}
