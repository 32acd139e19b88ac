/* The options every command that rewrites tensors shares (to-cpu, to-cuda,
 * convert, extract, consolidate: --map, --dtype, --keep, --only, --engine,
 * --verify-crc, --allow-unsafe, --safe-globals, the limits, a device value),
 * parsed into a tc_move_req (move.h). A helper of the command line, not a
 * command: every command's file uses it and it uses none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "cli.h"
#include "move.h"

int tc_device_arg(const char *opt, const char *s, char *out, size_t n)
{
    tc_diag d = TC_DIAG_INIT;
    if (tc_device_target(s, out, n, &d)) {
        tc_err(NULL, "%s %s", opt, d.msg);
        return -1;
    }
    return 0;
}

int tc_move_parse_common(const tc_args *a, tc_move_req *r)
{
    memset(&r->o, 0, sizeof r->o);
    r->o.dtype = TC_DT_INVALID;
    r->o.max_depth = 1000;
    tc_limits_from_args(a, &r->lim);
    r->o.max_depth = r->lim.max_depth + 16;
    r->nmaps = a->nrep[OPT_MAP];
    for (size_t i = 0; i < r->nmaps; i++) {
        const char *m = a->rep[OPT_MAP][i], *eq = strchr(m, '=');
        if (!eq || (size_t)(eq - m) >= sizeof r->from[i]) {
            tc_err(NULL, "--map '%s': expected FROM=TO, e.g. cuda:1=cuda:0", m);
            return -1;
        }
        snprintf(r->from[i], sizeof r->from[i], "%.*s", (int)(eq - m), m);
        /* FROM is a tag as a file carries it (any backend's name); TO one torch.load restores */
        tc_device dv;
        tc_diag d = TC_DIAG_INIT;
        if (tc_device_parse_tag(r->from[i], &dv, &d)) {
            tc_err(NULL, "--map '%s': %s", m, d.msg);
            return -1;
        }
        char what[80];
        snprintf(what, sizeof what, "--map '%.60s':", m);
        if (tc_device_arg(what, eq + 1, r->to[i], sizeof r->to[i]))
            return -1;
        r->maps[i].from = r->from[i];
        r->maps[i].to = r->to[i];
    }
    r->o.maps = r->maps;
    r->o.nmaps = r->nmaps;
    if (a->set[OPT_DTYPE]) {
        if (a->dtype[OPT_DTYPE] == TC_DT_INVALID) { /* convert's row takes GGUF's types too: not cast targets */
            tc_err_dtype(a->val[OPT_DTYPE]);
            return -1;
        }
        r->o.dtype = a->dtype[OPT_DTYPE];
    }
    if ((a->nrep[OPT_KEEP] || a->nrep[OPT_ONLY]) && !a->set[OPT_DTYPE]) {
        tc_err(NULL, "--keep and --only choose what --dtype casts; give --dtype too");
        return -1;
    }
    r->o.keep = a->rep[OPT_KEEP];
    r->o.nkeep = a->nrep[OPT_KEEP];
    r->o.only = a->rep[OPT_ONLY];
    r->o.nonly = a->nrep[OPT_ONLY];
    static const tc_engine engines[] = {TC_ENGINE_AUTO, TC_ENGINE_CPU, TC_ENGINE_CUDA}; /* auto|cpu|cuda */
    r->o.engine = a->set[OPT_ENGINE] ? engines[a->word[OPT_ENGINE]] : TC_ENGINE_AUTO;
    r->o.verify_crc = a->set[OPT_VERIFY_CRC];
    r->allow_unsafe = a->set[OPT_ALLOW_UNSAFE];
    return tc_safe_globals_from_args(a, &r->safe_globals, &r->nsafe, &r->safe_buf);
}

void tc_move_req_free(tc_move_req *r)
{
    free(r->safe_globals);
    free(r->safe_buf);
    r->safe_globals = NULL;
    r->safe_buf = NULL;
}
