/* The plan of a rewrite: per storage of a checkpoint, its new location and
 * dtype; where the casts run; the counts the summary reports.
 *
 * tc_plan_make decides (and refuses inconsistent requests, e.g. a --keep that
 * would split a shared storage); the writers then stream every storage
 * through src/ops/stream.h, which casts as planned and adds to the counts. */
#ifndef TC_PLAN_H
#define TC_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"
#include "format.h"

typedef struct tc_devmap {
    const char *from, *to;
} tc_devmap;

typedef enum tc_engine { TC_ENGINE_AUTO, TC_ENGINE_CPU, TC_ENGINE_CUDA } tc_engine;

/* What does the work: the transfer threads and the GPU caster. A plan makes
 * its own unless its options lend it these (a set makes one for all its
 * shards: hundreds of plans must not hold hundreds of pools). */
typedef struct tc_engines {
    struct tc_pool *pool;          /* made when first needed */
    struct tc_cuda_caster *caster; /* made when the first cast is planned, with engine[] */
    char engine[64];
} tc_engines;
void tc_engines_free(tc_engines *e);

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
    uint32_t max_depth;          /* pickle nesting a writer may emit */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    tc_engines *engines;         /* lent to every plan made with these options; NULL: each its own */
    const struct tc_keyops *keys; /* whole rewrites: key surgery on the dicts holding tensors (rekey.h); NULL: none */
} tc_rewrite_opts;

/* What the cast of one storage did. */
typedef struct tc_plan_stat {
    tc_dtype from;               /* the element type its tensors see before the cast */
    uint64_t overflow, underflow; /* values that became inf/NaN, or zero */
} tc_plan_stat;

typedef struct tc_plan {
    tc_out_storage *out;         /* one per storage of the checkpoint: what becomes of it */
    tc_plan_stat *stat;          /* the same */
    size_t n;
    size_t ncast, nkept;         /* tensors cast, float tensors kept by --keep/--only */
    uint64_t in_bytes, out_bytes;/* storage bytes before and after (of the storages written) */
    bool *gone;                  /* per storage: viewed only by tensors key surgery removes, so not
                                    written (tc_plan_make_less; NULL: none) */
    size_t ngone;
    size_t nunreached;           /* of them, storages nothing in the file reaches (tc_storage.unreached) */
    char engine[64];             /* what does the casts: "cpu (avx2+f16c)", "cuda:0"; "": no cast */
    bool cuda;                   /* casts run on the GPU */
    const tc_rewrite_opts *o;    /* as made with */
    uint64_t done, total;        /* progress: input bytes streamed */
    uint64_t shared, copied;     /* output data shared with the input's blocks (cloned), and copied unchanged */
    tc_engines own;              /* the plan's own pool and caster, unless o->engines lends them */
    struct tc_cuda_caster *caster; /* the GPU's streams and buffers, when cuda (own or lent) */
    tc_src_cache *rcache;        /* small reads through a cache, while set (tc_step_cache_on) */
} tc_plan;

/* The plan's transfer threads (made now if need be; NULL: run on this thread). */
struct tc_pool *tc_plan_pool(tc_plan *p);

/* o must outlive the plan. */
int tc_plan_make(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, tc_diag *d);
/* The same for a rewrite that leaves out the tensors whose names[k] is NULL (tc_rekey's names, NULL:
 * none): they are neither cast nor counted, nor are the storages only they view. */
int tc_plan_make_less(tc_plan *p, const tc_ckpt *c, const tc_rewrite_opts *o, char *const *names, tc_diag *d);
void tc_plan_free(tc_plan *p);
/* The overflow and underflow of every storage, summed. */
void tc_plan_totals(const tc_plan *p, uint64_t *overflow, uint64_t *underflow);

/* fnmatch-style match of name against any of pats. */
bool tc_glob_any(const char *const *pats, size_t n, const char *name);

#endif
