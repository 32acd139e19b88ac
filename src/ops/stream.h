/* The one cast stream: a storage's or a tensor's bytes read through their
 * checkpoint's driver, cast as a plan says, and written where a format
 * driver asked (tc_data_fn). Every writer of tensor data goes through here.
 *
 * Bytes that lie uncompressed in a file go through the parallel transfer
 * (xfer.h: several threads, copy_file_range for unchanged bytes); the rest
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

/* Bytes a tensor takes as a contiguous tensor of dtype dt. */
static inline uint64_t tc_tensor_bytes_as(const tc_tensor *t, tc_dtype dt) { return t->numel * tc_dtype_size(dt); }

#endif
