/* The options every command that rewrites tensors shares (to-cpu, to-cuda,
 * convert, extract, consolidate: --map, --dtype, --keep, --only, --engine,
 * --verify-crc, --allow-unsafe, --safe-globals, the limits; their values checked by tc_parse),
 * parsed into a tc_move_req (move.h). A helper of the command line, not a
 * command: every command's file uses it and it uses none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "cli.h"
#include "move.h"

int tc_move_parse_common(const tc_args *a, tc_move_req *r)
{
    memset(&r->o, 0, sizeof r->o);
    r->o.dtype = TC_DT_INVALID;
    r->o.max_depth = 1000;
    tc_limits_from_args(a, &r->lim);
    r->o.max_depth = r->lim.max_depth + 16;
    r->nmaps = a->nmap; /* checked by tc_parse (TC_KIND_DEVMAP) */
    for (size_t i = 0; i < r->nmaps; i++) {
        memcpy(r->from[i], a->map[i].from, sizeof r->from[i]);
        memcpy(r->to[i], a->map[i].to, sizeof r->to[i]);
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
    r->safe_globals = a->globals; /* checked by tc_parse (TC_KIND_GLOBALS) */
    r->nsafe = a->nglobals;
    return 0;
}
