/* The safety gate every rewriting command passes: a file that loading would
 * not keep inside torch's weights_only allowlist (an unsafe global, or a
 * second reading of its bytes) is refused unless the user asked for it, with
 * one line saying why and what would let it through. */
#ifndef TC_SAFETY_H
#define TC_SAFETY_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"

/* What an output keeps of its input: the object graph (a rewrite: every
 * global goes along, so any unsafe one is refused), or tensors only
 * (safetensors, a fresh state_dict: the globals stay behind, so only a file
 * that tries to run code, a dangerous global or a hazard, is refused). */
typedef enum tc_keeps { TC_KEEPS_GRAPH, TC_KEEPS_TENSORS } tc_keeps;

/* 0 when c passes for such an output or allow is set; else TC_ERR_UNSAFE,
 * d (subject: c's path) naming the globals or hazard and the option that
 * lets it through. verb says what was refused: "rewrite", "convert". */
int tc_safety_gate(const tc_ckpt *c, tc_keeps keeps, const char *verb, bool allow, tc_diag *d);
/* c is unsafe only for the globals of TorchScript's own (its classes,
 * torch.jit._pickle): an output of its tensors alone passes the gate, the
 * verdict said as a warning. */
bool tc_safety_script_only(const tc_ckpt *c);
/* Why c is unsafe, in one line (for inspect): "" when it is safe. */
void tc_safety_why(const tc_ckpt *c, char *buf, size_t n);

#endif
