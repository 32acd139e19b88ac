#include "scan_libarchive.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "buf.h"

#ifndef TC_LIBARCHIVE_SONAME
#define TC_LIBARCHIVE_SONAME "libarchive.so.13"
#endif

static scan_la table;
static bool loaded;
static char why_not[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    tc_buf why = tc_buf_fixed(why_not, sizeof why_not);
    tc_buf_puts(&why, "archives cannot be read: ");
    void *h = dlopen(TC_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        tc_buf_puts(&why, e ? e : "cannot load " TC_LIBARCHIVE_SONAME);
        return;
    }
    void *p;
#define SCAN_LA_SYM(f)                                                                                   \
    if (!(p = dlsym(h, #f))) {                                                                           \
        tc_buf_puts(&why, TC_LIBARCHIVE_SONAME " lacks " #f);                                            \
        return; /* the library stays loaded: dlclose could unmap what another thread holds */            \
    }                                                                                                    \
    memcpy(&table.f, &p, sizeof p); /* (POSIX: a dlsym result converts to a function pointer) */
    SCAN_LA_FNS(SCAN_LA_SYM)
#undef SCAN_LA_SYM
    loaded = true;
}

const scan_la *scan_la_load(const char **why)
{
    pthread_once(&once, load);
    if (!loaded && why)
        *why = why_not;
    return loaded ? &table : NULL;
}
