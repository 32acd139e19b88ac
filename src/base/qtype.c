#include "qtype.h"

#include <strings.h>

/* ids, block sizes and bytes: gguf-py 0.19 constants.py (GGMLQuantizationType, GGML_QUANT_SIZES);
 * decodes: what gguf.quants.dequantize handles, plus the element types; encodes: the types
 * gguf.quants.quantize handles that tensorctl writes. */
static const tc_qtype_info table[TC_Q_COUNT] = {
    [TC_Q_NONE] = {"none", UINT32_MAX, 0, 0, TC_DT_INVALID, false, false},
    [TC_Q_F32] = {"F32", 0, 1, 4, TC_DT_F32, true, true},
    [TC_Q_F16] = {"F16", 1, 1, 2, TC_DT_F16, true, true},
    [TC_Q_BF16] = {"BF16", 30, 1, 2, TC_DT_BF16, true, true},
    [TC_Q_F64] = {"F64", 28, 1, 8, TC_DT_F64, true, false},
    [TC_Q_I8] = {"I8", 24, 1, 1, TC_DT_I8, true, false},
    [TC_Q_I16] = {"I16", 25, 1, 2, TC_DT_I16, true, false},
    [TC_Q_I32] = {"I32", 26, 1, 4, TC_DT_I32, true, false},
    [TC_Q_I64] = {"I64", 27, 1, 8, TC_DT_I64, true, false},
    [TC_Q_Q4_0] = {"Q4_0", 2, 32, 18, TC_DT_INVALID, true, true},
    [TC_Q_Q4_1] = {"Q4_1", 3, 32, 20, TC_DT_INVALID, true, true},
    [TC_Q_Q5_0] = {"Q5_0", 6, 32, 22, TC_DT_INVALID, true, true},
    [TC_Q_Q5_1] = {"Q5_1", 7, 32, 24, TC_DT_INVALID, true, true},
    [TC_Q_Q8_0] = {"Q8_0", 8, 32, 34, TC_DT_INVALID, true, true},
    [TC_Q_Q8_1] = {"Q8_1", 9, 32, 40, TC_DT_INVALID, false, false},
    [TC_Q_Q2_K] = {"Q2_K", 10, 256, 84, TC_DT_INVALID, true, false},
    [TC_Q_Q3_K] = {"Q3_K", 11, 256, 110, TC_DT_INVALID, true, false},
    [TC_Q_Q4_K] = {"Q4_K", 12, 256, 144, TC_DT_INVALID, true, false},
    [TC_Q_Q5_K] = {"Q5_K", 13, 256, 176, TC_DT_INVALID, true, false},
    [TC_Q_Q6_K] = {"Q6_K", 14, 256, 210, TC_DT_INVALID, true, false},
    [TC_Q_Q8_K] = {"Q8_K", 15, 256, 292, TC_DT_INVALID, false, false},
    [TC_Q_IQ2_XXS] = {"IQ2_XXS", 16, 256, 66, TC_DT_INVALID, true, false},
    [TC_Q_IQ2_XS] = {"IQ2_XS", 17, 256, 74, TC_DT_INVALID, true, false},
    [TC_Q_IQ3_XXS] = {"IQ3_XXS", 18, 256, 98, TC_DT_INVALID, true, false},
    [TC_Q_IQ1_S] = {"IQ1_S", 19, 256, 50, TC_DT_INVALID, true, false},
    [TC_Q_IQ4_NL] = {"IQ4_NL", 20, 32, 18, TC_DT_INVALID, true, false},
    [TC_Q_IQ3_S] = {"IQ3_S", 21, 256, 110, TC_DT_INVALID, true, false},
    [TC_Q_IQ2_S] = {"IQ2_S", 22, 256, 82, TC_DT_INVALID, true, false},
    [TC_Q_IQ4_XS] = {"IQ4_XS", 23, 256, 136, TC_DT_INVALID, true, false},
    [TC_Q_IQ1_M] = {"IQ1_M", 29, 256, 56, TC_DT_INVALID, true, false},
    [TC_Q_TQ1_0] = {"TQ1_0", 34, 256, 54, TC_DT_INVALID, true, false},
    [TC_Q_TQ2_0] = {"TQ2_0", 35, 256, 66, TC_DT_INVALID, true, false},
    [TC_Q_MXFP4] = {"MXFP4", 39, 32, 17, TC_DT_INVALID, true, false},
    [TC_Q_NVFP4] = {"NVFP4", 40, 64, 36, TC_DT_INVALID, true, false},
    [TC_Q_Q1_0] = {"Q1_0", 41, 128, 18, TC_DT_INVALID, false, false},
};

const tc_qtype_info *tc_qtype_get(tc_qtype q)
{
    if ((unsigned)q >= TC_Q_COUNT)
        q = TC_Q_NONE;
    return &table[q];
}

tc_qtype tc_qtype_from_ggml(uint32_t id)
{
    for (int q = 1; q < TC_Q_COUNT; q++)
        if (table[q].ggml == id)
            return (tc_qtype)q;
    return TC_Q_NONE;
}

tc_qtype tc_qtype_from_name(const char *name)
{
    for (int q = 1; name && q < TC_Q_COUNT; q++)
        if (!strcasecmp(table[q].name, name))
            return (tc_qtype)q;
    return TC_Q_NONE;
}

tc_qtype tc_qtype_of_dtype(tc_dtype t)
{
    for (int q = 1; t != TC_DT_INVALID && q < TC_Q_COUNT; q++)
        if (table[q].plain == t)
            return (tc_qtype)q;
    return TC_Q_NONE;
}

bool tc_qtype_bytes(tc_qtype q, uint64_t n, uint64_t *out)
{
    const tc_qtype_info *t = tc_qtype_get(q);
    uint64_t b;
    if (!t->block || n % t->block || __builtin_mul_overflow(n / t->block, (uint64_t)t->bytes, &b))
        return false;
    *out = b;
    return true;
}
