/* Helpers shared by the unit tests: byte buffers, files, fixtures, a
 * canonical text form of pickle graphs and a pickle opcode walker. */
#ifndef TC_UNIT_UTIL_H
#define TC_UNIT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "dest.h"
#include "pickle.h"

/* A growing byte buffer; aborts on OOM (tests only). */
typedef struct bbuf {
    uint8_t *p;
    size_t n, cap;
} bbuf;

void bb_put(bbuf *b, const void *p, size_t n);
void bb_u8(bbuf *b, uint8_t v);
void bb_u16(bbuf *b, uint16_t v);
void bb_u32(bbuf *b, uint32_t v);
void bb_u64(bbuf *b, uint64_t v);
void bb_str(bbuf *b, const char *s); /* without the NUL */
void bb_free(bbuf *b);

/* Whole files. slurp returns NULL when the file cannot be read; its bytes are followed by a NUL. */
uint8_t *slurp(const char *path, size_t *n);
void spit(const char *path, const void *p, size_t n);

/* $UNIT_DATA/name; $CORPUS_DIR/name, where name "torch-1/X" ("torch-2/X") is X in $CORPUS_TORCH1
 * ($CORPUS_TORCH2), the corpus's folder of files torch 1.x (2.x) wrote: sample_models/corpus's
 * torch-1.13 and torch-2.15, or the reference corpus's torch-1.13 and torch-2.14 (static buffers,
 * rotated 8 deep). */
const char *data_path(const char *name);
const char *corpus_path(const char *name);

/* A fresh directory under $TMPDIR (or /tmp) and its recursive removal. */
char *tmpdir_new(void);
void tmpdir_rm(char *dir);
/* dir/name in a static rotating buffer. */
const char *in_dir(const char *dir, const char *name);

/* xorshift32 bytes; matches xorshift() in gen_fixtures.py. */
void xorshift_bytes(uint8_t *out, size_t n, uint32_t seed);

/* The uncompressed bytes of the first record of the zip at path whose name
 * ends with suffix (e.g. "/data.pkl"); NULL when absent. Caller frees. */
uint8_t *zip_record(const char *path, const char *suffix, size_t *len);

/* End records of a zip that has the ZIP64 ones and no comment (what
 * tc_zipw and torch write). false when they are not where expected. */
typedef struct zip_ends {
    uint64_t cd_off, cd_size, n;
    uint64_t z64_off, loc_off, eocd_off;
} zip_ends;
bool zip_find_ends(const uint8_t *f, size_t n, zip_ends *e);

/* The archive with the bytes [cut, cd_off) removed and the end records
 * patched to match: the records after cut are gone but the central directory
 * still names them. Caller frees. */
uint8_t *zip_cut(const uint8_t *f, size_t n, size_t cut, size_t *out_n);

/* Offsets where a zip's parts begin and end: local headers, data, data
 * descriptors, central directory entries, end records. Sorted, unique. */
size_t zip_boundaries(const uint8_t *f, size_t n, uint64_t *out, size_t max);

/* Read a pickle with the default limits (or lim) and no persid callback. */
int read_pk(pk_graph *g, const void *p, size_t n, const pk_limits *lim, pk_obj **out, tc_diag *d);

/* Canonical text of the graph below root (rules in gen_fixtures.py): bytes,
 * bytearrays and sets read the same whatever opcodes carried them. Lists,
 * dicts and generic calls are labelled #n= on first sight and #n# later.
 * Uses and resets the nodes' memo fields. Caller frees. */
char *canon(pk_graph *g, pk_obj *root);

/* Walk the opcodes of a pickle. For each opcode calls fn (may be NULL) with
 * the opcode, its offset, and its argument (integer value for the integer
 * and memo opcodes). Fails (returns -1, message in err) on an unknown opcode,
 * a truncated argument, bytes after STOP or no STOP. */
typedef void (*op_fn)(void *ctx, uint8_t op, size_t pos, uint64_t arg);
int walk_ops(const uint8_t *p, size_t n, op_fn fn, void *ctx, char *err, size_t errlen);

/* The opcodes torch's weights_only unpickler accepts (torch-format.md §6). */
bool weights_only_op(uint8_t op);

/* A destination over an open descriptor, for writers under test (the test
 * closes the descriptor itself; nothing is renamed or removed). */
#define UNIT_DST(fd_) ((tc_dst){.fd = (fd_), .path = (char *)"test output", .pos = (uint64_t)lseek((fd_), 0, SEEK_CUR)})

#endif
