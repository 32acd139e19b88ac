/* A map from strings to indices (open addressing, SipHash-1-3 keyed per process), so that lookups
 * by name stay O(1) however many names a file holds: storage keys, global
 * names, tensor names, index entries.
 *
 * Ownership: the map copies nothing; every key must outlive the map (keys
 * usually live in the table the indices point into). tc_strmap_free accepts
 * a zeroed map. */
#ifndef TC_STRMAP_H
#define TC_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tc_strmap {
    const char **key;
    size_t *val;
    size_t n, cap;
} tc_strmap;

/* The value of key, or false when absent. */
bool tc_strmap_get(const tc_strmap *m, const char *key, size_t *val);
/* Insert key -> val; when key is present already, *old (if given) receives
 * its value and nothing changes. 1: inserted, 0: present, -1: out of memory. */
int tc_strmap_put(tc_strmap *m, const char *key, size_t val, size_t *old);
void tc_strmap_free(tc_strmap *m);

#endif
