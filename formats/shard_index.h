/* Sharded checkpoints described by an index (model.safetensors.index.json,
 * pytorch_model.bin.index.json): {"metadata": {...}, "weight_map": {tensor
 * name: shard file}}.
 *
 * As a format (tc_format_safetensors_index, tc_format_torch_index) an index
 * lists the whole model; its storages are read through the shard holding
 * them. The set operations use the index itself, through tc_index.
 *
 * Shard files are relative paths under the index's folder: subfolders are
 * allowed, ".." components, absolute paths and backslashes are not, and a
 * shard may not itself be an index.
 *
 * Ownership: a tc_index owns its tables and strings; tc_index_free accepts
 * NULL. Shards are opened by the caller, one at a time. */
#ifndef TC_SHARD_INDEX_H
#define TC_SHARD_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"
#include "dest.h"
#include "strmap.h"

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
    size_t nmeta, metacap;
    tc_index_entry *e; /* weight_map in file order */
    size_t n;
    tc_strmap names;   /* entry name -> index into e */
    tc_shard *sh;      /* in order of first mention */
    size_t nsh, shcap;
    tc_strmap files;   /* shard file -> index into sh */
    uint64_t total_size; /* metadata.total_size, 0 when absent */
    bool has_total_size;
} tc_index;

/* True when path names an index by its name (*.index.json). */
bool tc_index_path(const char *path);
/* Read and validate the index JSON (not the shards). */
int tc_index_open(tc_index **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_index_free(tc_index *ix);
/* Every shard the index lists is there to be read (checked before any work
 * starts; a missing one is a bad input: an incomplete download). */
int tc_index_check_shards(const tc_index *ix, tc_diag *d);
/* Open shard i with opener and check it holds exactly the tensors the index
 * maps to it. On a mismatch the shard is closed and d says which tensor is
 * missing or extra. The index driver opens its shards so with the opener
 * its checkpoint was handed (tc_ckpt_opener). */
int tc_index_open_shard_by(const tc_index *ix, size_t i, tc_opener opener, const tc_limits *lim, tc_ckpt **out,
                           tc_diag *d);
/* The same through tc_open, whatever the shard's format (registry.c: the
 * registry above the index driver). */
int tc_index_open_shard(const tc_index *ix, size_t i, const tc_limits *lim, tc_ckpt **out, tc_diag *d);

/* Write an index into dst, as transformers writes it: "metadata" with
 * total_size first, then meta (less any total_size), values as strings;
 * "weight_map" of names[i] -> files[i] in the order given. */
int tc_index_write(tc_dst *dst, uint64_t total_size, const tc_kv *meta, size_t nmeta, const char *const *names,
                   const char *const *files, size_t n, tc_diag *d);

#endif
