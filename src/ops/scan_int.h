/* The parts of scan (scan.h): one file judged (scan_judge.c), the archives
 * and compressed streams it reads members from (scan_archive.c), the
 * sources those members are read through (scan_src.c), and the items both
 * make (scan_item.c). The archive walker judges each member through the
 * job's callback (scan_judge_cb), so that it calls nothing of the judge's
 * file, which calls it. */
#ifndef TC_SCAN_INT_H
#define TC_SCAN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "scan.h"
#include "source.h"
#include "vec.h"

/* Why an item is skipped: what tc_scan_totals counts it as (a file that is no model file unless
 * the walk says otherwise). */
typedef enum scan_skip { SCAN_SKIP_NOT_MODEL, SCAN_SKIP_OTHER_NAME, SCAN_SKIP_SPECIAL, SCAN_SKIP_KERNEL } scan_skip;

/* A result as a worker makes it: every string its own. */
typedef struct scan_item {
    char *kind, *reason;
    TC_VEC(char *) member;
    tc_scan_verdict verdict;
    scan_skip skip;        /* with TC_SCAN_SKIPPED */
    uint64_t size;
    TC_VEC(tc_scan_global) globals; /* name and why owned */
    TC_VEC(char *) hazards;
} scan_item;

typedef TC_VEC(scan_item) scan_items;

void scan_items_free(scan_items *v);

/* How the bytes of an archive's member are judged: fn(ctx, src, name, wrap,
 * depth), as scan_judge judges them, on the job ctx stands for. */
typedef struct scan_judge_cb {
    int (*fn)(void *ctx, const tc_src *src, const char *name, const char *wrap, unsigned depth);
    void *ctx;
} scan_judge_cb;

/* Where a file's items go once it holds `at` of them: fn hands them on (taking them over, in
 * order, the file's earlier items first) so that an archive of a million members is held a batch
 * at a time, not whole. fn returns 0, 1 when no more items of this file are wanted (it turned
 * out to be another name of a file judged before), or TC_ERR_NOMEM. */
typedef struct scan_flush {
    int (*fn)(void *ctx, scan_items *items);
    void *ctx;
    size_t at;
} scan_flush;

/* One file being judged: where its items go, the member names down to the
 * bytes being judged now, what decompression may still cost, and how its
 * archives' members are judged. */
typedef struct scan_job {
    const tc_scan_opts *o;
    const char *path;
    scan_items *out;
    TC_VEC(char *) chain;  /* member names, outermost first (not owned) */
    uint64_t budget;       /* bytes the file's compressed members may still inflate to */
    uint64_t archives;     /* archives and compressed streams read */
    uint64_t skipped;      /* skipped items not kept (unless the options ask for them) */
    uint64_t judged;       /* items made that are not skipped ones, handed on or not */
    scan_item sink;        /* what scan_emit hands back for those */
    scan_judge_cb judge;   /* scan_judge on this job (scan_file fills it); none for a job that only emits */
    const scan_flush *flush; /* NULL: every item stays in out */
    bool unwanted;         /* flush said no more: later items go to the sink */
} scan_job;

/* What scan_file learnt of the file it judged: its identity (known: it was opened) and size. */
typedef struct scan_fstat {
    bool known;
    uint64_t dev, ino, nlink;
    uint64_t size;
} scan_fstat;

#define SCAN_SIZE_UNKNOWN UINT64_MAX /* the walk listed the file without a stat */

/* Judge path (a regular file of size bytes, or SCAN_SIZE_UNKNOWN) into out, handed on through
 * flush where it is not NULL; *archives and *skipped count what it read as archives and the
 * skipped items it did not keep, *fst what it found the file to be (known before the first item
 * is handed on). 0, or TC_ERR_NOMEM. */
int scan_file(const tc_scan_opts *o, const char *path, uint64_t size, scan_items *out, const scan_flush *flush,
              uint64_t *archives, uint64_t *skipped, scan_fstat *fst);

/* Judge the bytes of src, the member j->chain of the file (internal name:
 * a path no file can lie under, for the drivers; wrap: the compression it
 * came out of, for its kind; depth: the archives around it). */
int scan_judge(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth);

/* An item for the bytes being judged now (j->chain), with kind, verdict and
 * reason (copied; reason may be NULL). NULL when out of memory. A skipped
 * item the options do not ask for is only counted (the item returned is
 * then a scratch one). The items made before it may have been handed on
 * (j->flush): no pointer to an item is good past the next scan_emit. */
scan_item *scan_emit(scan_job *j, const char *kind, const char *wrap, tc_scan_verdict v, uint64_t size,
                     const char *reason);
/* What the job's scratch item holds, freed (once the job made its last item). */
void scan_job_end(scan_job *j);

/* Read src as an archive or a compressed stream: its members judged (each
 * through j->judge, its name pushed on j->chain). 1 when it is one (its
 * items emitted, its failures among them), 0 when it is not, TC_ERR_NOMEM.
 * refused: a driver of the registry took src for its format and failed (a
 * zip torch.load reads as a checkpoint is then no archive). */
int scan_archive(scan_job *j, const tc_src *src, const char *name, const char *wrap, unsigned depth, bool refused);

/* ---- member sources -------------------------------------------------------- */

/* A reader of one member's bytes from its first, in order. */
typedef struct scan_seq {
    int (*open)(void *arg, void **h, tc_diag *d);
    int (*read)(void *h, void *buf, size_t n, size_t *got, tc_diag *d); /* *got 0: the end */
    void (*close)(void *h);
    void *arg;
} scan_seq;

/* A member's bytes as a source with random access, made from a sequential
 * reader: read once through (its size learnt, its bytes kept when they are
 * few, else its first and last MiBs), then read again from the start when a
 * reader asks for bytes in between before the last place read. */
typedef struct scan_stream scan_stream;

/* Read seq through once. *out owns the stream; its source is scan_stream_src.
 * Every byte decompressed is taken from *budget. */
int scan_stream_open(scan_stream **out, const scan_seq *seq, const char *what, uint64_t *budget, tc_diag *d);
const tc_src *scan_stream_src(const scan_stream *s);
void scan_stream_close(scan_stream *s);
/* Free the buffers this thread kept from its last stream for its next (call before it ends). */
void scan_stream_thread_end(void);

/* ---- files ------------------------------------------------------------------ */

/* A file on disk as scan reads it: every driver's probe reads its first bytes,
 * a zip's end is searched for backwards, a header lies at the start, so up to
 * SCAN_KEEP bytes of either end are kept as they are read: the first read of
 * an end takes 8 KiB, a read that goes on past what an end holds takes twice
 * as much (so a pickle read piece by piece takes a few reads). Other reads (a
 * zip's local headers between records) go to the file: the pages of tensor
 * data between them are never read. The source is one thread's, as
 * scan_file's are. */
#define SCAN_KEEP ((size_t)64 << 10)

typedef struct scan_file_src {
    tc_src src;           /* what the drivers read */
    const tc_src *file;
    uint8_t *head, *tail; /* NULL until first read */
    size_t nhead, ntail;  /* the most either end keeps */
    size_t hhave, thave;  /* what each holds: the first hhave bytes, the last thave */
} scan_file_src;

/* file must outlive *s; scan_file_src_close frees what it kept. */
void scan_file_src_open(scan_file_src *s, const tc_src *file);
void scan_file_src_close(scan_file_src *s);

#endif
