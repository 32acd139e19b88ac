/* placeholder, filled below */
#include "format.h"
#include "shard_index.h"

static bool probe(const uint8_t *h, size_t n, const char *path)
{
    (void)h; (void)n;
    return tc_index_path(path);
}
static int open_ix(tc_ckpt *c, tc_diag *d) { (void)c; return tc_fail(d, TC_ERR_UNSUPPORTED, "todo"); }
bool tc_index_path(const char *path) { (void)path; return false; }
const tc_format tc_format_shard_index = {"safetensors-index", probe, open_ix};
