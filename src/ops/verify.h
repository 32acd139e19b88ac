/* An integrity test, as gzip -t and unzip -t are: every byte of a checkpoint
 * read, and checked against every check its format records. A zip (torch's
 * format, TorchScript, npz) has every record read whole and its CRC-32
 * compared, the pickles and small records included; every storage outside it
 * (a legacy file's, a safetensors file's, a shard's, a distributed
 * checkpoint's chunk files) is read to its end through its driver, which
 * checks that its bytes lie inside the file, and its CRC-32 compared where the
 * format records one. A format without checksums (safetensors, legacy torch,
 * DCP) can show only that its sizes hold: a flipped bit in its data passes. */
#ifndef TC_VERIFY_H
#define TC_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"

typedef struct tc_verify_report {
    uint64_t bytes;      /* bytes read (uncompressed) */
    size_t records;      /* zip records read, each CRC-32 compared */
    size_t storages;     /* storages read outside a zip checked whole */
    size_t storage_crcs; /* of those, how many the format gives a CRC-32 that was compared */
} tc_verify_report;

/* Every byte of c read and checked; 0 with *rep filled, or a tc_status
 * (TC_ERR_FORMAT on a mismatch or a short file) with d naming the file, the
 * record or storage and its offset. progress (may be NULL) gets the bytes
 * read so far of the total. */
int tc_verify(const tc_ckpt *c, const tc_limits *lim, void (*progress)(void *ctx, uint64_t done, uint64_t total),
              void *progress_ctx, tc_verify_report *rep, tc_diag *d);

#endif
