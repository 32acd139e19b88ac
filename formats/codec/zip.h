/* Zip archives as torch writes and reads them.
 *
 * Reader: parses the (ZIP64) end records and the central directory, checks
 * every entry against the file (local header present, data inside the file,
 * no overlaps, no duplicate or escaping names) and reads records stored or
 * deflated, streaming.
 * Writer: torch's layout: stored records whose data starts on a 64-byte
 * boundary (FB padding extra field), data descriptors, ZIP64 where sizes or
 * offsets need it, and a ZIP64 end record always, as PyTorchStreamWriter;
 * on request a record's data is placed at a given offset modulo a larger
 * multiple of 64 (more padding), still 64-byte aligned.
 *
 * Ownership: tc_zip owns its entry table; the source it reads is the
 * caller's. tc_zip_free and tc_zipw_abort accept NULL. */
#ifndef TC_ZIP_H
#define TC_ZIP_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "dest.h"
#include "source.h"

typedef struct tc_zip_entry {
    char *name;
    uint16_t method;  /* 0 stored, 8 deflated */
    uint16_t flags;
    uint32_t crc;
    uint64_t csize, usize;
    uint64_t lfh_off;
    uint64_t data_off; /* from the local header */
} tc_zip_entry;

typedef struct tc_zip {
    const tc_src *src;
    tc_zip_entry *e;
    size_t n;
    tc_zip_entry **byname; /* e sorted by name, for tc_zip_find */
    uint64_t cd_off, cd_size;
    bool zip64;
} tc_zip;

typedef struct tc_zip_limits {
    uint64_t max_entries;
} tc_zip_limits;

int tc_zip_open(tc_zip *z, const tc_src *src, const tc_zip_limits *lim, tc_diag *d);
void tc_zip_free(tc_zip *z);
const tc_zip_entry *tc_zip_find(const tc_zip *z, const char *name);

/* Sequential reader of one record's uncompressed bytes. */
typedef struct tc_zip_rd {
    const tc_zip *z;
    const tc_zip_entry *e;
    uint64_t done;      /* uncompressed bytes returned */
    uint64_t cpos;      /* compressed bytes consumed */
    void *zs;           /* inflate state */
    uint8_t *cbuf;
    uint32_t crc;
} tc_zip_rd;

int tc_zip_rd_open(tc_zip_rd *r, const tc_zip *z, const tc_zip_entry *e, tc_diag *d);
/* Read up to n bytes; *got is 0 only at the end. Checks the CRC at the end
 * when check_crc is set. */
int tc_zip_rd_read(tc_zip_rd *r, void *buf, size_t n, size_t *got, bool check_crc, tc_diag *d);
void tc_zip_rd_close(tc_zip_rd *r);
/* Read a whole record (at most max bytes) into a new buffer (free()). */
int tc_zip_read_all(const tc_zip *z, const tc_zip_entry *e, uint64_t max, uint8_t **out, size_t *len,
                    tc_diag *d);

/* Writer. Output goes to dst from its current position. */
typedef struct tc_zipw_ent {
    char *name;
    uint32_t crc;
    uint64_t size, lfh_off;
} tc_zipw_ent;

typedef struct tc_zipw {
    tc_dst *dst;
    uint64_t off;      /* bytes written and buffered */
    char *prefix; /* "archive/" */
    tc_zipw_ent *e;
    size_t n, cap;
    /* the open record */
    bool open;
    uint64_t rec_size, rec_done;
    uint32_t rec_crc;
    uint8_t *buf; /* write buffer */
    size_t blen;
} tc_zipw;

int tc_zipw_init(tc_zipw *w, tc_dst *dst, const char *archive_name, tc_diag *d);
/* Begin record `name` of exactly `size` bytes, its data on a 64-byte boundary. */
int tc_zipw_begin(tc_zipw *w, const char *name, uint64_t size, tc_diag *d);
/* The same, its data at an offset congruent to phase modulo mod (both
 * multiples of 64, phase < mod <= TC_ZIP_MAX_PHASE_MOD), so that it can sit
 * at the same place within a file system block as the same bytes in another
 * file: the FB padding grows to at most mod - 1 bytes, placed by torch's
 * formula with mod for 64 (ZIP64 extras before it counted). */
#define TC_ZIP_MAX_PHASE_MOD 32768u
int tc_zipw_begin_at(tc_zipw *w, const char *name, uint64_t size, uint32_t mod, uint32_t phase, tc_diag *d);
int tc_zipw_write(tc_zipw *w, const void *p, size_t n, tc_diag *d);
/* The next n bytes of the open record are written by the caller, with
 * tc_dst_pwrite at *off (in parallel, say): reserve flushes what is buffered and
 * says where they go; commit accounts for them, with their CRC-32, and moves
 * the file position past them. */
int tc_zipw_reserve(tc_zipw *w, uint64_t n, uint64_t *off, tc_diag *d);
int tc_zipw_commit(tc_zipw *w, uint64_t n, uint32_t crc, tc_diag *d);
int tc_zipw_end(tc_zipw *w, tc_diag *d);
/* Write a whole small record. */
int tc_zipw_add(tc_zipw *w, const char *name, const void *p, size_t n, tc_diag *d);
int tc_zipw_finish(tc_zipw *w, tc_diag *d);
void tc_zipw_free(tc_zipw *w);

/* torch's archive folder for an output path: basename without its last extension. */
void tc_zip_archive_name(const char *path, char *out, size_t outlen);

#endif
