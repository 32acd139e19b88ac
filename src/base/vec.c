#include "vec.h"

#include <stdint.h>
#include <string.h>

int tc_grow_(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    if (!elem || need > SIZE_MAX / elem)
        return -1;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : c * 2;
    if (c > SIZE_MAX / elem)
        c = need;
    void *old;
    memcpy(&old, pp, sizeof old);
    void *p = realloc(old, c * elem);
    if (!p)
        return -1;
    memcpy(pp, &p, sizeof p);
    *cap = c;
    return 0;
}

void *tc_vec_zero_(void *v, size_t *n, size_t k, size_t elem)
{
    void *at = (char *)v + *n * elem;
    if (k)
        memset(at, 0, k * elem);
    *n += k;
    return at;
}
