/* scan: the verdict on every model file under folders and inside archives.
 *
 * Roots are files or folders; folders are walked (sorted by name), symlinks
 * followed, each file and folder reached once: a file that a symlink in the
 * tree points to is judged under the link's name (a Hugging Face cache's
 * snapshots name its blobs), and a file reached twice (hard links, several
 * links) is judged the first time only. Each file is judged as inspect
 * judges it (tc_open and the registry's drivers: the same verdict); what no
 * driver reads is tried as a raw pickle (what pickle.load imports), an
 * archive (zip, tar, 7z, ..., compressed or not: member by member, nested
 * ones to a bounded depth, nothing written to disk) and a compressed single
 * file (gzip, bzip2, xz, zstd, zlib), and is otherwise not a model file.
 *
 * Files are judged on a pool of threads; results come back on the caller's
 * thread, in the order of the walk, through a callback. Memory is bounded
 * by the number of threads and links, not by the size of the tree: a window
 * of results in flight, the links whose targets must be judged once, and
 * the sorted names of the folders on the path being walked.
 * No tensor data is read: members of uncompressed archives are read in
 * place, members of compressed ones are decompressed as they are read (held
 * in memory up to a few MiB, past that only their first and last MiBs, the
 * rest decompressed again when a reader asks for it). */
#ifndef TC_SCAN_H
#define TC_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "diag.h"

typedef enum tc_scan_verdict {
    TC_SCAN_SAFE,
    TC_SCAN_UNSAFE,
    TC_SCAN_UNREADABLE, /* no verdict: malformed, over a limit, cannot be read */
    TC_SCAN_SKIPPED,    /* not a model file, or a file judged under another name */
} tc_scan_verdict;

/* A global that makes an item unsafe. */
typedef struct tc_scan_global {
    const char *name;      /* "module.name" */
    const char *why;       /* what a dangerous one does, or NULL */
    uint32_t count;        /* how many times it is named */
} tc_scan_global;

/* One result: a file, or a member of an archive (valid during the callback). */
typedef struct tc_scan_item {
    const char *path;          /* the file as the walk reached it (a symlink's own path) */
    const char *const *member; /* the member within path's archive, then within that member, ... */
    size_t nmember;
    const char *target;        /* reached through a symlink: the file judged, else NULL */
    const char *kind;          /* a driver's name ("torch-zip", "npy"), "pickle", "zip archive", ... */
    tc_scan_verdict verdict;
    uint64_t size;             /* bytes (a member's uncompressed size) */
    const char *reason;        /* one line: why unsafe, unreadable or skipped; NULL when safe */
    const tc_scan_global *globals; /* the globals that make it unsafe, dangerous ones first */
    size_t nglobals;
    const char *const *hazards;    /* other reasons it is unsafe (a second reading, an object array) */
    size_t nhazards;
} tc_scan_item;

typedef struct tc_scan_totals {
    uint64_t files;        /* regular files reached (each once) */
    uint64_t members;      /* archive members judged */
    uint64_t safe, unsafe, unreadable, skipped;
    uint64_t other_names;  /* of skipped: other names (symlinks, hard links) of files judged under one before */
    uint64_t special;      /* of skipped: FIFOs, sockets and devices (never opened) */
    uint64_t kernel_folders; /* of skipped: folders of the kernel's own file systems (not entered) */
    uint64_t bytes;        /* of the files reached */
    uint64_t archives;     /* files and members read as archives or compressed streams */
} tc_scan_totals;

typedef struct tc_scan_opts {
    unsigned jobs;         /* threads judging files; 0: one per online CPU */
    tc_limits lim;
    const char *const *safe_globals; /* admitted as inspect --safe-globals admits them */
    size_t nsafe;
    unsigned max_archive_depth; /* archives inside archives, counting the outermost as 1 */
    bool report_skipped;   /* call on_item for skipped files too */
    void (*on_item)(void *ctx, const tc_scan_item *it); /* in walk order, on the caller's thread */
    void *ctx;
    size_t batch;          /* a file's items held before they are handed on (0: 256); what a scan holds is
                              about the threads' ring of files times this, whatever an archive holds */
} tc_scan_opts;

#define TC_SCAN_DEFAULT_ARCHIVE_DEPTH 4

/* Scan the roots. Fails (d says why) only when the scan itself cannot go
 * on: memory, threads; a file that cannot be read is an unreadable item. */
int tc_scan_run(const char *const *roots, size_t nroots, const tc_scan_opts *o, tc_scan_totals *t, tc_diag *d);

#endif
