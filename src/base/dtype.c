#include "dtype.h"

#include <string.h>

/* safetensors ranks: BOOL 0, F4 1, F6_E2M3 2, F6_E3M2 3, U8 4, I8 5, F8_E5M2 6, F8_E4M3 7, F8_E8M0 8,
 * F8_E4M3FNUZ 9, F8_E5M2FNUZ 10, I16 11, U16 12, F16 13, BF16 14, I32 15, U32 16, F32 17, C64 18, F64 19,
 * I64 20, U64 21 */
static const tc_dtype_info table[TC_DT_COUNT] = {
    [TC_DT_INVALID] = {"invalid", 0, NULL, NULL, -1, TC_KIND_BITS},
    [TC_DT_F64] = {"float64", 8, "DoubleStorage", "F64", 19, TC_KIND_FLOAT},
    [TC_DT_F32] = {"float32", 4, "FloatStorage", "F32", 17, TC_KIND_FLOAT},
    [TC_DT_F16] = {"float16", 2, "HalfStorage", "F16", 13, TC_KIND_FLOAT},
    [TC_DT_BF16] = {"bfloat16", 2, "BFloat16Storage", "BF16", 14, TC_KIND_FLOAT},
    [TC_DT_I64] = {"int64", 8, "LongStorage", "I64", 20, TC_KIND_INT},
    [TC_DT_I32] = {"int32", 4, "IntStorage", "I32", 15, TC_KIND_INT},
    [TC_DT_I16] = {"int16", 2, "ShortStorage", "I16", 11, TC_KIND_INT},
    [TC_DT_I8] = {"int8", 1, "CharStorage", "I8", 5, TC_KIND_INT},
    [TC_DT_U8] = {"uint8", 1, "ByteStorage", "U8", 4, TC_KIND_INT},
    [TC_DT_BOOL] = {"bool", 1, "BoolStorage", "BOOL", 0, TC_KIND_BOOL},
    [TC_DT_C128] = {"complex128", 16, "ComplexDoubleStorage", NULL, -1, TC_KIND_COMPLEX},
    [TC_DT_C64] = {"complex64", 8, "ComplexFloatStorage", "C64", 18, TC_KIND_COMPLEX},
    [TC_DT_C32] = {"complex32", 4, NULL, NULL, -1, TC_KIND_COMPLEX},
    [TC_DT_QINT8] = {"qint8", 1, "QInt8Storage", NULL, -1, TC_KIND_QUANT},
    [TC_DT_QUINT8] = {"quint8", 1, "QUInt8Storage", NULL, -1, TC_KIND_QUANT},
    [TC_DT_QINT32] = {"qint32", 4, "QInt32Storage", NULL, -1, TC_KIND_QUANT},
    [TC_DT_QUINT4X2] = {"quint4x2", 1, "QUInt4x2Storage", NULL, -1, TC_KIND_QUANT},
    [TC_DT_QUINT2X4] = {"quint2x4", 1, "QUInt2x4Storage", NULL, -1, TC_KIND_QUANT},
    [TC_DT_F8E5M2] = {"float8_e5m2", 1, NULL, "F8_E5M2", 6, TC_KIND_FLOAT},
    [TC_DT_F8E4M3FN] = {"float8_e4m3fn", 1, NULL, "F8_E4M3", 7, TC_KIND_FLOAT},
    [TC_DT_F8E5M2FNUZ] = {"float8_e5m2fnuz", 1, NULL, "F8_E5M2FNUZ", 10, TC_KIND_FLOAT},
    [TC_DT_F8E4M3FNUZ] = {"float8_e4m3fnuz", 1, NULL, "F8_E4M3FNUZ", 9, TC_KIND_FLOAT},
    [TC_DT_F8E8M0FNU] = {"float8_e8m0fnu", 1, NULL, "F8_E8M0", 8, TC_KIND_FLOAT},
    [TC_DT_F4E2M1FNX2] = {"float4_e2m1fn_x2", 1, NULL, NULL, -1, TC_KIND_BITS},
    [TC_DT_U16] = {"uint16", 2, NULL, "U16", 12, TC_KIND_INT},
    [TC_DT_U32] = {"uint32", 4, NULL, "U32", 16, TC_KIND_INT},
    [TC_DT_U64] = {"uint64", 8, NULL, "U64", 21, TC_KIND_INT},
    [TC_DT_BITS8] = {"bits8", 1, NULL, NULL, -1, TC_KIND_BITS},
    [TC_DT_BITS16] = {"bits16", 2, NULL, NULL, -1, TC_KIND_BITS},
};

const tc_dtype_info *tc_dtype_get(tc_dtype t)
{
    if ((unsigned)t >= TC_DT_COUNT)
        t = TC_DT_INVALID;
    return &table[t];
}

tc_dtype tc_dtype_from_name(const char *name)
{
    if (!name)
        return TC_DT_INVALID;
    if (!strncmp(name, "torch.", 6))
        name += 6;
    for (int t = 1; t < TC_DT_COUNT; t++)
        if (!strcmp(table[t].name, name))
            return (tc_dtype)t;
    return TC_DT_INVALID;
}

tc_dtype tc_dtype_from_storage(const char *storage)
{
    if (!storage)
        return TC_DT_INVALID;
    for (int t = 1; t < TC_DT_COUNT; t++)
        if (table[t].storage && !strcmp(table[t].storage, storage))
            return (tc_dtype)t;
    return TC_DT_INVALID;
}

tc_dtype tc_dtype_from_st(const char *st_name)
{
    if (!st_name)
        return TC_DT_INVALID;
    for (int t = 1; t < TC_DT_COUNT; t++)
        if (table[t].st_name && !strcmp(table[t].st_name, st_name))
            return (tc_dtype)t;
    return TC_DT_INVALID;
}

unsigned tc_dtype_st_foreign_bits(const char *st_name)
{
    static const struct {
        const char *name;
        unsigned bits;
    } foreign[] = {{"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6}};
    for (size_t i = 0; st_name && i < sizeof foreign / sizeof foreign[0]; i++)
        if (!strcmp(foreign[i].name, st_name))
            return foreign[i].bits;
    return 0;
}
