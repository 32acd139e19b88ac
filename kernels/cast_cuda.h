/* CUDA side of tensorctl behind a plain-C interface. Every function exists in
 * every build: without CUDA support compiled in (cast_cuda_none.c) they report
 * "built without CUDA". With it, a machine without a driver or GPU is a normal
 * answer (available = false and a reason), never a crash. */
#ifndef TC_CAST_CUDA_H
#define TC_CAST_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tc_cuda_device {
    int index;
    char name[256];
    uint64_t total_mem, free_mem;
    int cc_major, cc_minor;
} tc_cuda_device;

typedef struct tc_cuda_info {
    bool compiled;        /* CUDA support built in */
    bool available;       /* a usable device exists */
    int runtime_version;  /* cudart version, 0 when unknown */
    int driver_version;   /* 0 when no driver */
    int count;            /* devices found */
    char why[256];        /* when !available: why (no driver, driver too old, no device, ...) */
} tc_cuda_info;

/* Fill *out; never fails. */
void tc_cuda_query(tc_cuda_info *out);
/* Describe device idx into *out. Return 0, or -1 when it does not exist. */
int tc_cuda_device_get(tc_cuda_device *out, int idx);

/* A caster owns what casts on device `dev` need, made once: two streams,
 * each with pinned host staging buffers and device buffers (16 MiB of each
 * in all). NULL, with a reason in why, when CUDA or the device is unusable. */
typedef struct tc_cuda_caster tc_cuda_caster;
tc_cuda_caster *tc_cuda_caster_new(int dev, char *why, size_t why_len);
void tc_cuda_caster_free(tc_cuda_caster *c);

/* Cast n elements, host buffers in and out: copied in through the pinned
 * buffers in sub-chunks that alternate between the two streams, so one
 * stream's copies overlap the other's kernel. Return 0, or -1 with a reason
 * in why (always, in builds without CUDA). */
int tc_cuda_caster_run(tc_cuda_caster *c, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n,
                       char *why, size_t why_len);

/* Time the cast kernel alone on n elements already on the device (mean of
 * reps runs, seconds) and a device-to-device copy moving the same bytes (a
 * cast reads n * size(src) and writes n * size(dst); the copy moves half of
 * that sum each way). For benchmarks; -1 with a reason when not possible. */
int tc_cuda_measure(int dev, tc_dtype dst_t, tc_dtype src_t, size_t n, int reps, double *kernel_s, double *copy_s,
                    char *why, size_t why_len);

/* One cast with a caster made and freed around it. */
int tc_cuda_cast(int dev, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n,
                 char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
