#include "dl.h"

#include <dlfcn.h>
#include <string.h>

int tc_dl_open(const char *soname, const char *const *names, size_t n, void *table, tc_buf *why)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        if (e)
            tc_buf_puts(why, e);
        else {
            tc_buf_puts(why, "cannot load ");
            tc_buf_puts(why, soname);
        }
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(h, names[i]);
        if (!p) {
            tc_buf_puts(why, soname);
            tc_buf_puts(why, " lacks ");
            tc_buf_puts(why, names[i]);
            return -1;
        }
        /* POSIX: a dlsym result converts to a function pointer; the table is n of them */
        memcpy((char *)table + i * sizeof p, &p, sizeof p);
    }
    return 0;
}
