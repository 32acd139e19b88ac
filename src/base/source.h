/* Byte sources: a file read with pread, a memory buffer (tests, fuzzers), or
 * a function (a member of a compressed archive, decompressed as it is read).
 *
 * A tc_src owns its file descriptor, except a window (tc_src_window), which
 * reads a range of another source through that source's descriptor; offsets
 * and sizes are the window's own, messages name the whole file's offsets.
 * tc_src_close accepts a zeroed, closed or window source. Every read is
 * bounds-checked against the size taken at open time. */
#ifndef TC_IO_H
#define TC_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

typedef struct tc_src {
    int fd;              /* -1 for a memory source */
    uint64_t size;
    const uint8_t *mem;  /* memory sources only; not owned */
    const char *what;    /* name used in messages; not owned */
    uint64_t base;       /* a window: where its byte 0 lies in the file */
    bool window;         /* borrows the descriptor of the source it was made from */
    uint64_t open_id;    /* which opening of a file this is (each open a new one, windows keep their
                          * parent's); 0 for memory and function sources */
    /* function sources only: read n bytes at off (off counts from the
     * function's byte 0, windows included); not safe to call from two
     * threads at once unless the function is */
    int (*read)(void *ctx, uint64_t off, void *buf, size_t n, tc_diag *d);
    void *ctx;
} tc_src;

/* The regular file at path. What is no regular file is refused, a FIFO or a device without being
 * opened (a stat first: open waits for a FIFO's writer, and opening a device can act on it). */
int tc_src_open_file(tc_src *out, const char *path, tc_diag *d);
/* The same for a path a folder listing named as a regular file: opened at once, without waiting
 * (O_NONBLOCK, O_NOCTTY), so that a FIFO put there since cannot stop the open, and refused after
 * if it is no regular file. One system call fewer a file than tc_src_open_file. *st (if given)
 * receives the open file's status. */
struct stat;
int tc_src_open_listed(tc_src *out, const char *path, struct stat *st, tc_diag *d);
void tc_src_init_mem(tc_src *out, const void *buf, size_t n, const char *what);
/* A source of size bytes that read(ctx, ...) returns; ctx is the caller's and
 * must outlive the source and its windows. */
void tc_src_init_fn(tc_src *out, uint64_t size, int (*read)(void *ctx, uint64_t off, void *buf, size_t n, tc_diag *d),
                    void *ctx, const char *what);
/* The range [off, off + size) of parent as a source of its own (parent must
 * outlive it); the range must lie inside parent. */
int tc_src_window(tc_src *out, const tc_src *parent, uint64_t off, uint64_t size, tc_diag *d);
/* Read exactly n bytes at off. Reading past the end is a format error naming
 * `ctx` (e.g. "data/3"), since it means the file is truncated or lies. */
int tc_src_read(const tc_src *s, uint64_t off, void *buf, size_t n, const char *ctx, tc_diag *d);
void tc_src_close(tc_src *s);

/* A cache of one file's bytes for small reads, for one thread: a file of many small records is
 * read 64 KiB at a time, not once a record. Its bytes are known by the opening of the file they
 * came from (open_id) and their offset, so a file closed and another opened under the same
 * descriptor never gets them; valid while the files read through it do not change. */
#define TC_SRC_CACHE_BYTES ((size_t)64 << 10)
#define TC_SRC_CACHE_SMALL ((uint64_t)4 << 10) /* reads up to this size go through it */
typedef struct tc_src_cache {
    uint64_t id;   /* the opening whose bytes it holds (tc_src.open_id); 0: none */
    uint64_t off;  /* where they lie in the file */
    size_t len;
    uint8_t *buf;  /* TC_SRC_CACHE_BYTES, made when first filled */
} tc_src_cache;
#define TC_SRC_CACHE_INIT {.id = 0}
/* [off, off + n) of src from the cache (filled from off on where it does not hold them): 0 with
 * *out pointing at them until the next call, 1 where they are not read so (not an opened file, too
 * large, out of the source, no memory: the caller reads them as any others), or tc_src_read's
 * failure. */
int tc_src_cached(tc_src_cache *c, const tc_src *src, uint64_t off, uint64_t n, const char *ctx,
                  const uint8_t **out, tc_diag *d);
void tc_src_cache_free(tc_src_cache *c);

/* Write all of buf to fd, retrying short writes; -errno on failure. */
int tc_write_all(int fd, const void *buf, size_t n);

/* Little-endian loads. */
static inline uint16_t tc_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tc_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tc_le64(const uint8_t *p) { return tc_le32(p) | (uint64_t)tc_le32(p + 4) << 32; }
static inline void tc_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void tc_put32(uint8_t *p, uint32_t v) { tc_put16(p, (uint16_t)v); tc_put16(p + 2, (uint16_t)(v >> 16)); }
static inline void tc_put64(uint8_t *p, uint64_t v) { tc_put32(p, (uint32_t)v); tc_put32(p + 4, (uint32_t)(v >> 32)); }

#endif
