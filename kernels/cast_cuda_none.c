/* cast_cuda.h for builds without CUDA: always "not available". */
#include "cast_cuda.h"

#include <stdio.h>
#include <string.h>

static const char why_none[] = "built without CUDA support";

void tc_cuda_query(tc_cuda_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why, "%s", why_none);
}

int tc_cuda_device_get(tc_cuda_device *out, int idx)
{
    (void)out, (void)idx;
    return -1;
}

int tc_cuda_cast(int dev, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n, char *why,
                 size_t why_len)
{
    (void)dev, (void)dst_t, (void)dst, (void)src_t, (void)src, (void)n;
    if (why && why_len)
        snprintf(why, why_len, "%s", why_none);
    return -1;
}

tc_cuda_caster *tc_cuda_caster_new(int dev, char *why, size_t why_len)
{
    (void)dev;
    if (why && why_len)
        snprintf(why, why_len, "%s", why_none);
    return NULL;
}

void tc_cuda_caster_free(tc_cuda_caster *c)
{
    (void)c;
}

int tc_cuda_caster_run(tc_cuda_caster *c, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n,
                       char *why, size_t why_len)
{
    (void)c;
    return tc_cuda_cast(0, dst_t, dst, src_t, src, n, why, why_len);
}

int tc_cuda_measure(int dev, tc_dtype dst_t, tc_dtype src_t, size_t n, int reps, double *kernel_s, double *copy_s,
                    char *why, size_t why_len)
{
    (void)dev, (void)dst_t, (void)src_t, (void)n, (void)reps, (void)kernel_s, (void)copy_s;
    if (why && why_len)
        snprintf(why, why_len, "%s", why_none);
    return -1;
}
