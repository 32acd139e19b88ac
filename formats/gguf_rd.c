/* GGUF storage readers: a tensor's bytes as a plain range of its file, or
 * through a reader that swaps a big-endian file's numbers to little-endian
 * and, for TC_NAMES_HF, takes rows in Hugging Face's order. */
#include "gguf_priv.h"

#include <stdlib.h>
#include <string.h>

/* The bytes of a tensor whose reading differs from its bytes in the file:
 * swapped to little-endian (a big-endian file) and/or rows taken in
 * another order (TC_NAMES_HF). Units (elements, or blocks) are swapped
 * whole, so a read may start or end inside one. */
typedef struct grd {
    const gg_file *f;
    const gg_tensor *t;
    uint32_t unit;        /* bytes swapped together: an element, or a block */
    uint32_t esz;         /* element types: bytes per element (0 for blocks) */
    const int *fields;    /* blocks: the offsets of their f16 fields */
    uint64_t pos;
    uint8_t tmp[512];     /* one unit (the largest block is 292 bytes) */
} grd;

/* Row r of the output is row src_row(r) of the file: llama.cpp's Q/K permutation undone. */
static uint64_t src_row(const gg_tensor *t, uint64_t r)
{
    if (!t->perm_heads)
        return r;
    uint64_t per = t->prows / t->perm_heads, half = per / 2;
    uint64_t h = r / per, w = r % per, a = w / half, b = w % half; /* out[h][a][b] = in[h][b][a] */
    return h * per + b * 2 + a;
}

static void swap_units(const grd *s, uint8_t *p, size_t n)
{
    if (!s->f->big)
        return;
    for (size_t u = 0; u + s->unit <= n; u += s->unit) {
        if (s->esz) {
            for (uint32_t i = 0; i < s->esz / 2; i++) {
                uint8_t x = p[u + i];
                p[u + i] = p[u + s->esz - 1 - i];
                p[u + s->esz - 1 - i] = x;
            }
        } else {
            for (const int *o = s->fields; *o >= 0; o++) {
                uint8_t x = p[u + (size_t)*o];
                p[u + (size_t)*o] = p[u + (size_t)*o + 1];
                p[u + (size_t)*o + 1] = x;
            }
        }
    }
}

/* Whole units [pos, pos + n) of the output into p (pos and n multiples of unit). */
static int fill_units(grd *s, uint64_t pos, uint8_t *p, size_t n, tc_diag *d)
{
    uint64_t rb = s->t->perm_heads ? s->t->prow_bytes : 0; /* 0: one run */
    for (size_t done = 0; done < n;) {
        uint64_t at = pos + done, r = rb ? at / rb : 0, in = rb ? at % rb : at;
        size_t k = n - done;
        if (rb && rb - in < k)
            k = (size_t)(rb - in);
        int rc = gg_read(s->f, s->t->abs + src_row(s->t, r) * rb + in, p + done, k, d);
        if (rc)
            return rc;
        done += k;
    }
    swap_units(s, p, n);
    return 0;
}

static int grd_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    grd *s = r->state;
    uint8_t *p = buf;
    size_t done = 0;
    int rc = 0;
    while (done < n && !rc) {
        uint64_t at = s->pos, in = at % s->unit;
        if (in || n - done < s->unit) { /* part of a unit: through tmp */
            uint64_t u0 = at - in;
            size_t k = s->unit - (size_t)in < n - done ? s->unit - (size_t)in : n - done;
            if (!(rc = fill_units(s, u0, s->tmp, s->unit, d))) {
                memcpy(p + done, s->tmp + in, k);
                done += k;
                s->pos += k;
            }
        } else {
            size_t k = (n - done) / s->unit * s->unit;
            if (!(rc = fill_units(s, at, p + done, k, d))) {
                done += k;
                s->pos += k;
            }
        }
    }
    *got = rc ? 0 : done;
    return rc;
}

static void grd_close(tc_rd *r)
{
    free(r->state);
    r->state = NULL;
}

int gg_open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    gg_priv *g = tc_ckpt_priv(c);
    const gg_tensor *t = &g->t.v[i];
    const gg_file *f = &g->files.v[t->file];
    const tc_qtype_info *qi = tc_qtype_get(t->q);
    if (!(f->big && qi->bytes > 1) && !t->perm_heads) {
        tc_rd_range(r, f->src, t->abs, t->bytes);
        return 0;
    }
    grd *s = calloc(1, sizeof *s);
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    s->f = f;
    s->t = t;
    s->unit = qi->bytes;
    s->esz = qi->plain != TC_DT_INVALID ? qi->bytes : 0;
    s->fields = gg_be_fields(t->q);
    tc_rd_range(r, NULL, 0, t->bytes);
    r->read = grd_read;
    r->close = grd_close;
    r->state = s;
    return 0;
}

