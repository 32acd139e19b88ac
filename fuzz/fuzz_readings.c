/* Container detection: the input's first byte picks the file's name
 * (.pt, .safetensors, .bin, none), the rest is the file, opened with tc_open
 * as every command opens files. What must hold: a file judged safe has no
 * second reading tensorctl missed — it is a zip, or read from byte 0 it names
 * no global outside the allowlist — and a failure says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"
#include "readings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    static const char *const ext[] = {".pt", ".safetensors", ".bin", ""};
    char path[128];
    snprintf(path, sizeof path, "/tmp/tc-fuzz-readings-%d%s", (int)getpid(), ext[data[0] % 4]);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                     .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    if (tc_open(&c, path, &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0] && d.file[0], "a failure says why and names the file");
        unlink(path);
        return 0;
    }
    if (tc_ckpt_is_safe(c) && !(size >= 5 && !memcmp(data + 1, "PK\x03\x04", 4)) &&
        strcmp(tc_ckpt_format(c), "torch-legacy")) {
        char unsafe[1100];
        tc_diag d2 = TC_DIAG_INIT;
        if (!tc_pickle_at_zero(tc_ckpt_src(c), &lim, unsafe, sizeof unsafe, &d2))
            FZ_CHECK(!unsafe[0], "judged safe, but read from byte 0 it imports %s", unsafe);
    }
    tc_ckpt_close(c);
    unlink(path);
    return 0;
}
