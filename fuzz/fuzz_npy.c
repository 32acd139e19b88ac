/* numpy files: the input's first byte picks the name (.npy, .npz, none), the
 * rest is the file, opened from memory with tc_open_src as scan opens an
 * archive's member, then every storage read. What must hold: a failure says
 * why; a file read as npy or npz whose array holds objects (a hazard) is
 * never safe; every tensor lies on a storage of exactly its bytes, and a
 * storage stored in the file lies inside it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    static const char *const name[] = {"fuzz.npy", "fuzz.npz", "fuzz"};
    tc_src src;
    tc_src_init_mem(&src, data + 1, size - 1, name[data[0] % 3]);
    tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                     .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    if (tc_open_src(&c, name[data[0] % 3], &src, &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0] && d.file[0], "a failure says why and names the file");
        return 0;
    }
    FZ_CHECK(!tc_ckpt_nhazards(c) || !tc_ckpt_is_safe(c), "a file with a hazard judged safe");
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        if (t->storage < 0)
            continue;
        const tc_storage *s = tc_ckpt_storage(c, (size_t)t->storage);
        FZ_CHECK(!s->stored || (s->file_off <= src.size && s->nbytes <= src.size - s->file_off),
                 "storage %s lies past the file", s->key);
        if (strcmp(tc_ckpt_format(c), "npy") && strcmp(tc_ckpt_format(c), "npz"))
            continue;
        FZ_CHECK(s->nbytes == t->nbytes, "tensor %s: %llu bytes on a storage of %llu", t->name,
                 (unsigned long long)t->nbytes, (unsigned long long)s->nbytes);
        tc_rd r;
        tc_diag d2 = TC_DIAG_INIT;
        if (tc_storage_open(c, (size_t)t->storage, &r, &d2))
            continue;
        uint8_t buf[4096];
        size_t got;
        while (!tc_rd_read(&r, buf, sizeof buf, &got, &d2) && got)
            ;
        tc_rd_close(&r);
    }
    tc_ckpt_close(c);
    return 0;
}
