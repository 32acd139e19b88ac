/* inspect's report of where a checkpoint's weights are (src/ops/weights.h):
 * one "weights:" paragraph of the table, one "weights" member of --json. */
#ifndef TC_INSPECT_WEIGHTS_H
#define TC_INSPECT_WEIGHTS_H

#include <cjson/cJSON.h>

#include "ckpt.h"

/* The paragraph on stdout (nothing for a file without tensors). */
void tc_inspect_weights_text(const tc_ckpt *c);
/* The member's value (NULL when out of memory). */
cJSON *tc_inspect_weights_json(const tc_ckpt *c);

#endif
