#include "gguf_out.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "keys.h"
#include "plan.h"
#include "quant.h"
#include "step.h"
#include "stream.h"
#include "vec.h"

void tc_gguf_report_free(tc_gguf_report *r)
{
    if (!r)
        return;
    tc_convert_report_free(&r->r);
    free(r->first);
    memset(r, 0, sizeof *r);
}

/* One output tensor. */
typedef struct item {
    size_t t;            /* the input tensor */
    const char *name;    /* its output name */
    tc_qtype in, out;    /* its type in the input (TC_Q_NONE: a dtype GGUF lacks) and in the output */
    bool gguf;           /* the input is GGUF: its bytes are read as its driver returns them */
    uint64_t bytes;      /* in the output */
} item;

/* llama.cpp's file type (general.file_type, LlamaFileType) of an output whose 2-D weights are q. */
static uint32_t file_type(tc_qtype q)
{
    switch (q) {
    case TC_Q_F16: return 1;
    case TC_Q_Q4_0: return 2;
    case TC_Q_Q4_1: return 3;
    case TC_Q_Q8_0: return 7;
    case TC_Q_Q5_0: return 8;
    case TC_Q_Q5_1: return 9;
    case TC_Q_BF16: return 32;
    default: return 0; /* ALL_F32 */
    }
}

typedef TC_VEC(item) items_t;

static const char *const kinds[] = {"dense", "quantized tensor", "meta tensor without data", "tensor subclass"};

/* The output types and names of c's tensors into *out. */
static int select_items(const tc_ckpt *c, const tc_gguf_opts *o, items_t *out, tc_keymap *km,
                        tc_gguf_report *rep, tc_diag *d)
{
    size_t nt = tc_ckpt_ntensors(c);
    const char **names = malloc((nt + 1) * sizeof *names);
    if (!names)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nt; i++)
        names[i] = tc_ckpt_tensor(c, i)->name;
    int rc = tc_keymap_make(&o->keys, names, nt, km, d);
    free(names);
    uint64_t max_expand = o->max_expand ? o->max_expand : TC_DEFAULT_MAX_EXPAND;
    for (size_t i = 0; i < nt && !rc; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        const char *name = km->name ? km->name[i] : t->name;
        if (!name) {
            rep->r.nleft_out++;
            continue;
        }
        if (t->kind != TC_TENSOR_DENSE || t->storage < 0)
            return tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                              "tensor '%s' is a %s, which GGUF cannot hold; --drop '%s' leaves it out", t->name,
                              kinds[t->kind], t->name);
        tc_gguf_tensor g;
        item it = {i, name, tc_qtype_of_dtype(t->dtype), TC_Q_NONE, false, 0};
        if (tc_gguf_tensor_info(c, i, &g))
            it.in = g.type, it.gguf = true;
        bool floating = tc_dtype_get(t->dtype)->kind == TC_KIND_FLOAT;
        bool asked = o->nonly && tc_glob_any(o->only, o->nonly, t->name);
        const tc_qtype_info *to = tc_qtype_get(o->to);
        if (o->to == TC_Q_NONE) {
            it.out = it.in;
        } else if (!floating || tc_glob_any(o->keep, o->nkeep, t->name) || (o->nonly && !asked)) {
            it.out = it.in;
            rep->nkept++;
        } else if (t->ndim <= 1 && !asked) {
            it.out = TC_Q_F32;
            rep->n1d++;
        } else if (t->ndim == 0 || t->shape[t->ndim - 1] % to->block) {
            it.out = TC_Q_F16;
            rep->nfallback++;
        } else {
            it.out = o->to;
            rep->nquant++;
        }
        if (it.out == TC_Q_NONE)
            rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET,
                            "tensor '%s' is %s, which GGUF has no type for; --drop '%s' leaves it out%s", t->name,
                            tc_dtype_name(t->dtype), t->name, floating ? " (or --dtype casts it)" : "");
        else if (it.out != it.in && tc_qtype_is_block(it.in) && !tc_qtype_get(it.in)->decodes)
            rc = tc_fail_at(d, TC_ERR_UNSUPPORTED, tc_ckpt_path(c), TC_NO_OFFSET,
                            "tensor '%s' is %s, which cannot be dequantised to make %s; --keep '%s' copies it as it is",
                            t->name, tc_qtype_name(it.in), tc_qtype_name(it.out), t->name);
        else if (!tc_qtype_bytes(it.out, t->numel, &it.bytes))
            rc = tc_fail(d, TC_ERR_USAGE, "tensor '%s': %" PRIu64 " values are not whole %s blocks", t->name, t->numel,
                         tc_qtype_name(it.out));
        else if (!it.gguf && (rc = tc_expand_check(c, t, t->dtype, max_expand, d)))
            break;
        else if (tc_vec_push(out, it))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    return rc;
}

/* ---- metadata --------------------------------------------------------------------------- */

typedef TC_VEC(tc_gguf_wkv) kvs;

static bool carried(const char *key)
{
    return strcmp(key, "general.alignment") && strcmp(key, "split.no") && strcmp(key, "split.count") &&
           strcmp(key, "split.tensors.count");
}

/* The last --kv for key, or NULL. */
static const tc_gguf_wkv *given(const tc_gguf_opts *o, const char *key)
{
    const tc_gguf_wkv *w = NULL;
    for (size_t i = 0; i < o->nkv; i++)
        if (!strcmp(o->kv[i].key, key))
            w = &o->kv[i];
    return w;
}

/* Set key to a UINT32: in place when present (unless replace is false: then left as it is), else at the end. */
static int set_u32(kvs *v, const char *key, uint32_t x, bool replace, tc_diag *d)
{
    tc_gguf_wkv w = {.key = key, .type = TC_GGUF_UINT32, .bits = x};
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->v[i].key, key)) {
            if (replace)
                v->v[i] = w;
            return 0;
        }
    return tc_vec_push(v, w) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : 0;
}

static int build_kvs(const tc_ckpt *c, const tc_gguf_opts *o, bool quantised, kvs *v, tc_gguf_report *rep, tc_diag *d)
{
    int rc = 0;
    for (size_t i = 0; i < tc_gguf_nkv(c, 0) && !rc; i++) {
        uint32_t type, etype;
        const char *key = tc_gguf_kv_key(c, 0, i, &type, &etype, NULL);
        const tc_gguf_wkv *w = given(o, key);
        if (!carried(key) && !w)
            continue;
        if (!w && type == TC_GGUF_ARRAY && etype == TC_GGUF_ARRAY) {
            rc = tc_convert_drop(&rep->r, d, "metadata %s (an array of arrays, which ggml refuses)", key);
            continue;
        }
        if (tc_vec_push(v, w ? *w : ((tc_gguf_wkv){.key = key, .from = c, .index = i})))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < o->nkv && !rc; i++) { /* the --kv keys the input lacks, once each, the last given */
        bool seen = given(o, o->kv[i].key) != &o->kv[i];
        for (size_t k = 0; k < v->n && !seen; k++)
            seen = !strcmp(v->v[k].key, o->kv[i].key);
        if (!seen && tc_vec_push(v, o->kv[i]))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    if (rc)
        return rc;
    if (o->to != TC_Q_NONE && !given(o, "general.file_type") &&
        (rc = set_u32(v, "general.file_type", file_type(o->to), true, d)))
        return rc;
    if (quantised && (rc = set_u32(v, "general.quantization_version", 2, false, d)))
        return rc;
    bool arch = false;
    for (size_t i = 0; i < v->n; i++) {
        arch |= !strcmp(v->v[i].key, "general.architecture");
        if (!strcmp(v->v[i].key, "general.alignment") && !v->v[i].from && v->v[i].bits < 32)
            rep->low_align = true;
    }
    rep->no_arch = !arch;
    return 0;
}

/* ---- data ---------------------------------------------------------------------------------- */

typedef struct ctx {
    tc_plan *p;
    const tc_ckpt *c;
    const item *items;  /* block k of a shard's job is items[base + k] */
    size_t base;
} ctx;

#define QCHUNK ((size_t)2 << 20) /* values encoded per step */

typedef struct qsink {
    tc_qtype q;
    tc_dst *dst;
    uint64_t off;
    float *buf;
    size_t have;
    uint8_t *out;
    tc_plan *p;
    size_t in_size;      /* bytes per value in the input, for progress */
} qsink;

static int qflush(qsink *s, tc_diag *d)
{
    const tc_qtype_info *t = tc_qtype_get(s->q);
    size_t nb = s->have / t->block, bytes = nb * t->bytes;
    if (tc_quant_encode(s->q, s->out, s->buf, t->block == 1 ? s->have : nb))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "cannot write %s", t->name);
    int rc = tc_dst_pwrite(s->dst, s->off, s->out, bytes, d);
    s->off += bytes;
    s->have = 0;
    return rc;
}

static int qsink_put(void *vs, const void *buf, size_t n, tc_diag *d)
{
    qsink *s = vs;
    const uint8_t *p = buf;
    for (size_t left = n / 4; left;) {
        size_t k = QCHUNK - s->have < left ? QCHUNK - s->have : left;
        memcpy(s->buf + s->have, p, k * 4);
        s->have += k;
        p += k * 4;
        left -= k;
        tc_step_progress(s->p, k * s->in_size);
        if (s->have == QCHUNK) {
            int rc = qflush(s, d);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The tensor as float32, encoded to its output type block by block: by the parallel transfer when its
 * elements are a plain range of a file, else pulled through the cast stream. */
static int encode(ctx *x, const item *it, tc_dst *dst, uint64_t off, tc_diag *d)
{
    const tc_tensor *t = tc_ckpt_tensor(x->c, it->t);
    const tc_storage *st = tc_ckpt_storage(x->c, (size_t)t->storage);
    if (st->enc == TC_Q_NONE) {
        tc_elems *e = NULL;
        const tc_src *src;
        uint64_t in;
        int rc = tc_elems_open(&e, x->c, t, d);
        bool plain = !rc && tc_elems_range(e, &src, &in);
        tc_elems_close(e);
        if (rc)
            return rc;
        if (plain)
            return tc_step_coded(x->p, src, in, t->nbytes, t->name, TC_Q_NONE, t->dtype, TC_DT_F32, it->out, dst, off,
                                 NULL, NULL, d);
    }
    uint64_t out_bytes = 0;
    tc_qtype_bytes(it->out, QCHUNK, &out_bytes);
    qsink s = {it->out, dst, off, malloc(QCHUNK * 4), 0, malloc((size_t)out_bytes), x->p, tc_dtype_size(t->dtype)};
    int rc;
    if (!s.buf || !s.out) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = tc_tensor_elements(x->c, t, TC_DT_F32, qsink_put, &s, NULL, d)))
        goto done;
    if (s.have)
        rc = qflush(&s, d);
done:
    free(s.buf);
    free(s.out);
    return rc;
}

/* A GGUF tensor's bytes as its driver reads them, unchanged. */
static int copy_raw(ctx *x, const item *it, tc_dst *dst, uint64_t off, tc_diag *d)
{
    const tc_tensor *t = tc_ckpt_tensor(x->c, it->t);
    tc_rd r;
    int rc = tc_storage_open(x->c, (size_t)t->storage, &r, d);
    if (rc)
        return rc;
    if (r.src) { /* a plain range: the parallel transfer */
        const tc_src *src = r.src;
        uint64_t in = r.off, n = r.size;
        tc_rd_close(&r);
        return tc_step_range(x->p, src, in, n, t->name, TC_DT_U8, TC_DT_U8, dst, off, NULL, NULL, d);
    }
    uint8_t *buf = malloc(QCHUNK);
    if (!buf)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (uint64_t pos = 0; !rc;) {
        size_t got;
        if ((rc = tc_rd_read(&r, buf, QCHUNK, &got, d)) || !got)
            break;
        rc = tc_dst_pwrite(dst, off + pos, buf, got, d);
        pos += got;
        tc_step_progress(x->p, got);
    }
    free(buf);
    tc_rd_close(&r);
    return rc;
}

static int data_fn(void *vx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d)
{
    (void)crc;
    ctx *x = vx;
    const item *it = &x->items[x->base + k];
    const tc_tensor *t = tc_ckpt_tensor(x->c, it->t);
    if (it->out == it->in && it->gguf)
        return copy_raw(x, it, dst, off, d);
    if (it->out == it->in) /* its dtype's bytes, contiguous */
        return tc_stream_tensor(x->p, x->c, t, t->dtype, dst, off, NULL, NULL, d);
    if (it->out == TC_Q_F32)
        return tc_stream_tensor(x->p, x->c, t, TC_DT_F32, dst, off, NULL, NULL, d);
    return encode(x, it, dst, off, d);
}

/* ---- files ------------------------------------------------------------------------------------ */

/* The name of split k (1-based) of n: OUT less .gguf, then -0000K-of-0000N.gguf. */
static char *shard_name(const char *out, size_t k, size_t n)
{
    size_t l = strlen(out);
    if (l > 5 && !strcmp(out + l - 5, ".gguf"))
        l -= 5;
    tc_buf b = TC_BUF_INIT(0);
    tc_buf_add(&b, out, l);
    tc_buf_printf(&b, "-%05zu-of-%05zu.gguf", k, n);
    return tc_buf_take(&b); /* NULL when memory ran out */
}

int tc_gguf_convert(tc_ckpt *c, const tc_gguf_opts *o, const char *out, tc_gguf_report *rep, tc_diag *d)
{
    items_t items = {0};
    TC_VEC(size_t) cut = {0}; /* shard s holds items [cut[s], cut[s + 1]) */
    kvs kv = {0}, skv = {0};
    tc_keymap km = {0};
    tc_plan p = {0};
    tc_dst *dsts = NULL;
    tc_witem *wi = NULL;
    tc_wblock *wb = NULL;
    tc_qtype *types = NULL;
    char **names = NULL;
    size_t nsh = 0, opened = 0;
    tc_rewrite_opts ro = {.dtype = TC_DT_INVALID, .progress = o->progress, .progress_ctx = o->progress_ctx};
    int rc;
    if ((rc = tc_plan_make(&p, c, &ro, d)) || (rc = select_items(c, o, &items, &km, rep, d)))
        goto done;
    bool quantised = false;
    uint64_t total = 0, cur = 0;
    for (size_t i = 0; i < items.n; i++) {
        quantised |= tc_qtype_is_block(items.v[i].out);
        total += items.v[i].bytes;
        if (!i || (o->max_shard && cur && cur + items.v[i].bytes > o->max_shard)) {
            if (tc_vec_push(&cut, i)) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                goto done;
            }
            cur = 0;
        }
        cur += items.v[i].bytes;
    }
    if ((!cut.n && tc_vec_push(&cut, (size_t)0)) || tc_vec_push(&cut, items.n)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = build_kvs(c, o, quantised, &kv, rep, d)))
        goto done;
    nsh = cut.n - 1;
    if (!(dsts = calloc(nsh, sizeof *dsts)) || !(names = calloc(nsh, sizeof *names)) ||
        !(wi = calloc(items.n + 1, sizeof *wi)) || !(wb = calloc(items.n + 1, sizeof *wb)) ||
        !(types = calloc(items.n + 1, sizeof *types))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t s = 0; s < nsh; s++) {
        dsts[s] = (tc_dst)TC_DST_INIT;
        if (!(names[s] = nsh > 1 ? shard_name(out, s + 1, nsh) : strdup(out))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        for (size_t k = 0; k < (tc_gguf_nfiles(c) ? tc_gguf_nfiles(c) : 1); k++) {
            tc_gguf_file f = {.path = tc_ckpt_path(c)};
            tc_gguf_file_info(c, k, &f);
            if (tc_same_file(names[s], f.path)) {
                rc = tc_fail_at(d, TC_ERR_USAGE, names[s], TC_NO_OFFSET, "is an input file; write elsewhere");
                goto done;
            }
        }
        if ((rc = tc_dst_open(&dsts[s], names[s], o->dst_flags, d)))
            goto done;
        opened++;
    }
    for (size_t i = 0; i < items.n; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, items.v[i].t);
        wi[i] = (tc_witem){items.v[i].name, 0, t->dtype, t->ndim, t->shape, t->stride, 0, false, false, -1};
        wb[i] = (tc_wblock){items.v[i].bytes, t->dtype, NULL, items.v[i].out != items.v[i].in};
        types[i] = items.v[i].out;
        rep->r.data_bytes += items.v[i].bytes;
        p.total += t->nbytes;
    }
    (void)total;
    ctx x = {&p, c, items.v, 0};
    for (size_t s = 0; s < nsh; s++) {
        size_t a = cut.v[s], b = cut.v[s + 1];
        skv.n = 0;
        for (size_t k = 0; s == 0 && k < kv.n; k++)
            if (tc_vec_push(&skv, kv.v[k])) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                goto done;
            }
        if (nsh > 1) {
            tc_gguf_wkv sp[3] = {{.key = "split.no", .type = TC_GGUF_UINT16, .bits = s},
                                 {.key = "split.count", .type = TC_GGUF_UINT16, .bits = nsh},
                                 {.key = "split.tensors.count", .type = TC_GGUF_INT32, .bits = items.n}};
            if (nsh > 65535) {
                rc = tc_fail(d, TC_ERR_USAGE, "%zu split files: GGUF counts them in 16 bits (a larger --max-shard-size)",
                             nsh);
                goto done;
            }
            for (int k = 0; k < 3; k++)
                if (tc_vec_push(&skv, sp[k])) {
                    rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                    goto done;
                }
        }
        for (size_t i = a; i < b; i++)
            wi[i].block = i - a;
        x.base = a;
        tc_gguf_job gj = {types + a, skv.v, skv.n};
        tc_write_job job = {.items = wi + a, .nitems = b - a, .blocks = wb + a, .nblocks = b - a, .data = data_fn,
                            .ctx = &x, .gguf = &gj};
        rc = tc_format_write(TC_CAP_WRITES_GGUF, &job, &dsts[s], d);
        rep->file_bytes += dsts[s].pos;
        if (rc)
            goto done;
        rep->r.ntensors += b - a;
    }
    for (size_t s = 0; s < nsh; s++)
        if ((rc = tc_dst_finish(&dsts[s], d)))
            goto done;
    for (size_t s = 0; s < nsh; s++)
        if ((rc = tc_dst_publish(&dsts[s], d))) {
            for (size_t k = 0; k < s; k++) /* all or none: take back what was published */
                remove(names[k]);
            goto done;
        }
    rep->nfiles = nsh;
    rep->first = names[0];
    names[0] = NULL;
    rep->r.shared_bytes += p.shared;
    rep->r.copied_bytes += p.copied;
done:
    for (size_t s = 0; s < opened; s++)
        tc_dst_abort(&dsts[s]);
    for (size_t s = 0; names && s < nsh; s++)
        free(names[s]);
    free(names);
    free(dsts);
    free(wi);
    free(wb);
    free(types);
    tc_vec_free(&items);
    tc_vec_free(&cut);
    tc_vec_free(&kv);
    tc_vec_free(&skv);
    tc_keymap_free(&km);
    tc_plan_free(&p);
    return rc;
}
