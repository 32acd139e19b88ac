/* String keys to indices on the one hash map (map.h): lookups by name stay
 * O(1) however many names a file holds (storage keys, global names, tensor
 * names, index entries).
 *
 * Ownership: the map copies nothing; every key must outlive the map (keys
 * usually live in the table the indices point into). tc_strmap_free accepts
 * a zeroed map. */
#ifndef TC_STRMAP_H
#define TC_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "map.h"

typedef tc_map tc_strmap;

/* The value of key, or false when absent. */
static inline bool tc_strmap_get(const tc_strmap *m, const char *key, size_t *val)
{
    const uint64_t *v = tc_map_find(m, key, strlen(key));
    if (v && val)
        *val = (size_t)*v;
    return v != NULL;
}

/* Insert key -> val; when key is present already, *old (if given) receives
 * its value and nothing changes. 1: inserted, 0: present, -1: out of memory. */
static inline int tc_strmap_put(tc_strmap *m, const char *key, size_t val, size_t *old)
{
    uint64_t o = 0;
    int rc = tc_map_put(m, key, strlen(key), val, &o);
    if (rc == 0 && old)
        *old = (size_t)o;
    return rc;
}

static inline void tc_strmap_free(tc_strmap *m)
{
    tc_map_free(m);
}

#endif
