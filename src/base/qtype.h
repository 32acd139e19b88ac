/* ggml's tensor types, as GGUF files name them: the element types (F32,
 * F16, BF16, F64, I8..I64) and the block types, where a fixed number of
 * values is packed with its scales into a fixed number of bytes (Q8_0: 32
 * values in 34 bytes). Beside the dtype table (dtype.h), which holds what
 * torch and safetensors call a type; a tensor stored in blocks reads as
 * float32, the type its block codec (kernels/quant.h) decodes to.
 *
 * One table (qtype.c) gives each type its ggml id, name, block size and
 * bytes, the dtype an element type is, and whether its values can be read
 * (gguf-py 0.19 dequantises it) and written (gguf-py's numpy quantisers
 * define it). Ids ggml removed (4, 5, 31-33, 36-38) and ones gguf-py 0.19
 * does not know have no entry. */
#ifndef TC_QTYPE_H
#define TC_QTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"

typedef enum tc_qtype {
    TC_Q_NONE = 0, /* not a ggml type (a plain dtype's bytes) */
    TC_Q_F32,
    TC_Q_F16,
    TC_Q_BF16,
    TC_Q_F64,
    TC_Q_I8,
    TC_Q_I16,
    TC_Q_I32,
    TC_Q_I64,
    TC_Q_Q4_0,
    TC_Q_Q4_1,
    TC_Q_Q5_0,
    TC_Q_Q5_1,
    TC_Q_Q8_0,
    TC_Q_Q8_1,
    TC_Q_Q2_K,
    TC_Q_Q3_K,
    TC_Q_Q4_K,
    TC_Q_Q5_K,
    TC_Q_Q6_K,
    TC_Q_Q8_K,
    TC_Q_IQ2_XXS,
    TC_Q_IQ2_XS,
    TC_Q_IQ3_XXS,
    TC_Q_IQ1_S,
    TC_Q_IQ4_NL,
    TC_Q_IQ3_S,
    TC_Q_IQ2_S,
    TC_Q_IQ4_XS,
    TC_Q_IQ1_M,
    TC_Q_TQ1_0,
    TC_Q_TQ2_0,
    TC_Q_MXFP4,
    TC_Q_NVFP4,
    TC_Q_Q1_0,
    TC_Q_COUNT
} tc_qtype;

typedef struct tc_qtype_info {
    const char *name;  /* ggml's spelling: "Q4_K" */
    uint32_t ggml;     /* its id in a GGUF tensor info */
    uint32_t block;    /* values per block (1 for an element type) */
    uint32_t bytes;    /* bytes per block */
    tc_dtype plain;    /* an element type's dtype; TC_DT_INVALID for block types */
    bool decodes;      /* its values can be read (block types: to float32) */
    bool encodes;      /* tensorctl writes it, as gguf-py's quantize() does */
} tc_qtype_info;

/* The table entry of q; an entry named "none" for TC_Q_NONE and out-of-range values. */
const tc_qtype_info *tc_qtype_get(tc_qtype q);
static inline const char *tc_qtype_name(tc_qtype q) { return tc_qtype_get(q)->name; }
static inline bool tc_qtype_is_block(tc_qtype q) { return q != TC_Q_NONE && tc_qtype_get(q)->plain == TC_DT_INVALID; }
/* Lookups; TC_Q_NONE when nothing matches. */
tc_qtype tc_qtype_from_ggml(uint32_t id);
tc_qtype tc_qtype_from_name(const char *name); /* ggml's name, any letter case: "q8_0" */
tc_qtype tc_qtype_of_dtype(tc_dtype t);       /* float32 -> F32; dtypes GGUF has no type for -> TC_Q_NONE */
/* Bytes that n values of q take: false when n is not a whole number of
 * blocks or the count overflows. */
bool tc_qtype_bytes(tc_qtype q, uint64_t n, uint64_t *out);

#endif
