/* GGUF, llama.cpp's format (../shared/docs/gguf-format.md), read as ggml's
 * loader (ggml/src/gguf.cpp) and gguf-py 0.19 read it, and written as
 * llama.cpp loads it.
 *
 * Reading: versions 2 and 3, little- and big-endian, and split sets
 * (NAME-00001-of-0000N.gguf: opening the first shard opens the set, as
 * llama.cpp does; a later shard opens alone). Every tensor is one storage;
 * a tensor of a block type (Q4_K, ...) is a float32 tensor whose storage
 * holds blocks (tc_storage.enc), decoded above the drivers. Where the two
 * readers disagree the file is refused, or kept with a hazard when both
 * read it but see different things (see gguf.c). With TC_NAMES_HF the
 * llama family reads as transformers' GGUF loader gives it: Hugging Face
 * names, and the rows of attn_q/attn_k put back in Hugging Face's order.
 *
 * The metadata (typed key-value pairs) is not the checkpoint's string
 * metadata: it is read through the functions below, and a GGUF output
 * copies it from its input through tc_gguf_wkv. */
#ifndef TC_GGUF_H
#define TC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ckpt.h"

/* GGUF's value types (gguf_writer.py, ggml's gguf_type). */
enum {
    TC_GGUF_UINT8, TC_GGUF_INT8, TC_GGUF_UINT16, TC_GGUF_INT16, TC_GGUF_UINT32, TC_GGUF_INT32, TC_GGUF_FLOAT32,
    TC_GGUF_BOOL, TC_GGUF_STRING, TC_GGUF_ARRAY, TC_GGUF_UINT64, TC_GGUF_INT64, TC_GGUF_FLOAT64, TC_GGUF_NTYPES
};
/* "UINT32", ...; "?" for an unknown type. */
const char *tc_gguf_type_name(uint32_t type);
/* The type named (either case, or ggml's short names: u8, i32, f32, bool, str, ...), or -1. */
int tc_gguf_type_from_name(const char *name);

/* The header of file k of a checkpoint the GGUF driver read (k 0: the one opened). */
typedef struct tc_gguf_file {
    const char *path;
    uint32_t version;
    bool big_endian;
    uint32_t alignment;
    uint64_t data_offset;  /* where its tensor data starts */
    uint64_t nkv, ntensors;
} tc_gguf_file;

/* The files of c (1 for one file, N for a split set); 0 when c is not GGUF. */
size_t tc_gguf_nfiles(const tc_ckpt *c);
bool tc_gguf_file_info(const tc_ckpt *c, size_t k, tc_gguf_file *out);

/* Tensor i of c as the file lists it; false when c is not GGUF. */
typedef struct tc_gguf_tensor {
    tc_qtype type;
    uint32_t n_dims;
    int64_t ne[4];         /* GGUF's order: ne[0] the row length (torch's shape reversed) */
    uint64_t n_bytes;      /* in the file */
    uint64_t offset;       /* from its file's data start */
    uint64_t file_offset;
    size_t file;           /* tc_gguf_file_info index */
} tc_gguf_tensor;
bool tc_gguf_tensor_info(const tc_ckpt *c, size_t i, tc_gguf_tensor *out);

/* The metadata of file k, in file order. */
size_t tc_gguf_nkv(const tc_ckpt *c, size_t k);
/* Key i of file k (len bytes; no NUL inside), its type and, for arrays, element type and count. */
const char *tc_gguf_kv_key(const tc_ckpt *c, size_t k, size_t i, uint32_t *type, uint32_t *etype, uint64_t *count);
/* Appends KV i of file k as one JSON object: {"key", "type", "element_type" and "count"
 * (arrays), "nested": true (arrays of arrays), "value"}. Integers exactly, floats as the
 * shortest decimal that reads back to the same float32/float64 (infinities and NaN as
 * strings), strings as JSON strings. The value is read from the file as it is written:
 * when out holds a MiB or more, flush (may be NULL) is called to take it (and empty it),
 * so that a long array needs no more. */
int tc_gguf_kv_json(const tc_ckpt *c, size_t k, size_t i, tc_buf *out, void (*flush)(void *ctx, tc_buf *b),
                    void *ctx, tc_diag *d);
/* Appends its value for a table: scalars and strings whole (escaped, cut past 200
 * bytes), arrays as "[TYPE x N] first items, ...". */
int tc_gguf_kv_text(const tc_ckpt *c, size_t k, size_t i, tc_buf *out, tc_diag *d);

/* ---- writing (tc_write_job.gguf) ---------------------------------------------------- */

/* A metadata entry of an output: KV `index` of file 0 of the GGUF checkpoint
 * `from` (copied, little-endian), or a scalar or string given here. */
typedef struct tc_gguf_wkv {
    const char *key;
    const tc_ckpt *from;   /* NULL: the value below */
    size_t index;
    uint32_t type;         /* a scalar type or TC_GGUF_STRING */
    uint64_t bits;         /* integers (two's complement) and bools; FLOAT32 bits in the low half; FLOAT64 bits */
    const char *str;       /* STRING: str, len bytes */
    size_t len;
} tc_gguf_wkv;

/* The GGUF layout of a write job: block k of the job holds tensor data of
 * type types[k]. The file is written as ggml reads it: the KVs in order
 * (no arrays of arrays), tensor infos in the items' order, each tensor at
 * the padded running offset, padded after (as gguf-py), alignment from a
 * general.alignment KV (UINT32) when the KVs have one, else 32. */
typedef struct tc_gguf_job {
    const tc_qtype *types;
    const tc_gguf_wkv *kv;
    size_t nkv;
} tc_gguf_job;

/* Parse KEY=VALUE or KEY=TYPE:VALUE (TYPE a tc_gguf_type_from_name name;
 * without one, a string) into *out, which points into text. -1 with a
 * message in why when malformed. */
int tc_gguf_kv_parse(const char *text, tc_gguf_wkv *out, char *why, size_t whyn);

#endif
