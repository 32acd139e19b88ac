/* Archives and compressed files, member by member, nothing written to disk
 * (scan_int.h).
 *
 * Zip archives are read by tensorctl's own zip reader, as unzip and Python's
 * zipfile read them (the central directory): a stored member is a window of
 * the file, read in place; a deflated one is inflated as it is read. A zip
 * that torch.load takes for a checkpoint (it has a <folder>/data.pkl) but no
 * driver could read is no archive: the driver's failure is its verdict, as
 * in inspect, since torch may read it otherwise. So is a zip the zip reader
 * refuses (overlapping or escaping entries, other compression methods,
 * encryption), when a driver took it for its format. Any other zip (one
 * that starts with bytes of its own, say) and every other archive (tar, 7z, cpio, ar, ISO 9660, RAR,
 * compressed or not) are read by libarchive: a member of an uncompressed tar
 * is a window too, any other is decompressed as it is read. A file that is a
 * single compressed stream (gzip, bzip2, xz, lzma, lzip, zstd, lz4, compress,
 * or zlib, as joblib writes) is judged as what it decompresses to.
 *
 * Only the decompressors built into libarchive are used: the ones it would
 * run as outside programs are never asked for.
 *
 * A member's bytes are judged through the job's callback (j->judge, which
 * scan_judge.c fills with scan_judge): this file calls nothing of the
 * judge's, which calls it. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "buf.h"
#include "scan_int.h"
#include "scan_libarchive.h"
#include "zip.h"

/* libarchive's functions: every call below comes after la_open loaded them (or on what it made) */
#define LA scan_la_load(NULL)

#define LA_BUF (64u << 10)

/* ---- libarchive over a tc_src ------------------------------------------------------ */

typedef struct la_in {
    const tc_src *src;
    uint64_t pos;
    uint8_t *buf;
    tc_diag err;   /* the source's failure, when a callback reports one */
} la_in;

static la_ssize_t la_read(struct archive *a, void *ud, const void **out)
{
    la_in *in = ud;
    uint64_t left = in->src->size - in->pos;
    size_t n = left < LA_BUF ? (size_t)left : LA_BUF;
    *out = in->buf;
    if (n && tc_src_read(in->src, in->pos, in->buf, n, "archive", &in->err)) {
        LA->archive_set_error(a, EIO, "%s", in->err.msg);
        return -1;
    }
    in->pos += n;
    return (la_ssize_t)n;
}

static la_int64_t la_skip(struct archive *a, void *ud, la_int64_t req)
{
    (void)a;
    la_in *in = ud;
    uint64_t left = in->src->size - in->pos, n = req < 0 ? 0 : (uint64_t)req;
    if (n > left)
        n = left;
    in->pos += n;
    return (la_int64_t)n;
}

static la_int64_t la_seek(struct archive *a, void *ud, la_int64_t off, int whence)
{
    la_in *in = ud;
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)in->pos : (int64_t)in->src->size;
    if ((off > 0 && base > INT64_MAX - off) || base + off < 0 || (uint64_t)(base + off) > in->src->size) {
        LA->archive_set_error(a, EINVAL, "seek outside the archive");
        return ARCHIVE_FATAL;
    }
    in->pos = (uint64_t)(base + off);
    return (la_int64_t)in->pos;
}

static int la_close_cb(struct archive *a, void *ud)
{
    (void)a;
    (void)ud;
    return ARCHIVE_OK;
}

/* The decompressors libarchive has built in (a support call that would fall
 * back to an outside program answers ARCHIVE_WARN: that one is left out). */
typedef int (*la_support_fn)(struct archive *);
#define NFILTERS 8
static la_support_fn la_filters[NFILTERS];
static bool la_builtin[NFILTERS];
static pthread_once_t la_once = PTHREAD_ONCE_INIT;

static void la_probe_filters(void)
{
    la_support_fn f[NFILTERS] = {
        LA->archive_read_support_filter_gzip, LA->archive_read_support_filter_bzip2,
        LA->archive_read_support_filter_xz,   LA->archive_read_support_filter_lzma,
        LA->archive_read_support_filter_lzip, LA->archive_read_support_filter_zstd,
        LA->archive_read_support_filter_lz4,  LA->archive_read_support_filter_compress,
    };
    memcpy(la_filters, f, sizeof f);
    for (size_t i = 0; i < NFILTERS; i++) {
        struct archive *a = LA->archive_read_new();
        la_builtin[i] = a && la_filters[i](a) == ARCHIVE_OK;
        LA->archive_read_free(a);
    }
}

/* A reader of src: an archive, or else (the raw format, which bids only where no archive format
 * does) the bytes as one member, decompressed where a filter takes them. One reader asks both
 * questions: an archive format's bid beats raw's, so it reads what a reader of the archive
 * formats alone reads, and a file that is no archive costs one set-up, not two. */
typedef struct la {
    struct archive *a;
    la_in in;
} la;

static void la_free(la *l)
{
    if (!l)
        return;
    LA->archive_read_free(l->a);
    free(l->in.buf);
    free(l);
}

static int la_open(la **out, const tc_src *src, tc_diag *d)
{
    *out = NULL;
    const char *why = NULL;
    if (!scan_la_load(&why))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "%s", why);
    pthread_once(&la_once, la_probe_filters);
    la *l = calloc(1, sizeof *l);
    if (!l || !(l->in.buf = malloc(LA_BUF)) || !(l->a = LA->archive_read_new())) {
        la_free(l);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    l->in.src = src;
    tc_diag_clear(&l->in.err);
    for (size_t i = 0; i < NFILTERS; i++)
        if (la_builtin[i])
            la_filters[i](l->a);
    LA->archive_read_support_format_7zip(l->a);
    LA->archive_read_support_format_ar(l->a);
    LA->archive_read_support_format_cpio(l->a);
    LA->archive_read_support_format_iso9660(l->a);
    LA->archive_read_support_format_rar(l->a);
    LA->archive_read_support_format_rar5(l->a);
    LA->archive_read_support_format_tar(l->a);
    LA->archive_read_support_format_zip_seekable(l->a);
    LA->archive_read_support_format_raw(l->a);
    LA->archive_read_set_read_callback(l->a, la_read);
    LA->archive_read_set_skip_callback(l->a, la_skip);
    LA->archive_read_set_seek_callback(l->a, la_seek);
    LA->archive_read_set_close_callback(l->a, la_close_cb);
    LA->archive_read_set_callback_data(l->a, &l->in);
    if (LA->archive_read_open1(l->a) != ARCHIVE_OK) {
        int rc = l->in.err.code ? tc_diag_copy(d, &l->in.err)
                                : tc_fail(d, TC_ERR_FORMAT, "%s", LA->archive_error_string(l->a) ? LA->archive_error_string(l->a)
                                                                                           : "not an archive");
        la_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* What went wrong in l, as a diag. */
static int la_fail(la *l, tc_diag *d)
{
    if (l->in.err.code)
        return tc_diag_copy(d, &l->in.err);
    const char *e = LA->archive_error_string(l->a);
    return tc_fail(d, TC_ERR_FORMAT, "%s", e ? e : "unreadable archive");
}

/* ---- a libarchive member, read again from the start ----------------------------------- */

typedef struct la_member {
    const tc_src *src;
    size_t index;       /* among all headers of the archive */
    la *borrowed;       /* the walk's own reader, at the member: used for the first pass */
} la_member;

typedef struct la_h {
    la *l;
    bool own;
} la_h;

static int lm_open(void *arg, void **h, tc_diag *d)
{
    la_member *m = arg;
    la_h *x = calloc(1, sizeof *x);
    if (!x)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (m->borrowed) {
        x->l = m->borrowed;
        m->borrowed = NULL;
        *h = x;
        return 0;
    }
    int rc = la_open(&x->l, m->src, d);
    x->own = true;
    struct archive_entry *e;
    for (size_t k = 0; !rc && k <= m->index; k++) {
        int r = LA->archive_read_next_header(x->l->a, &e);
        if (r == ARCHIVE_EOF)
            rc = tc_fail(d, TC_ERR_FORMAT, "the archive ends before its member %zu when read again", m->index);
        else if (r < ARCHIVE_WARN)
            rc = la_fail(x->l, d);
    }
    if (rc) {
        if (x->own)
            la_free(x->l);
        free(x);
        return rc;
    }
    *h = x;
    return 0;
}

static int lm_read(void *h, void *buf, size_t n, size_t *got, tc_diag *d)
{
    la_h *x = h;
    la_ssize_t r = LA->archive_read_data(x->l->a, buf, n);
    if (r < 0)
        return la_fail(x->l, d);
    *got = (size_t)r;
    return 0;
}

static void lm_close(void *h)
{
    la_h *x = h;
    if (x->own)
        la_free(x->l);
    free(x);
}

/* ---- members judged ---------------------------------------------------------------- */

/* The bytes of a member judged, through the job's callback (scan_judge). */
static int judge(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth)
{
    return j->judge.fn(j->judge.ctx, src, name, wrap, depth);
}

/* Judge one member: its name on the chain, its internal name under name. */
static int member(scan_job *j, const tc_src *src, const char *name, const char *mname, const char *wrap,
                  unsigned depth)
{
    tc_buf inner = TC_BUF_INIT(0);
    tc_buf_puts(&inner, name);
    tc_buf_add(&inner, "/", 1);
    tc_buf_puts(&inner, mname);
    if (tc_buf_oom(&inner) || tc_vec_push(&j->chain, (char *)mname)) {
        tc_buf_free(&inner);
        return TC_ERR_NOMEM;
    }
    int rc = judge(j, src, tc_buf_str(&inner), wrap, depth);
    j->chain.n--;
    tc_buf_free(&inner);
    return rc;
}

/* A member that cannot be judged: an unreadable item of its own. */
static int member_fails(scan_job *j, const char *mname, uint64_t size, const char *why)
{
    if (tc_vec_push(&j->chain, (char *)mname))
        return TC_ERR_NOMEM;
    scan_item *it = scan_emit(j, "archive member", NULL, TC_SCAN_UNREADABLE, size, why);
    j->chain.n--;
    return it ? 0 : TC_ERR_NOMEM;
}

/* A member read through seq (decompressed as it is read), judged. */
static int stream_member(scan_job *j, const scan_seq *seq, const char *name, const char *mname, const char *wrap,
                         unsigned depth, uint64_t size)
{
    scan_stream *s;
    tc_diag d = TC_DIAG_INIT;
    tc_buf what = TC_BUF_INIT(2000);
    tc_buf_printf(&what, "%s!%s", j->path, mname);
    int rc = tc_buf_oom(&what) ? TC_ERR_NOMEM : scan_stream_open(&s, seq, tc_buf_str(&what), &j->budget, &d);
    tc_buf_free(&what);
    if (rc == TC_ERR_NOMEM)
        return rc;
    if (rc)
        return member_fails(j, mname, size, d.msg);
    rc = member(j, scan_stream_src(s), name, mname, wrap, depth);
    scan_stream_close(s);
    return rc;
}

static const char *format_kind(int fmt)
{
    switch (fmt & ARCHIVE_FORMAT_BASE_MASK) {
    case ARCHIVE_FORMAT_TAR: return "tar";
    case ARCHIVE_FORMAT_7ZIP: return "7z";
    case ARCHIVE_FORMAT_ZIP: return "zip";
    case ARCHIVE_FORMAT_CPIO: return "cpio";
    case ARCHIVE_FORMAT_AR: return "ar";
    case ARCHIVE_FORMAT_ISO9660: return "iso9660";
    case ARCHIVE_FORMAT_RAR: return "rar";
    case ARCHIVE_FORMAT_RAR_V5: return "rar5";
    default: return "archive";
    }
}

static const char *filter_kind(int code)
{
    switch (code) {
    case ARCHIVE_FILTER_GZIP: return "gzip";
    case ARCHIVE_FILTER_BZIP2: return "bzip2";
    case ARCHIVE_FILTER_XZ: return "xz";
    case ARCHIVE_FILTER_LZMA: return "lzma";
    case ARCHIVE_FILTER_LZIP: return "lzip";
    case ARCHIVE_FILTER_ZSTD: return "zstd";
    case ARCHIVE_FILTER_LZ4: return "lz4";
    case ARCHIVE_FILTER_COMPRESS: return "compress";
    default: return NULL;
    }
}

/* The kind of the archive: "tar.gzip archive" and the like. */
static void archive_kind(tc_buf *k, const char *fmt, const char *filter)
{
    tc_buf_printf(k, "%s%s%s archive", fmt, filter ? "." : "", filter ? filter : "");
}

/* After the walk: the archive's own item when it held no model file, or broke off. */
static int archive_end(scan_job *j, const char *kind, const char *wrap, uint64_t size, uint64_t first, size_t nmembers,
                       const tc_diag *failed)
{
    if (failed && failed->code) {
        tc_buf r = TC_BUF_INIT(1200);
        tc_buf_printf(&r, "the archive cannot be read past its member %zu: %s", nmembers, failed->msg);
        scan_item *it = scan_emit(j, kind, wrap, TC_SCAN_UNREADABLE, size, tc_buf_str(&r));
        tc_buf_free(&r);
        return it ? 1 : TC_ERR_NOMEM;
    }
    if (j->judged > first) /* it held a model file */
        return 1;
    tc_buf r = TC_BUF_INIT(200);
    tc_buf_printf(&r, "an archive holding no model file (%zu member%s)", nmembers, nmembers == 1 ? "" : "s");
    scan_item *it = scan_emit(j, kind, wrap, TC_SCAN_SKIPPED, size, tc_buf_str(&r));
    tc_buf_free(&r);
    return it ? 1 : TC_ERR_NOMEM;
}

static int too_deep(scan_job *j, const char *kind, const char *wrap, uint64_t size)
{
    tc_buf r = TC_BUF_INIT(300);
    tc_buf_printf(&r, "an archive nested more than %u deep: its members are not judged (raise with --max-archive-depth)",
                  j->o->max_archive_depth);
    scan_item *it = scan_emit(j, kind, wrap, TC_SCAN_UNREADABLE, size, tc_buf_str(&r));
    tc_buf_free(&r);
    return it ? 1 : TC_ERR_NOMEM;
}

/* ---- zip, by tensorctl's reader ------------------------------------------------------ */

typedef struct zm {
    const tc_zip *z;
    const tc_zip_entry *e;
} zm;

static int zm_open(void *arg, void **h, tc_diag *d)
{
    zm *m = arg;
    tc_zip_rd *r = malloc(sizeof *r);
    if (!r)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_zip_rd_open(r, m->z, m->e, d);
    if (rc) {
        free(r);
        return rc;
    }
    *h = r;
    return 0;
}

static int zm_read(void *h, void *buf, size_t n, size_t *got, tc_diag *d) { return tc_zip_rd_read(h, buf, n, got, true, d); }

static void zm_close(void *h)
{
    tc_zip_rd_close(h);
    free(h);
}

/* Whether torch.load would take the zip for a checkpoint: it unpickles
 * <folder>/data.pkl (found whatever the letter case). */
static bool torch_record(const tc_zip *z)
{
    for (size_t i = 0; i < z->n; i++) {
        const char *slash = strchr(z->e[i].name, '/');
        if (slash && slash > z->e[i].name && !strchr(slash + 1, '/') && !strcasecmp(slash + 1, "data.pkl"))
            return true;
    }
    return false;
}

/* 1: walked; 0: not walked (refused: a driver took the zip for its format and
 * failed, and this is no other archive: its failure is the verdict); 2:
 * tensorctl's reader does not take it (libarchive may); < 0: memory. */
static int walk_zip(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth, bool refused)
{
    tc_zip z;
    tc_diag d = TC_DIAG_INIT;
    tc_zip_limits zl = {.max_entries = j->o->lim.max_entries};
    if (tc_zip_open(&z, src, &zl, &d))
        return d.code == TC_ERR_NOMEM ? TC_ERR_NOMEM : refused ? 0 : 2;
    if (refused && (torch_record(&z) || !z.n)) { /* a checkpoint torch.load reads, malformed; or no member
                                                   * at all: its driver's failure is what there is to say */
        tc_zip_free(&z);
        return 0;
    }
    if (depth >= j->o->max_archive_depth) {
        tc_zip_free(&z);
        return too_deep(j, "zip archive", wrap, src->size);
    }
    j->archives++;
    uint64_t first = j->judged;
    int rc = 0;
    for (size_t i = 0; i < z.n && rc >= 0; i++) {
        const tc_zip_entry *e = &z.e[i];
        size_t l = strlen(e->name);
        if (l && e->name[l - 1] == '/')
            continue; /* a folder */
        if (e->method == 0) {
            tc_src w;
            if (tc_src_window(&w, src, e->data_off, e->usize, &d))
                rc = member_fails(j, e->name, e->usize, d.msg);
            else
                rc = member(j, &w, name, e->name, wrap, depth + 1);
        } else {
            zm m = {&z, e};
            scan_seq seq = {zm_open, zm_read, zm_close, &m};
            rc = stream_member(j, &seq, name, e->name, wrap, depth + 1, e->usize);
        }
    }
    size_t n = z.n;
    tc_zip_free(&z);
    return rc < 0 ? rc : archive_end(j, "zip archive", wrap, src->size, first, n, NULL);
}

/* ---- everything else, by libarchive -------------------------------------------------------- */

/* l has read its first header (r0, e0: what archive_read_next_header answered) */
static int walk_la(scan_job *j, la *l, int r0, struct archive_entry *e0, const tc_src *src, const char *name,
                   const char *wrap, unsigned depth)
{
    struct archive_entry *e = e0;
    tc_buf kind = TC_BUF_INIT(200);
    uint64_t first = j->judged;
    size_t nmembers = 0;
    tc_diag failed = TC_DIAG_INIT;
    int rc = 0;
    bool deep = depth >= j->o->max_archive_depth;
    for (size_t k = 0; rc >= 0; k++) {
        int r = k ? LA->archive_read_next_header(l->a, &e) : r0;
        if (r == ARCHIVE_EOF)
            break;
        if (!tc_buf_len(&kind)) {
            archive_kind(&kind, format_kind(LA->archive_format(l->a)), filter_kind(LA->archive_filter_code(l->a, 0)));
            if (deep)
                break;
            j->archives++;
        }
        if (r < ARCHIVE_WARN) {
            la_fail(l, &failed);
            break;
        }
        if (LA->archive_entry_filetype(e) != AE_IFREG || LA->archive_entry_hardlink(e))
            continue; /* folders, links (a hard link's bytes are another member's), devices */
        nmembers++;
        const char *mn = LA->archive_entry_pathname_utf8(e);
        if (!mn)
            mn = LA->archive_entry_pathname(e);
        if (!mn)
            mn = "?";
        char *mname = strdup(mn);
        if (!mname) {
            rc = TC_ERR_NOMEM;
            break;
        }
        uint64_t size = LA->archive_entry_size_is_set(e) && LA->archive_entry_size(e) > 0 ? (uint64_t)LA->archive_entry_size(e) : 0;
        if (LA->archive_entry_is_encrypted(e)) {
            rc = member_fails(j, mname, size, "an encrypted member: its bytes cannot be judged without the password");
        } else if ((LA->archive_format(l->a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR &&
                   LA->archive_filter_count(l->a) == 1 && LA->archive_entry_size_is_set(e) &&
                   !LA->archive_entry_sparse_count(e)) {
            /* an uncompressed tar's member lies in place, where the reader's position now is */
            tc_src w;
            tc_diag d = TC_DIAG_INIT;
            if (tc_src_window(&w, src, (uint64_t)LA->archive_filter_bytes(l->a, 0), size, &d))
                rc = member_fails(j, mname, size, d.msg);
            else
                rc = member(j, &w, name, mname, wrap, depth + 1);
        } else {
            la_member m = {src, k, l};
            scan_seq seq = {lm_open, lm_read, lm_close, &m};
            rc = stream_member(j, &seq, name, mname, wrap, depth + 1, size);
        }
        free(mname);
    }
    if (rc >= 0 && deep && tc_buf_len(&kind))
        rc = too_deep(j, tc_buf_str(&kind), wrap, src->size);
    else if (rc >= 0 && tc_buf_len(&kind))
        rc = archive_end(j, tc_buf_str(&kind), wrap, src->size, first, nmembers, &failed);
    else if (rc >= 0) /* no member at all: an empty archive */
        rc = archive_end(j, "archive", wrap, src->size, first, 0, &failed);
    tc_buf_free(&kind);
    return rc;
}

/* ---- one compressed stream ----------------------------------------------------------------- */

/* zlib's own format (RFC 1950), as joblib and zlib.compress write it: a header
 * naming deflate with a window of at most 32 KiB, its check bits right. */
static bool zlib_head(const uint8_t *h, size_t n)
{
    return n >= 2 && (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && ((unsigned)h[0] << 8 | h[1]) % 31 == 0 && !(h[1] & 0x20);
}

typedef struct zl_h {
    z_stream zs;
    const tc_src *src;
    uint64_t cpos;
    bool end;
    uint8_t in[LA_BUF];
} zl_h;

static int zl_open(void *arg, void **h, tc_diag *d)
{
    zl_h *x = calloc(1, sizeof *x);
    if (!x || inflateInit(&x->zs) != Z_OK) {
        free(x);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    x->src = arg;
    *h = x;
    return 0;
}

static int zl_read(void *h, void *buf, size_t n, size_t *got, tc_diag *d)
{
    zl_h *x = h;
    *got = 0;
    x->zs.next_out = buf;
    x->zs.avail_out = n > UINT32_MAX ? UINT32_MAX : (uInt)n;
    while (!x->end && x->zs.avail_out) {
        if (!x->zs.avail_in) {
            uint64_t left = x->src->size - x->cpos;
            size_t k = left < LA_BUF ? (size_t)left : LA_BUF;
            if (!k)
                return tc_fail(d, TC_ERR_FORMAT, "the zlib stream is cut short");
            int rc = tc_src_read(x->src, x->cpos, x->in, k, "zlib stream", d);
            if (rc)
                return rc;
            x->cpos += k;
            x->zs.next_in = x->in;
            x->zs.avail_in = (uInt)k;
        }
        int z = inflate(&x->zs, Z_NO_FLUSH);
        if (z == Z_STREAM_END)
            x->end = true;
        else if (z != Z_OK)
            return tc_fail(d, TC_ERR_FORMAT, "the zlib stream is corrupt: %s", x->zs.msg ? x->zs.msg : "inflate failed");
    }
    *got = n - x->zs.avail_out;
    return 0;
}

static void zl_close(void *h)
{
    zl_h *x = h;
    inflateEnd(&x->zs);
    free(x);
}

/* The stream's content judged as the file itself, its kind "gzip: ...". */
static int single(scan_job *j, const scan_seq *seq, const char *name, const char *what, unsigned depth, bool quiet)
{
    scan_stream *s;
    tc_diag d = TC_DIAG_INIT;
    int rc = scan_stream_open(&s, seq, j->path, &j->budget, &d);
    if (rc == TC_ERR_NOMEM)
        return rc;
    if (rc && quiet)
        return 0; /* a guess at zlib that did not hold: not compressed after all */
    if (depth >= j->o->max_archive_depth) {
        scan_stream_close(s);
        return too_deep(j, what, NULL, 0);
    }
    j->archives++;
    if (rc) {
        scan_item *it = scan_emit(j, what, NULL, TC_SCAN_UNREADABLE, 0, d.msg);
        return it ? 1 : TC_ERR_NOMEM;
    }
    /* the decompressed bytes are the file: nothing is pushed on the chain */
    tc_buf inner = TC_BUF_INIT(0);
    tc_buf_printf(&inner, "%s/%s", name, "content");
    rc = tc_buf_oom(&inner) ? TC_ERR_NOMEM : judge(j, scan_stream_src(s), tc_buf_str(&inner), what, depth + 1);
    tc_buf_free(&inner);
    scan_stream_close(s);
    return rc < 0 ? rc : 1;
}

/* The archive or compression whose magic number the bytes start with, or NULL. */
static const char *magic_kind(const uint8_t *h, size_t n)
{
    static const struct {
        const char *kind;
        size_t len;
        const char *magic;
    } m[] = {
        {"gzip", 2, "\x1f\x8b"},        {"bzip2", 3, "BZh"},       {"xz", 6, "\xfd" "7zXZ\0"},
        {"zstd", 4, "\x28\xb5\x2f\xfd"}, {"lz4", 4, "\x04\x22\x4d\x18"}, {"lzip", 4, "LZIP"},
        {"compress", 2, "\x1f\x9d"},    {"7z archive", 6, "7z\xbc\xaf\x27\x1c"}, {"rar archive", 6, "Rar!\x1a\x07"},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (n >= m[i].len && !memcmp(h, m[i].magic, m[i].len))
            return m[i].kind;
    return NULL;
}

/* Bytes that start as an archive or a compressed file does, but that nothing
 * reads as one: an unreadable item of that kind (why: d), or 0 when they
 * start as none does. */
static int unread(scan_job *j, const uint8_t *head, size_t hn, const char *wrap, uint64_t size, const tc_diag *d)
{
    const char *k = magic_kind(head, hn);
    if (!k)
        return 0;
    scan_item *it = scan_emit(j, k, wrap, TC_SCAN_UNREADABLE, size, d->msg[0] ? d->msg : "cannot be read");
    return it ? 1 : TC_ERR_NOMEM;
}

int scan_archive(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth, bool refused)
{
    uint8_t head[8] = {0};
    size_t hn = src->size < sizeof head ? (size_t)src->size : sizeof head;
    tc_diag d = TC_DIAG_INIT;
    if (tc_src_read(src, 0, head, hn, "header", &d))
        return 0;
    int rc;
    if (hn >= 4 && (!memcmp(head, "PK\x03\x04", 4) || !memcmp(head, "PK\x05\x06", 4)) &&
        (rc = walk_zip(j, src, name, wrap, depth, refused)) != 2)
        return rc;
    la *l = NULL;
    struct archive_entry *e = NULL;
    int r = ARCHIVE_FATAL;
    if (!(rc = la_open(&l, src, &d))) {
        r = LA->archive_read_next_header(l->a, &e);
        /* (a format that bid and then failed on its first header has not always named itself:
         * only raw's own header says the bytes are no archive) */
        if ((LA->archive_format(l->a) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_RAW) {
            rc = walk_la(j, l, r, e, src, name, wrap, depth);
            la_free(l);
            return rc;
        }
    } else if (rc == TC_ERR_NOMEM) {
        return rc;
    }
    if (zlib_head(head, hn)) {
        scan_seq seq = {zl_open, zl_read, zl_close, (void *)src};
        if ((rc = single(j, &seq, name, "zlib", depth, true))) {
            la_free(l);
            return rc;
        }
    }
    if (!l)
        return unread(j, head, hn, wrap, src->size, &d);
    const char *filter = r >= ARCHIVE_WARN && LA->archive_filter_count(l->a) > 1
                             ? filter_kind(LA->archive_filter_code(l->a, 0))
                             : NULL;
    if (!filter) {
        la_fail(l, &d);
        la_free(l);
        return unread(j, head, hn, wrap, src->size, &d);
    }
    la_member m = {src, 0, l};
    scan_seq seq = {lm_open, lm_read, lm_close, &m};
    rc = single(j, &seq, name, filter, depth, false);
    la_free(l); /* the first pass borrowed it; lm_close leaves it to its owner */
    return rc;
}
