/* tc_ckpt_open on a whole checkpoint of any registered format (the input is
 * an in-memory file), then everything inspect looks at: tensors, storages,
 * globals, and every storage's bytes. */
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                     .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};
    tc_ckpt *c = NULL;
    tc_diag d = {0};
    if (tc_open(&c, path, &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0], "a failure says why and returns nothing");
        close(fd);
        return 0;
    }
    (void)tc_ckpt_format(c);
    (void)tc_ckpt_has_dangerous(c);
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        FZ_CHECK(t->ndim >= 0 && t->ndim <= TC_MAX_DIMS, "ndim");
        FZ_CHECK(t->storage < (long)tc_ckpt_nstorages(c), "storage index");
        FZ_CHECK(t->alias_of < (long)i, "alias points back");
        if (t->storage >= 0 && t->numel) {
            const tc_storage *s = tc_ckpt_storage(c, t->storage);
            FZ_CHECK(t->nbytes <= s->nbytes || t->ndim > 0, "tensor %s larger than its storage", t->name);
        }
    }
    static uint8_t buf[65536];
    uint64_t budget = 32u << 20;
    for (size_t i = 0; i < tc_ckpt_nstorages(c) && budget; i++) {
        tc_rd r;
        tc_diag d2 = {0};
        if (tc_storage_open(c, i, &r, &d2))
            continue;
        uint64_t total = 0;
        for (;;) {
            size_t got = 0;
            if (tc_rd_read(&r, buf, sizeof buf, &got, &d2) || !got)
                break;
            total += got;
            budget = budget > got ? budget - got : 0;
            if (!budget)
                break;
        }
        FZ_CHECK(total <= tc_ckpt_storage(c, i)->nbytes, "storage gave more bytes than it has");
        tc_rd_close(&r);
    }
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        FZ_CHECK(!(g->allowed && g->dangerous), "global %s both allowed and dangerous", g->name);
    }
    tc_ckpt_close(c);
    close(fd);
    return 0;
}
