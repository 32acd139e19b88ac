/* torch.save's zip format (torch >= 1.6): <archive>/data.pkl, data/<key>
 * records, version, byteorder and friends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "torch_zip.h"

extern const tc_format tc_format_torch_zip;

static void tzip_free(void *p)
{
    tc_tzip *z = p;
    if (!z)
        return;
    tc_torch_graph_free(&z->tg);
    tc_zip_free(&z->zip);
    tc_zip_torch_free(&z->tz);
    free(z->rec);
    if (z->free_extra)
        z->free_extra(z->extra);
    free(z);
}

static bool probe(const tc_probe *p) { return p->n >= 4 && !memcmp(p->head, "PK\x03\x04", 4); }

const tc_zip_entry *tc_tzip_record(const tc_tzip *z, const char *name)
{
    return tc_zip_torch_find(&z->tz, &z->zip, name);
}

bool tc_tzip_listed(const tc_tzip *z, const char *name)
{
    size_t al = strlen(z->archive);
    for (size_t i = 0; i < z->zip.n; i++) {
        char l[512];
        tc_zip_listed_name(&z->zip.e[i], l);
        if (!strcmp(l + al + 1, name))
            return true;
    }
    return false;
}

/* A small record as a fact: its first 64 printable bytes (torch reads it whole). */
static int small_record(tc_ckpt *c, tc_tzip *z, const char *name, tc_diag *d)
{
    const tc_zip_entry *e = tc_tzip_record(z, name);
    if (!e)
        return 0;
    uint8_t *buf;
    size_t len;
    int rc = tc_zip_read_all(&z->zip, e, 1u << 20, true, &buf, &len, d);
    if (rc)
        return rc;
    char v[65];
    size_t k = 0;
    for (size_t i = 0; i < len && k < 64; i++)
        if (buf[i] >= 0x20 && buf[i] < 0x7f)
            v[k++] = (char)buf[i];
    v[k] = 0;
    bool exact = k == len;
    free(buf);
    if (!strcmp(name, "byteorder") && !exact) /* torch compares the whole record */
        return tc_fail(d, TC_ERR_FORMAT, "byteorder record is %zu bytes, neither 'little' nor 'big'", len);
    return tc_ckpt_add_fact(c, name, v, d);
}

/* Entries torch could take one for another: the file is never safe, and what
 * tensorctl reads of it is what torch's lookup finds. */
static int confusable(tc_ckpt *c, const tc_zip *zip, tc_diag *d)
{
    size_t a, b;
    int found = tc_zip_confusable(zip, &a, &b);
    if (found < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (!found)
        return 0;
    char ea[600], eb[600];
    tc_buf t = TC_BUF_INIT(2000);
    tc_buf_printf(&t,
                  "zip entries %zu '%s' and %zu '%s' are one name to torch's reader, which looks names up ignoring "
                  "letter case (and lists them cut at a NUL byte or at 511 bytes): which one a reader takes is not "
                  "the same everywhere; tensorctl read what torch's lookup finds",
                  a, tc_esc(zip->e[a].name, ea, sizeof ea), b, tc_esc(zip->e[b].name, eb, sizeof eb));
    int rc = tc_buf_oom(&t) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_hazard(c, tc_buf_str(&t), d);
    tc_buf_free(&t);
    return rc;
}

int tc_tzip_open(tc_ckpt *c, const tc_format *driver, tc_tzip **out, tc_diag *d)
{
    tc_tzip *z = calloc(1, sizeof *z);
    if (!z)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, driver, z, tzip_free);
    const tc_limits *lim = tc_ckpt_limits(c);
    tc_zip_limits zl = {.max_entries = lim->max_entries};
    int rc = tc_torch_graph_init(&z->tg, c, d);
    if (rc || (rc = tc_zip_open(&z->zip, tc_ckpt_src(c), &zl, d)) ||
        (rc = tc_zip_torch_init(&z->tz, &z->zip, lim->max_pickle_bytes, d)))
        return rc;
    z->archive = z->tz.archive;
    if ((rc = tc_zip_torch_records(&z->tz, &z->zip, d)) || (rc = confusable(c, &z->zip, d)))
        return rc;
    *out = z;
    return 0;
}

int tc_tzip_facts(tc_ckpt *c, tc_tzip *z, tc_diag *d)
{
    int rc;
    if ((rc = tc_ckpt_add_fact(c, "archive", z->archive, d)) || (rc = small_record(c, z, "version", d)) ||
        (rc = small_record(c, z, ".data/version", d)) || (rc = small_record(c, z, "byteorder", d)) ||
        (rc = small_record(c, z, ".format_version", d)) || (rc = small_record(c, z, ".storage_alignment", d)))
        return rc;
    for (size_t i = 0; i < tc_ckpt_nfacts(c); i++) {
        const tc_kv *f = tc_ckpt_fact(c, i);
        if (strcmp(f->key, "byteorder"))
            continue;
        if (!strcmp(f->value, "big"))
            z->big = true;
        else if (strcmp(f->value, "little")) /* torch: "Unknown endianness type" */
            return tc_fail(d, TC_ERR_FORMAT, "byteorder record says '%s', neither 'little' nor 'big'", f->value);
    }
    return 0;
}

int tc_tzip_read(const tc_tzip *z, const tc_ckpt *c, const tc_zip_entry *e, uint8_t **buf, size_t *len,
                 tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(c);
    if (e->usize > lim->max_pickle_bytes)
        return tc_fail(d, TC_ERR_LIMIT, "%s is %llu bytes, more than %llu (raise with --max-pickle-size)", e->name,
                       (unsigned long long)e->usize, (unsigned long long)lim->max_pickle_bytes);
    uint64_t allowed;
    if (e->method != 0 && lim->max_inflate_ratio &&
        (__builtin_mul_overflow(e->csize, lim->max_inflate_ratio, &allowed) ? false
                                                                              : e->usize > allowed + (1u << 20)))
        return tc_fail(d, TC_ERR_LIMIT,
                       "%s inflates from %llu to %llu bytes, more than %llu times past its first MiB "
                       "(raise with --max-inflate-ratio)",
                       e->name, (unsigned long long)e->csize, (unsigned long long)e->usize,
                       (unsigned long long)lim->max_inflate_ratio);
    return tc_zip_read_all(&z->zip, e, lim->max_pickle_bytes, true, buf, len, d);
}

/* The bytes of one number of dtype t, as torch swaps them when it loads a
 * file of the other byte order: each half of a complex number apart. */
static size_t swap_size(tc_dtype t)
{
    size_t n = tc_dtype_size(t);
    return tc_dtype_get(t)->kind == TC_KIND_COMPLEX ? n / 2 : n;
}

int tc_tzip_data(tc_ckpt *c, tc_tzip *z, tc_diag *d)
{
    const tc_zip_entry *pe = tc_tzip_record(z, "data.pkl");
    if (!pe)
        return tc_fail(d, TC_ERR_FORMAT, "no %s/data.pkl record", z->archive);
    uint8_t *pkl;
    size_t plen;
    int rc = tc_tzip_read(z, c, pe, &pkl, &plen, d);
    if (rc)
        return rc;
    pk_read_opts o = tc_torch_read_opts(&z->tg, "data.pkl");
    z->tg.pickle_bytes += plen;
    rc = pk_read(z->tg.g, pkl, plen, &o, &z->tg.root, NULL, d);
    free(pkl);
    if (rc)
        return tc_torch_read_failed(&z->tg, rc, "data.pkl", d);
    size_t ns = tc_ckpt_nstorages(c);
    if (!(z->rec = calloc(ns + 1, sizeof *z->rec)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ns; i++) {
        tc_storage *s = tc_ckpt_storage_mut(c, i);
        char name[256];
        snprintf(name, sizeof name, "data/%s", s->key);
        const tc_zip_entry *e = tc_tzip_record(z, name);
        if (!e)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s': no record %s/%s (file incomplete?)", s->key,
                           z->archive, name);
        const char *why = tc_zip_unreadable(e);
        if (why)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s': record %s: %s", s->key, e->name, why);
        if (e->usize != s->nbytes)
            return tc_fail(d, TC_ERR_FORMAT,
                           "record %s is %llu bytes but storage '%s' needs %llu (%llu x %s)", e->name,
                           (unsigned long long)e->usize, s->key, (unsigned long long)s->nbytes,
                           (unsigned long long)s->numel, tc_dtype_name(s->dtype));
        z->rec[i] = e;
        /* big-endian data is read through the driver, swapped, and its CRC-32 taken anew */
        bool swapped = z->big && swap_size(s->dtype) > 1;
        s->stored = e->method == 0 && !swapped;
        s->file_off = e->data_off;
        s->crc_known = !swapped;
        s->crc = e->crc;
    }
    return 0;
}

static int open_zip(tc_ckpt *c, tc_diag *d)
{
    tc_tzip *z;
    int rc = tc_tzip_open(c, &tc_format_torch_zip, &z, d);
    if (rc)
        return rc;
    if (tc_tzip_listed(z, "constants.pkl"))
        return TC_FORMAT_DECLINE; /* a TorchScript archive (torchscript.c) */
    if ((rc = tc_tzip_facts(c, z, d)) || (rc = tc_tzip_data(c, z, d)) || (rc = tc_torch_index(&z->tg, d)))
        return rc;
    const char *refused[TC_NTORCH] = {NULL, NULL};
    if (!(z->tz.readers & TC_ZIP_TORCH1))
        refused[TC_TORCH_1_13] = "its zip archive, which torch 1.13's zip reader refuses";
    if (!(z->tz.readers & TC_ZIP_TORCH2))
        refused[TC_TORCH_2] = "its zip archive, which torch 2.x's zip reader refuses";
    return tc_weights_only(&z->tg, refused, d);
}

/* ---- reading a storage -------------------------------------------------------- */

static int inflate_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    return tc_zip_rd_read(r->state, buf, n, got, false, d);
}

static void inflate_close(tc_rd *r)
{
    tc_zip_rd_close(r->state);
    free(r->state);
    r->state = NULL;
}

/* A big-endian record, read as little-endian: every number's bytes reversed.
 * Each read returns whole numbers, except when fewer bytes than one are
 * asked for: then one number is read and handed out from `one`. */
typedef struct swap_rd {
    tc_zip_rd zr;              /* first: inflate_close frees it */
    size_t esz;
    uint8_t one[8];
    size_t olen, oat;
} swap_rd;

/* Whole numbers of esz bytes at p, n bytes in all: esz is 2, 4 or 8 (swap_size
 * of every dtype wider than a byte); loops the compiler vectorises. */
#define SWAP_EACH(bits)                                                                                      \
    for (size_t i = 0; i + (bits) / 8 <= n; i += (bits) / 8) {                                              \
        uint##bits##_t v;                                                                                    \
        memcpy(&v, p + i, (bits) / 8);                                                                       \
        v = __builtin_bswap##bits(v);                                                                        \
        memcpy(p + i, &v, (bits) / 8);                                                                       \
    }

static void swap_all(uint8_t *p, size_t n, size_t esz)
{
    if (esz == 2)
        SWAP_EACH(16)
    else if (esz == 4)
        SWAP_EACH(32)
    else
        SWAP_EACH(64)
}
#undef SWAP_EACH

static int swap_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    swap_rd *s = r->state;
    *got = 0;
    if (s->oat == s->olen && n < s->esz) {
        int rc = tc_zip_rd_read(&s->zr, s->one, s->esz, &s->olen, false, d);
        if (rc)
            return rc;
        swap_all(s->one, s->olen, s->esz);
        s->oat = 0;
    }
    if (s->oat < s->olen) {
        size_t m = n < s->olen - s->oat ? n : s->olen - s->oat;
        memcpy(buf, s->one + s->oat, m);
        s->oat += m;
        *got = m;
    } else {
        int rc = tc_zip_rd_read(&s->zr, buf, n / s->esz * s->esz, got, false, d);
        if (rc)
            return rc;
        swap_all(buf, *got, s->esz);
    }
    /* the record's own CRC-32, of the bytes as they lie, once all are read */
    size_t none;
    return s->zr.done == s->zr.e->usize ? tc_zip_rd_read(&s->zr, NULL, 0, &none, true, d) : 0;
}

int tc_tzip_open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    const tc_tzip *z = tc_ckpt_priv(c);
    const tc_storage *s = tc_ckpt_storage(c, i);
    if (s->stored) {
        tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
        return 0;
    }
    size_t esz = z->big ? swap_size(s->dtype) : 1;
    swap_rd *sw = esz > 1 ? calloc(1, sizeof *sw) : NULL;
    tc_zip_rd *zr = sw ? &sw->zr : malloc(sizeof *zr);
    if (!zr)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_zip_rd_open(zr, &z->zip, z->rec[i], d);
    if (rc) {
        free(zr);
        return rc;
    }
    r->size = s->nbytes;
    r->read = sw ? swap_read : inflate_read;
    r->close = inflate_close;
    r->state = zr;
    if (sw)
        sw->esz = esz;
    return 0;
}

/* ---- writing ----------------------------------------------------------------------- */

/* The blocks a writer lays out: where it gets their bytes, where they lie
 * in the input (either job's data, origin and ctx), and their sizes (a
 * rewrite's storages, or a state_dict's blocks). */
typedef struct blocks_src {
    tc_data_fn data;
    tc_origin_fn origin;
    void *ctx;
    const tc_out_storage *storages;
    const tc_wblock *blocks;
} blocks_src;

static uint64_t block_size(const blocks_src *bs, size_t k)
{
    return bs->storages ? bs->storages[k].nbytes : bs->blocks[k].nbytes;
}

/* Where block k's data goes, modulo *mod: where its bytes lie in their input
 * modulo TC_SHARE_BLOCK when they pass through unchanged and hold a whole
 * block there, so that the file system can share those blocks; otherwise,
 * and whenever that would break torch's 64-byte alignment, on a 64-byte
 * boundary. */
static uint32_t data_phase(const blocks_src *bs, size_t k, uint64_t size, uint32_t *mod)
{
    uint64_t at;
    *mod = 64;
    if (!bs->origin || !bs->origin(bs->ctx, k, &at) || at % 64)
        return 0;
    uint64_t head = (TC_SHARE_BLOCK - at % TC_SHARE_BLOCK) % TC_SHARE_BLOCK;
    if (size < head || size - head < TC_SHARE_BLOCK)
        return 0;
    *mod = TC_SHARE_BLOCK;
    return (uint32_t)(at % TC_SHARE_BLOCK);
}

/* Block k as record data/<as>: laid out here, its bytes put by the job's callback. */
static int write_block(tc_zipw *w, const blocks_src *bs, size_t as, size_t k, uint64_t size, tc_diag *d)
{
    char name[48];
    snprintf(name, sizeof name, "data/%zu", as);
    uint64_t off;
    uint32_t crc = 0, mod, phase = data_phase(bs, k, size, &mod);
    int rc;
    if ((rc = tc_zipw_begin_at(w, name, size, mod, phase, d)) || (rc = tc_zipw_reserve(w, size, &off, d)) ||
        (rc = bs->data(bs->ctx, k, w->dst, off, &crc, d)) || (rc = tc_zipw_commit(w, size, crc, d)))
        return rc;
    return tc_zipw_end(w, d);
}

/* The archive: data.pkl, byteorder, the n blocks kept (every one when keep
 * is NULL; each as the next data/<as>), version, as torch.save orders them. */
static int write_records(tc_dst *dst, const uint8_t *pkl, size_t plen, const blocks_src *bs, size_t n,
                         const bool *keep, tc_diag *d)
{
    char archive[256];
    tc_zip_archive_name(dst->path, archive, sizeof archive);
    tc_zipw w;
    int rc = tc_zipw_init(&w, dst, archive, d);
    if (rc)
        goto done;
    if ((rc = tc_zipw_add(&w, "data.pkl", pkl, plen, d)) || (rc = tc_zipw_add(&w, "byteorder", "little", 6, d)))
        goto done;
    for (size_t k = 0, as = 0; k < n && !rc; k++)
        if (!keep || keep[k])
            rc = write_block(&w, bs, as++, k, block_size(bs, k), d);
    if (rc || (rc = tc_zipw_add(&w, "version", "3\n", 2, d)))
        goto done;
    rc = tc_zipw_finish(&w, d);
done:
    tc_zipw_free(&w);
    return rc;
}

/* A flat state_dict: a new pickle over every block. */
static int write_zip(const tc_write_job *job, tc_dst *dst, tc_diag *d)
{
    uint8_t *pkl = NULL;
    size_t plen = 0;
    int rc = tc_torch_state_dict(job, &pkl, &plen, d);
    if (rc)
        return rc;
    blocks_src bs = {job->data, job->origin, job->ctx, NULL, job->blocks};
    rc = write_records(dst, pkl, plen, &bs, job->nblocks, NULL, d);
    free(pkl);
    return rc;
}

/* A checkpoint whole: its own graph, edited and re-pointed at the storages it still reaches. */
static int rewrite_zip(const tc_rewrite_job *job, tc_dst *dst, tc_diag *d)
{
    tc_torch_graph *tg = tc_torch_graph_of(job->whole);
    if (!tg)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "%s files have no object graph to rewrite", tc_ckpt_format(job->whole));
    size_t n = tc_ckpt_nstorages(job->whole), plen = 0;
    uint8_t *pkl = NULL;
    bool *keep = calloc(n + 1, sizeof *keep);
    if (!keep)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_torch_rewrite(tg, job, keep, &pkl, &plen, d);
    if (rc)
        goto done;
    blocks_src bs = {job->data, job->origin, job->ctx, job->storages, NULL};
    rc = write_records(dst, pkl, plen, &bs, n, keep, d);
done:
    free(pkl);
    free(keep);
    return rc;
}

const tc_format tc_format_torch_zip = {.name = "torch-zip", .probe = probe, .open = open_zip,
                                       .open_storage = tc_tzip_open_storage, .write = write_zip,
                                       .caps = TC_CAP_TORCH_GRAPH | TC_CAP_WRITES_TORCH, .rewrite = rewrite_zip};
