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
 * exits or allocates more than a fixed amount. */
#ifndef TC_CAST_H
#define TC_CAST_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "../src/dtype.h"

/* True when src -> dst is a supported cast. */
bool tc_cast_supported(tc_dtype dst, tc_dtype src);

/* Convert n elements. Return 0, or -1 for an unsupported pair. */
int tc_cast_ref(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n);
int tc_cast_cpu(tc_dtype dst_t, void *dst, tc_dtype src_t, const void *src, size_t n);

/* What a cast would do to finite values, counted before casting down. */
typedef struct tc_cast_stats {
    uint64_t overflow;  /* finite in src, +-inf (or NaN for float8_e4m3fn) in dst */
    uint64_t underflow; /* nonzero in src, zero in dst */
    uint64_t nan;       /* NaN in src */
} tc_cast_stats;

/* Add the counts for n elements of src cast to dst_t into *stats. */
int tc_cast_count(tc_cast_stats *stats, tc_dtype dst_t, tc_dtype src_t, const void *src, size_t n);

/* Force a CPU path for tests: 0 = best available, 1 = scalar only. */
void tc_cast_cpu_force_scalar(bool scalar);
/* Name of the CPU path tc_cast_cpu uses now ("avx2+f16c", "scalar", ...). */
const char *tc_cast_cpu_path(void);

#endif
