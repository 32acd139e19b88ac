/* Members of compressed archives as sources with random access (scan_int.h).
 *
 * A compressed member can only be read from its first byte on. The drivers
 * that judge it read a few places: the end (a zip's directory), the start (a
 * pickle, a header), now and then something between (a zip's local headers,
 * in order). So the member is read through once, keeping it whole when it
 * is small, else its first and last MiBs; a read between those is served by
 * reading the member again from its start, onwards while the reads move
 * forward. Every byte inflated counts against the file's budget, and the
 * member is read through at most MAX_PASSES times, so the work stays
 * bounded whatever the reads ask. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "scan_int.h"

#define WHOLE (16u << 20)  /* members up to this size are kept whole */
#define HEAD (4u << 20)
#define TAIL (4u << 20)
#define CHUNK (256u << 10)
#define MAX_PASSES 32

/* The buffers a judging thread keeps from one member to the next (it reads one after another):
 * glibc gives a freed block of MiBs back to the system at once (madvise), and the next member
 * faulted it in again page by page, which was a third of the scan's system time on a tree of
 * archives. One set a thread, at most WHOLE + CHUNK bytes of head; scan_stream_thread_end frees it. */
static _Thread_local struct {
    uint8_t *head, *scratch;
    size_t hcap;
} spare;

struct scan_stream {
    tc_src src;
    scan_seq seq;
    char *what;
    uint64_t *budget;
    uint64_t size;
    uint8_t *head;   /* the whole member, or its first nhead bytes */
    size_t hcap;     /* head's room */
    uint8_t *tail;   /* its last ntail bytes (NULL when whole) */
    size_t nhead, ntail;
    void *cur;       /* a reader positioned at pos, for reads between head and tail */
    uint64_t pos;
    unsigned passes;
    uint8_t *scratch;
};

static int take(scan_stream *s, uint64_t n, tc_diag *d)
{
    if (n > *s->budget)
        return tc_fail(d, TC_ERR_LIMIT,
                       "decompressing it takes more than --max-inflate-ratio times the file's size (at least "
                       "64 MiB): a decompression bomb?");
    *s->budget -= n;
    return 0;
}

static int seq_read(scan_stream *s, void *h, void *buf, size_t n, size_t *got, tc_diag *d)
{
    int rc = s->seq.read(h, buf, n, got, d);
    return rc ? rc : take(s, *got, d);
}

/* Bytes [off, off + n) from a reader moved there: the one open if it has not passed off. */
static int from_middle(scan_stream *s, uint64_t off, uint8_t *buf, size_t n, tc_diag *d)
{
    int rc = 0;
    if (!s->cur || off < s->pos) {
        if (s->cur)
            s->seq.close(s->cur);
        s->cur = NULL;
        if (++s->passes > MAX_PASSES)
            return tc_fail(d, TC_ERR_LIMIT, "decompressed more than %d times over (its readers jump about too much)",
                           MAX_PASSES);
        if ((rc = s->seq.open(s->seq.arg, &s->cur, d)))
            return rc;
        s->pos = 0;
    }
    while (s->pos < off) {
        size_t got = 0, want = off - s->pos < CHUNK ? (size_t)(off - s->pos) : CHUNK;
        if ((rc = seq_read(s, s->cur, s->scratch, want, &got, d)))
            return rc;
        if (!got)
            return tc_fail(d, TC_ERR_FORMAT, "ends early when decompressed again");
        s->pos += got;
    }
    while (n) {
        size_t got = 0;
        if ((rc = seq_read(s, s->cur, buf, n, &got, d)))
            return rc;
        if (!got)
            return tc_fail(d, TC_ERR_FORMAT, "ends early when decompressed again");
        buf += got;
        n -= got;
        s->pos += got;
    }
    return 0;
}

static int stream_read(void *ctx, uint64_t off, void *buf, size_t n, tc_diag *d)
{
    scan_stream *s = ctx;
    if (off + n <= s->nhead) {
        memcpy(buf, s->head + off, n);
        return 0;
    }
    if (s->tail && off >= s->size - s->ntail) {
        memcpy(buf, s->tail + (off - (s->size - s->ntail)), n);
        return 0;
    }
    return from_middle(s, off, buf, n, d);
}

/* The first pass: the size, and the bytes kept. */
static int first_pass(scan_stream *s, tc_diag *d)
{
    void *h = NULL;
    int rc = s->seq.open(s->seq.arg, &h, d);
    if (rc)
        return rc;
    s->passes = 1;
    size_t cap = s->hcap, rpos = 0;
    bool whole = true;
    for (;;) {
        size_t room = whole ? (cap - s->nhead) : CHUNK;
        if (whole && room < CHUNK) {
            if (tc_grow(&s->head, &cap, s->nhead + CHUNK, 1)) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                break;
            }
            room = cap - s->nhead;
        }
        uint8_t *dst = whole ? s->head + s->nhead : s->scratch;
        size_t got = 0;
        if ((rc = seq_read(s, h, dst, room < CHUNK ? room : CHUNK, &got, d)) || !got)
            break;
        s->size += got;
        if (whole) {
            s->nhead += got;
            if (s->nhead <= WHOLE)
                continue;
            /* too big to keep: the first HEAD bytes stay, the last TAIL go round a ring */
            if (!(s->tail = malloc(TAIL))) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(s->tail, s->head + s->nhead - TAIL, TAIL);
            rpos = 0;
            s->nhead = HEAD;
            uint8_t *kept = malloc(HEAD); /* give back what was held while the whole might have fit */
            if (kept) {
                memcpy(kept, s->head, HEAD);
                free(s->head);
                s->head = kept;
                cap = HEAD;
            }
            whole = false;
            continue;
        }
        for (size_t k = 0; k < got;) { /* into the ring */
            size_t piece = TAIL - rpos < got - k ? TAIL - rpos : got - k;
            memcpy(s->tail + rpos, s->scratch + k, piece);
            rpos = (rpos + piece) % TAIL;
            k += piece;
        }
    }
    s->seq.close(h);
    s->hcap = cap;
    if (rc || whole)
        return rc;
    /* the ring's oldest byte is at rpos: turn it so that the tail starts at 0 */
    uint8_t *lin = malloc(TAIL);
    if (!lin)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memcpy(lin, s->tail + rpos, TAIL - rpos);
    memcpy(lin + TAIL - rpos, s->tail, rpos);
    free(s->tail);
    s->tail = lin;
    s->ntail = TAIL;
    return 0;
}

int scan_stream_open(scan_stream **out, const scan_seq *seq, const char *what, uint64_t *budget, tc_diag *d)
{
    *out = NULL;
    scan_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->what = strdup(what))) {
        free(s);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    s->scratch = spare.scratch, s->head = spare.head, s->hcap = spare.hcap; /* this thread's spare set, if any */
    spare.scratch = spare.head = NULL, spare.hcap = 0;
    if (!s->scratch && !(s->scratch = malloc(CHUNK))) {
        scan_stream_close(s);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    s->seq = *seq;
    s->budget = budget;
    int rc = first_pass(s, d);
    if (rc) {
        scan_stream_close(s);
        return rc;
    }
    if (s->tail)
        tc_src_init_fn(&s->src, s->size, stream_read, s, s->what);
    else
        tc_src_init_mem(&s->src, s->head, s->nhead, s->what);
    *out = s;
    return 0;
}

const tc_src *scan_stream_src(const scan_stream *s) { return &s->src; }

void scan_stream_close(scan_stream *s)
{
    if (!s)
        return;
    if (s->cur)
        s->seq.close(s->cur);
    /* kept for the thread's next member, unless it holds a set already (a member read inside
     * another's) or this head grew past what a member kept whole needs */
    if (!spare.scratch && s->scratch && s->hcap <= (size_t)WHOLE + CHUNK) {
        spare.scratch = s->scratch, spare.head = s->head, spare.hcap = s->hcap;
        s->scratch = s->head = NULL;
    }
    free(s->head);
    free(s->tail);
    free(s->scratch);
    free(s->what);
    free(s);
}

void scan_stream_thread_end(void)
{
    free(spare.head);
    free(spare.scratch);
    spare.head = spare.scratch = NULL;
    spare.hcap = 0;
}

/* ---- files ------------------------------------------------------------------ */

#define GROW_MIN ((size_t)8 << 10) /* the first read of either end */

/* The head holds the file's bytes [0, hhave): made to hold [0, end) and, so
 * that a pickle read piece by piece takes few reads, twice what it held. */
static int grow_head(scan_file_src *s, uint64_t end, tc_diag *d)
{
    if (!s->head && !(s->head = malloc(s->nhead)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t want = s->hhave > GROW_MIN / 2 ? 2 * s->hhave : GROW_MIN;
    if (want < end)
        want = (size_t)end;
    if (want > s->nhead)
        want = s->nhead;
    int rc = tc_src_read(s->file, s->hhave, s->head + s->hhave, want - s->hhave, "kept bytes", d);
    if (rc)
        return rc;
    s->hhave = want;
    return 0;
}

/* The tail holds the file's last thave bytes, at its end (tail + ntail - thave):
 * made to hold those from off on, and twice what it held. */
static int grow_tail(scan_file_src *s, uint64_t off, tc_diag *d)
{
    if (!s->tail && !(s->tail = malloc(s->ntail)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    uint64_t size = s->file->size;
    size_t want = s->thave > GROW_MIN / 2 ? 2 * s->thave : GROW_MIN;
    if (want < size - off)
        want = (size_t)(size - off);
    if (want > s->ntail)
        want = s->ntail;
    int rc = tc_src_read(s->file, size - want, s->tail + s->ntail - want, want - s->thave, "kept bytes", d);
    if (rc)
        return rc;
    s->thave = want;
    return 0;
}

static int file_read(void *ctx, uint64_t off, void *buf, size_t n, tc_diag *d)
{
    scan_file_src *s = ctx;
    uint64_t size = s->file->size;
    int rc = 0;
    if (n == 0) /* (an empty file has no ends to copy from) */
        return 0;
    /* a read that begins inside an end (or at its edge) and goes past it extends it: the reader
     * reads on from there (a pickle, a directory); one that does not touch an end reads only
     * itself (a zip's local header between two records, say) */
    if (off + n > s->hhave && off + n <= s->nhead && off <= s->hhave)
        rc = grow_head(s, off + n, d);
    else if (off + n > s->hhave && off < size - s->thave && off >= size - s->ntail && off + n >= size - s->thave)
        rc = grow_tail(s, off, d);
    if (rc)
        return rc;
    if (off + n <= s->hhave) {
        memcpy(buf, s->head + off, n);
        return 0;
    }
    if (off >= size - s->thave) {
        memcpy(buf, s->tail + s->ntail - (size - off), n);
        return 0;
    }
    return tc_src_read(s->file, off, buf, n, "data", d); /* between the ends: a record's data, say */
}

void scan_file_src_open(scan_file_src *s, const tc_src *file)
{
    memset(s, 0, sizeof *s);
    s->file = file;
    s->nhead = s->ntail = file->size < SCAN_KEEP ? (size_t)file->size : SCAN_KEEP; /* (a small file's ends overlap) */
    tc_src_init_fn(&s->src, file->size, file_read, s, file->what);
}

void scan_file_src_close(scan_file_src *s)
{
    free(s->head);
    free(s->tail);
    s->head = s->tail = NULL;
}
