/* The one cast stream: a storage's or a tensor's bytes read through their
 * checkpoint's driver, cast as a plan says, and written where a format
 * driver asked (tc_data_fn). Every writer of tensor data goes through here.
 *
 * Bytes that lie uncompressed in a file go through the parallel transfer
 * (xfer.h: several threads; shared blocks for unchanged bytes where the
 * file system clones them); the rest
 * (deflated records, casts on the GPU, strided views) streams through
 * bounded buffers. Memory stays bounded by the chunk sizes whatever the
 * checkpoint's size. */
#ifndef TC_STREAM_H
#define TC_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "cast.h"
#include "ckpt.h"
#include "dest.h"
#include "plan.h"

/* Storage i of c, cast as p plans, into dst at off; *crc (when crc is not
 * NULL) receives the CRC-32 of what was written. Unchanged bytes are checked
 * against the CRC-32 the input records, when it records one. */
int tc_stream_storage(tc_plan *p, const tc_ckpt *c, size_t i, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d);

/* Where tc_stream_storage takes storage i's bytes from when it passes them
 * through unchanged from c's file (stored uncompressed, not cast): true and
 * *off, their offset there (a tc_origin_fn's answer). */
bool tc_stream_origin(const tc_plan *p, const tc_ckpt *c, size_t i, uint64_t *off);

/* Tensor t's elements in C order (what torch's .contiguous() holds), cast
 * to `to` on the CPU, into dst at off (*crc as above); stats (may be NULL)
 * receives the cast's counts. */
int tc_stream_tensor(tc_plan *p, const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_dst *dst, uint64_t off,
                     uint32_t *crc, tc_cast_stats *stats, tc_diag *d);

/* Receives bytes in order. */
typedef int (*tc_sink_fn)(void *ctx, const void *buf, size_t n, tc_diag *d);

/* The same elements to a sink, in chunks of whole elements. */
int tc_tensor_elements(const tc_ckpt *c, const tc_tensor *t, tc_dtype to, tc_sink_fn sink, void *ctx,
                       tc_cast_stats *stats, tc_diag *d);

/* The same elements pulled, uncast: a reader that returns them in order, a
 * chunk at a time, so that two tensors can be walked in lockstep. A
 * contiguous tensor stored uncompressed is also a plain range of a file
 * (tc_elems_range), which callers may read in parallel chunks themselves.
 * Memory: a strided view holds its storage (up to 32 MiB) or a 32 MiB
 * cache of it; other tensors nothing beyond the caller's buffer.
 * Ownership: the reader keeps its storage open until tc_elems_close, which
 * accepts NULL. Threads: readers of one checkpoint are opened and closed one
 * at a time (drivers keep state across readers, such as an index's open
 * shard); each reader is read by one thread at a time, and different
 * readers may be read at once. */
typedef struct tc_elems tc_elems;
int tc_elems_open(tc_elems **out, const tc_ckpt *c, const tc_tensor *t, tc_diag *d);
/* The next whole elements, at most n bytes of them (n at least one element);
 * *got is 0 only after the last. */
int tc_elems_read(tc_elems *e, void *buf, size_t n, size_t *got, tc_diag *d);
/* True when the tensor's elements are the bytes [*off, *off + nbytes) of
 * *src, which any thread may read (tc_src_read) until the reader is closed. */
bool tc_elems_range(const tc_elems *e, const tc_src **src, uint64_t *off);
void tc_elems_close(tc_elems *e);
/* Bytes a tensor takes as a contiguous tensor of dtype dt. */
static inline uint64_t tc_tensor_bytes_as(const tc_tensor *t, tc_dtype dt) { return t->numel * tc_dtype_size(dt); }

/* A view read out whole (written to safetensors, hashed) may take max_expand
 * times its storage's bytes, or TC_EXPAND_FLOOR bytes, whichever is more: a
 * stride-0 view of one element can stand for terabytes. 0: the default. */
#define TC_DEFAULT_MAX_EXPAND 16
#define TC_EXPAND_FLOOR (64u << 20)
uint64_t tc_expand_limit(uint64_t storage_bytes, uint64_t max_expand);
/* 0, or TC_ERR_LIMIT naming tensor t and --max-expand when its elements pass that limit. */
int tc_expand_check(const tc_ckpt *c, const tc_tensor *t, tc_dtype as, uint64_t max_expand, tc_diag *d);

#endif
