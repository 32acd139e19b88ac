#include "dl.h"

#include <dlfcn.h>
#include <pthread.h>
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

const void *tc_dl_get(tc_dl *l, const char **why)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* (loads are rare: one lock for all) */
    int st = atomic_load_explicit(&l->state, memory_order_acquire);
    if (!st) {
        pthread_mutex_lock(&mu);
        if (!(st = atomic_load_explicit(&l->state, memory_order_relaxed))) {
            tc_buf w = tc_buf_fixed(l->why, sizeof l->why);
            tc_buf_puts(&w, l->what);
            tc_buf_puts(&w, ": ");
            st = tc_dl_open(l->soname, l->names, l->n, l->table, &w) ? -1 : 1;
            atomic_store_explicit(&l->state, st, memory_order_release);
        }
        pthread_mutex_unlock(&mu);
    }
    if (st < 0 && why)
        *why = l->why;
    return st > 0 ? l->table : NULL;
}
