/* Other readings of a file's bytes than the one its driver took: what
 * torch.load, in its order (tar, zip, pickles from byte 0), could make of
 * them. See readings.c. */
#ifndef TC_READINGS_H
#define TC_READINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "first_pickle.h" /* what the readings are judged by, which drivers use too */

/* Add c's hazards: every second reading of its bytes (head: its first n bytes). */
int tc_judge_readings(tc_ckpt *c, const uint8_t *head, size_t n, tc_diag *d);
/* Whether the first pickle of src is torch's legacy magic number (in any
 * encoding: torch.load compares the value), so that torch.load reads the
 * bytes as a legacy stream (torch_legacy.c). */
int tc_legacy_at_zero(const tc_src *src, const tc_limits *lim, bool *is, tc_diag *d);
/* Whether b (n bytes) opens as a tar archive to Python's tarfile: its first
 * block a header tarfile takes (torch_tar.c). */
bool tc_tar_header(const uint8_t *b, size_t n);

#endif
