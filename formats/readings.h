/* Other readings of a file's bytes than the one its driver took: what
 * torch.load, in its order (tar, zip, pickles from byte 0), could make of
 * them. See readings.c. */
#ifndef TC_READINGS_H
#define TC_READINGS_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "pickle.h"

/* Add c's hazards: every second reading of its bytes (head: its first n bytes). */
int tc_judge_readings(tc_ckpt *c, const uint8_t *head, size_t n, tc_diag *d);
/* The bytes of src read from byte 0 as CPython's unpickler would, up to where
 * it stops: the first global they name that the allowlist does not allow,
 * into unsafe ("" when none). */
int tc_pickle_at_zero(const tc_src *src, const tc_limits *lim, char *unsafe, size_t n, tc_diag *d);
/* The first global of g that the allowlist does not allow ("" when none). */
void tc_first_unsafe_global(pk_graph *g, char *out, size_t n);

#endif
