/* The steps every stream of this layer is made of: n elements cast on the
 * plan's engine, a plain range of a file through the parallel transfer
 * (decoded from or encoded as blocks on the way), and the plan's progress.
 * stream.c, assemble.c and gguf_out.c are made of them; none calls another's
 * steps. */
#ifndef TC_STEP_H
#define TC_STEP_H

#include <stdint.h>

#include "cast.h"
#include "ckpt.h"
#include "dest.h"
#include "plan.h"
#include "qtype.h"

/* n elements of `from` at in, as `to` at out, counted into stats: on the
 * plan's GPU when it casts there (p may be NULL: the CPU). The one cast step
 * of every stream; the parallel transfer casts its chunks the same way. */
int tc_step_cast(const tc_plan *p, tc_dtype to, void *out, tc_dtype from, const void *in, size_t n,
                 tc_cast_stats *stats, const char *what, tc_diag *d);
/* The plain range [in_off, in_off + in_bytes) of src through the parallel
 * transfer, cast from `from` to `to`, into dst at off (*crc of the output
 * when crc is not NULL), counted as streamed and into stats (may be NULL). */
int tc_step_range(tc_plan *p, const tc_src *src, uint64_t in_off, uint64_t in_bytes, const char *what, tc_dtype from,
                  tc_dtype to, tc_dst *dst, uint64_t off, uint32_t *crc, tc_cast_stats *stats, tc_diag *d);
/* The same for the block codecs (xfer.h): the range's blocks of dec decoded
 * and cast to `to`, or its `from` elements encoded as blocks of enc (one of
 * dec and enc TC_Q_NONE; both for tc_step_range). */
int tc_step_coded(tc_plan *p, const tc_src *src, uint64_t in_off, uint64_t in_bytes, const char *what, tc_qtype dec,
                  tc_dtype from, tc_dtype to, tc_qtype enc, tc_dst *dst, uint64_t off, uint32_t *crc,
                  tc_cast_stats *stats, tc_diag *d);
/* From now until tc_step_cache_off, ranges of a few KiB of a file are read through a cache of the
 * 64 KiB from each read on (tc_src_cache): a file of many small records is read in 64 KiB reads,
 * not one read a record. For one write whose steps all run on this thread; without memory for
 * the cache, ranges are read as before. */
void tc_step_cache_on(tc_plan *p);
void tc_step_cache_off(tc_plan *p);
/* Progress of p: add input bytes streamed. */
void tc_step_progress(tc_plan *p, uint64_t add);

#endif
