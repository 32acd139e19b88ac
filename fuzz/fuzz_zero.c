/* A DeepSpeed ZeRO save folder made from the input: its first four bytes
 * (little-endian) give the length of global_step1/mp_rank_00_model_states.pt,
 * which follows; the rest is global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt,
 * with 'latest' naming global_step1. Opened through tc_open as inspect opens a
 * folder, then every tensor of the state_dict gathered from its pieces (the
 * consolidate path, to a hashing sink) and the verdict looked at. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"
#include "stream.h"
#include "verdict.h"

static const char *folder(void)
{
    const char *dir = fz_folder("zero");
    char step[96];
    snprintf(step, sizeof step, "%s/global_step1", dir);
    mkdir(step, 0700); /* EEXIST after the first input */
    return dir;
}

static int spill(const char *name, const uint8_t *p, size_t n) { return fz_spill(folder(), name, p, n); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t mlen = tc_le32(data);
    if (mlen > size - 4)
        mlen = size - 4;
    if (spill("latest", (const uint8_t *)"global_step1", 12) ||
        spill("global_step1/mp_rank_00_model_states.pt", data + 4, mlen) ||
        spill("global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt", data + 4 + mlen, size - 4 - mlen))
        return 0;
    tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                     .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    if (tc_open(&c, folder(), &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0], "a failure says why and returns nothing");
        return 0;
    }
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        FZ_CHECK(t->storage >= 0 && (size_t)t->storage < tc_ckpt_nstorages(c), "storage index");
        FZ_CHECK(t->alias_of < (long)i, "an alias names an earlier tensor");
        size_t n = 0;
        const tc_chunk *ch = tc_ckpt_chunks(c, (size_t)t->storage, &n);
        FZ_CHECK(ch || !n, "a tensor of a ZeRO checkpoint is gathered from pieces");
        for (size_t k = 0; k < n; k++)
            FZ_CHECK(ch[k].storage < tc_ckpt_nstorages(c) && tc_ckpt_chunk_of(c, ch[k].storage) >= 0,
                     "piece storage");
        if (t->alias_of >= 0)
            continue;
        fz_sum s = {0};
        tc_diag d2 = TC_DIAG_INIT;
        if (!tc_tensor_elements(c, t, t->dtype, fz_sum_sink, &s, NULL, &d2))
            FZ_CHECK(s.bytes == t->nbytes, "tensor %s gathered to %llu bytes, not %llu", t->name,
                     (unsigned long long)s.bytes, (unsigned long long)t->nbytes);
        else
            FZ_CHECK(d2.code && d2.msg[0], "a failure says why");
    }
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        FZ_CHECK(!(g->allowed && g->dangerous), "global %s both allowed and dangerous", g->name);
        FZ_CHECK(!g->reader || tc_verdict_deepspeed_zero(g->name), "global %s allowed by the reader", g->name);
    }
    tc_ckpt_close(c);
    return 0;
}
