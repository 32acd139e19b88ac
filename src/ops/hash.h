/* SHA-256 of a tensor's logical elements, C order, little-endian: what
 * torch's .contiguous() holds, as the corpus expect files record it. */
#ifndef TC_HASH_H
#define TC_HASH_H

#include "ckpt.h"
#include "dest.h"
#include "stream.h"

/* A view that reads out past tc_expand_limit(max_expand) is not hashed (TC_ERR_LIMIT). */
int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, uint64_t max_expand, char hex[65], tc_diag *d);
/* SHA-256 of storage i's bytes as its driver reads them out: for one stored
 * as blocks (tc_storage.enc), the blocks, little-endian. */
int tc_storage_sha256(const tc_ckpt *c, size_t i, char hex[65], tc_diag *d);
/* The same from a reader opened on the tensor (read to its end here), for
 * callers that open readers on one thread and hash on others. */
int tc_elems_sha256(tc_elems *e, char hex[65], tc_diag *d);

/* tc_dst_commit, except that in a content-addressed store (tc_dst_blob) the
 * new blob is first named by the SHA-256 of the finished file, which blob
 * receives (hex; "" when o is not in a store). */
int tc_dst_commit_hashed(tc_dst *o, char blob[65], tc_diag *d);

#endif
