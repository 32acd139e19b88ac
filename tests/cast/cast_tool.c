/* cast_tool SRC_DTYPE DST_DTYPE < in > out: raw little-endian elements
 * through tc_cast_cpu, for live_torch_check.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "vec.h"

int main(int argc, char **argv)
{
    tc_dtype st = argc == 3 ? tc_dtype_from_name(argv[1]) : TC_DT_INVALID;
    tc_dtype dt = argc == 3 ? tc_dtype_from_name(argv[2]) : TC_DT_INVALID;
    if (!tc_cast_supported(dt, st)) {
        fprintf(stderr, "usage: cast_tool SRC_DTYPE DST_DTYPE < in > out (float dtypes)\n");
        return 2;
    }
    size_t cap = 0, len = 0, got = 1;
    char *in = NULL;
    while (got > 0 && !tc_grow(&in, &cap, len + (1 << 20), 1) && (got = fread(in + len, 1, cap - len, stdin)) > 0)
        len += got;
    if (got > 0) { /* out of memory */
        free(in);
        in = NULL;
    }
    size_t ss = tc_dtype_size(st), n = len / ss;
    char *out = malloc(n * tc_dtype_size(dt) + 1);
    if (!in || !out || ferror(stdin) || len % ss) {
        fprintf(stderr, "cast_tool: cannot read input (%zu bytes, out of memory or not whole elements)\n", len);
        free(in);
        free(out);
        return 1;
    }
    tc_cast_cpu(dt, out, st, in, n);
    if (fwrite(out, tc_dtype_size(dt), n, stdout) != n || fflush(stdout)) {
        fprintf(stderr, "cast_tool: write failed\n");
        return 1;
    }
    free(in);
    free(out);
    return 0;
}
