/* Block codecs: ggml's block types (base's qtype.h) decoded to float32 and
 * encoded from it, bit for bit as gguf-py 0.19's numpy code computes them
 * (gguf.quants.dequantize, whose float32 output equals ggml's C to_float
 * on every type it handles, and gguf.quants.quantize). Beside the casts.
 *
 * Two implementations share this header and agree bit for bit:
 *   tc_quant_*_ref  scalar C, the reference, written from the format's
 *                   layouts (../shared/docs/gguf-format.md section 6);
 *   tc_quant_*      the fast path: loops the compiler vectorises, split
 *                   over two threads on large inputs; other types fall back
 *                   to the reference.
 * Both are evaluated in float32, in numpy's order, without contracting
 * a*b+c into a fused multiply-add (meson builds them -ffp-contract=off).
 *
 * Decoding handles every block type whose tc_qtype_info says decodes;
 * encoding F32, F16 (numpy's float32 -> float16, NaN payloads kept), BF16
 * (ggml's rounding: nearest even, NaNs quieted) and the types whose
 * info says encodes. Buffers hold whole blocks, little-endian; float32
 * values are native (the hosts built for are little-endian). Nothing here
 * prints, exits or allocates more than a fixed amount.
 *
 * One place where gguf-py's own result depends on the machine: the
 * largest and smallest value of a Q4_1/Q5_1 block are found by numpy's
 * SIMD reductions, so when the extreme value is a zero present with both
 * signs, the sign numpy picks depends on the CPU's vector width. The
 * codecs here take the first such element in the block. */
#ifndef TC_QUANT_H
#define TC_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qtype.h"

bool tc_quant_can_decode(tc_qtype q);
bool tc_quant_can_encode(tc_qtype q);

/* n blocks of q at src -> n * block float32 at dst. 0, or -1 when q is not decodable. */
int tc_quant_decode_ref(tc_qtype q, float *dst, const void *src, size_t n);
int tc_quant_decode(tc_qtype q, float *dst, const void *src, size_t n);
/* n * block float32 at src -> n blocks of q at dst. 0, or -1 when q is not encodable. */
int tc_quant_encode_ref(tc_qtype q, void *dst, const float *src, size_t n);
int tc_quant_encode(tc_qtype q, void *dst, const float *src, size_t n);

/* The same from bfloat16 values (n blocks of them, or n values for the element types), each
 * widened to float32 exactly; Q8_0 and Q4_0 read them without a float32 copy. */
int tc_quant_encode_bf16(tc_qtype q, void *dst, const void *src, size_t n);

/* Force the reference path in tc_quant_decode/encode (tests). */
void tc_quant_force_scalar(bool scalar);
/* Use at most AVX2 on x86 where AVX-512 is there (tests: both vector paths against the reference). */
void tc_quant_force_avx2(bool avx2);

#endif
