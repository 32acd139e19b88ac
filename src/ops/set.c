/* The one shard-set driver of every command: a set of inputs (an index, or
 * one checkpoint) planned into shards, each written under a temporary name,
 * all published together with the index, or written in parts (--part I/N)
 * by several processes and joined by the index step.
 *
 * Longer than ~800 lines on purpose: planning, the parts, whole-shard
 * rewrites with key surgery and the all-or-nothing publish share the plan's
 * state (one section each below); split, each would re-derive the plan. */
#include "set.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consolidate.h"
#include "format.h"
#include "rekey.h"
#include "rewrite.h"
#include "safety.h"
#include "shard_index.h"
#include "stream.h"
#include "vec.h"

/* ---- outputs: all under temporary names until every one is complete ------------------ */

typedef struct outs {
    tc_dst *v;          /* finished (or open) outputs */
    size_t n, cap;
} outs;

static int outs_open(outs *o, const char *path, unsigned flags, tc_diag *d)
{
    if (tc_grow(&o->v, &o->cap, o->n + 1, sizeof *o->v))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_dst_open(&o->v[o->n], path, flags, d);
    if (rc)
        return rc;
    o->n++;
    return 0;
}

static tc_dst *outs_last(outs *o) { return &o->v[o->n - 1]; }

/* A folder where an output goes is never replaced, --force or not. */
static int not_a_folder(const char *path, tc_diag *d)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "is a folder; an output shard cannot replace it");
    return 0;
}

/* Every output in place, in order (the index last), or none of them: a
 * rename that fails after others took the new files away again. */
static int outs_publish(outs *o, tc_diag *d)
{
    int rc = 0;
    for (size_t i = 0; i < o->n; i++)
        if ((rc = tc_dst_finish(&o->v[i], d)) || (rc = not_a_folder(o->v[i].target, d)))
            return rc;
    char **placed = calloc(o->n + 1, sizeof *placed);
    if (!placed)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t done = 0;
    for (; done < o->n && !rc; done++) {
        placed[done] = strdup(o->v[done].target);
        rc = tc_dst_publish(&o->v[done], d);
    }
    if (rc)
        for (size_t i = 0; i + 1 < done; i++)
            if (placed[i])
                unlink(placed[i]);
    for (size_t i = 0; i < o->n; i++)
        free(placed[i]);
    free(placed);
    return rc;
}

static void outs_free(outs *o)
{
    for (size_t i = 0; i < o->n; i++)
        tc_dst_abort(&o->v[i]);
    free(o->v);
    memset(o, 0, sizeof *o);
}

/* The inputs (every shard, then the index) by path and by file identity, each
 * stat'ed once, so that checking n outputs against m inputs is O((n + m) log m). */
typedef struct in_id {
    dev_t dev;
    ino_t ino;
    size_t i; /* shard index; ix->nsh: the index file */
} in_id;

typedef struct inputs {
    const tc_index *ix;
    tc_strmap paths;
    in_id *v;
    size_t n;
} inputs;

static int cmp_id(const void *a, const void *b)
{
    const in_id *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void inputs_free(inputs *in)
{
    tc_strmap_free(&in->paths);
    free(in->v);
    memset(in, 0, sizeof *in);
}

static int inputs_make(inputs *in, const tc_index *ix, tc_diag *d)
{
    memset(in, 0, sizeof *in);
    in->ix = ix;
    if (!(in->v = malloc((ix->nsh + 1) * sizeof *in->v)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i <= ix->nsh; i++) {
        const char *p = i < ix->nsh ? ix->sh[i].path : ix->path;
        struct stat st;
        if (tc_strmap_put(&in->paths, p, i, NULL) < 0) {
            inputs_free(in);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        if (stat(p, &st) == 0)
            in->v[in->n++] = (in_id){st.st_dev, st.st_ino, i};
    }
    qsort(in->v, in->n, sizeof *in->v, cmp_id);
    return 0;
}

/* path must not name an input: a shard of the set or its index. */
static int not_an_input(const inputs *in, const char *path, tc_diag *d)
{
    size_t i;
    bool hit = tc_strmap_get(&in->paths, path, &i);
    struct stat st;
    if (!hit && stat(path, &st) == 0) {
        in_id key = {st.st_dev, st.st_ino, 0};
        const in_id *f = bsearch(&key, in->v, in->n, sizeof *in->v, cmp_id);
        if ((hit = f != NULL))
            i = f->i;
    }
    if (!hit)
        return 0;
    if (i < in->ix->nsh)
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "would replace input shard %s; write elsewhere",
                          in->ix->sh[i].file);
    return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "would replace the input index; write elsewhere");
}

/* ---- parts: which outputs this process writes ------------------------------------------ */

/* Output shard k is this part's to write. */
static bool mine(const tc_set_opts *o, size_t k)
{
    return !o->index_only && (!o->nparts || k % o->nparts == o->part - 1);
}

/* The index is this process's to write. */
static bool writes_index(const tc_set_opts *o) { return o->index_only || !o->nparts; }

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Output shard `path` is there, complete, and holds exactly the names the
 * plan gives it (n of them, each in want, sorted; the index step of a set
 * written in parts). */
static int check_written(const char *path, const char *const *want, size_t n, const tc_limits *lim, tc_diag *d)
{
    tc_ckpt *c = NULL;
    tc_diag in = TC_DIAG_INIT;
    if (tc_open(&c, path, lim, &in))
        return tc_fail_at(d, in.code == TC_ERR_IO ? TC_ERR_USAGE : in.code, path, TC_NO_OFFSET,
                          "a shard of this set is missing or incomplete (run every --part first): %s", in.msg);
    size_t got = 0;
    int rc = 0;
    for (size_t t = 0; t < tc_ckpt_ntensors(c) && !rc; t++) {
        const char *name = tc_ckpt_tensor(c, t)->name;
        if (tc_ckpt_tensor(c, t)->restored) /* a tied name in the shard's aliases record: no index lists it */
            continue;
        if (!bsearch(&name, want, n, sizeof *want, cmp_str))
            rc = tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                            "holds tensor '%s', which this set's plan puts elsewhere (a shard of another run? run "
                            "every --part again)", name);
        got++;
    }
    if (rc)
        goto done;
    if (got != n)
        rc = tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                        "holds %zu tensors where this set's plan puts %zu (a shard of another run? run every --part "
                        "again)", got, n);
done:
    tc_ckpt_close(c);
    return rc;
}

/* Admit what the user trusts, then refuse a shard that is still not safe to load. */
static int gate(tc_ckpt *c, const tc_set_opts *o, tc_diag *d)
{
    tc_ckpt_admit(c, o->safe_globals, o->nsafe);
    bool rewrite = o->mode == TC_SET_REWRITE;
    return tc_safety_gate(c, rewrite ? TC_KEEPS_GRAPH : TC_KEEPS_TENSORS, rewrite ? "rewrite" : "convert",
                          o->allow_unsafe, d);
}

static char *join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* The output folder and the index path: out is the index, or the folder it goes in (named idx_name there). */
static int out_paths(const char *out, const char *idx_name, char **dir, char **index, tc_diag *d)
{
    if (tc_index_path(out)) {
        const char *slash = strrchr(out, '/');
        *dir = slash ? strndup(out, (size_t)(slash - out)) : strdup(".");
        *index = strdup(out);
    } else {
        size_t l = strlen(out);
        while (l > 1 && out[l - 1] == '/')
            l--;
        *dir = strndup(out, l);
        *index = *dir ? join(*dir, idx_name) : NULL;
    }
    if (!*dir || !*index)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

/* One output file: its folder, and its path (in the report's index_path). */
static int one_path(const char *out, char **dir, char **path, tc_diag *d)
{
    const char *slash = strrchr(out, '/');
    *dir = slash ? strndup(out, (size_t)(slash - out) + (slash == out)) : strdup(".");
    *path = strdup(out);
    if (!*dir || !*path)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    return 0;
}

/* ---- rewriting each shard whole --------------------------------------------------------- */

/* A set rewritten shard by shard, as its phases share it. */
typedef struct rw {
    const tc_index *ix;
    const tc_set_opts *o;
    outs *os;
    tc_set_report *rep;
    char *dir, *index;     /* the new set's folder and index */
    tc_engines eng;        /* one pool and one GPU caster for every shard's plan */
    tc_rewrite_opts ro;
    bool keyed;            /* key surgery: the index is written anew, naming what the keys became */
    /* the new index's entries (keyed): names[k] in files[k], each name once in the set (seen) */
    const char **names, **files;
    char **owned;
    size_t nnames, capnames;
    tc_strmap seen;
    uint64_t total;        /* bytes of the storages the entries view */
} rw;

static void rw_free(rw *W)
{
    for (size_t k = 0; k < W->nnames; k++)
        free(W->owned[k]);
    free(W->owned);
    free(W->names);
    free(W->files);
    tc_strmap_free(&W->seen);
    free(W->dir);
    free(W->index);
    tc_engines_free(&W->eng);
}

/* Output `path` may be written: it names no input and no folder, and exists only with --force. */
static int check_output(const inputs *ins, const char *path, const tc_set_opts *o, tc_diag *d)
{
    struct stat st;
    int rc;
    if ((rc = not_an_input(ins, path, d)) || (rc = not_a_folder(path, d)))
        return rc;
    if (!(o->dst_flags & TC_DST_FORCE) && lstat(path, &st) == 0)
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "exists (use --force to replace it)");
    return 0;
}

/* Every output this process writes checked before anything is written. */
static int rw_check_outputs(const rw *W, tc_diag *d)
{
    inputs ins;
    char *path = NULL;
    int rc = inputs_make(&ins, W->ix, d);
    if (rc)
        return rc;
    for (size_t i = 0; i <= W->ix->nsh && !rc; i++) {
        if (i < W->ix->nsh ? !mine(W->o, i) : !writes_index(W->o))
            continue;
        free(path);
        if (!(path = i < W->ix->nsh ? join(W->dir, W->ix->sh[i].file) : strdup(W->index)))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else
            rc = check_output(&ins, path, W->o, d);
    }
    free(path);
    inputs_free(&ins);
    return rc;
}

/* The index step of a set rewritten in parts: output shard i is there and holds input shard i's names. */
static int rw_check_part(const rw *W, size_t i, tc_diag *d)
{
    tc_ckpt *inc = NULL;
    const char **names = NULL;
    char *path = join(W->dir, W->ix->sh[i].file);
    int rc = 0;
    if (!path) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_index_open_shard(W->ix, i, &W->o->lim, &inc, d)))
        goto done;
    size_t nt = tc_ckpt_ntensors(inc);
    if (!(names = malloc((nt + 1) * sizeof *names))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t t = 0; t < nt; t++)
        names[t] = tc_ckpt_tensor(inc, t)->name;
    qsort(names, nt, sizeof *names, cmp_str);
    rc = check_written(path, names, nt, &W->o->lim, d);
done:
    free(names);
    tc_ckpt_close(inc);
    free(path);
    return rc;
}

/* The names shard file's tensors have after key surgery rk, appended to the
 * new index (W's entries), each once in the whole set; W->total grows by the
 * bytes of the storages they still view. */
static int keyed_names(rw *W, const tc_ckpt *c, const tc_plan *p, const tc_rekey *rk, const char *file, tc_diag *d)
{
    size_t nt = tc_ckpt_ntensors(c), ns = tc_ckpt_nstorages(c);
    bool *counted = calloc(ns + 1, sizeof *counted);
    if (!counted)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (size_t t = 0; t < nt && !rc; t++) {
        const tc_tensor *x = tc_ckpt_tensor(c, t);
        if (!rk->names[t] || tc_ckpt_find_tensor(c, x->name) != (long)t)
            continue; /* removed, or a name given twice (listed once) */
        if (x->storage >= 0 && !counted[x->storage]) {
            counted[x->storage] = true;
            W->total += p->out[x->storage].nbytes;
        }
        size_t n = W->nnames, ca = W->capnames, cb = W->capnames, cc = W->capnames; /* three arrays, one capacity */
        if (tc_grow(&W->names, &ca, n + 1, sizeof *W->names) || tc_grow(&W->files, &cb, n + 1, sizeof *W->files) ||
            tc_grow(&W->owned, &cc, n + 1, sizeof *W->owned)) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        W->capnames = ca;
        char *nm = strdup(rk->names[t]);
        int put = nm ? tc_strmap_put(&W->seen, nm, n, NULL) : -1;
        if (put < 0) {
            free(nm);
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        } else if (put == 0) {
            rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                            "after key surgery two tensors of the set are named '%s'", nm);
            free(nm);
        } else {
            W->owned[n] = nm;
            W->names[n] = nm;
            W->files[n] = file;
            W->nnames++;
        }
    }
    free(counted);
    return rc;
}

/* Input shard i rewritten whole into the new set's folder, counted into the report. */
static int rw_shard(rw *W, size_t i, tc_diag *d)
{
    const tc_set_opts *o = W->o;
    tc_set_report *rep = W->rep;
    tc_plan p = {0};
    tc_rekey rk = {0};
    tc_ckpt *c = NULL;
    char *path = join(W->dir, W->ix->sh[i].file), *sub = path ? strdup(path) : NULL;
    int rc = 0;
    if (!sub) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (strrchr(sub, '/'))
        *strrchr(sub, '/') = '\0';
    if ((rc = tc_dst_mkdirs(sub, d)) || (rc = tc_index_open_shard(W->ix, i, &o->lim, &c, d)))
        goto done;
    if (!tc_ckpt_has_objects(c)) {
        rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                        "%s files hold no device tags; use 'tensorctl convert' for sets of them", tc_ckpt_format(c));
        goto done;
    }
    if ((rc = gate(c, o, d)))
        goto done;
    if (W->keyed && (rc = tc_rekey_make(c, &o->co.keys, &rk, d))) {
        tc_diag_subject(d, tc_ckpt_path(c));
        goto done;
    }
    if ((rc = tc_plan_make_less(&p, c, &W->ro, W->keyed ? rk.names : NULL, d)))
        goto done;
    if (W->keyed && (rc = keyed_names(W, c, &p, &rk, W->ix->sh[i].file, d)))
        goto done;
    if ((rc = outs_open(W->os, path, o->dst_flags, d)))
        goto done;
    rc = tc_rewrite_keyed(c, &p, &rk, outs_last(W->os), d);
    rep->sum.shared_bytes += p.shared;
    rep->sum.copied_bytes += p.copied;
    if (rc)
        goto done;
    rep->file_bytes += outs_last(W->os)->pos;
    if ((rc = tc_dst_finish(outs_last(W->os), d)))
        goto done;
    uint64_t ov, un;
    tc_plan_totals(&p, &ov, &un);
    rep->sum.overflow += ov;
    rep->sum.underflow += un;
    rep->ncast += p.ncast;
    rep->nkept += p.nkept;
    rep->sum.ntensors += tc_ckpt_ntensors(c) - rk.ndropped; /* those key surgery keeps */
    rep->sum.nleft_out += rk.ndropped;
    rep->sum.data_bytes += p.out_bytes;
    rep->nshards++;
done:
    tc_plan_free(&p);
    tc_rekey_free(&rk);
    tc_ckpt_close(c);
    free(sub);
    free(path);
    return rc;
}

/* The index after key surgery: its metadata kept, the new names, total_size what the shards now hold. */
static int rw_index_keyed(rw *W, tc_diag *d)
{
    int rc = outs_open(W->os, W->index, W->o->dst_flags, d);
    if (rc)
        return rc;
    return tc_index_write(outs_last(W->os), W->total, W->ix->meta, W->ix->nmeta, W->names, W->files, W->nnames, d);
}

/* The index unchanged: shard and tensor names stay. */
static int rw_index_copy(rw *W, tc_diag *d)
{
    tc_src src = {.fd = -1};
    uint8_t *buf = NULL;
    int rc = tc_src_open_file(&src, W->ix->path, d);
    if (rc)
        goto done;
    if (!(buf = malloc(src.size ? (size_t)src.size : 1))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_src_read(&src, 0, buf, (size_t)src.size, "index", d)) ||
        (rc = outs_open(W->os, W->index, W->o->dst_flags, d)) ||
        (rc = tc_dst_write(outs_last(W->os), buf, (size_t)src.size, d)))
        goto done;
    W->rep->file_bytes += src.size;
done:
    free(buf);
    tc_src_close(&src);
    return rc;
}

static int rewrite_set(const tc_index *ix, const char *out, const tc_set_opts *o, outs *os, tc_set_report *rep,
                       tc_diag *d)
{
    const char *in_name = strrchr(ix->path, '/') ? strrchr(ix->path, '/') + 1 : ix->path;
    rw W = {.ix = ix, .o = o, .os = os, .rep = rep, .ro = o->co.ro, .keyed = tc_keyops_any(&o->co.keys)};
    W.ro.engines = &W.eng;
    W.ro.keys = W.keyed ? &o->co.keys : NULL;
    int rc;
    if ((rc = out_paths(out, in_name, &W.dir, &W.index, d)) || (rc = rw_check_outputs(&W, d)))
        goto done;
    if (o->index_only) /* the parts wrote every shard */
        for (size_t i = 0; i < ix->nsh && !rc; i++)
            rc = rw_check_part(&W, i, d);
    if (rc)
        goto done;
    /* key surgery: each shard's dicts on their own, and the index names what they became */
    if (W.keyed && (o->nparts || o->index_only)) {
        rc = tc_fail(d, TC_ERR_USAGE, "key surgery on a set rewritten whole cannot be split into --part runs "
                                      "(the index names what every shard's keys became); run it in one process");
        goto done;
    }
    for (size_t i = 0; i < ix->nsh && !rc; i++)
        if (mine(o, i))
            rc = rw_shard(&W, i, d);
    if (rc)
        goto done;
    if (W.keyed)
        rc = rw_index_keyed(&W, d);
    else if (writes_index(o))
        rc = rw_index_copy(&W, d);
    if (rc)
        goto done;
    if (!(rep->index_path = strdup(W.index)))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
done:
    rw_free(&W);
    return rc;
}

/* ---- converting: re-sharded -------------------------------------------------------------- */

typedef struct set_in {
    tc_ckpt *c;
    tc_plan p;
    bool planned;
    tc_sel *sl;        /* to safetensors: the role of every tensor */
    tc_sd_items it;       /* to torch: the state_dict items */
    long *unit;           /* per tensor (safetensors) or per storage (torch): its unit, -1 when not written */
} set_in;

typedef struct set_unit {
    size_t in;
    size_t first;         /* safetensors: the written tensor; torch: the storage */
    uint64_t bytes;       /* output bytes */
    size_t shard;
    size_t block;         /* its block in its shard */
} set_unit;

typedef struct set_name {
    const char *name;
    size_t shard;
} set_name;

typedef struct conv {
    const tc_set_opts *o;
    tc_set_report *rep;
    const tc_index *ix;
    set_in *in;
    set_unit *u;
    size_t nu, ucap;
    tc_rewrite_opts ro;   /* what the plans are made with */
    tc_engines eng;       /* one pool and one GPU caster for every input's plan */
    char **shards;        /* output paths */
    tc_keymap km;         /* the names after key surgery, over the whole set */
    tc_ckpt *given;       /* the set's only input, opened by the caller (tc_set_run_ckpt), or NULL */
    outs *os;
    bool st;              /* to safetensors (else to torch) */
    const char *base, *ext; /* the shards are BASE-0000K-of-0000N.EXT, the index BASE.EXT.index.json */
    char *dir;            /* the output folder */
    size_t nshards;
    set_name *names;      /* every output name with its shard, sorted by name */
    size_t nnames;
} conv;

static int add_unit(conv *S, size_t in, size_t first, uint64_t bytes, long *out, tc_diag *d)
{
    if (tc_grow(&S->u, &S->ucap, S->nu + 1, sizeof *S->u))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    S->u[S->nu] = (set_unit){in, first, bytes, 0, 0};
    *out = (long)S->nu++;
    return 0;
}

/* Open, check and plan input shard i, and cut it into units. */
static int open_input(conv *S, size_t i, tc_diag *d)
{
    const tc_set_opts *o = S->o;
    tc_convert_report *sum = &S->rep->sum;
    set_in *in = &S->in[i];
    int rc = S->given ? 0 : tc_index_open_shard(S->ix, i, &o->lim, &in->c, d);
    if (S->given)
        in->c = S->given;
    if (rc)
        return rc;
    tc_ckpt *c = in->c;
    if ((rc = gate(c, o, d)))
        return rc;
    if ((rc = tc_plan_make(&in->p, c, &S->ro, d)))
        return rc;
    in->planned = true;
    sum->ncast += in->p.ncast;
    sum->nkept += in->p.nkept;
    size_t nt = tc_ckpt_ntensors(c), ns = tc_ckpt_nstorages(c);
    if (!(in->unit = malloc((nt + ns + 1) * sizeof *in->unit)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < nt + ns; k++)
        in->unit[k] = -1;
    if (o->mode == TC_SET_SAFETENSORS) {
        if (!(in->sl = calloc(nt + 1, sizeof *in->sl)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        if ((rc = tc_safetensors_select(c, &o->co, &in->p, in->sl, sum, d)))
            return rc;
        for (size_t k = 0; k < nt && !rc; k++) {
            const tc_sel *s = &in->sl[k];
            if (s->role == TC_SEL_WRITE || s->role == TC_SEL_COPY)
                rc = add_unit(S, i, k, tc_tensor_bytes_as(tc_ckpt_tensor(c, k), s->out), &in->unit[k], d);
            sum->ntensors += s->role == TC_SEL_WRITE;
            sum->naliases += s->role == TC_SEL_ALIAS;
        }
        for (size_t k = 0; k < nt; k++)
            if (in->sl[k].role == TC_SEL_ALIAS)
                in->unit[k] = in->unit[in->sl[k].of];
        return rc;
    }
    /* to torch: one unit per storage, in the order its first item comes */
    if ((rc = tc_sd_items_make(c, &o->co, &in->p, &in->it, sum, d)))
        return rc;
    for (size_t k = 0; k < in->it.n && !rc; k++) {
        size_t s = in->it.v[k].block;
        if (in->unit[nt + s] < 0)
            rc = add_unit(S, i, s, in->p.out[s].nbytes, &in->unit[nt + s], d);
    }
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const set_name *)a)->name, ((const set_name *)b)->name);
}

/* Every output name with its shard, sorted; a name given twice is an error. */
static int set_names(conv *S, set_name **out, size_t *nout, tc_diag *d)
{
    size_t n = 0, cap = 0;
    bool st = S->o->mode == TC_SET_SAFETENSORS;
    for (size_t i = 0; i < S->ix->nsh; i++)
        cap += st ? tc_ckpt_ntensors(S->in[i].c) : S->in[i].it.n;
    set_name *v = malloc((cap + 1) * sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < S->ix->nsh; i++) {
        const set_in *in = &S->in[i];
        size_t nt = tc_ckpt_ntensors(in->c);
        if (st) {
            for (size_t k = 0; k < nt; k++) /* aliases live in their shard's __metadata__, not the index */
                if (in->unit[k] >= 0 && in->sl[k].role != TC_SEL_ALIAS)
                    v[n++] = (set_name){in->sl[k].name, S->u[in->unit[k]].shard};
        } else {
            for (size_t k = 0; k < in->it.n; k++)
                v[n++] = (set_name){in->it.v[k].name, S->u[in->unit[nt + in->it.v[k].block]].shard};
        }
    }
    qsort(v, n, sizeof *v, cmp_name);
    for (size_t k = 1; k < n; k++)
        if (!strcmp(v[k].name, v[k - 1].name)) {
            int rc = tc_fail_at(d, TC_ERR_FORMAT, S->ix->path, TC_NO_OFFSET, "two input shards hold a tensor named '%s'",
                                v[k].name);
            free(v);
            return rc;
        }
    *out = v;
    *nout = n;
    return 0;
}

/* Block b of a shard: a unit's tensor (safetensors) or storage (torch). */
typedef struct shard_data {
    conv *S;
    size_t *unit;         /* block -> unit */
} shard_data;

static int shard_data_fn(void *ctx, size_t b, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    shard_data *sd = ctx;
    const set_unit *u = &sd->S->u[sd->unit[b]];
    set_in *in = &sd->S->in[u->in];
    if (sd->S->o->mode == TC_SET_TORCH)
        return tc_stream_storage(&in->p, in->c, u->first, dst, off, crc, d);
    tc_cast_stats cs = {0};
    int rc = tc_stream_tensor(&in->p, in->c, tc_ckpt_tensor(in->c, u->first), in->sl[u->first].out, dst, off, crc,
                              &cs, d);
    sd->S->rep->sum.overflow += cs.overflow;
    sd->S->rep->sum.underflow += cs.underflow;
    return rc;
}

static bool shard_origin_fn(void *ctx, size_t b, uint64_t *off)
{
    shard_data *sd = ctx;
    const set_unit *u = &sd->S->u[sd->unit[b]];
    set_in *in = &sd->S->in[u->in];
    return sd->S->o->mode == TC_SET_TORCH && tc_stream_origin(&in->p, in->c, u->first, off);
}

/* Shard k into dst. */
static int write_shard(conv *S, size_t k, tc_dst *dst, tc_diag *d)
{
    bool st = S->o->mode == TC_SET_SAFETENSORS;
    size_t nin = S->ix->nsh, nb = 0, ni = 0, cap = 0, nextra = 0, nmeta = 0;
    for (size_t u = 0; u < S->nu; u++)
        cap += S->u[u].shard == k;
    for (size_t i = 0; i < nin; i++)
        cap += st ? 0 : S->in[i].it.n;
    for (size_t i = 0; i < nin; i++)
        nextra += tc_ckpt_has_objects(S->in[i].c) ? 0 : tc_ckpt_nmeta(S->in[i].c);
    size_t *unit = malloc((cap + 1) * sizeof *unit);
    tc_wblock *blocks = calloc(cap + 1, sizeof *blocks);
    tc_witem *items = calloc(cap + 1, sizeof *items);
    long *remap = NULL;
    tc_kv *extra = calloc(nextra + 1, sizeof *extra), *meta = calloc(nextra + 2, sizeof *meta);
    tc_aliases *aliases = st ? tc_aliases_new() : NULL;
    int rc = 0;
    if (!unit || !blocks || !items || !extra || !meta || (st && !aliases)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* blocks: the shard's units in plan order */
    for (size_t u = 0; u < S->nu; u++) {
        set_unit *su = &S->u[u];
        if (su->shard != k)
            continue;
        set_in *in = &S->in[su->in];
        su->block = nb;
        unit[nb] = u;
        if (st) {
            const tc_tensor *t = tc_ckpt_tensor(in->c, su->first);
            const tc_sel *s = &in->sl[su->first];
            blocks[nb] = (tc_wblock){su->bytes, s->out, NULL, s->out != t->dtype};
            items[ni++] = (tc_witem){s->name, nb, s->out, t->ndim, t->shape, t->stride, 0, false, false, -1};
        } else {
            const tc_out_storage *ps = &in->p.out[su->first];
            blocks[nb] = (tc_wblock){su->bytes, ps->dtype, S->o->co.device ? S->o->co.device : "cpu", false};
        }
        nb++;
    }
    nextra = 0;
    for (size_t i = 0; i < nin && !rc; i++) {
        set_in *in = &S->in[i];
        size_t nt = tc_ckpt_ntensors(in->c);
        bool used = false;
        if (st) { /* the aliases of its tensors, and the __metadata__ of the safetensors shards it draws from */
            for (size_t t = 0; t < nt && !rc; t++) {
                if (in->unit[t] < 0 || S->u[in->unit[t]].shard != k)
                    continue;
                used = true;
                if (in->sl[t].role == TC_SEL_ALIAS)
                    rc = tc_aliases_add(aliases, in->c, in->sl, t, d);
            }
            for (size_t m = 0; used && !tc_ckpt_has_objects(in->c) && m < tc_ckpt_nmeta(in->c); m++) {
                const tc_kv *kv = tc_ckpt_meta(in->c, m);
                bool seen = false;
                for (size_t q = 0; q < nextra && !seen; q++)
                    seen = !strcmp(extra[q].key, kv->key);
                if (!seen)
                    extra[nextra++] = *kv;
            }
            continue;
        }
        /* torch: the items on its storages, in input order, re-pointed at the shard's blocks */
        free(remap);
        if (!(remap = malloc((in->it.n + 1) * sizeof *remap))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t j = 0; j < in->it.n; j++) {
            const tc_witem *it = &in->it.v[j];
            const set_unit *su = &S->u[in->unit[nt + it->block]];
            remap[j] = -1;
            if (su->shard != k)
                continue;
            remap[j] = (long)ni;
            items[ni] = *it;
            items[ni].block = su->block;
            items[ni].same_as = it->same_as >= 0 ? remap[it->same_as] : -1;
            ni++;
        }
    }
    if (rc)
        goto done;
    if (st && (rc = tc_aliases_meta(aliases, extra, nextra, meta, &nmeta, d)))
        goto done;
    shard_data sd = {S, unit};
    tc_write_job job = {.items = items, .nitems = ni, .blocks = blocks, .nblocks = nb, .meta = meta,
                        .nmeta = st ? nmeta : 0, .data = shard_data_fn, .origin = shard_origin_fn, .ctx = &sd,
                        .max_depth = S->ro.max_depth};
    rc = tc_format_write(st ? TC_CAP_WRITES_SAFETENSORS : TC_CAP_WRITES_TORCH, &job, dst, d);
    for (size_t b = 0; b < nb && !rc; b++)
        S->rep->sum.data_bytes += blocks[b].nbytes;
done:
    free(unit);
    free(blocks);
    free(items);
    free(remap);
    free(extra);
    free(meta);
    tc_aliases_free(aliases);
    return rc;
}

static void conv_free(conv *S)
{
    free(S->names);
    for (size_t i = 0; S->in && i < S->ix->nsh; i++) {
        if (S->in[i].planned)
            tc_plan_free(&S->in[i].p);
        free(S->in[i].sl);
        tc_sd_items_free(&S->in[i].it);
        free(S->in[i].unit);
        if (S->in[i].c != S->given)
            tc_ckpt_close(S->in[i].c);
    }
    for (size_t k = 0; S->shards && k < S->nshards; k++)
        free(S->shards[k]);
    free(S->shards);
    free(S->in);
    free(S->u);
    free(S->dir);
    tc_keymap_free(&S->km);
    tc_engines_free(&S->eng);
}

/* Where the set goes: its folder and its index, or the one file (the report's index_path). */
static int cv_paths(conv *S, const char *out, tc_diag *d)
{
    char idx_name[64];
    snprintf(idx_name, sizeof idx_name, "%s%s.index.json", S->base, S->ext);
    return S->o->one_file ? one_path(out, &S->dir, &S->rep->index_path, d)
                          : out_paths(out, idx_name, &S->dir, &S->rep->index_path, d);
}

/* --key: some input shard must have tensors under it. */
static int cv_key_check(const conv *S, tc_diag *d)
{
    for (size_t i = 0; i < S->ix->nsh; i++)
        if (!tc_convert_key_check(S->in[i].c, &S->o->co, &(tc_diag)TC_DIAG_INIT))
            return 0;
    return S->ix->nsh ? tc_convert_key_check(S->in[0].c, &S->o->co, d) : 0;
}

/* The inputs' checkpoints, tensor counts, selections (to safetensors) and
 * items (to torch) side by side, as the checks over the whole set take them. */
typedef struct cv_arrays {
    const tc_ckpt **cs;
    size_t *counts;
    tc_sel **sls;
    tc_sd_items **its;
} cv_arrays;

static void cv_arrays_free(cv_arrays *a)
{
    free(a->cs);
    free(a->counts);
    free(a->sls);
    free(a->its);
}

static int cv_arrays_make(const conv *S, cv_arrays *a, tc_diag *d)
{
    size_t n = S->ix->nsh;
    a->cs = calloc(n + 1, sizeof *a->cs);
    a->counts = calloc(n + 1, sizeof *a->counts);
    a->sls = calloc(n + 1, sizeof *a->sls);
    a->its = calloc(n + 1, sizeof *a->its);
    if (!a->cs || !a->counts || !a->sls || !a->its) {
        cv_arrays_free(a);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        a->cs[i] = S->in[i].c;
        a->counts[i] = tc_ckpt_ntensors(S->in[i].c);
        a->sls[i] = S->in[i].sl;
        a->its[i] = &S->in[i].it;
    }
    return 0;
}

/* Key surgery over the whole set at once (one shared prefix). */
static int cv_rename(conv *S, tc_diag *d)
{
    cv_arrays a;
    const tc_keyops *k = &S->o->co.keys;
    int rc = cv_arrays_make(S, &a, d);
    if (rc)
        return rc;
    rc = S->st ? tc_sel_rename(k, a.sls, a.counts, S->ix->nsh, &S->km, d)
               : tc_items_rename(k, a.its, S->ix->nsh, &S->km, d);
    cv_arrays_free(&a);
    return rc;
}

/* Every name the set gives, aliases included, once. */
static int cv_names_check(const conv *S, tc_diag *d)
{
    cv_arrays a;
    int rc = cv_arrays_make(S, &a, d);
    if (rc)
        return rc;
    rc = tc_out_names_check(&S->o->co, a.cs, S->st ? a.sls : NULL, a.counts, a.its, S->ix->nsh, d);
    if (rc && S->ix->nsh > 1)
        tc_diag_subject(d, S->ix->path);
    cv_arrays_free(&a);
    return rc;
}

/* The plan: the units into shards greedily, in input order, each shard
 * filled up to the largest size (a unit larger than that alone); and the
 * shards' paths. */
static int cv_plan(conv *S, const char *out, tc_diag *d)
{
    const tc_set_opts *o = S->o;
    uint64_t max = o->one_file ? UINT64_MAX : o->max_shard ? o->max_shard : TC_DEFAULT_MAX_SHARD, fill = 0;
    for (size_t u = 0; u < S->nu; u++) {
        if (!S->nshards || (fill && fill + S->u[u].bytes > max)) {
            S->nshards++;
            fill = 0;
        }
        S->u[u].shard = S->nshards - 1;
        fill += S->u[u].bytes;
    }
    if (!S->nshards)
        return tc_fail_at(d, TC_ERR_USAGE, S->ix->path, TC_NO_OFFSET, "no tensor of the set can be written as %s",
                          S->st ? "safetensors" : "a torch checkpoint");
    if (!(S->shards = calloc(S->nshards + 1, sizeof *S->shards)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < S->nshards; k++) {
        char file[96];
        snprintf(file, sizeof file, "%s-%05zu-of-%05zu%s", S->base, k + 1, S->nshards, S->ext);
        if (!(S->shards[k] = o->one_file ? strdup(out) : join(S->dir, file)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

/* Every output this process writes checked before anything is written. */
static int cv_check_outputs(const conv *S, tc_diag *d)
{
    const tc_set_opts *o = S->o;
    inputs ins;
    int rc = inputs_make(&ins, S->ix, d);
    if (rc)
        return rc;
    for (size_t k = 0; k <= S->nshards && !rc; k++) {
        if (k < S->nshards ? !mine(o, k) : !writes_index(o) || o->one_file)
            continue;
        rc = check_output(&ins, k < S->nshards ? S->shards[k] : S->rep->index_path, o, d);
    }
    inputs_free(&ins);
    return rc;
}

/* The index step of a set converted in parts: the parts wrote every shard,
 * each with what the plan gives it. */
static int cv_check_parts(const conv *S, tc_diag *d)
{
    /* the names grouped by shard, in one pass (names[] is sorted by name, so each group is too) */
    const char **nv = malloc((S->nnames + 1) * sizeof *nv);
    size_t *at = calloc(S->nshards + 2, sizeof *at);
    int rc = 0;
    if (!nv || !at) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < S->nnames; i++)
        at[S->names[i].shard + 2]++;
    for (size_t k = 0; k < S->nshards; k++)
        at[k + 2] += at[k + 1];
    for (size_t i = 0; i < S->nnames; i++)
        nv[at[S->names[i].shard + 1]++] = S->names[i].name;
    for (size_t k = 0; k < S->nshards && !rc; k++)
        rc = check_written(S->shards[k], nv + at[k], at[k + 1] - at[k], &S->o->lim, d);
done:
    free(nv);
    free(at);
    return rc;
}

/* Shard k written and finished under its temporary name. */
static int cv_shard(conv *S, size_t k, tc_diag *d)
{
    int rc;
    if ((rc = outs_open(S->os, S->shards[k], S->o->dst_flags, d)) || (rc = write_shard(S, k, outs_last(S->os), d)))
        return rc;
    S->rep->file_bytes += outs_last(S->os)->pos;
    if ((rc = tc_dst_finish(outs_last(S->os), d)))
        return rc;
    S->rep->nshards++;
    return 0;
}

/* The new index: every name the set gives with its shard's file, total_size the bytes of every unit. */
static int cv_index(conv *S, tc_diag *d)
{
    uint64_t total = 0;
    for (size_t u = 0; u < S->nu; u++)
        total += S->u[u].bytes;
    const char **nv = malloc((S->nnames + 1) * sizeof *nv), **fv = malloc((S->nnames + 1) * sizeof *fv);
    int rc = 0;
    if (!nv || !fv) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < S->nnames; i++) {
        nv[i] = S->names[i].name;
        fv[i] = strrchr(S->shards[S->names[i].shard], '/') + 1;
    }
    if ((rc = outs_open(S->os, S->rep->index_path, S->o->dst_flags, d)) ||
        (rc = tc_index_write(outs_last(S->os), total, S->ix->meta, S->ix->nmeta, nv, fv, S->nnames, d)))
        goto done;
    S->rep->file_bytes += outs_last(S->os)->pos;
done:
    free(nv);
    free(fv);
    return rc;
}

/* What the inputs' plans counted, into the report, once the set is written. */
static void cv_totals(conv *S)
{
    for (size_t i = 0; i < S->ix->nsh; i++) {
        if (!S->st) {
            uint64_t ov, un;
            tc_plan_totals(&S->in[i].p, &ov, &un);
            S->rep->sum.overflow += ov;
            S->rep->sum.underflow += un;
        }
        S->rep->sum.shared_bytes += S->in[i].p.shared;
        S->rep->sum.copied_bytes += S->in[i].p.copied;
    }
}

static int convert_set(const tc_index *ix, tc_ckpt *given, const char *out, const tc_set_opts *o, outs *os,
                       tc_set_report *rep, tc_diag *d)
{
    bool st = o->mode == TC_SET_SAFETENSORS;
    conv S = {.o = o, .rep = rep, .ix = ix, .os = os, .ro = o->co.ro, .given = given, .st = st,
              .base = st ? "model" : "pytorch_model", .ext = st ? ".safetensors" : ".bin"};
    S.ro.engines = &S.eng;
    if (!st) {
        S.ro.all_to = o->co.device ? o->co.device : "cpu";
        S.ro.maps = NULL;
        S.ro.nmaps = 0;
    }
    int rc;
    if ((rc = cv_paths(&S, out, d)))
        goto done;
    if (!(S.in = calloc(ix->nsh + 1, sizeof *S.in))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ix->nsh && !rc; i++)
        rc = open_input(&S, i, d);
    if (rc)
        goto done;
    if (o->co.key && (rc = cv_key_check(&S, d)))
        goto done;
    if (tc_keyops_any(&o->co.keys) && (rc = cv_rename(&S, d)))
        goto done;
    if ((rc = cv_names_check(&S, d)) || (rc = cv_plan(&S, out, d)) || (rc = set_names(&S, &S.names, &S.nnames, d)) ||
        (rc = cv_check_outputs(&S, d)))
        goto done;
    if (o->index_only && (rc = cv_check_parts(&S, d)))
        goto done;
    if (!o->one_file && (rc = tc_dst_mkdirs(S.dir, d))) /* one file goes where its folder is, as every other output */
        goto done;
    for (size_t k = 0; k < S.nshards && !rc; k++)
        if (mine(o, k))
            rc = cv_shard(&S, k, d);
    if (rc)
        goto done;
    if (writes_index(o) && !o->one_file && (rc = cv_index(&S, d)))
        goto done;
    cv_totals(&S);
done:
    conv_free(&S);
    return rc;
}

/* One checkpoint as a set of one input shard: an index of it alone. */
static int index_of_one(const char *in, tc_ckpt *c, tc_index **out, tc_diag *d)
{
    tc_index *ix = calloc(1, sizeof *ix);
    const char *slash = strrchr(tc_ckpt_path(c), '/');
    if (!ix || !(ix->path = strdup(tc_ckpt_path(c))) || !(ix->sh = calloc(1, sizeof *ix->sh)) ||
        !(ix->sh[0].file = strdup(slash ? slash + 1 : tc_ckpt_path(c))) || !(ix->sh[0].path = strdup(in))) {
        tc_index_free(ix);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    ix->nsh = 1;
    ix->sh[0].ntensors = tc_ckpt_ntensors(c);
    *out = ix;
    return 0;
}

/* ---- replacing an earlier set: its shards that the new one does not write ---------------- */

typedef TC_VEC(char *) strvec;

/* The shards the index at `index` (about to be replaced) names that are neither written now (os) nor inputs
 * (ix, given): paths into *out. A missing or unreadable old index names none. */
static int stale_shards(const char *index, const outs *os, const tc_index *ix, const tc_ckpt *given,
                        const tc_limits *lim, strvec *out, tc_diag *d)
{
    struct stat st;
    tc_index *old = NULL;
    tc_diag ignore = TC_DIAG_INIT;
    if (lstat(index, &st) < 0 || !S_ISREG(st.st_mode) || tc_index_open(&old, index, lim, &ignore))
        return 0;
    tc_map ids = {0}, outnames = {0}; /* the inputs by (device, inode); the outputs by path */
    int rc = 0;
    for (size_t i = 0; i < ix->nsh + 1 && !rc; i++) {
        const char *p = i < ix->nsh ? ix->sh[i].path : ix->path;
        if (p && stat(p, &st) == 0 && tc_map_put2(&ids, (uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, NULL) < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    if (given && stat(tc_ckpt_path(given), &st) == 0 &&
        tc_map_put2(&ids, (uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, NULL) < 0)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < os->n && !rc; i++)
        if (tc_map_put(&outnames, os->v[i].target, strlen(os->v[i].target), 0, NULL) < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    const char *slash = strrchr(index, '/');
    size_t dl = slash ? (size_t)(slash - index + 1) : 0;
    for (size_t k = 0; k < old->nsh && !rc; k++) {
        const char *f = old->sh[k].file;
        if (!*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, ".."))
            continue; /* only a file of the index's own folder */
        size_t n = dl + strlen(f) + 1;
        char *p = malloc(n);
        if (!p) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(p, n, "%.*s%s", (int)dl, index, f);
        bool gone = lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || tc_map_find2(&ids, (uint64_t)st.st_dev, (uint64_t)st.st_ino) ||
                    tc_map_find(&outnames, p, strlen(p));
        if (gone || tc_vec_push(out, p) < 0) {
            free(p);
            if (!gone)
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
    }
    tc_map_free(&ids);
    tc_map_free(&outnames);
    tc_index_free(old);
    return rc;
}

/* ix, or given (not closed here) as the one shard of ix. */
static int run(tc_index *ix, tc_ckpt *given, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d)
{
    outs os = {0};
    strvec stale = {0}, removed = {0};
    rep->ninputs = ix->nsh;
    int rc = 0;
    bool replaces = (o->dst_flags & TC_DST_FORCE) && writes_index(o) && !o->one_file;
    if ((!given && (rc = tc_index_check_shards(ix, d))) ||
        (rc = o->mode == TC_SET_REWRITE ? rewrite_set(ix, out, o, &os, rep, d)
                                        : convert_set(ix, given, out, o, &os, rep, d)) ||
        (replaces && rep->index_path && (rc = stale_shards(rep->index_path, &os, ix, given, &o->lim, &stale, d))) ||
        (rc = outs_publish(&os, d)))
        goto done;
    /* the new set is in place: the old one's other shards go */
    for (size_t i = 0; i < stale.n; i++) {
        if (unlink(stale.v[i]) == 0) {
            const char *slash = strrchr(stale.v[i], '/');
            char *name = strdup(slash ? slash + 1 : stale.v[i]);
            if (name && tc_vec_push(&removed, name) < 0)
                free(name);
        }
    }
done:
    for (size_t i = 0; i < stale.n; i++)
        free(stale.v[i]);
    tc_vec_free(&stale);
    if (removed.n > 1)
        qsort(removed.v, removed.n, sizeof *removed.v, cmp_str);
    rep->removed = removed.v;
    rep->nremoved = removed.n;
    outs_free(&os);
    if (rc)
        tc_dst_dirs_remove();
    else
        tc_dst_dirs_keep();
    tc_index_free(ix);
    return rc;
}

int tc_set_run(const char *in, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d)
{
    tc_index *ix = NULL;
    if (!tc_index_path(in) && o->mode != TC_SET_REWRITE) {
        tc_ckpt *c;
        int rc = tc_open(&c, in, &o->lim, d);
        if (rc)
            return rc;
        rc = tc_set_run_ckpt(c, out, o, rep, d);
        tc_ckpt_close(c);
        return rc;
    }
    int rc = tc_index_open(&ix, in, &o->lim, d);
    return rc ? rc : run(ix, NULL, out, o, rep, d);
}

int tc_set_run_ckpt(tc_ckpt *c, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d)
{
    tc_index *ix = NULL;
    int rc = o->mode == TC_SET_REWRITE
                 ? tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                              "a set is rewritten whole only from its index; a single checkpoint is written as a set "
                              "by converting it")
                 : index_of_one(tc_ckpt_path(c), c, &ix, d);
    return rc ? rc : run(ix, c, out, o, rep, d);
}

void tc_set_report_free(tc_set_report *r)
{
    if (!r)
        return;
    tc_convert_report_free(&r->sum);
    free(r->index_path);
    for (size_t i = 0; i < r->nremoved; i++)
        free(r->removed[i]);
    free(r->removed);
    memset(r, 0, sizeof *r);
}

