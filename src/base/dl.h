/* Shared libraries loaded when first needed (dlopen, as systemd loads its optional libraries), so
 * that a command that never needs one starts without mapping it and what it brings. Its functions
 * are called through a table of typed pointers: a struct of one pointer per function, declared
 * from an X-macro list with TC_DL_FIELD, and its names with TC_DL_NAME. */
#ifndef TC_DL_H
#define TC_DL_H

#include <stdatomic.h>
#include <stddef.h>

#include "buf.h"

#define TC_DL_FIELD(f) __typeof__(f) *f;
#define TC_DL_NAME(f) #f,

/* One library: what to load and where its functions go (the caller's, static), and how that went
 * (tc_dl_get's). */
typedef struct tc_dl {
    const char *soname;
    const char *const *names; /* the functions, n of them, in the table's order */
    size_t n;
    void *table;              /* n function pointers */
    const char *what;         /* what cannot be done without it, for the message ("archives cannot be read") */
    atomic_int state;         /* 0 not tried yet, 1 loaded, -1 not */
    char why[512];            /* "WHAT: the loader's reason" when not */
} tc_dl;

#define TC_DL_INIT(soname, names, table, what)                                                           \
    {(soname), (names), sizeof(names) / sizeof *(names), &(table), (what), 0, ""}

/* The table of l, loaded on the first call (from any thread; later calls cost an atomic load); NULL
 * when the library or one of its functions cannot be loaded, and *why (if why) then says why in one
 * line, the same for every call. The library stays loaded. */
const void *tc_dl_get(tc_dl *l, const char **why);

/* Loads soname and fills table (n function pointers, in the order of names) with its functions.
 * 0, or -1 with one line in why saying what is missing (the library, or which function). Not
 * thread-safe by itself (tc_dl_get is). The library stays loaded, also after a failure (another
 * thread may hold what it mapped). */
int tc_dl_open(const char *soname, const char *const *names, size_t n, void *table, tc_buf *why);

#endif
