#include "rewrite.h"

#include <string.h>

#include "format.h"
#include "rekey.h"
#include "step.h"
#include "stream.h"

int tc_storage_data_fn(void *ctx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    tc_storage_data *s = ctx;
    return tc_stream_storage(s->p, s->c, s->blk ? s->blk[k] : k, dst, off, crc, d);
}

bool tc_storage_origin_fn(void *ctx, size_t k, uint64_t *off)
{
    tc_storage_data *s = ctx;
    return tc_stream_origin(s->p, s->c, s->blk ? s->blk[k] : k, off);
}

int tc_rewrite_keyed(tc_ckpt *c, tc_plan *p, const tc_rekey *rk, tc_dst *dst, tc_diag *d)
{
    if (tc_ckpt_can(c, TC_CAP_TORCHSCRIPT))
        return tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                          "a TorchScript archive cannot be rewritten whole (its code/ would be lost); 'tensorctl "
                          "extract' writes its parameters and buffers as a state_dict");
    tc_storage_data sd = {p, c, NULL};
    tc_rewrite_job job = {.whole = c, .storages = p->out, .data = tc_storage_data_fn, .origin = tc_storage_origin_fn,
                        .ctx = &sd, .max_depth = p->o->max_depth, .edits = rk ? rk->edits : NULL,
                        .nedits = rk ? rk->nedits : 0};
    p->total = p->in_bytes;
    tc_step_cache_on(p); /* the write's steps run on this thread */
    int rc = tc_format_rewrite(TC_CAP_WRITES_TORCH, &job, dst, d);
    tc_step_cache_off(p);
    return rc;
}

int tc_rewrite(tc_ckpt *c, tc_plan *p, tc_dst *dst, tc_diag *d)
{
    tc_rekey rk = {0};
    int rc = 0;
    if (tc_keyops_any(p->o->keys) && (rc = tc_rekey_make(c, p->o->keys, &rk, d))) {
        tc_diag_subject(d, tc_ckpt_path(c));
        return rc;
    }
    rc = tc_rewrite_keyed(c, p, &rk, dst, d);
    tc_rekey_free(&rk);
    return rc;
}
