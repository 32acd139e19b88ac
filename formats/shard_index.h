/* safetensors helpers shared by formats/safetensors.c, formats/shard_index.c
 * and src/convert.c: the dtype names of safetensors 0.8, and sharded
 * checkpoints described by an index (model.safetensors.index.json,
 * pytorch_model.bin.index.json).
 *
 * Ownership: a tc_index owns its tables and strings; tc_index_free accepts
 * NULL. Shards are opened by the caller, one at a time, with tc_ckpt_open. */
#ifndef TC_SHARD_INDEX_H
#define TC_SHARD_INDEX_H

#include <stdint.h>
#include <stdbool.h>

#include "ckpt.h"

/* ---- safetensors dtype names ------------------------------------------- */

typedef struct tc_st_dtype {
    const char *name;   /* "F32" */
    tc_dtype dtype;     /* TC_DT_INVALID when tensorctl has no such type (F4, F6_*) */
    unsigned bits;      /* bits per element */
    int rank;           /* position in the reference library's Dtype enum (sort key) */
} tc_st_dtype;

/* The entry for a safetensors dtype name, or NULL when safetensors has none. */
const tc_st_dtype *tc_st_dtype_lookup(const char *name);
/* The entry safetensors uses for t, or NULL when it cannot hold t. */
const tc_st_dtype *tc_st_dtype_of(tc_dtype t);

/* ---- shard index --------------------------------------------------------- */

typedef struct tc_shard {
    char *file;        /* as written in the index, relative to it */
    char *path;        /* resolved against the index's folder */
    size_t ntensors;   /* names the index maps to this shard */
} tc_shard;

typedef struct tc_index_entry {
    char *name;
    size_t shard;      /* index into shards */
} tc_index_entry;

typedef struct tc_index {
    char *path;
    tc_kv *meta;       /* "metadata" values, as text (numbers printed) */
    size_t nmeta;
    tc_index_entry *e; /* weight_map in file order */
    size_t n;
    tc_shard *sh;      /* in order of first mention */
    size_t nsh;
    uint64_t total_size; /* metadata.total_size, 0 when absent */
    bool has_total_size;
} tc_index;

/* True when path names an index by its name (*.index.json). */
bool tc_index_path(const char *path);
/* Read and validate the index JSON (not the shards). */
int tc_index_open(tc_index **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_index_free(tc_index *ix);
/* Open shard i (tc_ckpt_open) and check it holds exactly the tensors the
 * index maps to it. On a mismatch the shard is closed and d says which
 * tensor is missing or extra. */
int tc_index_open_shard(const tc_index *ix, size_t i, const tc_limits *lim, tc_ckpt **out, tc_diag *d);

/* The shard of a tensor of a checkpoint opened from an index (format
 * "safetensors-index" or "torch-index"), or NULL for other checkpoints. */
const char *tc_index_shard_of(const tc_ckpt *c, const tc_tensor *t);

#endif
