/* Shared libraries loaded when first needed (dlopen, as systemd loads its optional libraries), so
 * that a command that never needs one starts without mapping it and what it brings. Its functions
 * are called through a table of typed pointers: a struct of one pointer per function, declared
 * from an X-macro list with TC_DL_FIELD, and its names with TC_DL_NAME. */
#ifndef TC_DL_H
#define TC_DL_H

#include <stddef.h>

#include "buf.h"

#define TC_DL_FIELD(f) __typeof__(f) *f;
#define TC_DL_NAME(f) #f,

/* Loads soname and fills table (n function pointers, in the order of names) with its functions.
 * 0, or -1 with one line in why saying what is missing (the library, or which function). Not
 * thread-safe by itself: a caller loads once (pthread_once). The library stays loaded, also after
 * a failure (another thread may hold what it mapped). */
int tc_dl_open(const char *soname, const char *const *names, size_t n, void *table, tc_buf *why);

#endif
