#include "tensor_data.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW (4u << 20)
#define OUTBUF (1u << 20)

typedef struct gather {
    const tc_ckpt *c;
    const tc_storage *s;
    uint8_t *whole;        /* non-raw storages: all bytes (bounded) */
    uint8_t *win;          /* raw storages: a window of the file */
    uint64_t win_off, win_len;
    uint8_t *out;
    size_t olen;
    tc_sink_fn sink;
    void *ctx;
} gather;

/* Copy n bytes at storage offset off into the output buffer, flushing as needed. */
static int take(gather *g, uint64_t off, size_t n, tc_diag *d)
{
    while (n) {
        if (g->olen == OUTBUF) {
            int rc = g->sink(g->ctx, g->out, g->olen, d);
            if (rc)
                return rc;
            g->olen = 0;
        }
        size_t k = OUTBUF - g->olen < n ? OUTBUF - g->olen : n;
        const uint8_t *src;
        if (g->whole) {
            src = g->whole + off;
        } else {
            if (off < g->win_off || off + k > g->win_off + g->win_len) {
                uint64_t len = g->s->nbytes - off < WINDOW ? g->s->nbytes - off : WINDOW;
                int rc = tc_src_read(&g->c->src, g->s->file_off + off, g->win, (size_t)len, g->s->key, d);
                if (rc)
                    return rc;
                g->win_off = off;
                g->win_len = len;
            }
            if (k > g->win_off + g->win_len - off)
                k = (size_t)(g->win_off + g->win_len - off);
            src = g->win + (off - g->win_off);
        }
        memcpy(g->out + g->olen, src, k);
        g->olen += k;
        off += k;
        n -= k;
    }
    return 0;
}

int tc_tensor_stream(const tc_ckpt *c, const tc_tensor *t, tc_sink_fn sink, void *ctx, tc_diag *d)
{
    if (t->storage < 0)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s' has no data", t->name);
    if (t->numel == 0)
        return 0;
    gather g = {.c = c, .s = &c->s[t->storage], .sink = sink, .ctx = ctx};
    int rc = 0;
    g.out = malloc(OUTBUF);
    if (!g.out)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (!g.s->raw) {
        if (g.s->nbytes > (64u << 20)) {
            free(g.out);
            return tc_fail(d, TC_ERR_UNSUPPORTED, "tensor '%s': a compressed record over 64 MiB", t->name);
        }
        g.whole = malloc(g.s->nbytes ? g.s->nbytes : 1);
        tc_srd r;
        size_t got;
        if (!g.whole)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else if (!(rc = tc_srd_open(&r, c, g.s, d))) {
            rc = tc_srd_read(&r, g.whole, g.s->nbytes, &got, d);
            tc_srd_close(&r);
        }
    } else if (!(g.win = malloc(WINDOW))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    size_t es = tc_dtype_size(t->dtype);
    int nd = t->ndim;
    /* merge the innermost run when it is contiguous */
    uint64_t run = 1;
    int inner = nd;
    while (inner > 0 && (uint64_t)t->stride[inner - 1] == run) {
        run *= (uint64_t)t->shape[inner - 1];
        inner--;
    }
    int64_t idx[TC_MAX_DIMS] = {0};
    while (!rc) {
        uint64_t el = (uint64_t)t->offset;
        for (int i = 0; i < inner; i++)
            el += (uint64_t)idx[i] * (uint64_t)t->stride[i];
        rc = take(&g, el * es, (size_t)(run * es), d);
        int i = inner - 1;
        for (; i >= 0; i--) {
            if (++idx[i] < t->shape[i])
                break;
            idx[i] = 0;
        }
        if (i < 0)
            break;
    }
    if (!rc && g.olen)
        rc = sink(ctx, g.out, g.olen, d);
    free(g.out);
    free(g.win);
    free(g.whole);
    return rc;
}

static int sha_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    if (!EVP_DigestUpdate(ctx, buf, n))
        return tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    return 0;
}

int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, char hex[65], tc_diag *d)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (!m || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(m);
        return tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
    }
    int rc = tc_tensor_stream(c, t, sha_sink, m, d);
    unsigned char md[32];
    unsigned len = 0;
    if (!rc && !EVP_DigestFinal_ex(m, md, &len))
        rc = tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    EVP_MD_CTX_free(m);
    if (!rc)
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return rc;
}
