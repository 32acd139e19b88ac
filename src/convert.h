/* Converting between torch checkpoints (.pt/.bin) and safetensors files.
 *
 * To safetensors: every dense tensor of a tc_ckpt (or of one entry, --key)
 * becomes a contiguous tensor; strided views are gathered element run by
 * element run through bounded buffers, casts (--dtype/--keep/--only) are
 * planned by tc_plan_make. Memory stays bounded whatever the tensor size.
 * Non-tensor objects cannot be represented and are reported as dropped.
 *
 * Shared storages (tied weights, views) are written once. Each other name
 * on a storage becomes an alias, recorded in __metadata__ under
 * TC_ST_ALIASES_KEY as a JSON object (text):
 *     {"alias name": {"of": "written name", "offset": N, "shape": [..],
 *                     "stride": [..], "same": true|false}, ...}
 * offset and stride count elements of the written tensor's storage (the
 * written tensor always covers its whole storage, contiguously); "same"
 * marks the same Python tensor object under two names (tied weights) rather
 * than a second view. Readers that do not know the key see the written
 * tensors only, as the reference converter gives; tc_convert_to_torch
 * restores every alias as a view of the same storage. When no tensor covers
 * a shared storage whole, the tensors on it are written as separate copies
 * (ncopies counts them).
 *
 * To torch: a pickle built from scratch as torch 2.x writes a state_dict
 * (OrderedDict of _rebuild_tensor_v2, or _rebuild_tensor_v3 with an
 * UntypedStorage for float8/uint16/32/64), tagged with one device, written
 * as a torch zip.
 *
 * Nothing here prints; out-params are set on success; the report is the
 * caller's to free with tc_convert_report_free (which accepts a zeroed one). */
#ifndef TC_CONVERT_H
#define TC_CONVERT_H

#include <stdint.h>
#include <stdbool.h>

#include "ckpt.h"
#include "rewrite.h"

#define TC_ST_ALIASES_KEY "tensorctl.aliases"

typedef struct tc_convert_opts {
    tc_rewrite_opts ro;   /* dtype, keep, only, progress, max_depth; all_to is ignored */
    const char *key;      /* only tensors under this entry, named relative to it (torch input) */
    const char *device;   /* location tag of .pt output storages (NULL: "cpu") */
} tc_convert_opts;

typedef struct tc_convert_report {
    char **dropped;       /* "name (why)" for every entry or tensor not written */
    size_t ndropped;
    size_t ntensors;      /* tensors written with their own data */
    size_t naliases;      /* names recorded as aliases (to safetensors) or restored (to torch) */
    size_t ncopies;       /* tensors of shared storages written as separate copies */
    size_t ncast, nkept;  /* from the cast plan */
    uint64_t data_bytes;  /* tensor bytes written */
    uint64_t overflow, underflow; /* values the cast turned into inf/NaN, or zero */
} tc_convert_report;

/* Pass t's elements, in C order (what torch's .contiguous() holds) and cast
 * to `to` (t->dtype: no cast), to sink in chunks of whole elements. Strided
 * views are gathered through bounded buffers. rep (may be NULL) receives the
 * cast's overflow and underflow counts. */
int tc_tensor_stream(const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_sink_fn sink, void *ctx,
                     tc_convert_report *rep, tc_diag *d);

/* Write c as a safetensors file into fd (an open, empty file). extra_meta
 * (may be NULL) is copied into __metadata__ after "format": "pt". */
int tc_convert_to_safetensors(tc_ckpt *c, const tc_convert_opts *o, const tc_kv *extra_meta, size_t nextra,
                              int fd, tc_convert_report *rep, tc_diag *d);

/* Write c (a safetensors checkpoint, or a torch one) as a torch zip into fd;
 * out_path names the archive folder. c's graph is built or modified. */
int tc_convert_to_torch(tc_ckpt *c, const tc_convert_opts *o, int fd, const char *out_path, tc_convert_report *rep,
                        tc_diag *d);

void tc_convert_report_free(tc_convert_report *r);

/* Bytes tensor t takes as a contiguous tensor of dtype dt. */
uint64_t tc_convert_tensor_bytes(const tc_tensor *t, tc_dtype dt);

/* One tensor to be written into a safetensors file, from an open checkpoint. */
typedef struct tc_st_item {
    const tc_ckpt *c;
    const tc_tensor *t;
    const char *name;     /* output name */
    tc_dtype out;         /* output dtype (a cast when != t->dtype) */
    uint64_t nbytes, begin;
} tc_st_item;

/* Write items (sorted in place the way the reference library sorts) with
 * the given metadata into fd. Tensors are cast with the CPU kernels. */
int tc_st_write(tc_st_item *items, size_t n, const tc_kv *meta, size_t nmeta, int fd, tc_convert_report *rep,
                const tc_rewrite_opts *ro, tc_diag *d);

/* ---- sharded sets ------------------------------------------------------------
 *
 * tc_convert_set reads the shard set of an index (IN.index.json) and writes a
 * new one: shards named as transformers names them (model-00001-of-0000N.
 * safetensors, pytorch_model-00001-of-0000N.bin) and their index (metadata
 * with total_size first, then the input's other metadata; weight_map sorted).
 *
 * Every input shard is opened first (metadata only), the whole set is planned
 * from tensor sizes after the casts, then the shards are written one at a
 * time, tensors streamed. The plan keeps the order of the input (shard by
 * shard, tensor by tensor) and starts a new shard when the next unit would
 * take the current one past max_shard bytes of tensor data; a unit larger
 * than max_shard gets a shard of its own. A unit is what must stay together
 * for the output to hold: to safetensors, a written tensor and its aliases;
 * to torch, a storage and every tensor on it (tied weights, views).
 *
 * The weight_map lists what each output shard holds: to safetensors, the
 * tensors in its header (aliases live in its __metadata__ and are restored
 * by tc_convert_to_torch); to torch, every name of its state_dict. Torch
 * shards are written as a flat state_dict (OrderedDict of name -> tensor or
 * Parameter): entries that are not dense tensors are reported as dropped.
 *
 * Outputs go through src/outfile.h; when one fails, the shards this call
 * wrote are removed and no index is written. */

#define TC_DEFAULT_MAX_SHARD 5000000000ull /* "5GB", as transformers' save_pretrained */

typedef struct tc_set_opts {
    tc_convert_opts co;
    bool to_safetensors;  /* else torch .bin shards */
    uint64_t max_shard;   /* bytes of tensor data per shard; 0: TC_DEFAULT_MAX_SHARD */
    bool force;           /* replace existing outputs */
    bool allow_unsafe;    /* convert shards that name dangerous globals */
    tc_limits lim;
} tc_set_opts;

typedef struct tc_set_report {
    tc_convert_report sum;  /* over the whole set */
    char *index_path;       /* the index written (or to be written) */
    char **shards;          /* output shard paths, in order */
    size_t nshards;
    size_t ninputs;         /* input shards */
    char *where;            /* on failure: the file the message is about */
} tc_set_report;

/* out: the output index (*.index.json) or a folder (the index is then
 * model.safetensors.index.json or pytorch_model.bin.index.json in it). */
int tc_convert_set(const char *in, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d);
void tc_set_report_free(tc_set_report *r);

#endif
