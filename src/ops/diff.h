/* diff: two checkpoints compared tensor by tensor, by name.
 *
 * Either side is anything tc_open reads (torch zip or legacy, safetensors, a
 * sharded set through its index) or a manifest (manifest.h: what
 * `inspect --json --hash` printed). Names are matched after key surgery
 * (--strip-prefix, keys.h's rule, on each side on its own). For every name in
 * both, the report says how dtype, shape, stride, storage offset and saved
 * device differ, and compares the values when the shapes agree:
 *
 *   - two checkpoints: element by element in C order (compare.h: the rule
 *     and the statistics), both tensors streamed in lockstep in chunks of
 *     at most 512 KiB, never whole. Elements stored as a plain range of a
 *     file are read by the threads of a pool, each chunk by whichever
 *     thread takes it; the rest (compressed records, strided views) are
 *     read in order by the caller and compared by the pool. Chunks are the
 *     same whatever the number of threads and their results are merged in
 *     order, so the report does not depend on it. Chunks of the same dtype
 *     are compared byte for byte first (memcmp), and only the blocks that
 *     differ are converted and compared element by element. A name that is
 *     the same tensor as an earlier name on both sides (tied weights) takes
 *     that name's result unread;
 *   - against a manifest: by the SHA-256 of the checkpoint's elements;
 *   - the same file twice (same inode): equal, unread.
 *
 * A name is equal when it is in both, its shapes agree and its values are
 * equal under the rule (or its SHA-256s match); dtype, stride, storage
 * offset and device differences are reported but count only with strict.
 * The checkpoints are equal when every name is.
 *
 * Nothing in a file is run; a file that is not safe to load is compared
 * all the same, and the report says so.
 *
 * Memory: two chunk buffers per thread, plus per side (when read in order)
 * one chunk per thread, and what tc_elems holds for a strided view.
 *
 * Ownership: a report owns everything it points to, the opened checkpoints
 * included; tc_diff_report_free releases it and accepts a zeroed report. */
#ifndef TC_DIFF_H
#define TC_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"
#include "compare.h"
#include "manifest.h"

typedef struct tc_diff_opts {
    tc_cmp_rule rule;             /* atol, rtol, equal_nan; sums for the cosine similarity (--stats) */
    bool strict;                  /* dtype, stride, offset and device differences make a name differ */
    bool strip;                   /* --strip-prefix, on each side */
    const char *strip_prefix;     /* with strip: this prefix; NULL: the one each side's names share */
    bool quick;                   /* stop at the first difference; the report is then partial */
    unsigned threads;             /* 0: one per CPU (at most 8) */
    uint64_t max_expand;          /* a view read out at more than this times its storage is an error (0: default) */
    tc_limits lim;
    const char *const *safe_globals; /* admitted before the safety note (--safe-globals) */
    size_t nsafe;
    void (*progress)(void *ctx, uint64_t done, uint64_t total); /* bytes read, on the caller's thread */
    void *progress_ctx;
} tc_diff_opts;

typedef enum tc_diff_how {
    TC_DIFF_NOT_COMPARED,  /* only on one side, shapes differ, no data, dtypes not comparable: see why_not */
    TC_DIFF_VALUES,        /* element by element */
    TC_DIFF_SHA256,        /* against a manifest's SHA-256 */
    TC_DIFF_METADATA,      /* a manifest without SHA-256: names, dtypes and shapes only */
    TC_DIFF_SAME_FILE,     /* one file on both sides: equal, unread */
    TC_DIFF_NO_DATA,       /* no data on either side (meta tensors): metadata only */
} tc_diff_how;

/* One side's view of a tensor. */
typedef struct tc_diff_meta {
    const char *name;             /* as its file names it */
    tc_dtype dtype;
    int ndim;
    const int64_t *shape, *stride;
    bool has_layout;              /* stride and offset are known */
    int64_t offset;
    const char *device;           /* NULL when the file records none (safetensors) */
    bool has_data;
    uint64_t numel;
} tc_diff_meta;

/* The two SHA-256s of an entry compared by them, as hex text. */
typedef struct tc_diff_shas {
    char a[65], b[65];
} tc_diff_shas;

/* An entry per name: its size is the report's, so what only some entries say lives apart. */
typedef struct tc_diff_entry {
    const char *name;             /* after --strip-prefix (the report's) */
    long ia, ib;                  /* the tensor (or manifest entry) of A and of B, -1 when absent */
    bool dtype_differs, shape_differs, stride_differs, offset_differs, device_differs;
    bool done;                    /* compared (a quick run leaves later names undone) */
    bool equal;
    bool bitwise;                 /* values compared, same dtype, every byte equal */
    tc_diff_how how;
    const char *why_not;          /* TC_DIFF_NOT_COMPARED: why, as a phrase */
    double cosine;                /* with rule.sums: NaN when undefined */
    uint64_t nvalues;             /* TC_DIFF_VALUES: elements compared */
    tc_cmp_res *res;              /* TC_DIFF_VALUES, owned: the result, when it says more than "nvalues elements,
                                     every one identical" (NULL then: tc_diff_res makes it) */
    tc_diff_shas *sha;            /* TC_DIFF_SHA256, owned */
} tc_diff_entry;

/* The value comparison of an entry compared by values, in *tmp when the entry keeps none of its own
 * (its sums, which only the cosine needs, are then zero). */
const tc_cmp_res *tc_diff_res(const tc_diff_entry *e, tc_cmp_res *tmp);

typedef struct tc_diff_side {
    const char *path;
    tc_ckpt *c;                   /* a checkpoint, or */
    tc_manifest *m;               /* a manifest */
    char *prefix;                 /* what --strip-prefix removed from its names ("" when nothing) */
    char **own;                   /* per tensor: its name after --strip-prefix where that is not the tail of its
                                     own (else NULL); NULL when every one is */
    size_t ntensors;
    bool unsafe;                  /* loading it is not safe (it was only read) */
    char why_unsafe[1024];
} tc_diff_side;

typedef struct tc_diff_report {
    tc_diff_side a, b;
    bool same_file;
    tc_diff_entry *e;             /* A's names in A's order, then B's others in B's order */
    size_t n;
    size_t ncompared, nequal, nbitwise, ndiffer, nonly_a, nonly_b;
    bool equal;
    bool partial;                 /* quick: stopped at the first difference */
} tc_diff_report;

/* Compare the files at paths a and b. 0 with the report filled (equal or
 * not), or an error (d's subject: the file). */
int tc_diff_files(tc_diff_report *rep, const char *a, const char *b, const tc_diff_opts *o, tc_diag *d);
void tc_diff_report_free(tc_diff_report *r);

/* Side 0 (A) or 1 (B) of entry e, false when that side lacks the name. */
bool tc_diff_meta_of(const tc_diff_report *r, const tc_diff_entry *e, int side, tc_diff_meta *out);
/* The format of a side: its driver's name, or "manifest". */
const char *tc_diff_format(const tc_diff_side *s);

#endif
