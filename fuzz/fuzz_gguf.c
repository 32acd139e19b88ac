/* A GGUF file (an in-memory file, through tc_open) read as inspect and
 * convert read it: every KV printed as JSON and as text, every tensor's
 * listing checked, its stored bytes and its values (blocks decoded) read;
 * then what is accepted is written again as GGUF (types kept, as convert
 * without --dtype) and as Q8_0, and the copy must open with the same
 * tensors, the kept ones byte for byte. An odd-sized input is read with
 * --names hf. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"
#include "gguf.h"
#include "gguf_out.h"
#include "stream.h"

static const tc_limits base = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                               .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};

static uint8_t buf[1 << 16];

/* Bytes of storage i through its driver (raw: as stored) or its values (decoded), at most budget. */
static uint64_t read_all(const tc_ckpt *c, size_t i, bool values, uint64_t budget, bool *ok)
{
    const tc_tensor *t = tc_ckpt_tensor(c, i);
    tc_diag d = {0};
    uint64_t total = 0;
    *ok = false;
    if (values) {
        tc_elems *e = NULL;
        if (tc_elems_open(&e, c, t, &d)) {
            FZ_CHECK(d.msg[0], "a failure says why");
            return 0;
        }
        for (size_t got; total < budget;) {
            if (tc_elems_read(e, buf, sizeof buf, &got, &d) || !got)
                break;
            total += got;
        }
        *ok = !d.code;
        tc_elems_close(e);
        return total;
    }
    tc_rd r;
    if (tc_storage_open(c, (size_t)t->storage, &r, &d))
        return 0;
    for (size_t got; total < budget;) {
        if (tc_rd_read(&r, buf, sizeof buf, &got, &d) || !got)
            break;
        total += got;
    }
    *ok = !d.code;
    tc_rd_close(&r);
    return total;
}

static void roundtrip(tc_ckpt *c, tc_qtype to)
{
    char dir[] = "/tmp/fuzz-gguf-XXXXXX", out[64];
    if (!mkdtemp(dir))
        return;
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    tc_gguf_opts o = {.to = to, .dst_flags = TC_DST_NO_SYNC};
    tc_gguf_report rep = {0};
    tc_diag d = {0};
    if (!tc_gguf_convert(c, &o, out, &rep, &d)) {
        tc_ckpt *b = NULL;
        tc_diag d2 = {0};
        FZ_CHECK(!tc_open(&b, out, &base, &d2), "the GGUF written opens again: %s", d2.msg);
        FZ_CHECK(tc_ckpt_ntensors(b) == tc_ckpt_ntensors(c), "as many tensors");
        for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
            const tc_tensor *x = tc_ckpt_tensor(c, i), *y = tc_ckpt_tensor(b, i);
            tc_gguf_tensor gx, gy;
            FZ_CHECK(!strcmp(x->name, y->name) && x->numel == y->numel, "tensor %zu kept", i);
            if (to != TC_Q_NONE || !tc_gguf_tensor_info(c, i, &gx) || !tc_gguf_tensor_info(b, i, &gy))
                continue;
            FZ_CHECK(gx.type == gy.type && gx.n_bytes == gy.n_bytes, "tensor %s keeps its type", x->name);
            tc_rd ra, rb;
            tc_diag d3 = {0};
            if (tc_storage_open(c, (size_t)x->storage, &ra, &d3))
                continue;
            FZ_CHECK(!tc_storage_open(b, (size_t)y->storage, &rb, &d3), "copy readable");
            static uint8_t p[4096], q[4096];
            for (size_t ga, gb;;) {
                if (tc_rd_read(&ra, p, sizeof p, &ga, &d3))
                    break;
                FZ_CHECK(!tc_rd_read(&rb, q, sizeof q, &gb, &d3) && ga == gb && !memcmp(p, q, ga), "%s copied bytes",
                         x->name);
                if (!ga)
                    break;
            }
            tc_rd_close(&ra);
            tc_rd_close(&rb);
        }
        tc_ckpt_close(b);
    } else {
        FZ_CHECK(d.msg[0], "a failed write says why");
    }
    FZ_CHECK(access(out, F_OK) != 0 || !d.code, "a failed write leaves nothing");
    unlink(out);
    rmdir(dir);
    tc_gguf_report_free(&rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    tc_limits lim = base;
    lim.names = size % 2 ? TC_NAMES_HF : TC_NAMES_FILE;
    tc_ckpt *c = NULL;
    tc_diag d = {0};
    if (tc_open(&c, path, &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0], "a failure says why and returns nothing");
        close(fd);
        return 0;
    }
    if (!tc_gguf_nfiles(c)) { /* another format's bytes: fuzz_ckpt's */
        tc_ckpt_close(c);
        close(fd);
        return 0;
    }
    for (size_t i = 0; i < tc_gguf_nkv(c, 0); i++) {
        tc_buf b = TC_BUF_INIT(0), t = TC_BUF_INIT(600);
        tc_diag d2 = {0};
        FZ_CHECK(tc_gguf_kv_key(c, 0, i, NULL, NULL, NULL), "key %zu", i);
        FZ_CHECK(!tc_gguf_kv_json(c, 0, i, &b, NULL, NULL, &d2) && !tc_gguf_kv_text(c, 0, i, &t, &d2), "KV %zu prints: %s", i,
                 d2.msg);
        tc_buf_free(&b);
        tc_buf_free(&t);
    }
    uint64_t budget = 16u << 20;
    for (size_t i = 0; i < tc_ckpt_ntensors(c) && budget; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        tc_gguf_tensor g;
        FZ_CHECK(tc_gguf_tensor_info(c, i, &g), "every tensor is listed");
        const tc_qtype_info *q = tc_qtype_get(g.type);
        uint64_t bytes;
        FZ_CHECK(tc_qtype_bytes(g.type, t->numel, &bytes) && bytes == g.n_bytes, "%s: bytes of its type", t->name);
        FZ_CHECK(g.file_offset + g.n_bytes <= size || tc_gguf_nfiles(c) > 1, "%s inside the file", t->name);
        bool ok;
        uint64_t n = read_all(c, i, false, budget, &ok);
        FZ_CHECK(!ok || n == g.n_bytes || n >= budget, "%s: stored bytes", t->name);
        budget -= n < budget ? n : budget;
        n = read_all(c, i, true, budget, &ok);
        FZ_CHECK(!ok || n == t->nbytes || n >= budget, "%s: values", t->name);
        FZ_CHECK(ok || (q->plain == TC_DT_INVALID && !q->decodes) || n >= budget, "%s: %s values read", t->name,
                 q->name);
        budget -= n < budget ? n : budget;
    }
    if (tc_ckpt_ntensors(c) <= 64 && budget) {
        roundtrip(c, TC_Q_NONE);
        roundtrip(c, TC_Q_Q8_0);
    }
    tc_ckpt_close(c);
    close(fd);
    return 0;
}
