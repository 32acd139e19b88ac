/* Whatever the reader accepts is rewritten (to-cpu, and to-cpu --dtype
 * bfloat16) as tensorctl's writer does it, and the result must be accepted
 * again with the same tensor names, kinds and shapes, every storage on the
 * CPU, dtypes unchanged or bfloat16 where cast, and uncast bytes identical. */
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "rewrite.h"
#include "fuzz_common.h"

static const tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                              .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};

static bool same_bytes(const tc_ckpt *a, size_t sa, const tc_ckpt *b, size_t sb)
{
    static uint8_t x[4096], y[4096];
    tc_rd ra, rb;
    tc_diag d = {0};
    if (tc_storage_open(a, sa, &ra, &d))
        return true; /* unreadable input data: the writer had to fail on it already */
    FZ_CHECK(!tc_storage_open(b, sb, &rb, &d), "rewritten storage readable: %s", d.msg);
    bool same = true;
    for (;;) {
        size_t ga = 0, gb = 0;
        if (tc_rd_read(&ra, x, sizeof x, &ga, &d))
            break;
        FZ_CHECK(!tc_rd_read(&rb, y, sizeof y, &gb, &d), "rewritten storage readable: %s", d.msg);
        if (ga != gb || memcmp(x, y, ga)) {
            same = false;
            break;
        }
        if (!ga)
            break;
    }
    tc_rd_close(&ra);
    tc_rd_close(&rb);
    return same;
}

static void one(const char *path, tc_dtype cast)
{
    tc_ckpt *c = NULL, *c2 = NULL;
    tc_diag d = {0};
    tc_plan p = {0};
    if (tc_open(&c, path, &lim, &d))
        return;
    if (!tc_ckpt_has_objects(c)) { /* formats without a pickle are converted, not moved */
        tc_ckpt_close(c);
        return;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < tc_ckpt_nstorages(c); i++)
        total += tc_ckpt_storage(c, i)->nbytes;
    if (total > (16u << 20)) {
        tc_ckpt_close(c);
        return;
    }
    /* snapshot before the writer edits the graph */
    size_t nt = tc_ckpt_ntensors(c);
    tc_tensor *before = malloc((nt ? nt : 1) * sizeof *before);
    char **names = calloc(nt ? nt : 1, sizeof *names);
    FZ_CHECK(before && names, "oom");
    for (size_t i = 0; i < nt; i++)
        before[i] = *tc_ckpt_tensor(c, i);
    for (size_t i = 0; i < nt; i++)
        names[i] = strdup(tc_ckpt_tensor(c, i)->name);

    tc_rewrite_opts o = {.all_to = "cpu", .dtype = cast, .engine = TC_ENGINE_CPU,
                         .max_depth = lim.max_depth + 16};
    char opath[64];
    int ofd = fz_memfd(NULL, 0, opath, sizeof opath);
    FZ_CHECK(ofd >= 0, "memfd");
    tc_dst dst = {.fd = ofd, .path = (char *)"fuzz_out.pt"};
    if (tc_plan_make(&p, c, &o, &d) || tc_rewrite(c, &p, &dst, &d)) {
        FZ_CHECK(d.code && d.msg[0], "a failure says why");
        goto done;
    }
    tc_limits lim2 = lim;
    lim2.max_objects *= 4;
    lim2.max_depth += 32;
    tc_diag d2 = {0};
    FZ_CHECK(!tc_open(&c2, opath, &lim2, &d2), "rewritten file must be accepted: %s", d2.msg);
    FZ_CHECK(!strcmp(tc_ckpt_format(c2), "torch-zip"), "written as a torch zip");
    FZ_CHECK(tc_ckpt_ntensors(c2) == nt, "%zu tensors, then %zu", nt, tc_ckpt_ntensors(c2));
    /* every storage but those nothing in the file reaches (the plan's gone ones) is written */
    FZ_CHECK(tc_ckpt_nstorages(c2) == tc_ckpt_nstorages(c) - p.ngone, "%zu storages (%zu unreached), then %zu",
             tc_ckpt_nstorages(c), p.ngone, tc_ckpt_nstorages(c2));
    FZ_CHECK(!tc_ckpt_has_dangerous(c2) || tc_ckpt_has_dangerous(c), "the writer adds no dangerous global");
    for (size_t i = 0; i < nt; i++) {
        const tc_tensor *a = &before[i], *b = tc_ckpt_tensor(c2, i);
        FZ_CHECK(!strcmp(names[i], b->name), "tensor %zu named '%s', then '%s'", i, names[i], b->name);
        FZ_CHECK(a->kind == b->kind && a->ndim == b->ndim, "tensor '%s' kind/ndim", b->name);
        FZ_CHECK(!memcmp(a->shape, b->shape, sizeof a->shape[0] * (size_t)a->ndim), "tensor '%s' shape", b->name);
        FZ_CHECK(!memcmp(a->stride, b->stride, sizeof a->stride[0] * (size_t)a->ndim), "tensor '%s' stride", b->name);
        FZ_CHECK(a->offset == b->offset, "tensor '%s' offset", b->name);
        FZ_CHECK((a->storage < 0) == (b->storage < 0), "tensor '%s' storage", b->name);
        bool was_cast = a->storage >= 0 && p.out[a->storage].cast;
        FZ_CHECK(b->dtype == (was_cast ? cast : a->dtype), "tensor '%s' dtype %s, then %s", b->name,
                 tc_dtype_name(a->dtype), tc_dtype_name(b->dtype));
        FZ_CHECK(a->requires_grad == b->requires_grad && a->parameter == b->parameter, "tensor '%s' flags", b->name);
    }
    for (size_t i = 0, rank = 0; i < tc_ckpt_nstorages(c); i++) {
        FZ_CHECK(!p.gone || !p.gone[i] || tc_ckpt_storage(c, i)->unreached, "storage %zu gone, though reached", i);
        if (p.gone && p.gone[i])
            continue;
        char key[32];
        snprintf(key, sizeof key, "%zu", rank++); /* written in order, renumbered */
        long k2 = tc_ckpt_find_storage(c2, key);
        FZ_CHECK(k2 >= 0, "storage %zu written as '%s'", i, key);
        const tc_storage *s2 = tc_ckpt_storage(c2, (size_t)k2);
        FZ_CHECK(!strcmp(s2->location, "cpu"), "storage %zu on %s", i, s2->location);
        if (!p.out[i].cast)
            FZ_CHECK(s2->nbytes == tc_ckpt_storage(c, i)->nbytes && same_bytes(c, i, c2, (size_t)k2),
                     "storage %zu copied bit for bit", i);
    }
done:
    for (size_t i = 0; i < nt; i++)
        free(names[i]);
    free(names);
    free(before);
    tc_plan_free(&p);
    tc_ckpt_close(c2);
    tc_ckpt_close(c);
    close(ofd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    one(path, TC_DT_INVALID);
    one(path, TC_DT_BF16);
    close(fd);
    return 0;
}
