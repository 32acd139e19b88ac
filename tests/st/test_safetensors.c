/* safetensors reader: one test per malformed-header defect, each pinning the
 * message fragment that names the tensor and the offending value. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shard_index.h"
#include "format.h"

static char path[256];

static void mkfile(const char *hdr, uint64_t hlen_override, size_t data_len)
{
    snprintf(path, sizeof path, "/tmp/tc_st_test_%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    uint64_t n = hlen_override ? hlen_override : strlen(hdr);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)(n >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(hdr, 1, strlen(hdr), f);
    for (size_t i = 0; i < data_len; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
}

static int open_it(tc_ckpt **c, tc_diag *d, const tc_limits *lim)
{
    tc_limits def = TC_LIMITS_DEFAULT;
    memset(d, 0, sizeof *d);
    return tc_open(c, path, lim ? lim : &def, d);
}

/* Open must fail with a message containing frag. */
static void expect_fail(const char *hdr, size_t data_len, const char *frag)
{
    mkfile(hdr, 0, data_len);
    tc_ckpt *c = NULL;
    tc_diag d;
    int rc = open_it(&c, &d, NULL);
    cr_assert_neq(rc, 0, "opened: %s", hdr);
    cr_assert_null(c);
    cr_assert(strstr(d.msg, frag), "message '%s' lacks '%s'", d.msg, frag);
    cr_assert(!strchr(d.msg, '\n'), "message is not one line: %s", d.msg);
    unlink(path);
}

Test(st, valid_file_fills_tables)
{
    mkfile("{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],"
           "\"data_offsets\":[8,20]},\"a\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
           "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[20,20]}}   ",
           0, 20);
    tc_ckpt *c;
    tc_diag d;
    cr_assert_eq(open_it(&c, &d, NULL), 0, "%s", d.msg);
    cr_assert_str_eq(tc_ckpt_format(c), "safetensors");
    cr_assert(!tc_ckpt_has_objects(c));
    cr_assert_eq(tc_ckpt_ntensors(c), 3);
    cr_assert_eq(tc_ckpt_nstorages(c), 3);
    cr_assert_eq(tc_ckpt_nmeta(c), 2);
    cr_assert_str_eq(tc_ckpt_meta(c, 1)->key, "k");
    cr_assert_str_eq(tc_ckpt_meta(c, 1)->value, "v");
    const tc_tensor *b = tc_ckpt_tensor(c, 0);
    cr_assert_str_eq(b->name, "b");
    cr_assert_eq(b->dtype, TC_DT_F16);
    cr_assert_eq(b->ndim, 2);
    cr_assert_eq(b->stride[0], 3);
    cr_assert_eq(b->stride[1], 1);
    cr_assert_eq(b->nbytes, 12);
    size_t hl = strlen("{\"__metadata__\":{\"format\":\"pt\",\"k\":\"v\"},\"b\":{\"dtype\":\"F16\",\"shape\":[2,3],"
                       "\"data_offsets\":[8,20]},\"a\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                       "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[20,20]}}   ");
    cr_assert_eq(tc_ckpt_storage(c, b->storage)->file_off, 8 + hl + 8);
    cr_assert(tc_ckpt_storage(c, b->storage)->stored);
    cr_assert_str_eq(tc_ckpt_storage(c, b->storage)->location, "-");
    cr_assert_eq(tc_ckpt_tensor(c, 1)->ndim, 0);
    cr_assert_eq(tc_ckpt_tensor(c, 1)->numel, 1);
    cr_assert_eq(tc_ckpt_tensor(c, 2)->numel, 0);
    /* the bytes read back are the file's */
    tc_rd r;
    uint8_t buf[16];
    size_t got;
    cr_assert_eq(tc_storage_open(c, (size_t)b->storage, &r, &d), 0);
    cr_assert_eq(tc_rd_read(&r, buf, sizeof buf, &got, &d), 0);
    cr_assert_eq(got, 12);
    cr_assert_eq(buf[0], 8);
    tc_rd_close(&r);
    tc_ckpt_close(c);
    unlink(path);
}

Test(st, every_safetensors_dtype)
{
    static const struct {
        const char *st;
        tc_dtype t;
        size_t size;
    } types[] = {{"BOOL", TC_DT_BOOL, 1},   {"U8", TC_DT_U8, 1},
                 {"I8", TC_DT_I8, 1},       {"F8_E5M2", TC_DT_F8E5M2, 1},
                 {"F8_E4M3", TC_DT_F8E4M3FN, 1}, {"F8_E8M0", TC_DT_F8E8M0FNU, 1},
                 {"F8_E4M3FNUZ", TC_DT_F8E4M3FNUZ, 1}, {"F8_E5M2FNUZ", TC_DT_F8E5M2FNUZ, 1},
                 {"I16", TC_DT_I16, 2},     {"U16", TC_DT_U16, 2},
                 {"F16", TC_DT_F16, 2},     {"BF16", TC_DT_BF16, 2},
                 {"I32", TC_DT_I32, 4},     {"U32", TC_DT_U32, 4},
                 {"F32", TC_DT_F32, 4},     {"C64", TC_DT_C64, 8},
                 {"F64", TC_DT_F64, 8},     {"I64", TC_DT_I64, 8},
                 {"U64", TC_DT_U64, 8}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"x\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%zu]}}", types[i].st,
                 3 * types[i].size);
        mkfile(hdr, 0, 3 * types[i].size);
        tc_ckpt *c;
        tc_diag d;
        cr_assert_eq(open_it(&c, &d, NULL), 0, "%s: %s", types[i].st, d.msg);
        cr_assert_eq(tc_ckpt_tensor(c, 0)->dtype, types[i].t, "%s", types[i].st);
        cr_assert_str_eq(tc_dtype_get(types[i].t)->st_name, types[i].st, "one table, both ways");
        cr_assert_eq(tc_dtype_from_st(types[i].st), types[i].t);
        tc_ckpt_close(c);
        unlink(path);
    }
}

Test(st, sub_byte_dtypes_rejected)
{
    expect_fail("{\"x\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]}}", 2,
                "tensor 'x': dtype F4 (4-bit elements) has no torch dtype");
    expect_fail("{\"x\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,3]}}", 3,
                "tensor 'x': dtype F6_E2M3 (6-bit elements)");
}

Test(st, unknown_dtype) { expect_fail("{\"w\":{\"dtype\":\"Q9\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 'w': unknown dtype 'Q9'"); }

Test(st, dtype_not_string)
{
    expect_fail("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 'w': dtype 7 is not a string");
}

Test(st, too_short)
{
    snprintf(path, sizeof path, "/tmp/tc_st_test_%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite("\x05\0\0", 1, 3, f);
    fclose(f);
    tc_ckpt *c;
    tc_diag d;
    cr_assert_neq(open_it(&c, &d, NULL), 0);
    cr_assert(strstr(d.msg, "file is 3 bytes, too short for a safetensors header length"), "%s", d.msg);
    unlink(path);
    expect_fail("", 0, "header length 0 is too small for a JSON object");
}

Test(st, header_over_limit)
{
    mkfile("{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1);
    tc_limits lim = TC_LIMITS_DEFAULT;
    lim.max_header = 16;
    tc_ckpt *c;
    tc_diag d;
    cr_assert_eq(open_it(&c, &d, &lim), TC_ERR_LIMIT);
    cr_assert(strstr(d.msg, "header length 53 is over the limit of 16 bytes"), "%s", d.msg);
    unlink(path);
}

Test(st, header_past_end)
{
    mkfile("{\"x\":1}", 4096, 0);
    tc_ckpt *c;
    tc_diag d;
    cr_assert_neq(open_it(&c, &d, NULL), 0);
    cr_assert(strstr(d.msg, "header length 4096 runs past the end of the file (15 bytes"), "%s", d.msg);
    unlink(path);
}

Test(st, header_not_json) { expect_fail("{\"x\":{\"dtype\":\"U8\",,}}", 0, "not valid JSON: error at header byte 20 (file offset 28) near '}}'"); }

Test(st, header_not_brace) { expect_fail("[1,2]", 0, "starts with byte 0x5b, not '{'"); }

Test(st, header_trailing_garbage) { expect_fail("{}  x", 0, "bytes after its JSON object at header byte 4"); }

Test(st, entry_not_object) { expect_fail("{\"w\":[1]}", 0, "tensor 'w': entry is an array, not an object"); }

Test(st, missing_field) { expect_fail("{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "tensor 'w': no \"data_offsets\" field"); }

Test(st, offsets_past_end)
{
    expect_fail("{\"w\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4,
                "tensor 'w': data_offsets [0, 8] reach past the end of the data (4 bytes");
}

Test(st, offsets_reversed)
{
    expect_fail("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
                "tensor 'w': data_offsets [4, 0] end before they begin");
}

Test(st, offsets_not_pair)
{
    expect_fail("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
                "tensor 'w': data_offsets [0] is not a pair of non-negative integers");
    expect_fail("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1,
                "tensor 'w': data_offsets [-1,0] is not a pair");
}

Test(st, size_mismatch)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20,
                "tensor 'w': shape [2,3] x F32 is 24 bytes but data_offsets [0, 20] hold 20");
}

Test(st, shape_negative)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", 24,
                "tensor 'w': shape[1] is -3, not a non-negative integer");
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
                "tensor 'w': shape[0] is 2.5, not a non-negative integer");
}

Test(st, shape_overflow)
{
    expect_fail("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
                "tensor 'w': shape [4294967296,4294967296,16] x F32 overflows a 64-bit byte count");
}

Test(st, overlap)
{
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                12, "tensor 'b': data_offsets [4, 12] overlap tensor 'a', which ends at 8");
}

Test(st, gap)
{
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                12, "tensor 'b': data_offsets [8, 12] leave bytes [4, 8) of the data unused (after tensor 'a'");
    expect_fail("{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 6,
                "leave bytes [0, 2) of the data unused (at the start");
}

Test(st, trailing_data)
{
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 10,
                "the data is 10 bytes but the tensors cover 4 (6 bytes at the end belong to no tensor)");
}

Test(st, duplicate_name)
{
    expect_fail("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                8, "names tensor 'a' twice");
}

/* the same when the names are not in order, the two apart (names in rising order are taken unsorted) */
Test(st, duplicate_name_apart)
{
    expect_fail("{\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
                "\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
                "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]}}",
                4, "names tensor 'a' twice");
}

Test(st, metadata_not_string)
{
    expect_fail("{\"__metadata__\":{\"format\":\"pt\",\"epoch\":5}}", 0,
                "__metadata__ value of 'epoch' is a number (5), not a string");
    expect_fail("{\"__metadata__\":[\"x\"]}", 0, "__metadata__ is an array, not an object of strings");
}

Test(st, too_many_tensors)
{
    mkfile("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
           "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
           "\"c\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
           0, 3);
    tc_limits lim = TC_LIMITS_DEFAULT;
    lim.max_entries = 1;
    tc_ckpt *c;
    tc_diag d;
    cr_assert_eq(open_it(&c, &d, &lim), TC_ERR_LIMIT);
    cr_assert(strstr(d.msg, "lists 3 tensors, over the limit of 1"), "%s", d.msg);
    unlink(path);
}
