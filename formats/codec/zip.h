/* Zip archives as torch writes and reads them.
 *
 * Reader: reads an archive exactly as torch's own reader does: miniz (2.1.0
 * in torch 1.13, 3.0.2 in torch 2.x, whose reading code is the same), as
 * caffe2's PyTorchStreamReader calls it (flags 0, CRC-32 checks compiled out).
 * tc_zip_open accepts and refuses what mz_zip_reader_init accepts and
 * refuses: the end record is the last signature with 22 bytes after it
 * (bytes after it, whatever its comment length says, are ignored), sizes and
 * offsets come from the central directory (ZIP64 extra fields where a field
 * is 0xFFFFFFFF), and an entry's local header is read only for where its
 * data starts. tc_zip_find looks a name up as mz_zip_reader_locate_file
 * does: ignoring ASCII letter case, by a binary search over the entries heap-
 * sorted by their lowercased names, so that of two names equal but for case
 * the same one is found as in torch. Records are read stored or deflated,
 * streaming. Beyond torch, and said so where it fails: entries whose data
 * overlaps (one span read as many records: work unbounded by the file's
 * size) are refused at open, a record torch would hand out without reading
 * (a directory entry or no compressed data, but claiming bytes) is refused
 * when read, and CRC-32s are checked where the caller asks.
 * torch's own layer over miniz (zip_torch.c): the archive folder, the
 * version record and the record list, as PyTorchStreamReader reads them.
 * Writer: torch's layout: stored records whose data starts on a 64-byte
 * boundary (FB padding extra field), data descriptors, ZIP64 where sizes or
 * offsets need it, and a ZIP64 end record always, as PyTorchStreamWriter;
 * on request a record's data is placed at a given offset modulo a larger
 * multiple of 64 (more padding), still 64-byte aligned.
 *
 * Ownership: tc_zip owns its entry table; the source it reads is the
 * caller's. tc_zip_free, tc_zip_torch_free and tc_zipw_abort accept NULL. */
#ifndef TC_ZIP_H
#define TC_ZIP_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "dest.h"
#include "source.h"

typedef struct tc_zip_entry {
    char *name;       /* the central directory's bytes, NUL-terminated; nlen of them (a NUL may be inside); in names */
    size_t nlen;
    uint16_t method;  /* 0 stored, 8 deflated */
    uint16_t flags;
    uint32_t crc;
    uint64_t csize, usize;
    uint64_t lfh_off;
    uint64_t data_off; /* from the local header; valid when bad is NULL */
    bool dir;          /* miniz's is_directory: a name ending in '/', or the DOS directory attribute */
    const char *bad;   /* why torch cannot read it (a static string), or NULL */
} tc_zip_entry;

typedef struct tc_zip {
    const tc_src *src;
    tc_zip_entry *e;  /* in central directory order */
    size_t n;
    uint32_t *sorted; /* indices into e, heap-sorted by lowercased name as miniz sorts them */
    char *names;      /* every entry's name, one after another */
    size_t names_len, names_cap;
    uint64_t cd_off, cd_size;
    bool zip64;
    unsigned readers;  /* TC_ZIP_TORCH1/2: whose reader opens the archive */
} tc_zip;

/* torch 1.13's miniz and torch 2.x's: their checks of the central directory
 * differ (zip_read.c, cd_check); past them they read an archive alike. */
enum { TC_ZIP_TORCH1 = 1, TC_ZIP_TORCH2 = 2, TC_ZIP_ANY_TORCH = 3 };

typedef struct tc_zip_limits {
    uint64_t max_entries;
    unsigned readers; /* open as these readers do: the archive opens when one of them opens it (0: both) */
} tc_zip_limits;

int tc_zip_open(tc_zip *z, const tc_src *src, const tc_zip_limits *lim, tc_diag *d);
void tc_zip_free(tc_zip *z);
/* The entry mz_zip_reader_locate_file(name, flags 0) finds, or NULL. */
const tc_zip_entry *tc_zip_find(const tc_zip *z, const char *name);
/* Two entries torch could take one for the other: names equal ignoring ASCII
 * case (an exact duplicate too), or a name that torch lists cut at a NUL
 * byte or at 511 bytes equal to another's. 1 with their indices (*a < *b),
 * 0 when there are none, -1 out of memory. */
int tc_zip_confusable(const tc_zip *z, size_t *a, size_t *b);
/* The name of entry e as torch lists it (mz_zip_reader_get_filename into a
 * 512-byte buffer: cut at 511 bytes and at a NUL), into out (512 bytes). */
void tc_zip_listed_name(const tc_zip_entry *e, char out[512]);

/* Why torch cannot read entry e, or reads bytes that are not in the file
 * (tensorctl refuses both), or NULL: then data_off is where its data starts. */
const char *tc_zip_unreadable(const tc_zip_entry *e);

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
 * when check_crc is set (torch does not). */
int tc_zip_rd_read(tc_zip_rd *r, void *buf, size_t n, size_t *got, bool check_crc, tc_diag *d);
void tc_zip_rd_close(tc_zip_rd *r);
/* Read a whole record (at most max bytes) into a new buffer (free()), its
 * CRC-32 checked when check_crc is set. */
int tc_zip_read_all(const tc_zip *z, const tc_zip_entry *e, uint64_t max, bool check_crc, uint8_t **out,
                    size_t *len, tc_diag *d);
/* The first bytes of a record, at most max of them, into a new buffer (free()); *len
 * those read. No CRC-32 to check: the record is not read to its end. */
int tc_zip_read_head(const tc_zip *z, const tc_zip_entry *e, uint64_t max, uint8_t **out, size_t *len, tc_diag *d);

/* ---- torch's reader over the archive (PyTorchStreamReader, zip_torch.c) -------- */

typedef struct tc_zip_torch {
    char *archive;      /* the archive folder: the first entry's name up to its first '/' */
    size_t alen;
    uint64_t version;   /* of the version record (.data/version when there is one) */
    unsigned readers;   /* TC_ZIP_TORCH1/2: whose reader opens the archive */
} tc_zip_torch;

/* PyTorchStreamReader's constructor after the zip is open: not the preview
 * format ("PYTORCH1"), at least one entry, the first inside a folder, a
 * version record (read whole, at most max bytes) that std::stoull reads as a
 * number from 1 to 10, and in torch 2.x a .data/serialization_id record it
 * can read, if there is one. Fails when no reader of z->readers opens it. */
int tc_zip_torch_init(tc_zip_torch *t, const tc_zip *z, uint64_t max, tc_diag *d);
void tc_zip_torch_free(tc_zip_torch *t);
/* The entry torch finds for record name (archive folder, '/', name). */
const tc_zip_entry *tc_zip_torch_find(const tc_zip_torch *t, const tc_zip *z, const char *name);
/* getAllRecords() as torch.load calls it (through get_all_records): every
 * entry's listed name must start with the folder and '/' (letter case
 * exact), and must be UTF-8 (the list becomes Python strings). 0, or the
 * failure naming the first entry that breaks this. */
int tc_zip_torch_records(const tc_zip_torch *t, const tc_zip *z, tc_diag *d);

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
 * the file position past them. Fewer bytes than a file system block are
 * staged in the write buffer instead (tc_dst_stage) and written with the
 * records around them. */
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
