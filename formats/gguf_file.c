/* What every part of the GGUF driver reads a file with, below them all
 * (gguf.c the header and metadata, gguf_meta.c what inspect and convert ask
 * of them, gguf_rd.c the tensors' bytes, gguf_write.c a new file): numbers in
 * the file's byte order, the value types' sizes, a file's bytes, a key of
 * its metadata, the fields a big-endian block swaps, and a checkpoint's GGUF
 * state. */
#include "gguf_priv.h"

#include <string.h>

/* ---- byte order -------------------------------------------------------------------- */

uint64_t gg_num(const gg_file *f, const uint8_t *p, size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++)
        v |= (uint64_t)p[f->big ? size - 1 - i : i] << (8 * i);
    return v;
}

size_t gg_scalar_size(uint32_t type)
{
    static const uint8_t size[TC_GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < TC_GGUF_NTYPES ? size[type] : 0;
}

int gg_read(const gg_file *f, uint64_t off, void *buf, size_t n, tc_diag *d)
{
    return tc_src_read(f->src, off, buf, n, "GGUF data", d);
}

/* ---- the checkpoint's state ------------------------------------------------------------ */

gg_priv *gg_priv_of(const tc_ckpt *c) { return c && tc_ckpt_can(c, TC_CAP_GGUF) ? tc_ckpt_priv(c) : NULL; }

const gg_kv *gg_find_kv(const gg_priv *g, const gg_file *f, const char *key)
{
    for (size_t i = f->kv0; i < f->kv0 + f->nkv; i++)
        if (!strcmp(g->kv.v[i].key, key))
            return &g->kv.v[i];
    return NULL;
}

const int *gg_be_fields(tc_qtype q)
{
    static const int q40[] = {0, -1}, q4k[] = {0, 2, -1}, q6k[] = {208, -1}, none[] = {-1};
    switch (q) {
    case TC_Q_Q4_0: case TC_Q_Q8_0: return q40;
    case TC_Q_Q4_K: return q4k;
    case TC_Q_Q6_K: return q6k;
    case TC_Q_MXFP4: case TC_Q_NVFP4: return none;
    default: return NULL;
    }
}
