/* Sharded sets: one driver for every command that writes a set from an index
 * (to-cpu/to-cuda of a set, convert between .bin and .safetensors sets), or
 * from one checkpoint (consolidate of a distributed checkpoint).
 *
 * Every input shard is opened first (metadata only) and checked against the
 * index, the whole output is planned, then the shards are written one at a
 * time, tensors streamed, each under a temporary name; only when every shard
 * and the index are complete are they renamed into place, the index last. A
 * failure, or SIGINT/SIGTERM/SIGHUP, leaves nothing of the new set; no input
 * is ever written over.
 *
 * Rewriting (TC_SET_REWRITE): each shard is rewritten whole under its own
 * name and relative path below the output folder (subfolders recreated), and
 * the index is copied unchanged.
 *
 * Converting (TC_SET_SAFETENSORS, TC_SET_TORCH): the set is re-sharded,
 * keeping the input's order (shard by shard, tensor by tensor) and starting a
 * new shard when the next unit would take the current one past max_shard
 * bytes of tensor data; a unit larger than max_shard gets a shard of its own.
 * A unit is what must stay together: to safetensors, a written tensor and its
 * aliases; to torch, a storage and every tensor on it. Shards are named as
 * transformers names them (model-00001-of-0000N.safetensors,
 * pytorch_model-00001-of-0000N.bin), with an index listing what each holds;
 * torch shards are flat state_dicts. With one_file, the set is joined into
 * the one file named by out instead (the plan's single shard), no index.
 *
 * Parts: a set can be written by several processes at once, on one machine
 * or many that see the same folder. Each computes the same plan from the
 * inputs' metadata alone; part I of N writes only the output shards k with
 * k % N == I - 1 (publishing them together when all are complete), and a
 * last step, run once every part has finished, checks that every shard is
 * there and holds what the plan puts in it, then writes the index. The
 * output is byte for byte what one process writes.
 *
 * A set written with TC_DST_FORCE over an index replaces that earlier set:
 * once the new one is in place, the shards the old index named that the new
 * set does not write are removed (rep->removed names them), so that no
 * earlier run's shard stays beside the new ones. Only those: a plain file
 * name in the index's folder, a regular file, none of the inputs; nothing
 * else in the folder is touched, and without TC_DST_FORCE the old index is
 * an output that exists (refused). A part (--part I/N) removes nothing; its
 * index step does. */
#ifndef TC_SET_H
#define TC_SET_H

#include <stdbool.h>
#include <stdint.h>

#include "convert.h"

#define TC_DEFAULT_MAX_SHARD 5000000000ull /* "5GB", as transformers' save_pretrained */

typedef enum tc_set_mode { TC_SET_REWRITE, TC_SET_SAFETENSORS, TC_SET_TORCH } tc_set_mode;

typedef struct tc_set_opts {
    tc_set_mode mode;
    tc_convert_opts co;   /* rewrite: co.ro as given (devices, maps, casts); convert: as convert takes it */
    uint64_t max_shard;   /* bytes of tensor data per shard; 0: TC_DEFAULT_MAX_SHARD */
    unsigned dst_flags;   /* of every output: TC_DST_FORCE (replace existing ones), TC_DST_NO_SYNC */
    bool allow_unsafe;    /* rewrite shards that are not safe to load */
    const char *const *safe_globals; /* globals admitted as safe (--safe-globals) */
    size_t nsafe;
    tc_limits lim;
    unsigned part, nparts;  /* this part (1..nparts) of the shards; nparts 0: all of them */
    bool index_only;        /* the last step of a set written in parts: the index */
    bool one_file;          /* converting: the whole set joined into the one file `out`, no index */
} tc_set_opts;

typedef struct tc_set_report {
    tc_convert_report sum;  /* over the whole set */
    char *index_path;       /* the index written */
    size_t nshards;         /* output shards */
    size_t ninputs;         /* input shards */
    size_t ncast, nkept;    /* rewrite: tensors cast and kept, over all shards */
    uint64_t file_bytes;    /* of every output file, the index included */
    char **removed;         /* the earlier set's shards removed (--force over an index): their names */
    size_t nremoved;
} tc_set_report;

/* in: an index (*.index.json), or any other checkpoint, taken as a set of
 * one input shard (converting only). out: the output index (*.index.json)
 * or a folder (the index then keeps the input index's name when rewriting,
 * else model.safetensors.index.json or pytorch_model.bin.index.json); with
 * one_file, the output file. */
int tc_set_run(const char *in, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d);
/* A set written from one checkpoint already open (extract's sharded output):
 * c is the set's only input (the caller keeps it; converting modes only). */
int tc_set_run_ckpt(tc_ckpt *c, const char *out, const tc_set_opts *o, tc_set_report *rep, tc_diag *d);
void tc_set_report_free(tc_set_report *r);

#endif
