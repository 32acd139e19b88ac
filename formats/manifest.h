/* Tensor manifests: what `tensorctl inspect --json --hash` prints about a
 * checkpoint, kept beside it to check a copy later without the original.
 *
 * Only the "tensors" array is read: each entry's name, dtype, shape, stride,
 * storage_offset, device and sha256 (the SHA-256 of its elements in C order,
 * little-endian; absent when inspect ran without --hash or the tensor has no
 * data). Other keys are ignored, so manifests stay readable as inspect's
 * JSON grows. A manifest is not a format driver: it holds no tensor data.
 *
 * Ownership: a tc_manifest owns its entries and strings; tc_manifest_free
 * accepts NULL. */
#ifndef TC_MANIFEST_H
#define TC_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "strmap.h"

typedef struct tc_manifest_entry {
    char *name;
    tc_dtype dtype;
    int ndim;
    int64_t shape[TC_MAX_DIMS], stride[TC_MAX_DIMS];
    bool has_stride;       /* stride and storage_offset were given */
    int64_t offset;
    char *device;          /* NULL when not given */
    bool has_data;         /* false for a tensor without data ("storage": null, "kind": "meta") */
    bool has_sha;
    char sha256[65];       /* lowercase hex */
    uint64_t numel;
} tc_manifest_entry;

typedef struct tc_manifest {
    char *path;
    char *file;            /* the checkpoint it describes ("file"), NULL when not given */
    char *format;          /* its format ("format"), NULL when not given */
    tc_manifest_entry *e;  /* in the manifest's order */
    size_t n;
    tc_strmap names;       /* name -> index into e */
} tc_manifest;

/* True when path looks like a manifest rather than a checkpoint: not an
 * index (*.index.json) and its first non-blank byte is '{'. */
bool tc_manifest_probe(const char *path);
/* Read and validate path (at most lim->max_header bytes). A name listed
 * twice, an unknown dtype, a shape that is not a list of whole numbers or a
 * malformed sha256 is a format error naming the entry. */
int tc_manifest_open(tc_manifest **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_manifest_free(tc_manifest *m);

#endif
