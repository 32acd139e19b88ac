/* The hash map: keys to 64-bit values, open addressing, O(1) expected per
 * operation whatever the keys, because the hash is keyed with a secret
 * chosen per process (names crafted to collide cannot be made without it):
 * SipHash-1-3 for byte strings, a keyed multiply-mix for word pairs.
 *
 * Two kinds of key, one kind per map: byte strings (names: storage keys,
 * globals, tensor names, index entries) and pairs of 64-bit words (a
 * pointer, an id, a hash and a count). A zeroed map is empty and valid.
 *
 * Ownership: the map copies no key; a byte-string key must outlive the map
 * (it usually lives in the table the value indexes). tc_map_free releases
 * the map's own memory and accepts a zeroed map. */
#ifndef TC_MAP_H
#define TC_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tc_map_slot {
    uint64_t a, b;  /* the key: a pointer and a length, or two words */
    uint64_t hash;  /* 0: empty */
    uint64_t val;
} tc_map_slot;

typedef struct tc_map {
    tc_map_slot *s;
    size_t n, cap;
} tc_map;

/* Byte-string keys. find: a pointer to key's value (valid until the next
 * insert), or NULL. put: insert key -> val; 1 inserted, 0 present already
 * (*old, if given, receives its value; nothing changes), -1 out of memory. */
uint64_t *tc_map_find(const tc_map *m, const void *key, size_t len);
int tc_map_put(tc_map *m, const void *key, size_t len, uint64_t val, uint64_t *old);

/* Word-pair keys, the same rules. */
uint64_t *tc_map_find2(const tc_map *m, uint64_t a, uint64_t b);
int tc_map_put2(tc_map *m, uint64_t a, uint64_t b, uint64_t val, uint64_t *old);

/* Every key's slot, for walking the map in no particular order: slots with hash 0 are empty. */
static inline size_t tc_map_cap(const tc_map *m) { return m->cap; }

void tc_map_free(tc_map *m);

/* An index of a table of names the caller holds: a name to its position, 8 bytes a slot (a
 * position and part of the name's hash), for tables too large for a tc_map's 32. The table must
 * outlive the index and stay as it is; a name listed twice keeps its first position. */
typedef struct tc_nameidx {
    struct tc_nameidx_slot {
        uint32_t at;    /* position + 1; 0: empty */
        uint32_t hash;  /* the name's hash, its high half */
    } *s;
    size_t cap;
    const char *const *names;
} tc_nameidx;

/* Room for names[0..n), none indexed yet: 0, or -1 when out of memory or n is 2^32 - 1 or more. */
int tc_nameidx_init(tc_nameidx *x, const char *const *names, size_t n);
/* Index names[i] (i < n, the table's entry set by now): 1, or 0 when the name is indexed already
 * (*was, if given, receives its position). */
int tc_nameidx_add(tc_nameidx *x, size_t i, size_t *was);
/* Index all of names[0..n): tc_nameidx_init, then each added in order. */
int tc_nameidx_make(tc_nameidx *x, const char *const *names, size_t n);
/* The position of name, or false when the table lacks it. */
bool tc_nameidx_get(const tc_nameidx *x, const char *name, size_t *at);
/* Accepts a zeroed index. */
void tc_nameidx_free(tc_nameidx *x);

/* The keyed hash of n bytes (SipHash-1-3 with the process's secret). */
uint64_t tc_hash_bytes(const void *p, size_t n);

#endif
