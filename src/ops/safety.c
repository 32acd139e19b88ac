#include "safety.h"

#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "format.h"

/* Up to a few names of the unsafe globals, dangerous ones first (with what
 * they do when want_why), comma-separated; *more counts the ones left out. */
static void unsafe_names(const tc_ckpt *c, bool dangerous, bool want_why, char *buf, size_t n, size_t *count)
{
    size_t shown = 0;
    tc_buf b = tc_buf_fixed(buf, n);
    *count = 0;
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        if (g->allowed || g->dangerous != dangerous)
            continue;
        (*count)++;
        if (shown == 4 || tc_buf_len(&b) + 80 > n)
            continue;
        tc_buf_sep(&b, ", ");
        tc_buf_escs(&b, g->name);
        if (want_why && g->why && tc_buf_len(&b) + 80 < n)
            tc_buf_printf(&b, " (%s)", g->why);
        shown++;
    }
    if (*count > shown && tc_buf_len(&b) + 32 < n)
        tc_buf_printf(&b, " and %zu more", *count - shown);
}

void tc_safety_why(const tc_ckpt *c, char *buf, size_t n)
{
    char dl[400], ul[400];
    size_t nd, nu;
    unsafe_names(c, true, true, dl, sizeof dl, &nd);
    unsafe_names(c, false, false, ul, sizeof ul, &nu);
    buf[0] = 0;
    if (nd)
        snprintf(buf, n, "loading it runs %s", dl);
    else if (nu && tc_ckpt_can(c, TC_CAP_TORCHSCRIPT))
        snprintf(buf, n,
                 "a TorchScript archive: torch.load(weights_only=True) refuses it, and torch.jit.load (what "
                 "torch.load(weights_only=False) calls) compiles its code/ files and runs what its classes define: %s",
                 ul);
    else if (nu)
        snprintf(buf, n, "loading it needs weights_only=False for globals outside torch's allowlist: %s", ul);
    else if (tc_ckpt_nhazards(c))
        snprintf(buf, n, "%s", tc_ckpt_hazard(c, 0));
}

/* The names of the unsafe globals that are not dangerous, comma-separated with no spaces, as --safe-globals takes them. */
static void admit_list(const tc_ckpt *c, char *buf, size_t n)
{
    tc_buf b = tc_buf_fixed(buf, n);
    for (size_t i = 0; i < tc_ckpt_nglobals(c) && !tc_buf_cut(&b); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        if (!g->allowed && !g->dangerous) {
            tc_buf_sep(&b, ",");
            tc_buf_escs(&b, g->name);
        }
    }
}

/* A global of TorchScript's own: the classes its code defines (__torch__.*)
 * and the helpers of its pickles (torch.jit._pickle.build_intlist, ...).
 * torch.jit.load compiles the archive's code and calls them; a reader of its
 * tensors calls nothing, so a tensors-only output of them trusts nothing. */
static bool script_own(const char *name)
{
    return !strncmp(name, "__torch__.", 10) || !strncmp(name, "torch.jit._pickle.", 18);
}

bool tc_safety_script_only(const tc_ckpt *c)
{
    size_t n = 0;
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        if (g->allowed)
            continue;
        if (!script_own(g->name))
            return false;
        n++;
    }
    return n && !tc_ckpt_nhazards(c);
}

int tc_safety_gate(const tc_ckpt *c, tc_keeps keeps, const char *verb, bool allow, tc_diag *d)
{
    bool dangerous = false, globals = false;
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++)
        dangerous |= !tc_ckpt_global(c, i)->allowed && tc_ckpt_global(c, i)->dangerous;
    if (allow || tc_ckpt_is_safe(c) || (keeps == TC_KEEPS_TENSORS && !dangerous && !tc_ckpt_nhazards(c)) ||
        (keeps == TC_KEEPS_TENSORS && tc_safety_script_only(c)))
        return 0;
    char why[900];
    tc_safety_why(c, why, sizeof why);
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++)
        globals |= !tc_ckpt_global(c, i)->allowed;
    if (globals && !dangerous) {
        char names[400];
        admit_list(c, names, sizeof names);
        return tc_fail_at(d, TC_ERR_UNSAFE, tc_ckpt_path(c), TC_NO_OFFSET,
                          "refusing to %s: %s (--safe-globals %s admits them if you trust them; --allow-unsafe "
                          "%ss it anyway, running nothing)",
                          verb, why, names, verb);
    }
    return tc_fail_at(d, TC_ERR_UNSAFE, tc_ckpt_path(c), TC_NO_OFFSET,
                      "refusing to %s: %s (--allow-unsafe %ss it anyway; tensorctl runs nothing)", verb, why, verb);
}
