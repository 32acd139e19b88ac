/* Parallel transfer of a stored byte range into the output file.
 *
 * A storage stored uncompressed in the input is read chunk by chunk (pread),
 * cast when asked, its CRC-32 taken (zlib) and written with pwrite straight
 * to its final place in the output. Every chunk is independent, so a small
 * pool of threads shares them; the chunk CRCs are joined in order with
 * crc32_combine. The output bytes, the CRC and the counts do not depend on
 * the number of threads, and a failure reported is always the one at the
 * lowest offset, so messages do not either.
 *
 * Unchanged bytes whose input and output offsets agree modulo
 * TC_SHARE_BLOCK share their whole blocks with the input where the file
 * system clones blocks (XFS, btrfs: tc_dst_clone), which costs no copy; the
 * partial blocks at either end, and everything where cloning is refused,
 * are read and written by the threads; only where the output's file system
 * copies on its server (tc_dst_offloads: NFS, SMB, Ceph) are they copied in
 * the kernel (copy_file_range, from 64 KiB up, when no CRC is wanted). A CRC
 * wanted of shared bytes is taken by reading them.
 *
 * Memory: two chunk buffers (at most 1 MiB each) per thread. */
#ifndef TC_XFER_H
#define TC_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include "cast.h"
#include "dest.h"
#include "diag.h"
#include "dtype.h"
#include "qtype.h"
#include "source.h"

/* Threads for tc_xfer_run; the caller's thread is one of them. */
typedef struct tc_pool tc_pool;

/* A pool of n threads in all (0: one per online CPU, at most TC_POOL_MAX).
 * When threads cannot be started the pool runs everything on the caller's
 * thread; NULL only when out of memory, and a NULL pool works the same way. */
#define TC_POOL_MAX 8
tc_pool *tc_pool_new(unsigned n);
unsigned tc_pool_default_size(void);
void tc_pool_free(tc_pool *p);
unsigned tc_pool_size(const tc_pool *p);
/* fn(arg, tid) on every thread of the pool at once (tid 0 is the caller's,
 * tids below tc_pool_size); returns when all are done. A NULL pool runs
 * fn(arg, 0) alone. */
typedef void (*tc_pool_fn)(void *arg, unsigned tid);
void tc_pool_run(tc_pool *p, tc_pool_fn fn, void *arg);

typedef struct tc_xfer {
    /* input: in_bytes at in_off of src (a stored record's data) */
    const tc_src *src;
    uint64_t in_off, in_bytes;
    const char *what;        /* names the data in messages, e.g. the storage key */
    /* output: written at out_off of out (with tc_dst_pwrite: its position is left alone) */
    const tc_dst *out;
    uint64_t out_off;
    /* element types; equal: the bytes are copied unchanged. A cast converts
     * in_bytes / size(from) elements (a trailing partial element is dropped). */
    tc_dtype from, to;
    /* block codecs (kernels/quant.h), at most one of them: dec, the input is
     * blocks of that type, decoded to float32 and cast to `to` (from is
     * ignored); enc, the input's `from` elements are cast to float32 and
     * encoded as blocks of that type (to is ignored). TC_Q_NONE: neither. */
    tc_qtype dec, enc;
    bool want_crc;           /* compute crc of the output */
    /* called on the caller's thread every few MiB with the input bytes done */
    void (*progress)(void *ctx, uint64_t in_done);
    void *progress_ctx;

    /* results */
    uint64_t out_bytes;      /* bytes of output: shared + copied + cast */
    uint64_t shared;         /* of them, shared with the input (cloned blocks) */
    uint64_t copied;         /* copied unchanged (in the kernel, or read and written) */
    uint32_t crc;            /* of the output, when want_crc */
    tc_cast_stats stats;     /* a cast's overflow/underflow/NaN counts */
} tc_xfer;

/* Output size of x, without running it. */
uint64_t tc_xfer_out_bytes(const tc_xfer *x);

/* Run x on the pool's threads. Starts writeback of the written range as it
 * goes (so that a final fsync finds little left to do). A failure names the
 * input or the output as its subject, whichever failed. */
int tc_xfer_run(tc_pool *pool, tc_xfer *x, tc_diag *d);

#endif
