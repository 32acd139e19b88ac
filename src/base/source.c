#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every reader seeks (a zip's directory is at its end, a safetensors header
 * gives offsets) and takes the size from fstat: a pipe, terminal or device
 * would read as empty or truncated, so it is refused by what it is. */
static int refuse_unseekable(const char *path, mode_t m, tc_diag *d)
{
    const char *kind = S_ISFIFO(m)   ? "a pipe"
                       : S_ISCHR(m)  ? "a character device"
                       : S_ISBLK(m)  ? "a block device"
                       : S_ISSOCK(m) ? "a socket"
                                     : "not a regular file";
    return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                      "is %s; tensorctl reads checkpoints by seeking and needs a seekable regular file "
                      "(save the stream to a file first)", kind);
}

/* Open path with flags; then what it is decides. */
static int open_checked(tc_src *out, const char *path, int flags, struct stat *st_out, tc_diag *d)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "is a directory");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse_unseekable(path, st.st_mode, d);
    }
    static atomic_uint_fast64_t opened;
    out->fd = fd;
    out->open_id = atomic_fetch_add(&opened, 1) + 1;
    out->size = (uint64_t)st.st_size;
    out->mem = NULL;
    out->what = path;
    out->base = 0;
    out->window = false;
    out->read = NULL;
    out->ctx = NULL;
    if (st_out)
        *st_out = st;
    return 0;
}

int tc_src_open_file(tc_src *out, const char *path, tc_diag *d)
{
    struct stat st;
    /* before open, which waits for a writer on a named pipe */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return refuse_unseekable(path, st.st_mode, d);
    return open_checked(out, path, 0, NULL, d);
}

int tc_src_open_listed(tc_src *out, const char *path, struct stat *st, tc_diag *d)
{
    /* O_NONBLOCK changes nothing for a regular file's reads */
    return open_checked(out, path, O_NONBLOCK | O_NOCTTY, st, d);
}

void tc_src_init_mem(tc_src *out, const void *buf, size_t n, const char *what)
{
    out->fd = -1;
    out->open_id = 0;
    out->size = n;
    out->mem = buf;
    out->what = what;
    out->base = 0;
    out->window = false;
    out->read = NULL;
    out->ctx = NULL;
}

void tc_src_init_fn(tc_src *out, uint64_t size, int (*read)(void *ctx, uint64_t off, void *buf, size_t n, tc_diag *d),
                    void *ctx, const char *what)
{
    tc_src_init_mem(out, NULL, 0, what);
    out->size = size;
    out->read = read;
    out->ctx = ctx;
}

int tc_src_window(tc_src *out, const tc_src *parent, uint64_t off, uint64_t size, tc_diag *d)
{
    if (off > parent->size || size > parent->size - off)
        return tc_fail_at(d, TC_ERR_FORMAT, parent->what, parent->base + parent->size,
                          "bytes [%llu, %llu) lie past the end of the file at %llu (truncated?)",
                          (unsigned long long)(parent->base + off), (unsigned long long)(parent->base + off + size),
                          (unsigned long long)(parent->base + parent->size));
    *out = *parent;
    out->size = size;
    out->window = true;
    if (parent->mem && !parent->read)
        out->mem = parent->mem + off;
    else
        out->base = parent->base + off;
    return 0;
}

int tc_src_read(const tc_src *s, uint64_t off, void *buf, size_t n, const char *ctx, tc_diag *d)
{
    if (off > s->size || n > s->size - off)
        return tc_fail_at(d, TC_ERR_FORMAT, s->what, s->base + s->size,
                       "%s: needs bytes up to offset %llu but the %s ends at %llu (truncated?)", ctx,
                       (unsigned long long)(s->base + off + n), s->window ? "item" : "file",
                       (unsigned long long)(s->base + s->size));
    off += s->base;
    if (s->read)
        return s->read(s->ctx, off, buf, n, d);
    if (s->mem) {
        memcpy(buf, s->mem + off, n);
        return 0;
    }
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(s->fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return tc_fail_at(d, TC_ERR_IO, s->what, off, "%s: read error at offset %llu: %s", ctx,
                           (unsigned long long)off, strerror(errno));
        }
        if (r == 0)
            return tc_fail_at(d, TC_ERR_IO, s->what, off, "%s: file shrank while reading (offset %llu)", ctx,
                           (unsigned long long)off);
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

void tc_src_close(tc_src *s)
{
    if (s && s->what && !s->mem && !s->window && s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

int tc_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tc_src_cached(tc_src_cache *c, const tc_src *src, uint64_t off, uint64_t n, const char *ctx,
                  const uint8_t **out, tc_diag *d)
{
    if (!src->open_id || src->mem || src->read || !n || n > TC_SRC_CACHE_SMALL || off > src->size ||
        n > src->size - off)
        return 1;
    uint64_t at = src->base + off;
    if (c->id != src->open_id || at < c->off || at + n > c->off + c->len) {
        if (!c->buf && !(c->buf = malloc(TC_SRC_CACHE_BYTES)))
            return 1;
        uint64_t left = src->size - off;
        size_t fill = left < TC_SRC_CACHE_BYTES ? (size_t)left : TC_SRC_CACHE_BYTES;
        c->id = 0;
        int rc = tc_src_read(src, off, c->buf, fill, ctx, d);
        if (rc)
            return rc;
        c->id = src->open_id;
        c->off = at;
        c->len = fill;
    }
    *out = c->buf + (at - c->off);
    return 0;
}

void tc_src_cache_free(tc_src_cache *c)
{
    if (!c)
        return;
    free(c->buf);
    *c = (tc_src_cache)TC_SRC_CACHE_INIT;
}
