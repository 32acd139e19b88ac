/* The pickle at byte 0 of a file's bytes, as CPython's unpickler reads it
 * (first_pickle.c). */
#ifndef TC_FIRST_PICKLE_H
#define TC_FIRST_PICKLE_H

#include <stddef.h>

#include "ckpt.h"
#include "pickle.h"

/* The bytes of src read from byte 0 as CPython's unpickler would, up to where
 * it stops: the first global they name that the allowlist does not allow,
 * into unsafe ("" when none). */
int tc_pickle_at_zero(const tc_src *src, const tc_limits *lim, char *unsafe, size_t n, tc_diag *d);
/* The first pickle of src from byte 0, read as CPython's unpickler reads it
 * as far as it goes: its graph (*g, the caller frees it) and its value
 * (*root, NULL when it does not end or fails), both set only on success. */
int tc_first_pickle(const tc_src *src, const tc_limits *lim, pk_graph **g, pk_obj **root, tc_diag *d);
/* The first global of g that the allowlist does not allow ("" when none). */
void tc_first_unsafe_global(pk_graph *g, char *out, size_t n);

#endif
