/* Helpers shared by cast_ref.c and cast_cpu.c. Internal to kernels/. */
#ifndef TC_CAST_INTERNAL_H
#define TC_CAST_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "cast.h"

/* Element size of a cast type, 0 for anything tc_cast does not handle.
 * Local so the kernels library does not need src/dtype.c. */
static inline size_t tc_cast_esize(tc_dtype t)
{
    switch (t) {
    case TC_DT_F64: return 8;
    case TC_DT_F32: return 4;
    case TC_DT_F16: case TC_DT_BF16: return 2;
    case TC_DT_F8E4M3FN: case TC_DT_F8E5M2: return 1;
    default: return 0;
    }
}

/* Little-endian element i of size sz (the hosts we build for are LE). */
static inline uint64_t tc_cast_load(const void *p, size_t sz, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)p + i * sz, sz);
    return v;
}

static inline void tc_cast_store(void *p, size_t sz, size_t i, uint64_t v)
{
    memcpy((char *)p + i * sz, &v, sz);
}

#endif
