/* Consolidating a distributed checkpoint (torch.distributed.checkpoint: a
 * folder of .distcp files and their .metadata; a DeepSpeed ZeRO save folder)
 * into one checkpoint, or a sharded set. A ZeRO folder's tensors are the
 * state_dict DeepSpeed's get_fp32_state_dict_from_zero_checkpoint returns,
 * each parameter assembled from the ranks' flat fp32 partitions (stages 1/2:
 * a view into its group's storage, which a .pt output writes once, as
 * torch.save writes the converter's state_dict); tied parameters stay one
 * tensor (one storage) in a .pt output.
 *
 * The output is a flat state_dict named by DCP's own flattened names
 * ("model.layers.0.weight", "optim.state.0.exp_avg"), as dcp_to_torch_save's
 * nested dicts read with their keys joined by dots, in a plain dict (the
 * container dcp_to_torch_save writes, not an OrderedDict); --from KEY (co.key)
 * takes only what lies under KEY, named relative to it. Each tensor is
 * assembled from its chunks as it is written (src/ops/assemble.h), cast as
 * planned; key surgery applies to every name.
 *
 * The pickled items (step counters, hyper-parameters, ...) go into a .pt
 * output as values of the state_dict when they can be carried: read as a
 * torch pickle, they hold no tensor and name only globals torch's
 * weights_only loader accepts, so the output still loads with
 * weights_only=True. Every other one, and every item of a safetensors
 * output or of a sharded set (tensors only), is reported as dropped.
 *
 * Nothing here prints; the report is freed with tc_consolidate_report_free. */
#ifndef TC_CONSOLIDATE_H
#define TC_CONSOLIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "convert.h"
#include "set.h"

typedef enum tc_out_format { TC_OUT_PT, TC_OUT_ST } tc_out_format;

typedef struct tc_consolidate_opts {
    tc_out_format format;
    bool sharded;           /* a set: out is its folder or its index */
    tc_set_opts set;        /* the set's options (and, for one file: co, dst_flags, allow_unsafe, safe globals, limits) */
    const char *tag;        /* read in/tag (a ZeRO save folder's step), or NULL */
    bool exclude_frozen;    /* leave out the frozen parameters (tc_ckpt_drop_frozen) */
} tc_consolidate_opts;

typedef struct tc_consolidate_report {
    tc_set_report set;      /* set.sum for one file as well */
    size_t ncarried;        /* pickled items written into the .pt output */
} tc_consolidate_report;

/* in: the checkpoint's folder or its .metadata (for ZeRO: the save folder, its tag folder or a file of it). */
int tc_consolidate(const char *in, const char *out, const tc_consolidate_opts *o, tc_consolidate_report *rep,
                   tc_diag *d);
void tc_consolidate_report_free(tc_consolidate_report *r);


#endif
