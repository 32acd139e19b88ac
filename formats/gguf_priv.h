/* Internal to the GGUF driver (gguf.c parses, gguf_rd.c reads tensor data,
 * gguf_meta.c prints metadata and maps names, gguf_write.c writes): the state
 * kept for a checkpoint read. */
#ifndef TC_GGUF_PRIV_H
#define TC_GGUF_PRIV_H

#include "format.h"
#include "gguf.h"
#include "vec.h"

#define GG_MAX_STRING (1ull << 30)   /* ggml's GGUF_MAX_STRING_LENGTH */
#define GG_MAX_ARRAY (1ull << 30)    /* ggml's GGUF_MAX_ARRAY_ELEMENTS */
#define GG_MAX_NAME 64               /* ggml's GGML_MAX_NAME: names are shorter */
#define GG_MAX_NEST 64               /* arrays of arrays deeper than this are refused */

typedef struct gg_kv {
    char *key;          /* NUL-terminated (keys with a NUL byte are refused) */
    uint32_t type;      /* TC_GGUF_* */
    uint32_t etype;     /* arrays: the element type */
    uint64_t count;     /* arrays: elements */
    uint64_t off, len;  /* the value's bytes in its file (a string's from its length; an array's elements, after
                           their type and count) */
    uint64_t bits;      /* scalars: the value, native (zero-extended) */
    bool nested;        /* an array of arrays (gguf-py flattens it, ggml refuses it) */
} gg_kv;

typedef struct gg_file {
    char *path;
    tc_src own;         /* files after the first: their own source */
    const tc_src *src;  /* the source to read */
    uint32_t version;
    bool big;
    uint32_t align;
    uint64_t data_off, ntensors, nkv;
    size_t kv0;         /* its KVs: kv[kv0 .. kv0 + nkv) */
} gg_file;

typedef struct gg_tensor {
    tc_qtype q;
    size_t file;
    uint32_t nd;
    int64_t ne[4];
    uint64_t off, abs, bytes;  /* offset from the data start, in the file, size */
    uint64_t row_bytes;        /* of ne[0] values */
    /* TC_NAMES_HF: the tensor read as prows rows of prow_bytes in Hugging Face's order, for perm_heads
     * heads (llama.cpp's Q/K permutation undone); perm_heads 0: as stored */
    uint32_t perm_heads;
    uint64_t prows, prow_bytes;
} gg_tensor;

typedef struct gg_priv {
    TC_VEC(gg_file) files;
    TC_VEC(gg_kv) kv;
    TC_VEC(gg_tensor) t;       /* one per tensor, which is also its storage */
} gg_priv;

extern const tc_format tc_format_gguf;

/* c's state when the GGUF driver read it, else NULL. */
gg_priv *gg_priv_of(const tc_ckpt *c);
/* Bytes of one value of a scalar type (0 for STRING and ARRAY). */
size_t gg_scalar_size(uint32_t type);
/* Read n bytes at off of file f into buf. */
int gg_read(const gg_file *f, uint64_t off, void *buf, size_t n, tc_diag *d);
/* A number of `size` bytes in f's byte order. */
uint64_t gg_num(const gg_file *f, const uint8_t *p, size_t size);

/* gguf_meta.c: a cursor over a value's bytes [off, off + len) in file f, read in pieces. */
typedef struct gg_cur {
    const gg_file *f;
    uint64_t pos, end, boff;
    size_t blen;
    uint8_t buf[1 << 14];
} gg_cur;
void gg_cur_init(gg_cur *c, const gg_file *f, uint64_t off, uint64_t len);
int gg_cur_get(gg_cur *c, void *out, size_t n, tc_diag *d);
/* A number of size bytes in f's byte order. */
int gg_cur_num(gg_cur *c, size_t size, uint64_t *v, tc_diag *d);

/* gguf_meta.c, TC_NAMES_HF: whether g's metadata has what the llama family's mapping needs; then
 * the Hugging Face name of tensor t (GGUF name gguf), setting its row order. */
int gg_hf_check(const gg_priv *g, tc_diag *d);
int gg_hf_name(const gg_priv *g, const char *gguf, gg_tensor *t, char *out, size_t n, tc_diag *d);
/* The first KV of file f named key, or NULL. */
const gg_kv *gg_find_kv(const gg_priv *g, const gg_file *f, const char *key);

/* Block types whose scale fields gguf_convert_endian.py swaps (so that a big-endian file has an agreed
 * reading): the offsets of their f16 fields, -1 ending the list; NULL for the other block types. */
const int *gg_be_fields(tc_qtype q);
/* gguf_rd.c: the driver's open_storage */
int gg_open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d);

/* gguf_write.c */
int tc_gguf_write(const tc_write_job *job, tc_dst *dst, tc_diag *d);

#endif
