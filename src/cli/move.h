/* Shared by the commands that rewrite checkpoints (to-cpu, to-cuda, convert). */
#ifndef TC_MOVE_H
#define TC_MOVE_H

#include "cli.h"
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
    char **safe_globals;  /* --safe-globals, split */
    size_t nsafe;
    char *safe_buf;
    tc_keyops keys;       /* key surgery (to-cpu, to-cuda: on the dicts holding tensors) */
    void (*check_cuda)(tc_move_req *r, const tc_ckpt *c, const tc_plan *p);
};

/* --map, --dtype, --keep, --only, --engine, --allow-unsafe, --safe-globals, limits. Prints and returns -1 on
 * misuse. tc_move_req_free releases what it made. */
int tc_move_parse_common(const tc_args *a, tc_move_req *r);
void tc_move_req_free(tc_move_req *r);
/* Rewrite `in` to the torch zip `out` (tc_dst_open flags); returns an exit status, having printed. */
int tc_move_run(const char *in, const char *out, unsigned dst_flags, tc_move_req *r);
bool tc_valid_location(const char *s);
/* The device types tc_valid_location takes: tc_locations_plain alone, each of
 * tc_locations_indexed alone or with ":N" (cuda:1). NULL-terminated. */
extern const char *const tc_locations_plain[], *const tc_locations_indexed[];

#endif
