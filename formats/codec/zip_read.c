/* The zip reader, as torch's miniz reads (zip.h): each check below is one of
 * mz_zip_reader_init's, mz_zip_reader_file_stat's or
 * mz_zip_reader_extract_to_mem's, in their order, with the same arithmetic;
 * the messages say what torch's reader would do. */
#include "zip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "map.h"

#define SIG_LFH 0x04034b50u
#define SIG_CDH 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_Z64_EOCD 0x06064b50u
#define SIG_Z64_LOC 0x07064b50u
#define U32MAX 0xFFFFFFFFu

/* miniz's mz_zip_reader_locate_header_sig: blocks of 4096 bytes from the end,
 * each overlapping the next by 3, searched backwards for the last signature
 * with 22 bytes after it; the search stops once a block starting 65557 bytes
 * or more before the end was searched. When stepping back would go below
 * byte 0 from a block that does not start there, miniz's offset arithmetic
 * wraps and its next read fails: the record is not found. */
static int find_eocd(const tc_src *s, uint64_t *eocd, tc_diag *d)
{
    uint8_t buf[4096];
    uint64_t size = s->size, cur = size > sizeof buf ? size - sizeof buf : 0;
    if (size < 22)
        return tc_fail(d, TC_ERR_FORMAT, "zip: file of %llu bytes is too small to be a zip (truncated?)",
                       (unsigned long long)size);
    for (;;) {
        size_t n = size - cur < sizeof buf ? (size_t)(size - cur) : sizeof buf;
        int rc = tc_src_read(s, cur, buf, n, "zip end record", d);
        if (rc)
            return rc;
        for (size_t lim = n - 3; lim;) { /* the last signature in buf[0, n - 3), by its first byte */
            const uint8_t *p = memrchr(buf, SIG_EOCD & 0xff, lim);
            if (!p)
                break;
            lim = (size_t)(p - buf);
            if (tc_le32(p) == SIG_EOCD && size - (cur + lim) >= 22) {
                *eocd = cur + lim;
                return 0;
            }
        }
        if (!cur || size - cur >= 65535 + 22 || cur < sizeof buf - 3)
            break;
        cur -= sizeof buf - 3;
    }
    return tc_fail(d, TC_ERR_FORMAT,
                   "zip: no end-of-central-directory record in the last %llu bytes, where torch's reader looks for "
                   "one (file truncated, e.g. an incomplete download?)",
                   (unsigned long long)(size - cur));
}

static uint8_t lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c; }

/* mz_zip_reader_filename_less */
static bool name_less(const tc_zip_entry *l, const tc_zip_entry *r)
{
    size_t n = l->nlen < r->nlen ? l->nlen : r->nlen, i = 0;
    uint8_t a = 0, b = 0;
    for (; i < n; i++)
        if ((a = lower((uint8_t)l->name[i])) != (b = lower((uint8_t)r->name[i])))
            break;
    return i == n ? l->nlen < r->nlen : a < b;
}

/* mz_zip_reader_sort_central_dir_offsets_by_filename: its heap sort, step
 * for step, since which of two equal names a lookup lands on depends on it. */
static void heap_sort(const tc_zip_entry *e, uint32_t *v, uint32_t size)
{
    if (size <= 1)
        return;
    for (uint32_t start = (size - 2) >> 1;; start--) {
        for (uint64_t root = start, child; (child = (root << 1) + 1) < size; root = child) {
            child += child + 1 < size && name_less(&e[v[child]], &e[v[child + 1]]);
            if (!name_less(&e[v[root]], &e[v[child]]))
                break;
            uint32_t t = v[root];
            v[root] = v[child];
            v[child] = t;
        }
        if (!start)
            break;
    }
    for (uint32_t end = size - 1; end > 0; end--) {
        uint32_t t = v[end];
        v[end] = v[0];
        v[0] = t;
        for (uint64_t root = 0, child; (child = (root << 1) + 1) < end; root = child) {
            child += child + 1 < end && name_less(&e[v[child]], &e[v[child + 1]]);
            if (!name_less(&e[v[root]], &e[v[child]]))
                break;
            t = v[root];
            v[root] = v[child];
            v[child] = t;
        }
    }
}

/* mz_zip_filename_compare */
static int name_cmp(const tc_zip_entry *l, const char *r, size_t rlen)
{
    size_t n = l->nlen < rlen ? l->nlen : rlen, i = 0;
    uint8_t a = 0, b = 0;
    for (; i < n; i++)
        if ((a = lower((uint8_t)l->name[i])) != (b = lower((uint8_t)r[i])))
            break;
    if (i == n)
        return l->nlen < rlen ? -1 : l->nlen > rlen;
    return a < b ? -1 : 1;
}

/* mz_zip_locate_file_binary_search */
const tc_zip_entry *tc_zip_find(const tc_zip *z, const char *name)
{
    size_t len = strlen(name);
    int64_t l = 0, h = (int64_t)z->n - 1;
    while (z->sorted && l <= h) {
        int64_t m = l + ((h - l) >> 1);
        const tc_zip_entry *e = &z->e[z->sorted[m]];
        int c = name_cmp(e, name, len);
        if (!c)
            return e;
        if (c < 0)
            l = m + 1;
        else
            h = m - 1;
    }
    return NULL;
}

void tc_zip_listed_name(const tc_zip_entry *e, char out[512])
{
    size_t n = e->nlen < 511 ? e->nlen : 511;
    memcpy(out, e->name, n);
    out[n] = 0;
}

static void lower_str(char *s)
{
    for (; *s; s++)
        *s = (char)lower((uint8_t)*s);
}

int tc_zip_confusable(const tc_zip *z, size_t *a, size_t *b)
{
    /* equal ignoring case: neighbours in miniz's order */
    for (size_t i = 1; i < z->n; i++) {
        const tc_zip_entry *x = &z->e[z->sorted[i - 1]], *y = &z->e[z->sorted[i]];
        if (!name_cmp(x, y->name, y->nlen)) {
            *a = z->sorted[i - 1] < z->sorted[i] ? z->sorted[i - 1] : z->sorted[i];
            *b = z->sorted[i - 1] < z->sorted[i] ? z->sorted[i] : z->sorted[i - 1];
            return 1;
        }
    }
    /* listed cut short (a NUL, or past 511 bytes): the short name found as another entry, or listed twice */
    tc_map seen = {0};
    char *keys = NULL;
    size_t nk = 0;
    int rc = 0;
    for (size_t i = 0; i < z->n && !rc; i++) {
        if (strlen(z->e[i].name) == z->e[i].nlen && z->e[i].nlen < 512)
            continue;
        if (!keys && !(keys = malloc(z->n * 512))) {
            rc = -1;
            break;
        }
        char *k = keys + nk++ * 512;
        tc_zip_listed_name(&z->e[i], k);
        const tc_zip_entry *f = tc_zip_find(z, k);
        lower_str(k);
        uint64_t old;
        int put = tc_map_put(&seen, k, strlen(k), i, &old);
        if (put < 0) {
            rc = -1;
        } else if (f || !put) {
            size_t j = f ? (size_t)(f - z->e) : (size_t)old;
            *a = j < i ? j : i;
            *b = j < i ? i : j;
            rc = 1;
        }
    }
    tc_map_free(&seen);
    free(keys);
    return rc;
}

/* mz_zip_file_stat_internal's ZIP64 fields: for each of the sizes and the
 * offset at 0xFFFFFFFF, 8 bytes of the first 0x0001 extra field, in order.
 * A malformed extra field fails the stat (NULL on success). */
static const char *stat_zip64(tc_zip_entry *e, const uint8_t *x, size_t xl)
{
    if ((e->csize > e->usize ? e->csize : e->usize) < U32MAX && e->lfh_off < U32MAX)
        return NULL;
    while (xl) {
        if (xl < 4)
            return "its extra field is malformed";
        size_t id = tc_le16(x), len = tc_le16(x + 2);
        if (len + 4 > xl)
            return "its extra field is malformed";
        if (id == 1) {
            const uint8_t *f = x + 4;
            uint64_t *field[3] = {&e->usize, &e->csize, &e->lfh_off};
            for (int k = 0; k < 3; k++) {
                if (*field[k] != U32MAX)
                    continue;
                if (len < 8)
                    return "its ZIP64 extra field is too short";
                *field[k] = tc_le64(f);
                f += 8;
                len -= 8;
            }
            return NULL;
        }
        x += 4 + len;
        xl -= 4 + len;
    }
    return NULL;
}

/* One central directory entry h (left bytes of the directory from it on)
 * as one of torch's readers checks it in mz_zip_reader_read_central_dir:
 * NULL, or why it refuses the archive. torch 1.13's miniz 2.1.0 looks for a
 * ZIP64 extra field only until it has seen one (*ext) and checks sizes and
 * offsets with the 32-bit fields; torch 2.x's miniz 3.0.2, as torch patched
 * it, looks in every entry with a field at 0xFFFFFFFF and checks with the
 * values it reads there: 8 bytes each for the fields at 0xFFFFFFFF, taken in
 * order from after the 0x0001 field's header for as long as the extra area
 * (not that field) has 8 bytes left. */
static const char *cd_check(const uint8_t *h, uint64_t left, uint64_t size, unsigned this_disk, bool patched,
                            bool *ext)
{
    uint64_t c = tc_le32(h + 20), u = tc_le32(h + 24), lfh = tc_le32(h + 42);
    size_t nl = tc_le16(h + 28), xl = tc_le16(h + 30), cl = tc_le16(h + 32);
    uint64_t top = c > u ? c : u;
    if ((patched || !*ext) && xl && (top > lfh ? top : lfh) == U32MAX) {
        if (46 + nl + xl > left)
            return "runs past the directory's end";
        const uint8_t *x = h + 46 + nl;
        size_t xr = xl;
        while (xr) {
            if (xr < 4 || (size_t)tc_le16(x + 2) + 4 > xr)
                return "has a malformed extra field";
            if (tc_le16(x) == 1) {
                *ext = true;
                break;
            }
            xr -= 4 + tc_le16(x + 2);
            x += 4 + tc_le16(x + 2);
        }
        if (patched && xr >= 4) {
            xr -= 4;
            x += 4;
            uint64_t *field[3] = {&u, &c, &lfh};
            for (int k = 0; k < 3; k++)
                if (*field[k] == U32MAX && xr >= 8) {
                    *field[k] = tc_le64(x);
                    xr -= 8;
                    x += 8;
                }
        }
    }
    /* miniz reads 32 bits at the method field: method and time both 0 make "stored" */
    if (c != U32MAX && u != U32MAX && ((!tc_le32(h + 10) && u != c) || (u && !c)))
        return "has sizes that contradict its method";
    unsigned disk = tc_le16(h + 34);
    if (disk == 0xFFFF || (disk != this_disk && disk != 1))
        return "lies on another disk of a split archive";
    if (c != U32MAX && lfh + 30 + c > size) /* 64-bit arithmetic that may wrap, as miniz's */
        return "has data that runs past the end of the file (truncated or corrupt)";
    if (tc_le16(h + 8) & 0x2000)
        return "is encrypted";
    if (46 + nl + xl + cl > left)
        return "runs past the directory's end";
    return NULL;
}

/* The bytes the names of the first n entries of the directory cd take, a NUL
 * after each: at most the directory's size and n more (a corrupt entry ends
 * the count, and read_entries then fails on it). */
static size_t names_bytes(const uint8_t *cd, uint64_t cd_size, uint64_t n)
{
    size_t total = 0;
    for (uint64_t i = 0, p = 0; i < n && cd_size - p >= 46; i++) {
        const uint8_t *h = cd + p;
        size_t nl = tc_le16(h + 28);
        total += nl + 1;
        p += 46 + nl + tc_le16(h + 30) + tc_le16(h + 32);
        if (p > cd_size)
            break;
    }
    return total;
}

/* mz_zip_reader_read_central_dir's loop over the entries, as each reader
 * asked for checks it (z->readers keeps those that accept), then each entry
 * as mz_zip_reader_file_stat describes it. */
static int read_entries(tc_zip *z, const uint8_t *cd, uint64_t n, unsigned this_disk, tc_diag *d)
{
    z->names_cap = names_bytes(cd, z->cd_size, n);
    if (!(z->names = malloc(z->names_cap ? z->names_cap : 1)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    uint64_t size = z->src->size, left = z->cd_size, p = 0;
    bool ext[2] = {false, false}; /* each reader's m_zip64_has_extended_info_fields */
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *h = cd + p;
        uint64_t at = z->cd_off + p;
        if (left < 46 || tc_le32(h) != SIG_CDH)
            return tc_fail(d, TC_ERR_FORMAT, "zip: central directory entry %llu at offset %llu is corrupt",
                           (unsigned long long)i, (unsigned long long)at);
        const char *why = NULL;
        for (int v = 0; v < 2; v++) {
            if (!(z->readers & (1u << v)))
                continue;
            const char *w = cd_check(h, left, size, this_disk, v == 1, &ext[v]);
            if (w) {
                z->readers &= ~(1u << v);
                why = why ? why : w;
            }
        }
        if (!z->readers)
            return tc_fail(d, strstr(why, "encrypted") || strstr(why, "disk") ? TC_ERR_UNSUPPORTED : TC_ERR_FORMAT,
                           "zip: central directory entry %llu at offset %llu %s (torch's reader refuses the archive)",
                           (unsigned long long)i, (unsigned long long)at, why);
        z->zip64 |= ext[0] || ext[1];
        size_t nl = tc_le16(h + 28), xl = tc_le16(h + 30), cl = tc_le16(h + 32);
        tc_zip_entry *e = &z->e[z->n];
        if (nl + 1 > z->names_cap - z->names_len)
            return tc_fail(d, TC_ERR_FORMAT, "zip: central directory entry %llu at offset %llu is corrupt",
                           (unsigned long long)i, (unsigned long long)at);
        e->name = z->names + z->names_len;
        z->names_len += nl + 1;
        z->n++;
        memcpy(e->name, h + 46, nl);
        e->name[nl] = 0;
        e->nlen = nl;
        e->flags = tc_le16(h + 8);
        e->method = tc_le16(h + 10);
        e->crc = tc_le32(h + 16);
        e->csize = tc_le32(h + 20);
        e->usize = tc_le32(h + 24);
        e->lfh_off = tc_le32(h + 42);
        e->dir = (nl && e->name[nl - 1] == '/') || (tc_le32(h + 38) & 0x10);
        e->bad = stat_zip64(e, h + 46 + nl, xl);
        /* mz_zip_reader_file_stat records these as errors (is_file_supported), which torch's reader checks
         * after every stat: the record cannot be read, not even as empty */
        if (!e->bad && e->method != 0 && e->method != 8)
            e->bad = "its compression method is neither stored nor deflate (torch's reader fails on it)";
        if (!e->bad && (e->flags & 0x61))
            e->bad = "it is encrypted or a patch (torch's reader fails on it)";
        p += 46 + nl + xl + cl;
        left -= 46 + nl + xl + cl;
    }
    return 0;
}

/* Where a record's data lies, from the 30 bytes h of its local header
 * (mz_zip_reader_extract_to_mem's reading of it), or why torch cannot read it. */
static void locate_data(const tc_zip *z, tc_zip_entry *e, const uint8_t *h)
{
    uint64_t size = z->src->size;
    if (tc_le32(h) != SIG_LFH) {
        e->bad = "the central directory lies: no local header where it points";
        return;
    }
    e->data_off = e->lfh_off + 30 + tc_le16(h + 26) + tc_le16(h + 28);
    uint64_t span = e->method ? e->csize : e->usize; /* stored: miniz reads the uncompressed size */
    if (e->data_off > size || e->csize > size - e->data_off || span > size - e->data_off)
        e->bad = "its data runs past the end of the file (truncated or corrupt)";
}

static int cmp_off(const void *a, const void *b)
{
    const tc_zip_entry *x = *(tc_zip_entry *const *)a, *y = *(tc_zip_entry *const *)b;
    return x->lfh_off < y->lfh_off ? -1 : x->lfh_off > y->lfh_off;
}

/* The local headers are read in offset order, each read taking the next
 * ones while they lie within LFH_WINDOW bytes of its start and fewer than
 * LFH_GAP bytes (a record's data) lie between one and the next: one read for
 * many small records, 30 bytes for each of a few large ones, and never the
 * data of a record of pages read only to pass over it. */
#define LFH_WINDOW 65536
#define LFH_GAP 4096

/* Every record's data located (v: the k records that are read from the file, sorted by offset). */
static int locate_all(tc_zip *z, tc_zip_entry **v, size_t k, tc_diag *d)
{
    uint64_t size = z->src->size, wbeg = 0, wend = 0;
    uint8_t *buf = NULL;
    int rc = 0;
    for (size_t i = 0; i < k && !rc; i++) {
        tc_zip_entry *e = v[i];
        if (e->lfh_off > size || size - e->lfh_off < 30) {
            e->bad = "its local header lies past the end of the file (torch's reader fails on it)";
            continue;
        }
        if (e->lfh_off < wbeg || e->lfh_off + 30 > wend) {
            if (!buf && !(buf = malloc(LFH_WINDOW))) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                break;
            }
            wbeg = e->lfh_off;
            wend = wbeg + 30;
            for (size_t j = i + 1; j < k && v[j]->lfh_off + 30 <= wbeg + LFH_WINDOW && v[j]->lfh_off < wend + LFH_GAP;
                 j++)
                if (v[j]->lfh_off + 30 <= size)
                    wend = v[j]->lfh_off + 30;
            rc = tc_src_read(z->src, wbeg, buf, (size_t)(wend - wbeg), e->name, d);
            if (rc)
                break;
        }
        locate_data(z, e, buf + (e->lfh_off - wbeg));
    }
    free(buf);
    return rc;
}

/* Beyond torch: no two readable entries share bytes, so that the records
 * read (and written again) add up to at most the file's size (v: the k
 * records read from the file, sorted by offset). */
static int check_overlaps(tc_zip_entry **v, size_t k, tc_diag *d)
{
    const tc_zip_entry *prev = NULL;
    for (size_t i = 0; i < k; i++) {
        if (v[i]->bad)
            continue;
        if (prev) {
            uint64_t end = prev->data_off + (prev->method ? prev->csize : prev->usize);
            if (v[i]->lfh_off < end)
                return tc_fail(d, TC_ERR_FORMAT,
                               "zip: entries %s and %s overlap (offsets %llu and %llu): one span of bytes read as two "
                               "records",
                               prev->name, v[i]->name, (unsigned long long)prev->lfh_off,
                               (unsigned long long)v[i]->lfh_off);
        }
        prev = v[i];
    }
    return 0;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const tc_zip_entry *e = ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (name_less(&e[x], &e[y]))
        return -1;
    if (name_less(&e[y], &e[x]))
        return 1;
    return x < y ? -1 : x > y;
}

/* z->sorted in miniz's order. Where no two names are equal ignoring case,
 * every sort gives the one order miniz's heap sort gives, and a merge sort
 * takes half its comparisons; where two are, miniz's heap sort decides which
 * comes first, and runs step for step. */
static void sort_names(tc_zip *z)
{
    uint32_t n = (uint32_t)z->n;
    for (uint32_t i = 0; i < n; i++)
        z->sorted[i] = i;
    qsort_r(z->sorted, n, sizeof *z->sorted, cmp_name, z->e);
    for (uint32_t i = 1; i < n; i++)
        if (!name_less(&z->e[z->sorted[i - 1]], &z->e[z->sorted[i]])) {
            for (uint32_t j = 0; j < n; j++)
                z->sorted[j] = j;
            heap_sort(z->e, z->sorted, n);
            return;
        }
}

int tc_zip_open(tc_zip *z, const tc_src *src, const tc_zip_limits *lim, tc_diag *d)
{
    memset(z, 0, sizeof *z);
    z->src = src;
    z->readers = lim->readers ? lim->readers & TC_ZIP_ANY_TORCH : TC_ZIP_ANY_TORCH;
    uint64_t eocd_off = 0, size = src->size;
    uint8_t eocd[22], loc[20], r[56];
    int rc = find_eocd(src, &eocd_off, d);
    if (rc || (rc = tc_src_read(src, eocd_off, eocd, 22, "zip end record", d)))
        return rc;
    bool z64 = false;
    if (eocd_off >= 20 + 56 && (rc = tc_src_read(src, eocd_off - 20, loc, 20, "zip64 locator", d)))
        return rc;
    if (eocd_off >= 20 + 56 && tc_le32(loc) == SIG_Z64_LOC) {
        uint64_t at = tc_le64(loc + 8);
        if (at > size - 56)
            return tc_fail(d, TC_ERR_FORMAT, "zip: the zip64 locator points to offset %llu, past the end of the file",
                           (unsigned long long)at);
        if ((rc = tc_src_read(src, at, r, 56, "zip64 end record", d)))
            return rc;
        z64 = tc_le32(r) == SIG_Z64_EOCD; /* miniz ignores a locator pointing elsewhere */
    }
    uint64_t n = tc_le16(eocd + 10), on_disk = tc_le16(eocd + 8), this_disk = tc_le16(eocd + 4),
             cd_disk = tc_le16(eocd + 6);
    z->cd_size = tc_le32(eocd + 12);
    z->cd_off = tc_le32(eocd + 16);
    if (z64) {
        if (tc_le64(r + 4) < 44)
            return tc_fail(d, TC_ERR_FORMAT, "zip: the zip64 end record is too short");
        if (tc_le32(loc + 16) != 1)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "zip: a split archive (zip64 locator: %lu disks)",
                           (unsigned long)tc_le32(loc + 16));
        if (tc_le64(r + 32) > U32MAX || tc_le64(r + 24) > U32MAX)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "zip: more than 4294967295 entries");
        if (tc_le64(r + 40) > U32MAX)
            return tc_fail(d, TC_ERR_FORMAT, "zip: a central directory of 4 GiB or more");
        n = tc_le64(r + 32);
        on_disk = tc_le64(r + 24);
        z->cd_size = tc_le64(r + 40);
        this_disk = tc_le32(r + 16);
        cd_disk = tc_le32(r + 20);
        z->cd_off = tc_le64(r + 48);
        z->zip64 = true;
    }
    if (n != on_disk || ((this_disk | cd_disk) && (this_disk != 1 || cd_disk != 1)))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "zip: a split archive (entries on other disks)");
    if (z->cd_size < n * 46)
        return tc_fail(d, TC_ERR_FORMAT, "zip: %llu entries cannot fit in a central directory of %llu bytes",
                       (unsigned long long)n, (unsigned long long)z->cd_size);
    if (z->cd_off > size || z->cd_size > size - z->cd_off)
        return tc_fail(d, TC_ERR_FORMAT,
                       "zip: central directory (offset %llu, %llu bytes) lies outside the file (truncated?)",
                       (unsigned long long)z->cd_off, (unsigned long long)z->cd_size);
    if (n > lim->max_entries)
        return tc_fail(d, TC_ERR_LIMIT, "zip: %llu entries, more than the limit of %llu (raise with --max-entries)",
                       (unsigned long long)n, (unsigned long long)lim->max_entries);
    tc_zip_entry **v = NULL;
    uint8_t *cd = malloc(z->cd_size ? z->cd_size : 1);
    z->e = calloc(n ? n : 1, sizeof *z->e);
    z->sorted = malloc((n ? n : 1) * sizeof *z->sorted);
    if (!cd || !z->e || !z->sorted) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((n && (rc = tc_src_read(src, z->cd_off, cd, z->cd_size, "central directory", d))) ||
        (rc = read_entries(z, cd, n, (unsigned)this_disk, d)))
        goto fail;
    free(cd);
    cd = NULL;
    /* the records read from the file, by offset (nothing is read of the others) */
    if (!(v = malloc((z->n ? z->n : 1) * sizeof *v))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t k = 0;
    for (size_t i = 0; i < z->n; i++)
        if (!z->e[i].bad && !z->e[i].dir && z->e[i].csize)
            v[k++] = &z->e[i];
    qsort(v, k, sizeof *v, cmp_off);
    if ((rc = locate_all(z, v, k, d)) || (rc = check_overlaps(v, k, d)))
        goto fail;
    free(v);
    sort_names(z);
    return 0;
fail:
    free(cd);
    free(v);
    tc_zip_free(z);
    return rc;
}

void tc_zip_free(tc_zip *z)
{
    if (!z)
        return;
    free(z->names);
    free(z->e);
    free(z->sorted);
    z->names = NULL;
    z->e = NULL;
    z->sorted = NULL;
    z->n = 0;
}

#define CBUF 65536

const char *tc_zip_unreadable(const tc_zip_entry *e)
{
    if (e->bad)
        return e->bad;
    if ((e->dir || !e->csize) && e->usize)
        return e->dir ? "a directory entry that claims bytes: torch hands out that many bytes it never wrote "
                        "(uninitialised memory)"
                      : "a record with no compressed data that claims bytes: torch hands out that many bytes it "
                        "never wrote (uninitialised memory)";
    if (e->method == 8 && e->usize > e->csize * 1032 + 1024)
        return "it claims to inflate to more bytes than deflate's limit from its compressed size (beyond deflate's "
               "limit)";
    return NULL;
}

int tc_zip_rd_open(tc_zip_rd *r, const tc_zip *z, const tc_zip_entry *e, tc_diag *d)
{
    memset(r, 0, sizeof *r);
    r->z = z;
    r->e = e;
    r->crc = (uint32_t)crc32(0, NULL, 0);
    const char *why = tc_zip_unreadable(e);
    if (why)
        return tc_fail(d, TC_ERR_FORMAT, "zip: %s: %s", e->name, why);
    if (e->method == 8 && !e->dir && e->csize) {
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

/* More compressed bytes for r's inflate state, when it has none left: 0, or
 * 1 when the record's compressed bytes are all read. */
static int refill(tc_zip_rd *r, tc_diag *d)
{
    z_stream *zs = r->zs;
    const tc_zip_entry *e = r->e;
    if (zs->avail_in)
        return 0;
    uint64_t cl = e->csize - r->cpos;
    size_t k = cl < CBUF ? (size_t)cl : CBUF;
    if (k == 0)
        return 1;
    int rc = tc_src_read(r->z->src, e->data_off + r->cpos, r->cbuf, k, e->name, d);
    if (rc)
        return rc;
    r->cpos += k;
    zs->next_in = r->cbuf;
    zs->avail_in = (uInt)k;
    return 0;
}

int tc_zip_rd_read(tc_zip_rd *r, void *buf, size_t n, size_t *got, bool check_crc, tc_diag *d)
{
    const tc_zip_entry *e = r->e;
    uint64_t left = e->usize - r->done;
    if (n > left)
        n = (size_t)left;
    *got = 0;
    int rc;
    if (n == 0) {
        /* what follows the directory's uncompressed size in the stream is never looked at: miniz inflates into
         * a buffer of exactly that size and takes it once it is full, whatever tinfl says next */
        if (check_crc && r->crc != e->crc && !(e->crc == 0 && e->usize == 0))
            return tc_fail(d, TC_ERR_FORMAT,
                           "zip: %s: CRC-32 is %08x but the central directory says %08x (data corrupted; torch does "
                           "not check, and would load the corrupted bytes)",
                           e->name, r->crc, e->crc);
        return 0;
    }
    if (e->method == 0) {
        if ((rc = tc_src_read(r->z->src, e->data_off + r->done, buf, n, e->name, d)))
            return rc;
    } else {
        z_stream *zs = r->zs;
        zs->next_out = buf;
        zs->avail_out = (uInt)(n > (1u << 30) ? (1u << 30) : n);
        n = zs->avail_out;
        while (zs->avail_out) {
            if ((rc = refill(r, d)) < 0)
                return rc;
            if (rc)
                return tc_fail(d, TC_ERR_FORMAT,
                               "zip: %s: deflated data ends early (corrupt): torch would hand out bytes it never wrote",
                               e->name);
            int zr = inflate(zs, Z_NO_FLUSH);
            if (zr == Z_STREAM_END && zs->avail_out)
                return tc_fail(d, TC_ERR_FORMAT,
                               "zip: %s: inflates to fewer bytes than the %llu the directory says", e->name,
                               (unsigned long long)e->usize);
            /* torch's reader ignores tinfl's failures (miniz records no error for them), and hands out its
             * buffer as far as it was written and whatever memory held after that: refused here */
            if (zr != Z_OK && zr != Z_STREAM_END)
                return tc_fail(d, TC_ERR_FORMAT,
                               "zip: %s: corrupt deflate data (%s): torch would hand out bytes it never wrote",
                               e->name, zs->msg ? zs->msg : "inflate failed");
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

/* The first want bytes of e (its whole when want is its size) into a new buffer. */
static int read_start(const tc_zip *z, const tc_zip_entry *e, uint64_t want, bool check_crc, uint8_t **out,
                      size_t *len, tc_diag *d)
{
    tc_zip_rd r;
    uint8_t *buf = NULL;
    size_t got = 0, total = 0;
    int rc;
    if ((rc = tc_zip_rd_open(&r, z, e, d)))
        goto done;
    if (!(buf = malloc(want ? (size_t)want : 1))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory reading %s", e->name);
        goto done;
    }
    /* the whole record: read to its end, where the CRC-32 is checked; its start: no further */
    while (want == e->usize || total < want) {
        if ((rc = tc_zip_rd_read(&r, buf + total, (size_t)(want - total), &got, check_crc, d)))
            goto done;
        if (got == 0)
            break;
        total += got;
    }
done:
    tc_zip_rd_close(&r);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = total;
    return 0;
}

int tc_zip_read_all(const tc_zip *z, const tc_zip_entry *e, uint64_t max, bool check_crc, uint8_t **out,
                    size_t *len, tc_diag *d)
{
    if (e->usize > max)
        return tc_fail(d, TC_ERR_LIMIT, "zip: %s: %llu bytes, more than the limit of %llu", e->name,
                       (unsigned long long)e->usize, (unsigned long long)max);
    return read_start(z, e, e->usize, check_crc, out, len, d);
}

int tc_zip_read_head(const tc_zip *z, const tc_zip_entry *e, uint64_t max, uint8_t **out, size_t *len, tc_diag *d)
{
    return read_start(z, e, e->usize < max ? e->usize : max, false, out, len, d);
}
