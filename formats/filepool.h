/* The files of a checkpoint saved as many files (a DCP folder's .distcp
 * files, a ZeRO step's rank files), opened when their bytes are read and
 * kept within a bound: each file stays open while a reader holds it, and
 * before another one opens, those nothing reads are closed once
 * TC_FILEPOOL_OPEN are open (a checkpoint of thousands of ranks must not run
 * out of descriptors). A file's size is taken when it is added; an open that
 * finds another size fails (the file changed while being read).
 *
 * Ownership: the pool owns its files (names, paths, descriptors); a reader
 * from tc_filepool_reader holds its file open until tc_rd_close. Not
 * thread-safe: open readers only from the thread that owns the checkpoint
 * (reads through an open reader may come from any thread). */
#ifndef TC_FILEPOOL_H
#define TC_FILEPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "vec.h"

#define TC_FILEPOOL_OPEN 32 /* files kept open with no reader */

typedef struct tc_filepool tc_filepool;

typedef struct tc_pfile {
    tc_filepool *owner;
    char *name;            /* as the format names it (relative to its folder) */
    char *path;
    tc_src src;            /* fd -1 while closed */
    uint64_t size;
    size_t readers;
} tc_pfile;

struct tc_filepool {
    TC_VEC(tc_pfile *) f;  /* each file allocated once: a reader's pointer to it stays good */
    size_t nopen;
};

/* File path (named name) of size bytes as file *out of the pool; both strings copied. */
int tc_filepool_add(tc_filepool *p, const char *name, const char *path, uint64_t size, size_t *out, tc_diag *d);

static inline size_t tc_filepool_n(const tc_filepool *p) { return p->f.n; }
static inline const tc_pfile *tc_filepool_file(const tc_filepool *p, size_t i) { return p->f.v[i]; }

/* File i open, for reads made before the next call on the pool: *src. */
int tc_filepool_open(tc_filepool *p, size_t i, const tc_src **src, tc_diag *d);

/* A reader of bytes [off, off + len) of file i, holding it open until tc_rd_close. */
int tc_filepool_reader(tc_filepool *p, size_t i, uint64_t off, uint64_t len, tc_rd *r, tc_diag *d);

/* Every file closed that nothing reads (a driver's open done: none). */
void tc_filepool_close_idle(tc_filepool *p);

void tc_filepool_free(tc_filepool *p);

#endif
