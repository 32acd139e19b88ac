/* Growable arrays. One growth rule for every list the program builds:
 * capacity doubles, every size is checked for overflow, and a failed
 * allocation leaves the array as it was.
 *
 * Ownership: an array owns its elements' memory (not what they point to);
 * tc_vec_free releases it, and a zeroed array is empty and valid. */
#ifndef TC_VEC_H
#define TC_VEC_H

#include <stddef.h>
#include <stdlib.h>

/* Make *pp (an array of elem-byte elements with *cap slots; pp is a T **)
 * hold at least need elements. 0, or -1 when memory or size_t runs out (the
 * array unchanged). For arrays kept as a pointer and a capacity. The check
 * is inline, so calling it on every append costs a comparison. */
int tc_grow_(void *pp, size_t *cap, size_t need, size_t elem);
static inline int tc_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap ? 0 : tc_grow_(pp, cap, need, elem);
}

/* An array of T: v[0 .. n), room for cap. */
#define TC_VEC(T) \
    struct {      \
        T *v;     \
        size_t n, cap; \
    }

/* Room for need elements in all: 0 or -1. */
#define tc_vec_reserve(a, need) tc_grow(&(a)->v, &(a)->cap, (need), sizeof *(a)->v)
/* Append x: 0 or -1 (nothing appended). */
#define tc_vec_push(a, x) (tc_vec_reserve((a), (a)->n + 1) ? -1 : ((a)->v[(a)->n++] = (x), 0))
/* A pointer to k new zeroed elements at the end, or NULL. */
#define tc_vec_extend(a, k) \
    ((k) > ((size_t)-1) - (a)->n || tc_vec_reserve((a), (a)->n + (k)) ? NULL : tc_vec_zero_((a)->v, &(a)->n, (k), sizeof *(a)->v))
#define tc_vec_free(a) (free((a)->v), (a)->v = NULL, (a)->n = (a)->cap = 0)

void *tc_vec_zero_(void *v, size_t *n, size_t k, size_t elem);

#endif
