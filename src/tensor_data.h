/* Digests of a tensor's logical elements (see tc_tensor_stream in convert.h). */
#ifndef TC_TENSOR_DATA_H
#define TC_TENSOR_DATA_H

#include "ckpt.h"

/* SHA-256 of those bytes, as lowercase hex (65 bytes with the NUL). */
int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, char hex[65], tc_diag *d);

#endif
