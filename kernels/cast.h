/* Element-type casts between floating-point formats, bit-exact with torch's
 * tensor.to(dtype) on the CPU.
 *
 * Three implementations share this header and must agree bit for bit:
 *   tc_cast_ref   scalar C, the reference;
 *   tc_cast_cpu   vectorised (chosen at run time by CPU features) and
 *                 threaded on large inputs;
 *   tc_cuda_cast  CUDA kernels (kernels/cast_cuda.h), when built with CUDA.
 * Supported pairs: any two of float64, float32, float16, bfloat16,
 * float8_e4m3fn, float8_e5m2 (same type: a copy). Buffers are little-endian
 * element arrays; dst and src must not overlap. No function here prints,
 * exits or allocates more than a fixed amount.
 *
 * Semantics are those of torch 2.x on x86 (AVX2/AVX512 kernels): through
 * float32 (so float64 -> 16/8-bit types rounds twice), round to nearest even,
 * float8_e4m3fn saturating at +-448 (inf included), NaN bits as listed in
 * cast_bits.h. Where torch's vectorised loop and its scalar tail disagree
 * (NaNs in float16 -> float32 and float64 -> bfloat16) the vectorised result,
 * i.e. what large tensors get, is the one reproduced. */
#ifndef TC_CAST_H
#define TC_CAST_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "dtype.h"

/* True when src -> dst is a supported cast. */
bool tc_cast_supported(tc_dtype dst, tc_dtype src);

/* Convert n elements. Return 0, or -1 for an unsupported pair.
 * tc_cast_cpu picks AVX2+F16C when the CPU has it and uses two threads above
 * 4 Mi elements; it assumes the default floating-point environment (round to
 * nearest, no FTZ/DAZ), as torch does. */
int tc_cast_ref(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n);
int tc_cast_cpu(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n);

/* What a cast would do to finite values, counted before casting down. */
typedef struct tc_cast_stats {
    uint64_t overflow;  /* finite in src, +-inf in dst; for float8_e4m3fn, which
                         * saturates, finite values that would round past 448
                         * (|x| >= 464 after the float32 step) */
    uint64_t underflow; /* nonzero in src, zero in dst */
    uint64_t nan;       /* NaN in src */
} tc_cast_stats;

/* Add the counts for n elements of src cast to dst_t into *stats. */
int tc_cast_count(tc_cast_stats *stats, tc_dtype dst_t, tc_dtype src_t, const void *src, size_t n);

/* tc_cast_count and tc_cast_cpu in one pass over src (the counts are added
 * to *stats; the output and counts are those of the two calls). */
int tc_cast_cpu_counted(tc_cast_stats *stats, tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n);

/* Force a CPU path for tests: 0 = best available, 1 = scalar only. */
void tc_cast_cpu_force_scalar(bool scalar);
/* Name of the CPU path tc_cast_cpu uses now ("avx2+f16c", "scalar", ...). */
const char *tc_cast_cpu_path(void);

#endif
