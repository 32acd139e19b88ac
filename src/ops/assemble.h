/* Tensors assembled from chunks (distributed checkpoints): a storage whose
 * bytes are the whole tensor in C order, held by the storages of its chunks
 * (tc_ckpt_chunks), each chunk a box of the tensor. A chunk may start inside
 * its storage (soffset: a parameter's piece of a ZeRO rank's flat buffer),
 * and its storage may hold another element type than the tensor, which the
 * assembly casts from (every chunk of a tensor holds the same one).
 *
 * The output is produced in order. Each chunk is a sequence of runs: the
 * pieces contiguous both in the chunk and in the whole tensor (a chunk split
 * off on dimension 0 is one run; a column of a matrix, one run per row).
 * The runs of all chunks are merged by their position, and a gap or an
 * overlap is an error. A long run goes through the parallel transfer (with
 * the chunk's own CRC-32 when it is trusted); short ones are gathered into a
 * buffer that is cast once (on the plan's engine), checksummed on the plan's
 * threads and written at once.
 * Each chunk's bytes are read through its storage's reader
 * (tc_storage_open), in order.
 *
 * Memory: two buffers of at most 8 MiB (32 MiB on the GPU), read-ahead for
 * the chunks being read sharing 32 MiB, and for a chunk stored in another
 * order than C's (channels_last), a window of 4 MiB. */
#ifndef TC_ASSEMBLE_H
#define TC_ASSEMBLE_H

#include <stdbool.h>

#include "stream.h"

/* Storage i of c is assembled from chunks. */
bool tc_assembled(const tc_ckpt *c, size_t i);

/* Elements [lo, lo + n) of storage i (assembled; all of it, or a
 * contiguous view's range: one storage may hold several tensors, as a ZeRO
 * parameter group does), cast to `to` on p's engine, into dst at off; *crc
 * (when crc is not NULL) receives the CRC-32 of what was written; stats
 * (may be NULL) the cast's counts. The elements before lo are passed over
 * unread where the chunk holding them is a plain range of its file. */
int tc_assemble(tc_plan *p, const tc_ckpt *c, size_t i, uint64_t lo, uint64_t n, tc_dtype to, tc_dst *dst,
                uint64_t off, uint32_t *crc, tc_cast_stats *stats, tc_diag *d);

/* Where in its file the chunk lies that storage i (assembled) starts with,
 * when that chunk's bytes are copied to the start of the output as they lie
 * (C order, whole rows below the first dimension, more than the gathering
 * buffer takes): the output's writer can then place the tensor at the same
 * offset within a block, and the file system share those blocks (tc_xfer).
 * False otherwise, and where the chunk cannot be opened (the copy reports
 * that). */
bool tc_assembled_origin(const tc_ckpt *c, size_t i, uint64_t *off);

/* The same elements to a sink (cast on the CPU). */
int tc_assemble_elements(const tc_ckpt *c, size_t i, uint64_t lo, uint64_t n, tc_dtype to, tc_sink_fn sink, void *ctx,
                         tc_cast_stats *stats, tc_diag *d);

#endif
