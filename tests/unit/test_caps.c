/* What each driver says it is and can do (tc_format_cap, formats/format.h),
 * against what opening the samples finds: the traits the layers above act on
 * are the checkpoints' own, whichever driver read them. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>

#include "format.h"
#include "torch_pickle.h"

static tc_ckpt *open_sample(const char *name)
{
    static char path[4096];
    const char *dir = getenv("SAMPLES_DIR");
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "sample_models", name);
    tc_limits lim = TC_LIMITS_DEFAULT;
    tc_diag d = TC_DIAG_INIT;
    tc_ckpt *c = NULL;
    cr_assert_eq(tc_open(&c, path, &lim, &d), 0, "%s: %s", path, d.msg);
    return c;
}

/* The traits a checkpoint's contents show, whichever driver read it. */
static void traits_agree(const tc_ckpt *c, const char *name)
{
    cr_assert_eq(tc_ckpt_can(c, TC_CAP_ASSEMBLED), tc_ckpt_distributed(c) != NULL, "%s: assembled", name);
    cr_assert_eq(tc_ckpt_can(c, TC_CAP_TORCH_GRAPH), tc_torch_graph_of(c) != NULL, "%s: torch graph", name);
    cr_assert_eq(tc_ckpt_can(c, TC_CAP_SHARD_INDEX), tc_ckpt_nshards(c) > 0, "%s: shard index", name);
    cr_assert(tc_ckpt_can(c, 0), "%s: no trait asked is every trait had", name);
}

#define WRITES (TC_CAP_WRITES_TORCH | TC_CAP_WRITES_SAFETENSORS | TC_CAP_WRITES_GGUF)

static const struct {
    const char *sample;
    unsigned has, lacks;
} cases[] = {
    {"tiny_mlp_cuda0.pt", TC_CAP_TORCH_GRAPH,
     TC_CAP_TORCHSCRIPT | TC_CAP_ASSEMBLED | TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER | TC_CAP_LEGACY_STREAM},
    {"legacy_cuda0.pt", TC_CAP_TORCH_GRAPH | TC_CAP_LEGACY_STREAM, TC_CAP_TORCHSCRIPT | TC_CAP_OWN_READER},
    {"torchscript_scripted.pt", TC_CAP_TORCH_GRAPH | TC_CAP_TORCHSCRIPT, TC_CAP_ASSEMBLED | TC_CAP_WRITES_TORCH},
    {"sharded/model.safetensors.index.json", TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER,
     TC_CAP_TORCH_GRAPH | TC_CAP_ASSEMBLED},
    {"sharded/pytorch_model.bin.index.json", TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER, TC_CAP_TORCH_GRAPH},
    {"sharded/model-00001-of-00002.safetensors", TC_CAP_WRITES_SAFETENSORS,
     TC_CAP_TORCH_GRAPH | TC_CAP_SHARD_INDEX | TC_CAP_OWN_READER},
    {"dcp/ws2_sharded", TC_CAP_ASSEMBLED | TC_CAP_FOLDER | TC_CAP_OWN_READER, TC_CAP_TORCH_GRAPH | TC_CAP_SHARD_INDEX},
    {"zero/z1_w1_fp32", TC_CAP_ASSEMBLED | TC_CAP_FOLDER, TC_CAP_OWN_READER | TC_CAP_TORCH_GRAPH},
    {"gguf/tiny-llama-f16.gguf", TC_CAP_GGUF | TC_CAP_WRITES_GGUF,
     TC_CAP_TORCH_GRAPH | TC_CAP_OWN_READER | TC_CAP_ASSEMBLED | TC_CAP_LEGACY_TAR},
    {"gguf/tiny-llama-f16.ref.npz", 0, TC_CAP_TORCH_GRAPH | TC_CAP_GGUF | WRITES | TC_CAP_LEGACY_STREAM},
};

Test(caps, samples_have_their_drivers_traits)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tc_ckpt *c = open_sample(cases[i].sample);
        cr_assert(tc_ckpt_can(c, cases[i].has), "%s (%s) lacks traits %#x", cases[i].sample, tc_ckpt_format(c),
                  cases[i].has & ~tc_ckpt_driver(c)->caps);
        cr_assert_eq(tc_ckpt_driver(c)->caps & cases[i].lacks, 0, "%s (%s) has traits %#x", cases[i].sample,
                     tc_ckpt_format(c), tc_ckpt_driver(c)->caps & cases[i].lacks);
        traits_agree(c, cases[i].sample);
        tc_ckpt_close(c);
    }
}

Test(caps, writers_by_trait)
{
    const tc_format *pt = tc_format_writer(TC_CAP_WRITES_TORCH), *st = tc_format_writer(TC_CAP_WRITES_SAFETENSORS),
                    *gg = tc_format_writer(TC_CAP_WRITES_GGUF);
    cr_assert(pt && pt->write && (pt->caps & TC_CAP_WRITES_TORCH));
    cr_assert(st && st->write && (st->caps & TC_CAP_WRITES_SAFETENSORS));
    cr_assert(gg && gg->write && (gg->caps & TC_CAP_WRITES_GGUF));
    cr_assert(pt != st && st != gg && gg != pt);
    /* a trait no writer has: no driver, and writing fails cleanly instead of through a NULL table */
    cr_assert_null(tc_format_writer(TC_CAP_WRITES_TORCH | TC_CAP_WRITES_SAFETENSORS));
    tc_write_job job = {0};
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_format_write(TC_CAP_WRITES_TORCH | TC_CAP_WRITES_SAFETENSORS, &job, NULL, &d), TC_ERR_UNSUPPORTED);
    cr_assert(d.msg[0]);
    /* every driver that writes says what it writes, and every one that says so writes */
    for (const tc_format *const *f = tc_formats; *f; f++)
        cr_assert_eq((*f)->write != NULL, ((*f)->caps & WRITES) != 0, "%s", (*f)->name);
    /* a whole rewrite (the object graph kept) by the torch writer alone, and cleanly refused for any other */
    for (const tc_format *const *f = tc_formats; *f; f++)
        cr_assert_eq((*f)->rewrite != NULL, *f == pt, "%s", (*f)->name);
    tc_rewrite_job whole = {0};
    tc_diag d2 = TC_DIAG_INIT;
    cr_assert_eq(tc_format_rewrite(TC_CAP_WRITES_SAFETENSORS, &whole, NULL, &d2), TC_ERR_UNSUPPORTED);
    cr_assert(d2.msg[0]);
}
