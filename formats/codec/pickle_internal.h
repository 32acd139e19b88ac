/* Codec-internal helpers shared by the pickle reader's files; not part of the
 * codec's interface. The text parsers reproduce CPython 3.11's rules byte for
 * byte (which input each accepts, and what it yields), since a reader that
 * parses a number or a string otherwise describes another object than the
 * one torch.load builds. */
#ifndef TC_PICKLE_INTERNAL_H
#define TC_PICKLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "map.h"
#include "pickle.h"

/* Node with a copy of s[0..len) (NUL-terminated) as its bytes. */
pk_obj *pk_new_bytes_kind(pk_graph *g, pk_kind kind, const void *s, size_t len);
/* A NUL-terminated copy of s[0..len) owned by the graph. */
char *pk_arena_str(pk_graph *g, const char *s, size_t len);
/* Give o (a container without items) exactly items[0..n) in the arena, its
 * depth raised as pk_push raises it. -1 on OOM. */
int pk_set_items(pk_graph *g, pk_obj *o, pk_obj *const *items, size_t n);
/* Append to a PK_BYTEARRAY's bytes in place (amortised O(len)). -1 on OOM. */
int pk_bytes_append(pk_graph *g, pk_obj *o, const void *s, size_t len);

/* ---- text arguments (pickle_text.c) ------------------------------------------ */

/* An integer as sign and magnitude, little-endian 32-bit limbs. */
typedef struct pkt_big {
    uint32_t *d;
    size_t n, cap;
    bool neg;
} pkt_big;

void pkt_big_free(pkt_big *b);
/* Minimal two's complement little-endian bytes of b into a malloc'd buffer. */
int pkt_big_to_le(const pkt_big *b, uint8_t **out, size_t *len);

/* C11 strtol(s, &end, 0) on the NUL-terminated s (no C23 "0b"): glibc's
 * reading, which CPython's INT opcode uses first. On overflow *overflow is
 * set and the value is clamped. */
int64_t pkt_strtol0(const char *s, const char **end, bool *overflow);

/* PyLong_FromString(s, NULL, base) for base 0 or 10 on the NUL-terminated s,
 * with no int_max_str_digits limit (Pythons before 3.11, 3.10.7, 3.9.14,
 * 3.8.14 and 3.7.14 have none): 0 on success, 1 when CPython raises (why
 * says what), 2 when the text has more than max_digits decimal digits (not
 * read: quadratic work), -1 out of memory. *ndigits: its decimal digits (0
 * for other bases), set once they are counted. */
#define PKT_PY_MAX_STR_DIGITS 4300 /* sys.int_info.default_max_str_digits, Python 3.11 */
int pkt_pylong(const char *s, int base, size_t max_digits, pkt_big *out, size_t *ndigits, const char **why);

/* PyOS_string_to_double(s, &end, OverflowError): 0 with *v and *end; 1 when
 * nothing parses (*end == s) or the value overflows. */
int pkt_pyfloat(const char *s, double *v, const char **end, const char **why);

/* PyBytes_DecodeEscape (STRING): out needs n bytes. 0, or 1 with why. */
int pkt_decode_escape(const char *s, size_t n, char *out, size_t *outlen, const char **why);

/* raw-unicode-escape (UNICODE) to UTF-8 with surrogates in their 3-byte form:
 * out needs 4*n bytes. 0, or 1 with why. */
int pkt_raw_unicode_escape(const char *s, size_t n, char *out, size_t *outlen, bool *surrogates,
                           const char **why);

/* CPython's UTF-8 decoder's verdict on s[0..n): 0 when it decodes (with
 * 'surrogatepass', encoded surrogates too: *surrogates says if any), else 1
 * and *bad the offset of the first byte it rejects. */
int pkt_utf8_check(const uint8_t *s, size_t n, bool surrogatepass, bool *surrogates, size_t *bad);

/* Latin-1 bytes as UTF-8: out needs 2*n bytes. */
size_t pkt_latin1_to_utf8(const uint8_t *s, size_t n, char *out);

/* ---- hashing, dict keys and set members (pickle_keys.c) ---------------------- */

/* Maps from a pair of 64-bit words to a 64-bit value: base's tc_map. Set
 * (a, b) to v (replacing its value when present): 0, or -1 on OOM. */
static inline int pk_map_set(tc_map *m, uint64_t a, uint64_t b, uint64_t v)
{
    int rc = tc_map_put2(m, a, b, v, NULL);
    if (rc == 0)
        *tc_map_find2(m, a, b) = v;
    return rc < 0 ? -1 : 0;
}

/* Which objects Python's dict and set take as the same key: every hashable
 * node gets a value id (equal ids iff CPython's == holds for the built
 * objects: 1 == 1.0 == True, a NaN only equals itself, tuples item by item,
 * frozensets as sets; globals by resolved name; call results and persistent
 * ids by identity). Ids are interned, each node's computed once. */
typedef struct pk_keys pk_keys;

pk_keys *pkk_new(void);
void pkk_free(pk_keys *k);
/* 0 with *vid; 1 when o is unhashable (*kind names the offending type, as in
 * CPython's "unhashable type: 'list'"); -1 on OOM. */
int pkk_vid(pk_keys *k, const pk_obj *o, uint64_t *vid, const char **kind);
/* Position of vid among container c's keys: *found and *pos, or, when absent,
 * records it at pos_if_new. -1 on OOM. */
int pkk_slot(pk_keys *k, const pk_obj *c, uint64_t vid, size_t pos_if_new, size_t *pos, bool *found);

#endif
