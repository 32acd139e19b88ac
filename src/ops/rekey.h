/* Key surgery on a checkpoint rewritten whole (to-cpu, to-cuda, convert to
 * .pt of a torch checkpoint, and the shards of a set rewritten whole): the
 * object graph is kept, so the options act on the dicts that hold tensors
 * directly (tc_ckpt_keyed: a state_dict, an optimizer's per-parameter
 * state), each on its own:
 *
 *   --drop and --only-keys match the full dotted names (as inspect lists
 *   them) and remove those key/value pairs from their dict; the parts of a
 *   tensor (a quantized tensor's scales) go with it. A tensor that is no
 *   item of a dict (a list element) cannot be removed: an error.
 *   --strip-prefix, --rename and --add-prefix rename the str keys of the
 *   tensors of each such dict; --strip-prefix without P takes off the first
 *   dotted component every tensor key of that dict shares (dicts whose keys
 *   share none are left as they are; when none shares one, an error).
 *
 * Other objects and their keys stay as they are. Attributes of a pickled
 * object (an nn.Module's parameters and buffers) are not dict items: surgery
 * that would remove or rename one is refused, pointing to extract, which
 * writes the weights as a state_dict. Two keys of one dict renamed onto one,
 * or onto a key the dict keeps, is an error naming both. A dict reached by
 * two paths is edited once; --drop must then name it by every path.
 *
 * Ownership: a tc_rekey owns its edits and names; tc_rekey_free accepts a
 * zeroed one. */
#ifndef TC_REKEY_H
#define TC_REKEY_H

#include "ckpt.h"
#include "format.h"
#include "keys.h"

typedef struct tc_rekey {
    tc_keyedit *edits;      /* for tc_write_job, sorted */
    size_t nedits;
    char **names;           /* per tensor of the checkpoint: its name in the output, NULL when removed */
    size_t n;
    size_t ndropped;        /* tensors removed */
    size_t nrenamed;        /* keys renamed */
    size_t nstripped;       /* dicts --strip-prefix took a prefix off */
} tc_rekey;

int tc_rekey_make(const tc_ckpt *c, const tc_keyops *k, tc_rekey *out, tc_diag *d);
void tc_rekey_free(tc_rekey *r);

#endif
