#include "scan_libarchive.h"

#ifndef TC_LIBARCHIVE_SONAME
#define TC_LIBARCHIVE_SONAME "libarchive.so.13"
#endif

static scan_la table;
static const char *const names[] = {SCAN_LA_FNS(TC_DL_NAME)};
_Static_assert(sizeof table == sizeof names / sizeof *names * sizeof(void *), "one pointer per function");
static tc_dl lib = TC_DL_INIT(TC_LIBARCHIVE_SONAME, names, table, "archives cannot be read");

const scan_la *scan_la_load(const char **why) { return tc_dl_get(&lib, why); }
