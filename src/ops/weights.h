/* Where a checkpoint's weights are: the candidates extract (and any command
 * that wants "the model" out of a file) chooses from.
 *
 * A candidate is a name prefix: its tensors are those named prefix + "." +
 * rest (every tensor, for prefix ""), and together they are a state_dict
 * whose keys are the rests. Found, in this order of precedence:
 *
 *   - the file's root is an nn.Module pickled whole (torch.save(model)) or a
 *     TorchScript module: the one candidate "" (names as its state_dict()
 *     gives them, whatever its classes are called);
 *   - the usual keys of a training checkpoint at the top level holding
 *     tensors (state_dict, model, model_state_dict, module, net, ...), and
 *     the EMA copies (ema, model_ema, ema_model, ...), and every other nn.Module
 *     pickled whole anywhere (not inside another, nor under training state);
 *   - else a root that holds tensors directly: a plain state_dict, "";
 *   - else each top-level entry with tensors that is not training state
 *     (optimizer, scheduler, scaler, RNG state, callbacks, loops), or, when
 *     there is none, every tensor of the file ("").
 * A file without an object graph (safetensors) is its one candidate "".
 *
 * Nothing here prints; tc_weights_free releases what tc_weights_find made
 * (and accepts a zeroed one). */
#ifndef TC_WEIGHTS_H
#define TC_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

typedef struct tc_wcand {
    char *prefix;          /* "": the whole file */
    char reason[200];      /* why it is one: "the usual key 'state_dict'", "a pickled nn.Module model.Net" */
    const char *cls;       /* the class of the module pickled there (points into the checkpoint), or NULL */
    bool ema;              /* an EMA copy of the weights */
    size_t ntensors;       /* tensors under it */
    uint64_t bytes;        /* of the storages they view, each counted once */
    char shared[64];       /* the first dotted component every one of its names shares ("module."), or "" */
} tc_wcand;

typedef struct tc_weights {
    tc_wcand *v;
    size_t n;
    uint64_t total_bytes;     /* every storage of the file */
    uint64_t optimizer_bytes; /* the storages under top-level optimizer entries */
    bool training;            /* a training checkpoint: the weights sit under a key beside other state */
} tc_weights;

int tc_weights_find(const tc_ckpt *c, tc_weights *out, tc_diag *d);
void tc_weights_free(tc_weights *w);

/* The candidate to take: the prefix `from` when given ("" or "." for the
 * whole file; it must have tensors under it), else the EMA copy when ema,
 * else the only candidate. Several (or none) to choose from is TC_ERR_USAGE
 * saying so (the caller lists w's candidates). *out is filled with its own
 * prefix: tc_wcand_clear releases it. */
int tc_weights_pick(const tc_weights *w, const tc_ckpt *c, const char *from, bool ema, tc_wcand *out, tc_diag *d);
void tc_wcand_clear(tc_wcand *c);

/* For each prefixes[i]: the tensors under it (named it, or it + "." + ...;
 * every tensor for "") and the bytes of the storages they view, each once;
 * O((T + n) log T) for T tensors. */
int tc_weights_measure(const tc_ckpt *c, const char *const *prefixes, size_t n, size_t *ntensors, uint64_t *bytes,
                       tc_diag *d);

#endif
