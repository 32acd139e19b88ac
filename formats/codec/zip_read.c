#include "zip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LFH 0x04034b50u
#define SIG_CDH 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_Z64_EOCD 0x06064b50u
#define SIG_Z64_LOC 0x07064b50u

/* The end record torch's reader (miniz) takes: the LAST signature with 22
 * bytes after it, whatever its comment length says. The archive is accepted
 * only when that record's comment ends the file exactly: bytes after it, or a
 * signature inside a comment, would let two readers see two archives. */
static int find_eocd(const tc_src *s, uint64_t *eocd, uint8_t rec[22], tc_diag *d)
{
    uint64_t tail = s->size < 65557 ? s->size : 65557;
    if (s->size < 22)
        return tc_fail(d, TC_ERR_FORMAT, "zip: file of %llu bytes is too small to be a zip (truncated?)",
                       (unsigned long long)s->size);
    uint8_t *buf = malloc(tail);
    if (!buf)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_src_read(s, s->size - tail, buf, tail, "zip end record", d);
    if (rc) {
        free(buf);
        return rc;
    }
    for (uint64_t i = tail - 22 + 1; i-- > 0;) {
        if (tc_le32(buf + i) != SIG_EOCD)
            continue;
        unsigned comment = tc_le16(buf + i + 20);
        uint64_t end = i + 22 + comment;
        if (end != tail) {
            free(buf);
            return tc_fail(d, TC_ERR_FORMAT,
                           "zip: the last end record (offset %llu) has a %u-byte comment but %llu bytes follow it "
                           "(trailing data, or a record hidden in a comment: readers would disagree)",
                           (unsigned long long)(s->size - tail + i), comment, (unsigned long long)(tail - i - 22));
        }
        memcpy(rec, buf + i, 22);
        *eocd = s->size - tail + i;
        free(buf);
        return 0;
    }
    free(buf);
    return tc_fail(d, TC_ERR_FORMAT,
                   "zip: no end-of-central-directory record in the last %llu bytes (file truncated, "
                   "e.g. an incomplete download?)",
                   (unsigned long long)tail);
}

static int cmp_off(const void *a, const void *b)
{
    const tc_zip_entry *x = *(tc_zip_entry *const *)a, *y = *(tc_zip_entry *const *)b;
    return x->lfh_off < y->lfh_off ? -1 : x->lfh_off > y->lfh_off;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(tc_zip_entry *const *)a)->name, (*(tc_zip_entry *const *)b)->name);
}

static int check_name(const char *name, tc_diag *d)
{
    if (name[0] == '/' || name[0] == '\\')
        return tc_fail(d, TC_ERR_FORMAT, "zip: entry name '%s' is an absolute path", name);
    for (const char *p = name; *p;) {
        const char *q = p + strcspn(p, "/\\");
        if (q - p == 2 && p[0] == '.' && p[1] == '.')
            return tc_fail(d, TC_ERR_FORMAT, "zip: entry name '%s' contains '..'", name);
        p = *q ? q + 1 : q;
    }
    return 0;
}

/* Validate local headers, bounds, overlaps and duplicates. */
static int check_entries(tc_zip *z, tc_diag *d)
{
    int rc = 0;
    tc_zip_entry **v = malloc((z->n ? z->n : 1) * sizeof *v);
    if (!v)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < z->n; i++) {
        tc_zip_entry *e = &z->e[i];
        v[i] = e;
        uint8_t h[30];
        if ((rc = tc_src_read(z->src, e->lfh_off, h, 30, e->name, d)))
            goto done;
        if (tc_le32(h) != SIG_LFH) {
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "zip: %s: no local header at offset %llu (the central directory lies)",
                         e->name, (unsigned long long)e->lfh_off);
            goto done;
        }
        e->data_off = e->lfh_off + 30 + tc_le16(h + 26) + tc_le16(h + 28);
        if (e->data_off > z->cd_off || e->csize > z->cd_off - e->data_off) {
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "zip: %s: data at offset %llu of %llu bytes runs past the central directory "
                         "at %llu (truncated or corrupt)",
                         e->name, (unsigned long long)e->data_off, (unsigned long long)e->csize,
                         (unsigned long long)z->cd_off);
            goto done;
        }
        if (e->method != 0 && e->method != 8) {
            rc = tc_fail(d, TC_ERR_UNSUPPORTED, "zip: %s: compression method %u (only stored and deflated)",
                         e->name, e->method);
            goto done;
        }
        if (e->method == 8 && e->usize > e->csize * 1032 + 1024) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: %s: claims to inflate %llu bytes to %llu, beyond deflate's limit",
                         e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
            goto done;
        }
        if (e->method == 0 && e->csize != e->usize) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: %s: stored record with sizes %llu and %llu", e->name,
                         (unsigned long long)e->csize, (unsigned long long)e->usize);
            goto done;
        }
        if (e->flags & 1) {
            rc = tc_fail(d, TC_ERR_UNSUPPORTED, "zip: %s: encrypted entries are not supported", e->name);
            goto done;
        }
    }
    qsort(v, z->n, sizeof *v, cmp_off);
    for (size_t i = 1; i < z->n; i++) {
        if (v[i]->lfh_off < v[i - 1]->data_off + v[i - 1]->csize) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: entries %s and %s overlap (offsets %llu and %llu)",
                         v[i - 1]->name, v[i]->name, (unsigned long long)v[i - 1]->lfh_off,
                         (unsigned long long)v[i]->lfh_off);
            goto done;
        }
    }
    qsort(v, z->n, sizeof *v, cmp_name);
    for (size_t i = 1; i < z->n; i++)
        if (!strcmp(v[i]->name, v[i - 1]->name)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: duplicate entry name '%s'", v[i]->name);
            goto done;
        }
done:
    free(v);
    return rc;
}

int tc_zip_open(tc_zip *z, const tc_src *src, const tc_zip_limits *lim, tc_diag *d)
{
    memset(z, 0, sizeof *z);
    z->src = src;
    uint8_t eocd[22] = {0};
    uint64_t eocd_off = 0;
    int rc = find_eocd(src, &eocd_off, eocd, d);
    if (rc)
        return rc;
    uint64_t n = tc_le16(eocd + 10);
    z->cd_size = tc_le32(eocd + 12);
    z->cd_off = tc_le32(eocd + 16);
    if (eocd_off >= 20) {
        uint8_t loc[20];
        if ((rc = tc_src_read(src, eocd_off - 20, loc, 20, "zip64 locator", d)))
            return rc;
        if (tc_le32(loc) == SIG_Z64_LOC) {
            uint64_t z64 = tc_le64(loc + 8);
            uint8_t r[56];
            if ((rc = tc_src_read(src, z64, r, 56, "zip64 end record", d)))
                return rc;
            if (tc_le32(r) != SIG_Z64_EOCD)
                return tc_fail(d, TC_ERR_FORMAT, "zip: zip64 locator points to %llu, where no zip64 end "
                               "record is", (unsigned long long)z64);
            n = tc_le64(r + 32);
            z->cd_size = tc_le64(r + 40);
            z->cd_off = tc_le64(r + 48);
            z->zip64 = true;
            eocd_off = z64;
        }
    }
    if (z->cd_off > eocd_off || z->cd_size > eocd_off - z->cd_off)
        return tc_fail(d, TC_ERR_FORMAT,
                       "zip: central directory (offset %llu, %llu bytes) lies outside the file (truncated?)",
                       (unsigned long long)z->cd_off, (unsigned long long)z->cd_size);
    if (n > lim->max_entries)
        return tc_fail(d, TC_ERR_LIMIT, "zip: %llu entries, more than the limit of %llu (raise with --max-entries)",
                       (unsigned long long)n, (unsigned long long)lim->max_entries);
    if (n > z->cd_size / 46)
        return tc_fail(d, TC_ERR_FORMAT, "zip: %llu entries cannot fit in a central directory of %llu bytes",
                       (unsigned long long)n, (unsigned long long)z->cd_size);
    uint8_t *cd = malloc(z->cd_size ? z->cd_size : 1);
    z->e = calloc(n ? n : 1, sizeof *z->e);
    if (!cd || !z->e) {
        free(cd);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    if ((rc = tc_src_read(src, z->cd_off, cd, z->cd_size, "central directory", d))) {
        free(cd);
        return rc;
    }
    uint64_t p = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (z->cd_size - p < 46 || tc_le32(cd + p) != SIG_CDH) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: central directory entry %llu at offset %llu is corrupt",
                         (unsigned long long)i, (unsigned long long)(z->cd_off + p));
            break;
        }
        const uint8_t *h = cd + p;
        size_t nl = tc_le16(h + 28), xl = tc_le16(h + 30), cl = tc_le16(h + 32);
        if (z->cd_size - p - 46 < nl + xl + cl) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: central directory entry %llu runs past its end",
                         (unsigned long long)i);
            break;
        }
        tc_zip_entry *e = &z->e[z->n];
        e->flags = tc_le16(h + 8);
        e->method = tc_le16(h + 10);
        e->crc = tc_le32(h + 16);
        e->csize = tc_le32(h + 20);
        e->usize = tc_le32(h + 24);
        e->lfh_off = tc_le32(h + 42);
        if (!(e->name = malloc(nl + 1))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        z->n++;
        memcpy(e->name, h + 46, nl);
        e->name[nl] = 0;
        if (memchr(e->name, 0, nl)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "zip: entry %llu has a NUL byte in its name", (unsigned long long)i);
            break;
        }
        /* ZIP64 extra: present fields in order usize, csize, offset, for those at 0xFFFFFFFF */
        const uint8_t *x = h + 46 + nl, *xe = x + xl;
        while (xe - x >= 4) {
            uint16_t id = tc_le16(x), len = tc_le16(x + 2);
            if ((size_t)(xe - x - 4) < len)
                break;
            if (id == 1) {
                const uint8_t *f = x + 4, *fe = f + len;
                if (e->usize == 0xFFFFFFFFu && fe - f >= 8) {
                    e->usize = tc_le64(f);
                    f += 8;
                }
                if (e->csize == 0xFFFFFFFFu && fe - f >= 8) {
                    e->csize = tc_le64(f);
                    f += 8;
                }
                if (e->lfh_off == 0xFFFFFFFFu && fe - f >= 8)
                    e->lfh_off = tc_le64(f);
            }
            x += 4 + len;
        }
        if ((rc = check_name(e->name, d)))
            break;
        p += 46 + nl + xl + cl;
    }
    free(cd);
    if (!rc)
        rc = check_entries(z, d);
    if (rc)
        tc_zip_free(z);
    return rc;
}

void tc_zip_free(tc_zip *z)
{
    if (!z)
        return;
    for (size_t i = 0; i < z->n; i++)
        free(z->e[i].name);
    free(z->e);
    z->e = NULL;
    z->n = 0;
}

const tc_zip_entry *tc_zip_find(const tc_zip *z, const char *name)
{
    for (size_t i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name))
            return &z->e[i];
    return NULL;
}

#define CBUF 65536

int tc_zip_rd_open(tc_zip_rd *r, const tc_zip *z, const tc_zip_entry *e, tc_diag *d)
{
    memset(r, 0, sizeof *r);
    r->z = z;
    r->e = e;
    r->crc = (uint32_t)crc32(0, NULL, 0);
    if (e->method == 8) {
        z_stream *zs = calloc(1, sizeof *zs);
        r->cbuf = malloc(CBUF);
        if (!zs || !r->cbuf || inflateInit2(zs, -MAX_WBITS) != Z_OK) {
            free(zs);
            free(r->cbuf);
            r->cbuf = NULL;
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        r->zs = zs;
    }
    return 0;
}

int tc_zip_rd_read(tc_zip_rd *r, void *buf, size_t n, size_t *got, bool check_crc, tc_diag *d)
{
    const tc_zip_entry *e = r->e;
    uint64_t left = e->usize - r->done;
    if (n > left)
        n = (size_t)left;
    *got = 0;
    if (n == 0) {
        if (check_crc && r->crc != e->crc && !(e->crc == 0 && e->usize == 0))
            return tc_fail(d, TC_ERR_FORMAT,
                           "zip: %s: CRC-32 is %08x but the central directory says %08x (data corrupted)",
                           e->name, r->crc, e->crc);
        return 0;
    }
    if (e->method == 0) {
        int rc = tc_src_read(r->z->src, e->data_off + r->done, buf, n, e->name, d);
        if (rc)
            return rc;
    } else {
        z_stream *zs = r->zs;
        zs->next_out = buf;
        zs->avail_out = (uInt)(n > (1u << 30) ? (1u << 30) : n);
        n = zs->avail_out;
        while (zs->avail_out) {
            if (zs->avail_in == 0) {
                uint64_t cl = e->csize - r->cpos;
                size_t k = cl < CBUF ? (size_t)cl : CBUF;
                if (k == 0)
                    return tc_fail(d, TC_ERR_FORMAT, "zip: %s: deflated data ends early (corrupt)", e->name);
                int rc = tc_src_read(r->z->src, e->data_off + r->cpos, r->cbuf, k, e->name, d);
                if (rc)
                    return rc;
                r->cpos += k;
                zs->next_in = r->cbuf;
                zs->avail_in = (uInt)k;
            }
            int zr = inflate(zs, Z_NO_FLUSH);
            if (zr == Z_STREAM_END && zs->avail_out)
                return tc_fail(d, TC_ERR_FORMAT,
                               "zip: %s: inflates to fewer bytes than the %llu the directory says", e->name,
                               (unsigned long long)e->usize);
            if (zr != Z_OK && zr != Z_STREAM_END)
                return tc_fail(d, TC_ERR_FORMAT, "zip: %s: corrupt deflate data (%s)", e->name,
                               zs->msg ? zs->msg : "inflate failed");
        }
    }
    r->crc = (uint32_t)crc32(r->crc, buf, (uInt)n);
    r->done += n;
    *got = n;
    return 0;
}

void tc_zip_rd_close(tc_zip_rd *r)
{
    if (r && r->zs) {
        inflateEnd(r->zs);
        free(r->zs);
        r->zs = NULL;
    }
    if (r) {
        free(r->cbuf);
        r->cbuf = NULL;
    }
}

int tc_zip_read_all(const tc_zip *z, const tc_zip_entry *e, uint64_t max, uint8_t **out, size_t *len,
                    tc_diag *d)
{
    if (e->usize > max)
        return tc_fail(d, TC_ERR_LIMIT, "zip: %s: %llu bytes, more than the limit of %llu", e->name,
                       (unsigned long long)e->usize, (unsigned long long)max);
    if (e->method == 8 && e->usize > e->csize * 1032 + 1024)
        return tc_fail(d, TC_ERR_FORMAT, "zip: %s: claims to inflate %llu bytes to %llu, beyond deflate's limit",
                       e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
    uint8_t *buf = malloc(e->usize ? e->usize : 1);
    if (!buf)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory reading %s", e->name);
    tc_zip_rd r;
    int rc = tc_zip_rd_open(&r, z, e, d);
    size_t got = 0, total = 0;
    while (!rc) {
        rc = tc_zip_rd_read(&r, buf + total, (size_t)(e->usize - total), &got, true, d);
        if (!rc && got == 0)
            break;
        total += got;
    }
    tc_zip_rd_close(&r);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = total;
    return 0;
}
