#include "rewrite.h"

#include "format.h"
#include "stream.h"

int tc_storage_data_fn(void *ctx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    tc_storage_data *s = ctx;
    return tc_stream_storage(s->p, s->c, k, dst, off, crc, d);
}

bool tc_storage_origin_fn(void *ctx, size_t k, uint64_t *off)
{
    tc_storage_data *s = ctx;
    return tc_stream_origin(s->p, s->c, k, off);
}

int tc_rewrite(tc_ckpt *c, tc_plan *p, tc_dst *dst, tc_diag *d)
{
    tc_storage_data sd = {p, c};
    tc_write_job job = {.whole = c, .storages = p->out, .data = tc_storage_data_fn, .origin = tc_storage_origin_fn,
                        .ctx = &sd, .max_depth = p->o->max_depth};
    p->total = p->in_bytes;
    return tc_format_named("torch-zip")->write(&job, dst, d);
}
