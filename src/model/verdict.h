/* The safety verdict for one Python global: what torch.load does with a
 * file that names it.
 *
 * allowed: torch's own weights_only unpickler accepts it (the table in
 * verdict.c, the union of what torch 1.13 and 2.x accept, read off real
 * torch), or the user admitted it (--safe-globals, as
 * torch.serialization.add_safe_globals does). Every other global is unsafe:
 * loading the file takes weights_only=False, which imports it and calls it.
 * This is an allowlist; the dangerous label below only says why a known
 * global is bad, it never decides. */
#ifndef TC_VERDICT_H
#define TC_VERDICT_H

#include <stdbool.h>

typedef struct tc_verdict {
    bool allowed;
    const char *torch;   /* allowed: which torch versions' weights_only accept it ("1.13 and 2.x", "2.x", "1.13") */
    const char *why;     /* a known way it runs code or touches the system when unpickled, or NULL */
} tc_verdict;

/* The verdict for "module.name" as CPython resolves it. */
tc_verdict tc_verdict_of(const char *name);
/* Whether --safe-globals may admit name: never sys, os, posix or nt (torch
 * blocks those modules whatever the user allows), never a name that is not
 * "module.name". */
bool tc_verdict_admissible(const char *name);

/* Whether name is one of the DeepSpeed classes a ZeRO checkpoint's optimizer
 * files pickle (verdict.c lists them): what DeepSpeed's own loader imports
 * and tensorctl's ZeRO reader accepts. Not torch's allowlist: a file naming
 * one does not load with weights_only=True. */
bool tc_verdict_deepspeed_zero(const char *name);

#endif
