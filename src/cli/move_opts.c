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
    if (tc_limits_from_args(a, &r->lim))
        return -1;
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
        tc_dtype t = tc_dtype_from_arg(a->val[OPT_DTYPE]);
        if (!tc_dtype_is_cast_target(t)) {
            tc_err(NULL, "--dtype '%s': choose float16 (fp16, half), bfloat16 (bf16), float32 (fp32), float64 (fp64), "
                   "float8_e4m3fn or float8_e5m2",
                   a->val[OPT_DTYPE]);
            return -1;
        }
        r->o.dtype = t;
    }
    if ((a->nrep[OPT_KEEP] || a->nrep[OPT_ONLY]) && !a->set[OPT_DTYPE]) {
        tc_err(NULL, "--keep and --only choose what --dtype casts; give --dtype too");
        return -1;
    }
    r->o.keep = a->rep[OPT_KEEP];
    r->o.nkeep = a->nrep[OPT_KEEP];
    r->o.only = a->rep[OPT_ONLY];
    r->o.nonly = a->nrep[OPT_ONLY];
    r->o.engine = TC_ENGINE_AUTO;
    if (a->set[OPT_ENGINE]) {
        const char *e = a->val[OPT_ENGINE];
        if (!strcmp(e, "cpu"))
            r->o.engine = TC_ENGINE_CPU;
        else if (!strcmp(e, "cuda"))
            r->o.engine = TC_ENGINE_CUDA;
        else if (strcmp(e, "auto")) {
            tc_err(NULL, "--engine '%s': choose auto, cpu or cuda", e);
            return -1;
        }
    }
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
