/* Element types of tensors as PyTorch and safetensors name them.
 *
 * One table (dtype.c) maps each type to its torch name, element size, legacy
 * storage class (for _rebuild_tensor_v2 files), safetensors name and sort
 * rank, and kind. Everything else in tensorctl looks types up here. */
#ifndef TC_DTYPE_H
#define TC_DTYPE_H

#include <stddef.h>
#include <stdbool.h>

typedef enum tc_dtype {
    TC_DT_INVALID = 0,
    TC_DT_F64,
    TC_DT_F32,
    TC_DT_F16,
    TC_DT_BF16,
    TC_DT_I64,
    TC_DT_I32,
    TC_DT_I16,
    TC_DT_I8,
    TC_DT_U8,
    TC_DT_BOOL,
    TC_DT_C128,
    TC_DT_C64,
    TC_DT_C32,
    TC_DT_QINT8,
    TC_DT_QUINT8,
    TC_DT_QINT32,
    TC_DT_QUINT4X2,
    TC_DT_QUINT2X4,
    TC_DT_F8E5M2,
    TC_DT_F8E4M3FN,
    TC_DT_F8E5M2FNUZ,
    TC_DT_F8E4M3FNUZ,
    TC_DT_F8E8M0FNU,
    TC_DT_F4E2M1FNX2,
    TC_DT_U16,
    TC_DT_U32,
    TC_DT_U64,
    TC_DT_BITS8,
    TC_DT_BITS16,
    TC_DT_COUNT
} tc_dtype;

typedef enum tc_dtype_kind {
    TC_KIND_FLOAT,   /* real floating point: the only kind --dtype casts */
    TC_KIND_INT,
    TC_KIND_BOOL,
    TC_KIND_COMPLEX,
    TC_KIND_QUANT,
    TC_KIND_BITS
} tc_dtype_kind;

typedef struct tc_dtype_info {
    const char *name;        /* torch spelling without "torch.": "float32" */
    size_t size;             /* bytes per element */
    const char *storage;     /* legacy storage class ("FloatStorage"), NULL for v3-only types */
    const char *st_name;     /* safetensors dtype ("F32"), NULL when safetensors has none */
    int st_rank;             /* position in the safetensors library's Dtype enum (its sort key) */
    tc_dtype_kind kind;
} tc_dtype_info;

/* The table entry of t; an entry with name "invalid" for out-of-range values. */
const tc_dtype_info *tc_dtype_get(tc_dtype t);
static inline size_t tc_dtype_size(tc_dtype t) { return tc_dtype_get(t)->size; }
static inline const char *tc_dtype_name(tc_dtype t) { return tc_dtype_get(t)->name; }
/* Lookups; each returns TC_DT_INVALID when nothing matches. */
tc_dtype tc_dtype_from_name(const char *name);          /* "float32", also "torch.float32" */
tc_dtype tc_dtype_from_storage(const char *storage);    /* "FloatStorage" */
tc_dtype tc_dtype_from_st(const char *st_name);         /* "F32" */
/* Bits per element of a safetensors dtype that has no torch type here (F4,
 * F6_E2M3, F6_E3M2), 0 for any other name. */
unsigned tc_dtype_st_foreign_bits(const char *st_name);
/* True when torch saves this dtype with _rebuild_tensor_v3 and UntypedStorage. */
static inline bool tc_dtype_is_v3(tc_dtype t) { return tc_dtype_get(t)->storage == NULL; }

#endif
