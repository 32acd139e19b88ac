/* The integrity test (verify.h). */
#include "verify.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "assemble.h"
#include "format.h"
#include "zip.h"

enum { BUFSZ = 1 << 20 };

typedef struct vstate {
    uint8_t *buf;
    uint64_t done, total;
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *ctx;
} vstate;

static void advance(vstate *v, size_t n)
{
    v->done += n;
    if (v->progress)
        v->progress(v->ctx, v->done, v->total);
}

static bool is_zip(const tc_src *src, tc_diag *d)
{
    uint8_t m[4];
    return src->size >= 4 && !tc_src_read(src, 0, m, 4, "header", d) && !memcmp(m, "PK\3\4", 4);
}

/* Every record of the zip read whole through the zip reader, which compares
 * its CRC-32 with the central directory's at its end. */
static int zip_records(const tc_ckpt *c, const tc_zip *z, vstate *v, tc_verify_report *rep, tc_diag *d)
{
    for (size_t i = 0; i < z->n; i++) {
        const tc_zip_entry *e = &z->e[i];
        tc_zip_rd r;
        int rc = tc_zip_rd_open(&r, z, e, d);
        for (size_t got = 1; !rc && got;) {
            rc = tc_zip_rd_read(&r, v->buf, BUFSZ, &got, true, d);
            advance(v, got);
        }
        tc_zip_rd_close(&r);
        if (rc) {
            d->offset = e->data_off;
            tc_diag_subject(d, tc_ckpt_path(c));
            return rc;
        }
        rep->records++;
        rep->bytes += e->usize;
    }
    return 0;
}

/* Storage i read to its end through its driver, its CRC-32 compared when the format gives one. */
static int storage(const tc_ckpt *c, size_t i, vstate *v, tc_verify_report *rep, tc_diag *d)
{
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd r;
    int rc = tc_storage_open(c, i, &r, d);
    if (rc)
        return rc;
    uint32_t crc = (uint32_t)crc32(0, NULL, 0);
    uint64_t n = 0;
    for (size_t got = 1; !rc && got;) {
        if (!(rc = tc_rd_read(&r, v->buf, BUFSZ, &got, d))) {
            crc = (uint32_t)crc32(crc, v->buf, (uInt)got);
            n += got;
            advance(v, got);
        }
    }
    tc_rd_close(&r);
    if (rc)
        return rc;
    if (n != r.size)
        return tc_fail_at(d, TC_ERR_FORMAT, tc_ckpt_path(c), s->file_off,
                          "storage '%s': %llu bytes read where the file gives it %llu (truncated?)", s->key,
                          (unsigned long long)n, (unsigned long long)r.size);
    /* a CRC of 0 over bytes is what an unknown one is recorded as (the stream trusts it no more) */
    if (s->crc_known && !(s->crc == 0 && n)) {
        if (crc != s->crc)
            return tc_fail_at(d, TC_ERR_FORMAT, tc_ckpt_path(c), s->file_off,
                              "storage '%s': CRC-32 is %08x but the file says %08x (data corrupted)", s->key, crc,
                              s->crc);
        rep->storage_crcs++;
    }
    rep->storages++;
    rep->bytes += n;
    return 0;
}

int tc_verify(const tc_ckpt *c, const tc_limits *lim, void (*progress)(void *ctx, uint64_t done, uint64_t total),
              void *progress_ctx, tc_verify_report *rep, tc_diag *d)
{
    tc_verify_report r = {0};
    vstate v = {.progress = progress, .ctx = progress_ctx};
    const tc_src *src = tc_ckpt_src(c);
    tc_zip z = {0};
    bool zip = is_zip(src, d);
    int rc;
    if ((rc = d->code)) /* its first bytes could not be read */
        goto done;
    tc_zip_limits zl = {.max_entries = lim->max_entries};
    if (zip && (rc = tc_zip_open(&z, src, &zl, d)))
        goto done;
    /* what is read: the zip's records, and every storage not in them (a
     * storage assembled from chunks is read as its chunks, which are storages) */
    size_t ns = tc_ckpt_nstorages(c);
    for (size_t i = 0; i < z.n; i++)
        v.total += z.e[i].usize;
    for (size_t i = 0; i < ns; i++)
        if (!tc_assembled(c, i) && !(zip && tc_ckpt_storage(c, i)->stored))
            v.total += tc_ckpt_storage(c, i)->nbytes;
    if (!(v.buf = malloc(BUFSZ))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (zip && (rc = zip_records(c, &z, &v, &r, d)))
        goto done;
    /* a storage stored in the zip was one of its records; any other (deflated, in another file) is read */
    for (size_t i = 0; i < ns; i++)
        if (!tc_assembled(c, i) && !(zip && tc_ckpt_storage(c, i)->stored) && (rc = storage(c, i, &v, &r, d)))
            goto done;
    *rep = r;
done:
    tc_zip_free(&z);
    free(v.buf);
    if (rc)
        tc_diag_subject(d, tc_ckpt_path(c));
    return rc;
}
