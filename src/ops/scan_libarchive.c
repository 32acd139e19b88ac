#include "scan_libarchive.h"

#include <pthread.h>
#include <stdbool.h>

#include "buf.h"
#include "dl.h"

#ifndef TC_LIBARCHIVE_SONAME
#define TC_LIBARCHIVE_SONAME "libarchive.so.13"
#endif

static scan_la table;
static bool loaded;
static char why_not[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    static const char *const names[] = {SCAN_LA_FNS(TC_DL_NAME)};
    _Static_assert(sizeof table == sizeof names / sizeof *names * sizeof(void *), "one pointer per function");
    tc_buf why = tc_buf_fixed(why_not, sizeof why_not);
    tc_buf_puts(&why, "archives cannot be read: ");
    loaded = !tc_dl_open(TC_LIBARCHIVE_SONAME, names, sizeof names / sizeof *names, &table, &why);
}

const scan_la *scan_la_load(const char **why)
{
    pthread_once(&once, load);
    if (!loaded && why)
        *why = why_not;
    return loaded ? &table : NULL;
}
