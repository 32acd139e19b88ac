#include "format.h"

/* formats/shard_index.c: an index JSON naming safetensors or torch shards */
extern const tc_format tc_format_shard_index, tc_format_torch_index;

const tc_format *const tc_formats[] = {
    &tc_format_torch_zip,
    &tc_format_torch_legacy,
    &tc_format_safetensors,
    &tc_format_shard_index,
    &tc_format_torch_index,
    NULL,
};
