/* One file judged (scan_int.h): first as inspect opens it (tc_open and the
 * registry: every format a driver reads, with the verdict inspect gives),
 * then as what no driver reads: an archive or a compressed stream, a raw
 * pickle, or not a model file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "format.h"
#include "pickle_file.h"
#include "scan_int.h"

/* The one line that says why c is not safe: what its dangerous globals do,
 * else the globals outside the allowlist, else its first hazard. */
static void reason_of(const tc_ckpt *c, tc_buf *b)
{
    size_t nd = 0, nu = 0;
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        nd += !g->allowed && g->dangerous;
        nu += !g->allowed;
    }
    if (nd)
        tc_buf_puts(b, "loading it runs ");
    else if (nu)
        tc_buf_puts(b, "loading it imports and calls globals outside torch's weights_only allowlist: ");
    else if (tc_ckpt_nhazards(c))
        tc_buf_puts(b, tc_ckpt_hazard(c, 0));
    size_t shown = 0;
    for (size_t i = 0; i < tc_ckpt_nglobals(c) && (nd || nu); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        if (g->allowed || (nd && !g->dangerous))
            continue;
        if (shown++ == 4) {
            tc_buf_printf(b, " and %zu more", (nd ? nd : nu) - 4);
            break;
        }
        if (shown > 1)
            tc_buf_puts(b, ", ");
        tc_buf_esc(b, g->name, strlen(g->name));
        if (g->dangerous && g->why)
            tc_buf_printf(b, " (%s)", g->why);
    }
}

static int from_ckpt(scan_job *j, tc_ckpt *c, const char *kind, const char *wrap)
{
    tc_ckpt_admit(c, j->o->safe_globals, j->o->nsafe);
    bool safe = tc_ckpt_is_safe(c);
    tc_buf why = TC_BUF_INIT(1000);
    if (!safe)
        reason_of(c, &why);
    scan_item *it = tc_buf_oom(&why) ? NULL
                    : scan_emit(j, kind, wrap, safe ? TC_SCAN_SAFE : TC_SCAN_UNSAFE, tc_ckpt_src(c)->size,
                                safe ? NULL : tc_buf_str(&why));
    tc_buf_free(&why);
    if (!it)
        return TC_ERR_NOMEM;
    for (int pass = 0; pass < 2; pass++) /* the dangerous ones first */
        for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
            const tc_global *g = tc_ckpt_global(c, i);
            if (g->allowed || g->dangerous != !pass)
                continue;
            tc_scan_global sg = {strdup(g->name), g->why ? strdup(g->why) : NULL, g->count};
            if (!sg.name || (g->why && !sg.why) || tc_vec_push(&it->globals, sg)) {
                free((char *)sg.name);
                free((char *)sg.why);
                return TC_ERR_NOMEM;
            }
        }
    for (size_t i = 0; i < tc_ckpt_nhazards(c); i++) {
        char *h = strdup(tc_ckpt_hazard(c, i));
        if (!h || tc_vec_push(&it->hazards, h)) {
            free(h);
            return TC_ERR_NOMEM;
        }
    }
    return 0;
}

/* c judged as kind, and closed. */
static int judge_ckpt(scan_job *j, tc_ckpt *c, const char *kind, const char *wrap)
{
    int rc = from_ckpt(j, c, kind, wrap);
    tc_ckpt_close(c);
    return rc;
}

/* The first driver of the registry that takes the bytes for its format (by
 * their first bytes or the name), or NULL: the kind of a file none could read. */
static const char *probed(const tc_src *src, const char *name)
{
    uint8_t head[TC_PROBE_BYTES] = {0};
    size_t hn = src->size < sizeof head ? (size_t)src->size : sizeof head;
    tc_diag d = TC_DIAG_INIT;
    if (tc_src_read(src, 0, head, hn, "header", &d))
        return NULL;
    tc_probe p = {head, hn, src->size, name};
    for (const tc_format *const *f = tc_formats; *f; f++)
        if ((*f)->probe(&p))
            return (*f)->name;
    return NULL;
}

/* Names pickle.dump, joblib.dump and dill.dump files usually have. */
static bool pickle_name(const char *name)
{
    static const char *const ext[] = {".pkl", ".pickle", ".dill", ".joblib", ".pck"};
    size_t l = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (l > e && !strcmp(name + l - e, ext[i]))
            return true;
    }
    return false;
}

static int emit(scan_job *j, const char *kind, const char *wrap, tc_scan_verdict v, uint64_t size, const char *why)
{
    return scan_emit(j, kind, wrap, v, size, why) ? 0 : TC_ERR_NOMEM;
}

/* An unsafe item known only by a refusal's message: the message is its hazard. */
static int emit_refused(scan_job *j, const char *kind, const char *wrap, uint64_t size, const char *why)
{
    scan_item *it = scan_emit(j, kind, wrap, TC_SCAN_UNSAFE, size, why);
    char *h = it ? strdup(why) : NULL;
    if (!h || tc_vec_push(&it->hazards, h)) {
        free(h);
        return TC_ERR_NOMEM;
    }
    return 0;
}

int scan_judge(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth)
{
    const tc_limits *lim = &j->o->lim;
    tc_ckpt *c;
    tc_diag d = TC_DIAG_INIT;
    int rc;
    if (!(rc = tc_open_src(&c, name, src, lim, &d)))
        return judge_ckpt(j, c, tc_ckpt_format(c), wrap);
    if (rc == TC_ERR_NOMEM)
        return rc;
    bool judged = false;
    tc_diag d2 = TC_DIAG_INIT;
    const char *k = probed(src, name);
    size_t pl = strlen(j->path);
    if (depth && rc == TC_ERR_IO && !strncmp(d.file, j->path, pl) && d.file[pl] == '/') {
        /* its driver reads files by name (a shard index reads its JSON and shards so): inside an
         * archive there are none, under the archive's own path. The bytes are judged as what no
         * driver reads (a pickle torch.load would take from byte 0, say); the files it names are
         * members judged on their own. */
        rc = TC_ERR_FORMAT;
        k = NULL;
    }
    if (rc == TC_ERR_UNSAFE && k) /* a driver's format whose pickle names a global before it fails */
        return emit_refused(j, k, wrap, src->size, d.msg);
    if (rc == TC_ERR_UNSAFE) {
        /* no driver's format, but a pickle read from byte 0 names globals: the pickle reader lists them all */
        if (!(rc = tc_open_pickle(&c, name, src, lim, &d2)))
            rc = judge_ckpt(j, c, "pickle", wrap);
        else if (rc != TC_ERR_NOMEM)
            rc = emit_refused(j, "pickle", wrap, src->size, d.msg);
        if (rc)
            return rc;
        judged = true; /* and it may be an archive as well: its members are judged too */
    } else if (rc != TC_ERR_FORMAT) {
        return emit(j, k ? k : "unreadable", wrap, TC_SCAN_UNREADABLE, src->size, d.msg);
    }
    int ar = scan_archive(j, src, name, wrap, depth, k != NULL);
    if (ar || judged)
        return ar < 0 ? ar : 0;
    if (!(rc = tc_open_pickle(&c, name, src, lim, &d2))) {
        /* read from byte 0 as a pickle: what torch.load and pickle.load would run. For bytes a
         * driver took for its format and could not read, that reading can only make them
         * unsafe: the driver's failure is otherwise the verdict (a legacy file's first pickle
         * parses whatever follows it) */
        tc_ckpt_admit(c, j->o->safe_globals, j->o->nsafe);
        if (!k || !tc_ckpt_is_safe(c))
            return judge_ckpt(j, c, "pickle", wrap);
        tc_ckpt_close(c);
    } else if (rc == TC_ERR_NOMEM) {
        return rc;
    } else if (rc != TC_ERR_FORMAT && !k) { /* a pickle too long to judge */
        return emit(j, "pickle", wrap, TC_SCAN_UNREADABLE, src->size, d2.msg);
    }
    if (k) /* a driver's format, malformed */
        return emit(j, k, wrap, TC_SCAN_UNREADABLE, src->size, d.msg);
    if (pickle_name(name))
        return emit(j, "pickle", wrap, TC_SCAN_UNREADABLE, src->size, d2.msg);
    return emit(j, "not a model file", wrap, TC_SCAN_SKIPPED, src->size, "not a model file");
}

/* scan_judge as the archive walker's callback: ctx is the job. */
static int judge_member(void *ctx, const tc_src *src, const char *name, const char *wrap, unsigned depth)
{
    return scan_judge(ctx, src, name, wrap, depth);
}

int scan_file(const tc_scan_opts *o, const char *path, uint64_t size, scan_items *out, const scan_flush *flush,
              uint64_t *archives, uint64_t *skipped, scan_fstat *fst)
{
    scan_job j = {.o = o, .path = path, .out = out};
    j.judge = (scan_judge_cb){judge_member, &j};
    tc_src f, w;
    scan_file_src fs;
    tc_diag d = TC_DIAG_INIT;
    struct stat st;
    int rc;
    *archives = *skipped = 0;
    memset(fst, 0, sizeof *fst);
    if (tc_src_open_listed(&f, path, &st, &d)) { /* the walk listed it as a regular file */
        struct stat ls;
        if (size == SCAN_SIZE_UNKNOWN)
            size = lstat(path, &ls) == 0 ? (uint64_t)ls.st_size : 0;
        fst->size = size;
        return emit(&j, "unreadable", NULL, TC_SCAN_UNREADABLE, size, d.msg);
    }
    *fst = (scan_fstat){true, (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_nlink, f.size};
    j.flush = flush; /* (its first call may ask whether the file was judged under another name: now known) */
    if (size == SCAN_SIZE_UNKNOWN)
        size = f.size;
    /* decompression may take the file's size times --max-inflate-ratio, and at least 64 MiB
     * (small archives of text inflate far more than archives of weights) */
    uint64_t ratio = o->lim.max_inflate_ratio ? o->lim.max_inflate_ratio : 1;
    j.budget = size > UINT64_MAX / ratio ? UINT64_MAX : size * ratio;
    if (j.budget < (64ull << 20))
        j.budget = 64ull << 20;
    scan_file_src_open(&fs, &f);
    if (tc_src_window(&w, &fs.src, 0, f.size, &d))
        rc = emit(&j, "unreadable", NULL, TC_SCAN_UNREADABLE, size, d.msg);
    else
        rc = scan_judge(&j, &w, path, NULL, 0);
    scan_file_src_close(&fs);
    tc_src_close(&f);
    tc_vec_free(&j.chain);
    scan_job_end(&j);
    *archives = j.archives;
    *skipped = j.skipped;
    return rc;
}
