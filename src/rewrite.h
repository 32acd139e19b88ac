/* Rewriting checkpoints: move storages between devices, cast floating-point
 * storages, and write the result as a torch zip file that real torch loads.
 *
 * The work is split in two: tc_plan decides, per storage, its new location
 * and dtype (and refuses inconsistent requests, e.g. a --keep that would
 * split a shared storage); the writers stream every storage through
 * tc_stream_storage, chunk by chunk, casting on the way when planned. Memory
 * stays bounded by the chunk size, whatever the checkpoint size. */
#ifndef TC_REWRITE_H
#define TC_REWRITE_H

#include <stdint.h>
#include <stdbool.h>

#include "ckpt.h"

typedef struct tc_devmap {
    const char *from, *to;
} tc_devmap;

typedef enum tc_engine { TC_ENGINE_AUTO, TC_ENGINE_CPU, TC_ENGINE_CUDA } tc_engine;

typedef struct tc_rewrite_opts {
    const char *all_to;          /* every storage to this location (NULL: only maps) */
    const tc_devmap *maps;       /* location -> location, applied first */
    size_t nmaps;
    tc_dtype dtype;              /* cast floating-point storages; TC_DT_INVALID: none */
    const char *const *keep;     /* glob patterns of names kept in their dtype */
    size_t nkeep;
    const char *const *only;     /* if any: cast only matching names */
    size_t nonly;
    tc_engine engine;
    int cuda_device;             /* for the CUDA engine */
    bool verify_crc;             /* recompute input CRCs instead of trusting them */
    uint32_t max_depth;
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} tc_rewrite_opts;

/* Per-storage decisions and what the cast did. */
typedef struct tc_plan_st {
    const char *location;        /* new location (points into opts or the ckpt) */
    tc_dtype dtype;              /* new element type (== old when not cast) */
    bool cast;
    uint64_t overflow, underflow; /* values that became inf/NaN, or zero, in the cast */
} tc_plan_st;

typedef struct tc_plan {
    tc_plan_st *st;              /* one per storage of the checkpoint */
    size_t ncast, nkept;         /* tensors cast, float tensors kept by --keep/--only */
    uint64_t in_bytes, out_bytes;/* storage bytes before and after */
    char engine[64];             /* what does the casts: "cpu (avx2+f16c)", "cuda:0"; "": no cast */
    bool cuda;                   /* casts run on the GPU */
    struct tc_pool *pool;        /* threads for stored records (made when first needed) */
    struct tc_cuda_caster *caster; /* the GPU's streams and buffers, when cuda */
} tc_plan;

int tc_plan_make(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, tc_diag *d);
void tc_plan_free(tc_plan *p);

/* Receives a storage's output bytes in order. */
typedef int (*tc_sink_fn)(void *ctx, const void *buf, size_t n, tc_diag *d);

/* Read storage i, cast as planned, and pass the bytes to sink in chunks. */
int tc_stream_storage(const tc_ckpt *c, tc_plan *p, size_t i, const tc_rewrite_opts *o, tc_sink_fn sink,
                      void *ctx, uint64_t *done, uint64_t total, tc_diag *d);

/* Rewrite c as a torch zip into fd (an open, empty file); out_path only names
 * the archive folder. The graph of c is modified. */
int tc_write_torch(tc_ckpt *c, tc_plan *p, const tc_rewrite_opts *o, int fd, const char *out_path,
                   tc_diag *d);

/* The pieces of tc_write_torch, for writers that build their own pickle:
 * open (archive folder from out_path, data.pkl, which is freed, byteorder),
 * one storage record data/<key> (copied, or streamed and cast as planned;
 * *werr tells whether a failure was on the writing side), close (version
 * record, central directory; frees w, passes rc through). */
#include "zip.h"
int tc_torch_zip_open(tc_zipw *w, int fd, const char *out_path, uint8_t *pkl, size_t plen, tc_diag *d);
int tc_torch_zip_storage(tc_zipw *w, const tc_ckpt *c, tc_plan *p, size_t i, size_t key, const tc_rewrite_opts *o,
                         uint64_t *done, uint64_t total, bool *werr, tc_diag *d);
int tc_torch_zip_close(tc_zipw *w, int rc, tc_diag *d);
/* Bytes of storage i after the planned cast. */
uint64_t tc_plan_out_bytes(const tc_ckpt *c, const tc_plan *p, size_t i);

/* fnmatch-style match of name against any of pats. */
bool tc_glob_any(const char *const *pats, size_t n, const char *name);

#endif
