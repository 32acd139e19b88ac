/* Converting between torch checkpoints (.pt/.bin) and safetensors files:
 * which tensors go where, under which names, and what cannot go.
 *
 * To safetensors: every dense tensor of a checkpoint (or of one entry,
 * --key) becomes a contiguous tensor, cast as planned. Shared storages (tied
 * weights, views) are written once; every other name on a storage becomes an
 * alias, recorded in __metadata__ under TC_ST_ALIASES_KEY as a JSON object
 * (text):
 *     {"alias name": {"of": "written name", "offset": N, "shape": [..],
 *                     "stride": [..], "same": true|false}, ...}
 * offset and stride count elements of the written tensor's storage (the
 * written tensor always covers its whole storage, contiguously); "same"
 * marks the same Python tensor object under two names (tied weights) rather
 * than a second view. Readers that do not know the key see the written
 * tensors only, as the reference converter gives; conversion back restores
 * every alias as a view of the same storage. When no tensor covers a shared
 * storage whole, the tensors on it are written as separate copies (ncopies).
 * Non-tensor objects cannot be represented and are reported as dropped.
 *
 * To torch: a checkpoint with an object graph is rewritten whole
 * (rewrite.h); a safetensors file becomes a state_dict as torch 2.x writes
 * one, its aliases restored.
 *
 * Nothing here prints; the report is the caller's to free with
 * tc_convert_report_free (which accepts a zeroed one). */
#ifndef TC_CONVERT_H
#define TC_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"
#include "dest.h"
#include "format.h"
#include "keys.h"
#include "plan.h"

typedef struct tc_convert_opts {
    tc_rewrite_opts ro;   /* dtype, keep, only, progress, max_depth; locations are set here */
    const char *key;      /* only tensors under this entry, named relative to it (torch input) */
    const char *key_opt;  /* the option that gave key, for messages (NULL: --key; consolidate's is --from) */
    const char *device;   /* location tag of .pt output storages (NULL: "cpu") */
    tc_keyops keys;       /* key surgery: --drop and --only-keys choose, the rest renames */
    uint64_t max_expand;  /* a view written out may take this many times its storage's bytes (0: default) */
    bool no_entries;      /* leave the objects that are not tensors out of the report (extract lists them itself) */
    bool plain;           /* a flat state_dict of a torch checkpoint's tensors: plain tensors, requires_grad off,
                             as state_dict() gives them (not Parameters) */
} tc_convert_opts;

typedef struct tc_convert_report {
    char **dropped;       /* "name (why)" for every entry or tensor not written */
    size_t ndropped, dropcap;
    size_t nleft_out;     /* tensors left out by --drop/--only-keys: asked for, so not among dropped */
    size_t ntensors;      /* tensors written with their own data */
    size_t naliases;      /* names recorded as aliases (to safetensors) or restored (to torch) */
    size_t ncopies;       /* tensors of shared storages written as separate copies */
    size_t ncast, nkept;  /* from the cast plan */
    uint64_t data_bytes;  /* tensor bytes written */
    /* of the output's tensor data: bytes sharing the input's blocks (cloned)
     * and bytes copied unchanged; the rest of the output tensorctl wrote */
    uint64_t shared_bytes, copied_bytes;
    uint64_t overflow, underflow; /* values the cast turned into inf/NaN, or zero */
} tc_convert_report;

void tc_convert_report_free(tc_convert_report *r);
/* Record one dropped object, "what (why)". */
int tc_convert_drop(tc_convert_report *r, tc_diag *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* c as a safetensors file into dst. extra_meta (may be NULL) is copied into
 * __metadata__ after "format": "pt". */
int tc_convert_to_safetensors(tc_ckpt *c, const tc_convert_opts *o, const tc_kv *extra_meta, size_t nextra,
                              tc_dst *dst, tc_convert_report *rep, tc_diag *d);
/* c as a torch zip into dst. */
int tc_convert_to_torch(tc_ckpt *c, const tc_convert_opts *o, tc_dst *dst, tc_convert_report *rep, tc_diag *d);

/* ---- the pieces, for sets ------------------------------------------------------ */

/* The role of every tensor of a checkpoint in a safetensors output. */
typedef struct tc_sel {
    const char *name;     /* output name */
    tc_dtype out;
    int role;             /* TC_SEL_* */
    long of;              /* alias: tensor index of the written one */
    bool same;
} tc_sel;

enum { TC_SEL_SKIP, TC_SEL_WRITE, TC_SEL_ALIAS, TC_SEL_COPY };

/* Roles for every tensor of c (sl: one per tensor, zeroed), as planned by p.
 * A tensor safetensors cannot hold (no data, a dtype it lacks, the name it
 * reserves, a view that would expand past max_expand) is an error naming it
 * and --drop, unless --drop names it; non-tensor entries go to rep as
 * dropped, and rep->ncopies counts the copies. */
int tc_safetensors_select(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, tc_sel *sl,
                 tc_convert_report *rep, tc_diag *d);
/* o->key names an entry with tensors, or d says which entries there are. */
int tc_convert_key_check(const tc_ckpt *c, const tc_convert_opts *o, tc_diag *d);

/* c as the items of a flat state_dict over blocks = c's storages as p plans
 * them: its dense tensors (Parameters and sharing kept; only those under
 * o->key, named relative to it, when given), or a safetensors file's tensors
 * with the aliases its __metadata__ records restored. A tensor it cannot
 * hold is an error unless o's --drop names it. */
typedef struct tc_sd_items {
    tc_witem *v;
    size_t *tensor;       /* per item: the tensor of c it is */
    size_t n;
    void *mem, *json;     /* what the items point into */
} tc_sd_items;
int tc_sd_items_make(const tc_ckpt *c, const tc_convert_opts *o, const tc_plan *p, tc_sd_items *out,
                     tc_convert_report *rep, tc_diag *d);
void tc_sd_items_free(tc_sd_items *s);

/* Key surgery on the names of several selections at once (an input set's
 * shards: the shared prefix is the whole set's): sl[k] has n[k] entries,
 * those with a role take their new names from km, which must outlive them. */
int tc_sel_rename(const tc_keyops *keys, tc_sel *const *sl, const size_t *n, size_t nsel, tc_keymap *km, tc_diag *d);
/* The same for state_dict items. */
int tc_items_rename(const tc_keyops *keys, tc_sd_items *const *it, size_t nit, tc_keymap *km, tc_diag *d);

/* Every name an output of several selections (sl[k], nsl[k] entries, of
 * checkpoint c[k]) or of several item lists (it[k], when sl is NULL) gives,
 * checked at once before anything is written (tc_outnames_check); names
 * before key surgery are o's tensor names (relative to o->key). */
int tc_out_names_check(const tc_convert_opts *o, const tc_ckpt *const *c, tc_sel *const *sl, const size_t *nsl,
                       tc_sd_items *const *it, size_t n, tc_diag *d);

/* A JSON object of aliases: tc_aliases_add for each, then tc_aliases_meta. */
typedef struct tc_aliases tc_aliases;
tc_aliases *tc_aliases_new(void);
void tc_aliases_free(tc_aliases *a);
/* Record tensor i of c (an alias, role TC_SEL_ALIAS in sl). */
int tc_aliases_add(tc_aliases *a, const tc_ckpt *c, const tc_sel *sl, size_t i, tc_diag *d);
/* The __metadata__ of a safetensors output: "format": "pt", then extra (less
 * "format" and, when there are aliases, an older alias record), then the
 * aliases. meta must hold nextra + 2 entries; it points into extra and a
 * (which must outlive it). */
int tc_aliases_meta(tc_aliases *a, const tc_kv *extra, size_t nextra, tc_kv *meta, size_t *nmeta, tc_diag *d);

#endif
