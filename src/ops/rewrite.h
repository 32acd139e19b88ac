/* Rewriting a torch checkpoint whole (to-cpu, to-cuda, --map, --dtype, and
 * convert from .pt to .pt): every object kept, storages re-tagged and cast
 * as planned, written as a torch zip that real torch loads. */
#ifndef TC_REWRITE_H
#define TC_REWRITE_H

#include "ckpt.h"
#include "dest.h"
#include "plan.h"

/* Write c as p plans into dst (an open, empty destination), with the key
 * surgery p's options ask for (rekey.h); c's object graph is modified.
 * TorchScript archives are refused (their code would be lost). */
int tc_rewrite(tc_ckpt *c, tc_plan *p, tc_dst *dst, tc_diag *d);
/* The same with the surgery already worked out (rk may be NULL: none). */
struct tc_rekey;
int tc_rewrite_keyed(tc_ckpt *c, tc_plan *p, const struct tc_rekey *rk, tc_dst *dst, tc_diag *d);

/* A tc_data_fn for plans: block k is storage blk[k] of the planned
 * checkpoint, or storage k when blk is NULL. */
typedef struct tc_storage_data {
    tc_plan *p;
    const tc_ckpt *c;
    const size_t *blk;
} tc_storage_data;
int tc_storage_data_fn(void *ctx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d);
/* Its tc_origin_fn: where block k's unchanged bytes lie in the input. */
bool tc_storage_origin_fn(void *ctx, size_t k, uint64_t *off);

#endif
