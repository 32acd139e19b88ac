#include "zip.h"

#include "vec.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <zlib.h>

#define ALIGN 64
#define WBUF (1u << 20)
#define BIG 0xFFFFFFFFull
/* a reserved range this small is staged in the write buffer (tc_dst_stage): smaller than a file
 * system block, so that it has no whole block the output could share with its input */
#define STAGE_MAX ((uint64_t)TC_SHARE_BLOCK - 1)

static int flush(tc_zipw *w, tc_diag *d)
{
    if (w->blen) {
        int rc = tc_dst_write(w->dst, w->buf, w->blen, d);
        if (rc)
            return rc;
        w->blen = 0;
        tc_dst_writeback_pos(w->dst);
    }
    return 0;
}

static int emit(tc_zipw *w, const void *p, size_t n, tc_diag *d)
{
    const uint8_t *s = p;
    while (n) {
        if (w->blen == WBUF) {
            int rc = flush(w, d);
            if (rc)
                return rc;
        }
        size_t k = WBUF - w->blen < n ? WBUF - w->blen : n;
        if (k == WBUF && w->blen == 0) { /* large writes skip the buffer */
            int rc = tc_dst_write(w->dst, s, n, d);
            if (rc)
                return rc;
            w->off += n;
            tc_dst_writeback_pos(w->dst);
            return 0;
        }
        memcpy(w->buf + w->blen, s, k);
        w->blen += k;
        w->off += k;
        s += k;
        n -= k;
    }
    return 0;
}

int tc_zipw_init(tc_zipw *w, tc_dst *dst, const char *archive_name, tc_diag *d)
{
    memset(w, 0, sizeof *w);
    w->dst = dst;
    w->off = dst->pos;
    size_t l = strlen(archive_name);
    w->prefix = malloc(l + 2);
    w->buf = malloc(WBUF);
    if (!w->prefix || !w->buf) {
        tc_zipw_free(w);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    memcpy(w->prefix, archive_name, l);
    memcpy(w->prefix + l, "/", 2);
    return 0;
}

void tc_zipw_free(tc_zipw *w)
{
    if (!w)
        return;
    if (w->dst && w->dst->stage) /* a record left open by a failure: its data was to land in buf */
        tc_dst_unstage(w->dst);
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    free(w->e);
    free(w->prefix);
    free(w->buf);
    memset(w, 0, sizeof *w);
}

int tc_zipw_begin(tc_zipw *w, const char *name, uint64_t size, tc_diag *d)
{
    return tc_zipw_begin_at(w, name, size, ALIGN, 0, d);
}

int tc_zipw_begin_at(tc_zipw *w, const char *name, uint64_t size, uint32_t mod, uint32_t phase, tc_diag *d)
{
    if (mod < ALIGN || mod > TC_ZIP_MAX_PHASE_MOD || mod % ALIGN || phase % ALIGN || phase >= mod)
        return tc_fail_at(d, TC_ERR_USAGE, w->dst->path, w->off,
                          "record %s: cannot place its data at %u modulo %u (multiples of 64, %u < %u <= %u)",
                          name, phase, mod, phase, mod, TC_ZIP_MAX_PHASE_MOD);
    if (tc_grow(&w->e, &w->cap, w->n + 1, sizeof *w->e))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t pl = strlen(w->prefix), nl = strlen(name);
    if (pl + nl > 65535)
        return tc_fail_at(d, TC_ERR_USAGE, w->dst->path, w->off, "record name too long");
    tc_zipw_ent *e = &w->e[w->n];
    if (!(e->name = malloc(pl + nl + 1)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memcpy(e->name, w->prefix, pl);
    memcpy(e->name + pl, name, nl + 1);
    w->n++;
    e->size = size;
    e->lfh_off = w->off;
    e->crc = 0;

    uint64_t cursor = w->off;
    bool z64s = size >= BIG, z64o = cursor >= BIG;
    uint64_t start = cursor + 30 + pl + nl + 4;
    uint16_t z64len = 0;
    if (z64s || z64o) {
        z64len = (uint16_t)((z64s ? 16 : 0) + (z64o ? 8 : 0));
        start += 4 + z64len;
    }
    /* the data starts at start + pad, congruent to phase modulo mod (torch:
     * 0 modulo 64); the FB extra's own 4 bytes are already in start */
    uint16_t pad = (uint16_t)((phase + mod - start % mod) % mod);
    uint8_t h[30];
    tc_put32(h, 0x04034b50u);
    tc_put16(h + 4, 0);
    tc_put16(h + 6, size ? 0x0808 : 0x0800);
    tc_put16(h + 8, 0);
    memset(h + 10, 0, 16);
    tc_put16(h + 26, (uint16_t)(pl + nl));
    tc_put16(h + 28, (uint16_t)((z64len ? 4 + z64len : 0) + 4 + pad));
    int rc;
    if ((rc = emit(w, h, 30, d)) || (rc = emit(w, e->name, pl + nl, d)))
        goto done;
    if (z64len) {
        uint8_t x[28];
        size_t k = 4;
        tc_put16(x, 1);
        tc_put16(x + 2, z64len);
        if (z64s) {
            tc_put64(x + k, size);
            tc_put64(x + k + 8, size);
            k += 16;
        }
        if (z64o) {
            tc_put64(x + k, cursor);
            k += 8;
        }
        if ((rc = emit(w, x, k, d)))
            goto done;
    }
    uint8_t zs[256], fb[4] = {'F', 'B'};
    memset(zs, 'Z', sizeof zs);
    tc_put16(fb + 2, pad);
    if ((rc = emit(w, fb, 4, d)))
        goto done;
    for (size_t left = pad; left;) {
        size_t k = left < sizeof zs ? left : sizeof zs;
        if ((rc = emit(w, zs, k, d)))
            goto done;
        left -= k;
    }
done: /* the record is open, its header written or not */
    w->open = true;
    w->rec_size = size;
    w->rec_done = 0;
    w->rec_crc = (uint32_t)crc32(0, NULL, 0);
    return rc;
}

/* n more bytes would not fit the open record's declared size */
static int too_much(const tc_zipw *w, uint64_t n, tc_diag *d)
{
    if (n <= w->rec_size - w->rec_done)
        return 0;
    return tc_fail_at(d, TC_ERR_USAGE, w->dst->path, w->off, "record %s: more data than its declared size",
                      w->e[w->n - 1].name);
}

int tc_zipw_write(tc_zipw *w, const void *p, size_t n, tc_diag *d)
{
    int rc = too_much(w, n, d);
    if (rc)
        return rc;
    const uint8_t *s = p;
    for (size_t left = n; left;) {
        uInt k = left > (1u << 30) ? (1u << 30) : (uInt)left;
        w->rec_crc = (uint32_t)crc32(w->rec_crc, s, k);
        s += k;
        left -= k;
    }
    w->rec_done += n;
    return emit(w, p, n, d);
}

int tc_zipw_reserve(tc_zipw *w, uint64_t n, uint64_t *off, tc_diag *d)
{
    int rc = too_much(w, n, d);
    if (rc)
        return rc;
    /* a small record's data joins the buffer, written with the headers around it */
    if (!n || n > STAGE_MAX || n > WBUF - w->blen) { /* (an empty record is committed as an unstaged one) */
        if ((rc = flush(w, d)))
            return rc;
    }
    if (n && n <= STAGE_MAX) {
        memset(w->buf + w->blen, 0, (size_t)n);
        tc_dst_stage(w->dst, w->buf + w->blen, w->off, (size_t)n);
    }
    *off = w->off;
    return 0;
}

int tc_zipw_commit(tc_zipw *w, uint64_t n, uint32_t crc, tc_diag *d)
{
    bool staged = w->dst->stage != NULL;
    tc_dst_unstage(w->dst);
    int rc = too_much(w, n, d);
    if (rc)
        return rc;
    w->rec_crc = (uint32_t)crc32_combine(w->rec_crc, crc, (z_off_t)n);
    w->off += n;
    w->rec_done += n;
    if (staged) {
        w->blen += (size_t)n;
        return 0;
    }
    tc_dst_seek(w->dst, w->off);
    w->dst->synced = w->off; /* the writer of the range started its writeback */
    return 0;
}

int tc_zipw_end(tc_zipw *w, tc_diag *d)
{
    tc_zipw_ent *e = &w->e[w->n - 1];
    if (w->rec_done != w->rec_size)
        return tc_fail_at(d, TC_ERR_USAGE, w->dst->path, w->off, "record %s: wrote %llu of %llu bytes", e->name,
                       (unsigned long long)w->rec_done, (unsigned long long)w->rec_size);
    e->crc = w->rec_crc;
    w->open = false;
    if (e->size == 0)
        return 0;
    uint8_t dd[24];
    tc_put32(dd, 0x08074b50u);
    tc_put32(dd + 4, e->crc);
    if (e->size >= BIG || e->lfh_off >= BIG) {
        tc_put64(dd + 8, e->size);
        tc_put64(dd + 16, e->size);
        return emit(w, dd, 24, d);
    }
    tc_put32(dd + 8, (uint32_t)e->size);
    tc_put32(dd + 12, (uint32_t)e->size);
    return emit(w, dd, 16, d);
}

int tc_zipw_add(tc_zipw *w, const char *name, const void *p, size_t n, tc_diag *d)
{
    int rc;
    if ((rc = tc_zipw_begin(w, name, n, d)) || (rc = tc_zipw_write(w, p, n, d)))
        return rc;
    return tc_zipw_end(w, d);
}

/* Entry e's central directory header. */
static int emit_cdh(tc_zipw *w, const tc_zipw_ent *e, tc_diag *d)
{
    bool zs = e->size >= BIG, zo = e->lfh_off >= BIG;
    uint16_t xl = (uint16_t)((zs || zo) ? 4 + (zs ? 16 : 0) + (zo ? 8 : 0) : 0);
    size_t nl = strlen(e->name);
    uint8_t h[46 + 28];
    tc_put32(h, 0x02014b50u);
    tc_put16(h + 4, 0);
    tc_put16(h + 6, 0);
    tc_put16(h + 8, e->size ? 0x0808 : 0x0800);
    tc_put16(h + 10, 0);
    tc_put32(h + 12, 0);
    tc_put32(h + 16, e->crc);
    tc_put32(h + 20, zs ? 0xFFFFFFFFu : (uint32_t)e->size);
    tc_put32(h + 24, zs ? 0xFFFFFFFFu : (uint32_t)e->size);
    tc_put16(h + 28, (uint16_t)nl);
    tc_put16(h + 30, xl);
    memset(h + 32, 0, 10);
    tc_put32(h + 42, zo ? 0xFFFFFFFFu : (uint32_t)e->lfh_off);
    int rc;
    if ((rc = emit(w, h, 46, d)) || (rc = emit(w, e->name, nl, d)))
        return rc;
    if (xl) {
        size_t k = 4;
        tc_put16(h, 1);
        tc_put16(h + 2, (uint16_t)(xl - 4));
        if (zs) {
            tc_put64(h + k, e->size);
            tc_put64(h + k + 8, e->size);
            k += 16;
        }
        if (zo) {
            tc_put64(h + k, e->lfh_off);
            k += 8;
        }
        return emit(w, h, k, d);
    }
    return 0;
}

int tc_zipw_finish(tc_zipw *w, tc_diag *d)
{
    uint64_t cd_off = w->off;
    int rc = 0;
    for (size_t i = 0; i < w->n && !rc; i++)
        rc = emit_cdh(w, &w->e[i], d);
    if (rc)
        return rc;
    uint64_t cd_size = w->off - cd_off, z64_off = w->off;
    uint8_t r[56 + 20 + 22];
    tc_put32(r, 0x06064b50u);
    tc_put64(r + 4, 44);
    tc_put16(r + 12, 0x031E);
    tc_put16(r + 14, 0x002D);
    tc_put32(r + 16, 0);
    tc_put32(r + 20, 0);
    tc_put64(r + 24, w->n);
    tc_put64(r + 32, w->n);
    tc_put64(r + 40, cd_size);
    tc_put64(r + 48, cd_off);
    uint8_t *l = r + 56;
    tc_put32(l, 0x07064b50u);
    tc_put32(l + 4, 0);
    tc_put64(l + 8, z64_off);
    tc_put32(l + 16, 1);
    uint8_t *e = l + 20;
    tc_put32(e, 0x06054b50u);
    tc_put16(e + 4, 0);
    tc_put16(e + 6, 0);
    uint16_t n16 = w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n;
    tc_put16(e + 8, n16);
    tc_put16(e + 10, n16);
    tc_put32(e + 12, cd_size >= BIG ? 0xFFFFFFFFu : (uint32_t)cd_size);
    tc_put32(e + 16, cd_off >= BIG ? 0xFFFFFFFFu : (uint32_t)cd_off);
    tc_put16(e + 20, 0);
    if ((rc = emit(w, r, sizeof r, d)))
        return rc;
    return flush(w, d);
}

void tc_zip_archive_name(const char *path, char *out, size_t outlen)
{
    const char *b = path;
    for (const char *p = path; *p; p++)
        if (*p == '/' || *p == '\\')
            b = p + 1;
    size_t l = strlen(b);
    const char *dot = strrchr(b, '.');
    if (dot)
        l = (size_t)(dot - b);
    bool ascii = l > 0;
    for (size_t i = 0; i < l; i++)
        if ((unsigned char)b[i] >= 0x80 || (unsigned char)b[i] < 0x20)
            ascii = false;
    if (!ascii || l >= outlen) {
        snprintf(out, outlen, "archive");
        return;
    }
    memcpy(out, b, l);
    out[l] = 0;
}
