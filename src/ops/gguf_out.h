/* Any checkpoint tensorctl reads written as GGUF: each tensor in a ggml type,
 * cast or quantised block by block in the cast stream (bounded memory,
 * whatever the size), the metadata of a GGUF input carried over.
 *
 * Types: without a target every tensor keeps its type (a GGUF input's
 * blocks are copied as they are; other inputs' dtypes as the GGUF type of
 * the same name, and a dtype GGUF lacks is an error naming --drop). With a
 * target (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: the output of
 * gguf-py's quantize() on the tensor as float32, bit for bit) the
 * floating-point tensors take it, except those --keep names or --only does
 * not, and 1-D tensors (norms, biases), which are written F32 as
 * llama.cpp's converter writes them unless --only names them; a tensor
 * whose rows are not a whole number of blocks falls back to F16, as that
 * converter does. A tensor already in its output type is copied unchanged.
 *
 * Metadata: a GGUF input's KVs in order, less general.alignment, the
 * split.* keys and arrays of arrays (reported as dropped); each --kv
 * replaces the key it names in place or is added after them; with a
 * target, general.file_type becomes llama.cpp's file type of it and a
 * quantised output gets general.quantization_version 2 if it has none. The
 * alignment is 32 unless a --kv general.alignment=u32:N asks otherwise.
 *
 * Split output (max_shard): files OUT-0000K-of-0000N.gguf as gguf-split
 * and GGUFWriter name them, a new one started when the next tensor would
 * take the current one past max_shard bytes of tensor data; the first holds
 * the metadata, every one split.no, split.count and split.tensors.count.
 * One shard's worth is written as OUT itself. All are written under
 * temporary names and published together, or none.
 *
 * Nothing here prints; the report is the caller's (tc_convert_report_free). */
#ifndef TC_GGUF_OUT_H
#define TC_GGUF_OUT_H

#include "convert.h"
#include "gguf.h"

typedef struct tc_gguf_opts {
    tc_qtype to;                  /* target type; TC_Q_NONE: each tensor keeps its own */
    const char *const *keep;      /* with a target: names left in their type (globs, as for casts) */
    size_t nkeep;
    const char *const *only;      /* if any: only these names take the target (1-D ones included) */
    size_t nonly;
    const tc_gguf_wkv *kv;        /* --kv, in order */
    size_t nkv;
    tc_keyops keys;               /* key surgery on the names */
    uint64_t max_shard;           /* 0: one file */
    unsigned dst_flags;           /* TC_DST_FORCE, TC_DST_NO_SYNC */
    uint64_t max_expand;          /* a view written out may take this many times its storage (0: default) */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} tc_gguf_opts;

typedef struct tc_gguf_report {
    tc_convert_report r;          /* ntensors, data_bytes, dropped (KVs not carried) */
    size_t nquant;                /* tensors cast or quantised to the target */
    size_t n1d;                   /* 1-D tensors written F32 (with a target) */
    size_t nfallback;             /* rows not whole blocks: written F16 */
    size_t nkept;                 /* --keep/--only and tensors that are not floating-point: unchanged */
    size_t nfiles;                /* files written */
    uint64_t file_bytes;          /* their bytes */
    char *first;                  /* the first file written (the caller frees it) */
    bool no_arch;                 /* the output has no general.architecture */
    bool low_align;               /* the alignment asked for is below 32 */
} tc_gguf_report;

/* c as GGUF into out (a path ending in .gguf). On failure nothing is left behind. */
int tc_gguf_convert(tc_ckpt *c, const tc_gguf_opts *o, const char *out, tc_gguf_report *rep, tc_diag *d);
void tc_gguf_report_free(tc_gguf_report *r);

#endif
