/* The safety verdict for one Python global: what torch.load would do with a
 * file that names it.
 *
 * allowed: torch's own weights_only unpickler accepts it (the table in
 * verdict.c, torch 1.13 to 2.x). dangerous: a known way to run code or touch
 * the system when unpickled, with the reason. */
#ifndef TC_VERDICT_H
#define TC_VERDICT_H

#include <stdbool.h>

typedef struct tc_verdict {
    bool allowed;
    bool dangerous;
    const char *why;   /* for dangerous globals, NULL otherwise */
} tc_verdict;

/* The verdict for "module.name" (module names as Python 3 imports them). */
tc_verdict tc_verdict_of(const char *name);

#endif
