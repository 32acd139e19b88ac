/* Key surgery: the names tensors get in an output.
 *
 * In this order: --only-keys and --drop choose which names stay (globs on the
 * names as they are); --strip-prefix takes a prefix off (without P: the first
 * dotted component every name shares, such as "module." of DataParallel or
 * "_orig_mod." of torch.compile); each --rename REGEX=REPL (POSIX extended
 * regular expressions, \1 to \9 in REPL, the first match replaced, as sed's
 * s///) in the order given; --add-prefix puts a prefix on. Two names that
 * end up the same are an error naming both.
 *
 * Ownership: a tc_keymap owns its names; tc_keymap_free accepts a zeroed one. */
#ifndef TC_KEYS_H
#define TC_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"
#include "diag.h"

typedef struct tc_keyops {
    bool strip;                     /* --strip-prefix given */
    const char *strip_prefix;       /* its P, or NULL: the shared first component */
    const char *add_prefix;
    const char *const *rename;      /* "REGEX=REPL" ('\=' is a literal '=' in either; '\\' a backslash in REPL) */
    size_t nrename;
    const char *const *drop;        /* globs */
    size_t ndrop;
    const char *const *only;        /* globs: keep only names matching one */
    size_t nonly;
} tc_keyops;

typedef struct tc_keymap {
    char **name;                    /* per input name: its output name, NULL when left out */
    size_t n;
    size_t ndropped;
    char *stripped;                 /* the prefix --strip-prefix took off some name, or NULL when it took none */
} tc_keymap;

bool tc_keyops_any(const tc_keyops *o);
/* Check the options alone (a --rename that does not compile, a missing '='). */
int tc_keyops_check(const tc_keyops *o, tc_diag *d);
/* The output names of names[0..n). */
int tc_keymap_make(const tc_keyops *o, const char *const *names, size_t n, tc_keymap *m, tc_diag *d);
/* The same, names alike allowed: for callers that check every output name
 * afterwards with what holds each tensor (tc_outnames_check). */
int tc_keymap_make_any(const tc_keyops *o, const char *const *names, size_t n, tc_keymap *m, tc_diag *d);
void tc_keymap_free(tc_keymap *m);
/* The first dotted component every name shares ("module."), into out; false when none is shared. */
bool tc_keys_shared_prefix(const char *const *names, size_t n, char *out, size_t len);

/* An output name and the tensor it names (tc_outnames_check). */
typedef struct tc_outname {
    const char *name;        /* as written */
    const char *before;      /* before key surgery, NULL when the same */
    const tc_ckpt *c;        /* the tensor's checkpoint (its keys describe it), or NULL */
    size_t t;                /* its index in c */
} tc_outname;

/* Every output name once, checked before anything is written: two tensors
 * under one name are TC_ERR_USAGE naming both (by the keys that hold them,
 * where their checkpoint says) and what tells them apart: --rename when key
 * surgery made them alike, else --drop (names alike in the file itself, as
 * {"a.b": x, "a": {"b": y}} or {1: x, "1": y} flatten). O(n) expected. */
int tc_outnames_check(const tc_outname *v, size_t n, tc_diag *d);

/* Tensor t (named name in the output) cannot be named flat: a key on its
 * path is no text (t->badkey). TC_ERR_USAGE saying so and naming --drop. */
int tc_badkey_fail(const tc_ckpt *c, const tc_tensor *t, const char *name, tc_diag *d);

#endif
