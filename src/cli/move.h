/* Shared by the commands that rewrite checkpoints (to-cpu, to-cuda, convert). */
#ifndef TC_MOVE_H
#define TC_MOVE_H

#include "cli.h"
#include "device.h"
#include "extract.h"
#include "keys.h"
#include "rewrite.h"

typedef struct tc_move_req tc_move_req;
struct tc_move_req {
    tc_rewrite_opts o;
    tc_limits lim;
    tc_devmap maps[TC_MAX_REPEAT];
    char from[TC_MAX_REPEAT][32], to[TC_MAX_REPEAT][32];
    size_t nmaps;
    bool allow_unsafe;
    const char *const *safe_globals; /* --safe-globals' names (the tc_args' globals) */
    size_t nsafe;
    tc_keyops keys;       /* key surgery (to-cpu, to-cuda: on the dicts holding tensors) */
    void (*check_cuda)(tc_move_req *r, const tc_ckpt *c, const tc_plan *p);
};

/* --map, --dtype, --keep, --only, --engine, --allow-unsafe, --safe-globals, limits. Prints and returns -1 on
 * misuse. r points into a (which must outlive it) and owns nothing. */
int tc_move_parse_common(const tc_args *a, tc_move_req *r);
/* Rewrite `in` to the torch zip `out` (tc_dst_open flags); returns an exit status, having printed. */
int tc_move_run(const char *in, const char *out, unsigned dst_flags, tc_move_req *r);

/* The weights to take from c (opened from in), as extract and convert take them (cmd_extract.c): the
 * entry `from` names (--from, --key; "." the whole file), else the EMA copy when ema, else ws's one
 * candidate. None or several to choose from: the error, then the candidates, one a line. 0 with *w
 * filled (tc_wcand_clear it), or the exit status after printing. */
int tc_pick_weights(const tc_ckpt *c, const char *in, const char *from, bool ema, const tc_weights *ws, tc_wcand *w);
/* "tensorctl: left behind: NAME (KIND, N tensors, SIZE), ..." on stderr: what r says stayed in the input. */
void tc_print_left(const tc_extract_report *r);

#endif
