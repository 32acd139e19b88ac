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

/* Counting works on the float32 value every cast goes through (float64 ->
 * float32 rounds, the narrower types widen exactly): a finite value overflows
 * when its float32 magnitude is at least the type's rounding threshold to inf
 * (for float8_e4m3fn, which saturates: 464, the tie with the missing 480),
 * and underflows when it is nonzero but at most half the smallest subnormal
 * (the tie rounds to even, zero). Casts that do not narrow get limits that
 * count nothing: ov = the infinity bits, uf = 0. */
typedef struct tc_cast_limits {
    uint32_t ov, uf; /* float32 magnitude bits */
} tc_cast_limits;

/* The limits for src_t -> dst_t; false when the cast cannot lose range. */
static inline bool tc_cast_limits_of(tc_dtype dst, tc_dtype src, tc_cast_limits *l)
{
    l->ov = 0x7f800000u, l->uf = 0;
    if (dst == src)
        return false;
    switch (dst) {
    case TC_DT_F32: return true; /* only the float64 step can */
    case TC_DT_F16: l->ov = 0x477ff000u, l->uf = 0x33000000u; return true;
    case TC_DT_BF16: l->ov = 0x7f7f8000u, l->uf = 0x00008000u; return true;
    case TC_DT_F8E5M2: l->ov = 0x47700000u, l->uf = 0x37000000u; return true;
    case TC_DT_F8E4M3FN: l->ov = 0x43e80000u, l->uf = 0x3a800000u; return true;
    default: return false;
    }
}

#endif
