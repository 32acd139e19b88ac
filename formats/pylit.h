/* Python literals as ast.literal_eval reads them, as far as a header made
 * of them needs (numpy's .npy header is the repr of a dict): strings (with
 * prefixes, escapes and adjacent literals joined), integers (decimal, 0x,
 * 0o, 0b, underscores; with `longs`, a Python 2 'L' suffix dropped, as numpy
 * drops it from old headers), True, False, None, tuples, lists, dicts and
 * sets, and comments. Other numbers parse as LV_OTHER; what is not a literal
 * (names, calls, operators, triple quotes, \N{} escapes) is refused with a
 * reason. Nesting is held to TC_PYLIT_MAX_DEPTH, the work is linear.
 *
 * Ownership: a value owns its items and text; tc_pylit_free accepts NULL. */
#ifndef TC_PYLIT_H
#define TC_PYLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vec.h"

#define TC_PYLIT_MAX_DEPTH 64

typedef enum { LV_STR, LV_BYTES, LV_INT, LV_BOOL, LV_NONE, LV_TUPLE, LV_LIST, LV_DICT, LV_OTHER } lv_kind;

typedef struct lv lv;
struct lv {
    lv_kind k;
    char *s;          /* LV_STR, LV_BYTES: the decoded text (NUL-terminated; len bytes, NULs inside possible) */
    size_t len;
    int64_t i;        /* LV_INT, LV_BOOL */
    bool huge;        /* LV_INT beyond int64 */
    TC_VEC(lv *) v;   /* items; a dict's are key, value, key, value... */
};

/* The literal that is all of [p, end) (surrounding spaces and comments
 * allowed), or NULL with *err saying why and *at where. */
lv *tc_pylit_parse(const char *p, const char *end, bool longs, const char **err, const char **at);
void tc_pylit_free(lv *v);

#endif
