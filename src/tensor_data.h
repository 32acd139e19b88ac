/* A tensor's logical elements, in C order, whatever its strides and offset:
 * what torch's tensor.contiguous() holds. Streams through bounded buffers. */
#ifndef TC_TENSOR_DATA_H
#define TC_TENSOR_DATA_H

#include "ckpt.h"
#include "rewrite.h"

/* Pass the tensor's elements to sink in order, in chunks of whole elements. */
int tc_tensor_stream(const tc_ckpt *c, const tc_tensor *t, tc_sink_fn sink, void *ctx, tc_diag *d);

/* SHA-256 of those bytes, as lowercase hex (65 bytes with the NUL). */
int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, char hex[65], tc_diag *d);

#endif
