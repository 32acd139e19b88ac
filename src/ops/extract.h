/* extract: a checkpoint's weights (one candidate of weights.h) written as a
 * flat state_dict, whatever held them: a training checkpoint's entry, a
 * pickled nn.Module (as its state_dict() names them), a TorchScript module.
 *
 * The tensors under the candidate's prefix, named relative to it, become a
 * .pt state_dict (plain tensors, requires_grad off, loadable with
 * weights_only=True; only the storages they view are written, each once, so
 * tied weights and views keep sharing) or a .safetensors file (shared
 * storages written once, the other names recorded as aliases, as convert
 * does), or a sharded set of either through the set driver. Key surgery,
 * --dtype and the rest act as they do for convert. Everything else in the
 * file stays behind and is listed (tc_left), with the tensor bytes it held.
 *
 * Nothing here prints; tc_extract_report_free releases a report (and accepts
 * a zeroed one). */
#ifndef TC_EXTRACT_H
#define TC_EXTRACT_H

#include "convert.h"
#include "set.h"
#include "weights.h"

typedef struct tc_extract_opts {
    tc_convert_opts co;   /* casts in co.ro, key surgery in co.keys, co.device (.pt: "cpu" when NULL), max_expand */
    bool safetensors;     /* the output format: safetensors, else torch */
} tc_extract_opts;

/* An object left behind: a top-level entry (or, under the chosen one, its neighbour). */
typedef struct tc_left {
    char *name;
    char *kind;           /* "dict", "int", "Adam", ... */
    size_t ntensors;
    uint64_t bytes;       /* of the storages its tensors view */
} tc_left;

typedef struct tc_extract_report {
    tc_convert_report conv;  /* what was written; conv.dropped: what --drop and --only-keys left out */
    tc_left *left;
    size_t nleft;
} tc_extract_report;

void tc_extract_report_free(tc_extract_report *r);

/* What extracting w leaves behind, into rep->left. */
int tc_extract_left(const tc_ckpt *c, const tc_wcand *w, tc_extract_report *rep, tc_diag *d);
/* w's tensors as one file into dst. */
int tc_extract(tc_ckpt *c, const tc_wcand *w, const tc_extract_opts *o, tc_dst *dst, tc_extract_report *rep,
               tc_diag *d);
/* w's tensors as a sharded set: out is the index (*.index.json) or its folder; so gives the shard size, --force
 * and the safety options (its mode and co are set here from o). */
int tc_extract_set(tc_ckpt *c, const tc_wcand *w, const tc_extract_opts *o, const tc_set_opts *so, const char *out,
                   tc_set_report *rep, tc_diag *d);

#endif
