#include "dest.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "vec.h"

/* ---- temporaries a signal handler removes ------------------------------------
 * The table is changed only with the cleanup signals blocked, so the handler
 * always sees it whole. */

static char **pending;
static size_t npending, pending_cap;

static void block(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGHUP);
    sigprocmask(SIG_BLOCK, &s, old);
}

static int pending_add(char *path)
{
    sigset_t old;
    block(&old);
    int rc = tc_grow(&pending, &pending_cap, npending + 1, sizeof *pending);
    if (!rc)
        pending[npending++] = path;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void pending_drop(const char *path)
{
    sigset_t old;
    block(&old);
    for (size_t i = 0; i < npending; i++)
        if (pending[i] == path) {
            pending[i] = pending[--npending];
            break;
        }
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static char **made;        /* folders tc_dst_mkdirs created, oldest first */
static size_t nmade, made_cap;

static void on_signal(int sig)
{
    for (size_t i = 0; i < npending; i++)
        unlink(pending[i]);
    for (size_t i = nmade; i > 0; i--)
        rmdir(made[i - 1]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void tc_dst_cleanup_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
}

int tc_dst_mkdirs(const char *dir, tc_diag *d)
{
    char *p = strdup(dir);
    if (!p)
        return tc_fail_at(d, TC_ERR_NOMEM, dir, TC_NO_OFFSET, "out of memory");
    size_t len = strlen(p);
    int rc = 0;
    /* each prefix ending before a '/', then the whole path */
    for (size_t i = 1; i <= len && !rc; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char keep = p[i];
        p[i] = '\0';
        struct stat st;
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                rc = tc_fail_at(d, TC_ERR_IO, p, TC_NO_OFFSET, "cannot create the output folder: not a folder");
        } else if (mkdir(p, 0777) == 0) {
            sigset_t old;
            block(&old);
            char *copy = tc_grow(&made, &made_cap, nmade + 1, sizeof *made) ? NULL : strdup(p);
            if (copy)
                made[nmade++] = copy; /* else it stays, untracked: harmless */
            sigprocmask(SIG_SETMASK, &old, NULL);
        } else if (errno != EEXIST) {
            rc = tc_fail_at(d, TC_ERR_IO, p, TC_NO_OFFSET, "cannot create the output folder: %s", strerror(errno));
        }
        p[i] = keep;
    }
    free(p);
    return rc;
}

static void dirs_forget(bool remove)
{
    sigset_t old;
    block(&old);
    for (size_t i = nmade; i > 0; i--) {
        if (remove)
            rmdir(made[i - 1]);
        free(made[i - 1]);
    }
    nmade = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void tc_dst_dirs_keep(void) { dirs_forget(false); }
void tc_dst_dirs_remove(void) { dirs_forget(true); }

/* ---- opening ----------------------------------------------------------------- */

bool tc_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int tc_dst_fail(const tc_dst *o, int e, tc_diag *d)
{
    if (e < 0)
        e = -e;
    return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "write failed: %s",
                      e == EFBIG ? "file too large (the file size limit, ulimit -f)" : strerror(e));
}

static int nomem(tc_dst *o, tc_diag *d)
{
    const char *p = o->path;
    int rc = tc_fail_at(d, TC_ERR_NOMEM, p, TC_NO_OFFSET, "out of memory");
    tc_dst_abort(o);
    return rc;
}

/* File systems whose copy_file_range copies on the server (an allowlist: any
 * other is read and written). */
static bool offloads(int fd)
{
    static const unsigned long server_copy[] = {
        0x6969,     /* NFS (4.2 copies on the server) */
        0xFE534D42, /* SMB2/3 (server-side copy) */
        0xFF534D42, /* CIFS */
        0x00C36400, /* Ceph (copies objects on the OSDs) */
    };
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return false;
    for (size_t i = 0; i < sizeof server_copy / sizeof server_copy[0]; i++)
        if ((unsigned long)sf.f_type == server_copy[i])
            return true;
    return false;
}

bool tc_dst_offloads(const tc_dst *o) { return o->offload; }

int tc_dst_open(tc_dst *o, const char *path, unsigned flags, tc_diag *d)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    if (exists && !(flags & (TC_DST_FORCE | TC_DST_IN_PLACE)))
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "exists (use --force to replace it)");
    o->sync = !(flags & TC_DST_NO_SYNC) || (flags & TC_DST_IN_PLACE);
    if (!(o->path = strdup(path)))
        return nomem(o, d);
    /* in place, a link is followed: its target is rewritten and the link kept */
    if (flags & TC_DST_IN_PLACE) {
        o->target = realpath(path, NULL);
        if (!o->target || stat(o->target, &st) < 0) {
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot resolve: %s", strerror(errno));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
    } else if (!(o->target = strdup(path))) {
        return nomem(o, d);
    }
    char *c1 = strdup(o->target), *c2 = strdup(o->target);
    if (!c1 || !c2) {
        free(c1);
        free(c2);
        return nomem(o, d);
    }
    const char *dir = dirname(c1), *base = basename(c2);
    size_t n = strlen(dir) + strlen(base) + 32;
    if ((o->tmp = malloc(n)))
        snprintf(o->tmp, n, "%s/.%s.tensorctl-XXXXXX", dir, base);
    free(c1);
    free(c2);
    if (!o->tmp)
        return nomem(o, d);
    /* made and registered as one step: a signal between the two would leave it behind */
    sigset_t old;
    block(&old);
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    int reg = o->fd >= 0 ? pending_add(o->tmp) : 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (o->fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot create a file beside it: %s", strerror(e));
        tc_dst_abort(o);
        return TC_ERR_IO;
    }
    if (reg)
        return nomem(o, d);
    o->offload = offloads(o->fd);
    if (flags & TC_DST_IN_PLACE) {
        if ((st.st_uid != geteuid() || st.st_gid != getegid()) && fchown(o->fd, st.st_uid, st.st_gid) < 0) {
            int e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET,
                       "cannot keep its owner %u:%u on the rewritten file (%s); it is left as it is",
                       (unsigned)st.st_uid, (unsigned)st.st_gid, strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
        if (fchmod(o->fd, st.st_mode & 07777) < 0) {
            int e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot keep its permissions: %s", strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
    } else {
        mode_t um = umask(0);
        umask(um);
        if (fchmod(o->fd, 0666 & ~um) < 0) {
            int e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot set permissions: %s", strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
    }
    return 0;
}

/* ---- writing ----------------------------------------------------------------- */

int tc_dst_write(tc_dst *o, const void *p, size_t n, tc_diag *d)
{
    int rc = tc_dst_pwrite(o, o->pos, p, n, d);
    if (!rc)
        o->pos += n;
    return rc;
}

/* The most one pwrite asks for. On Linux 6.x (ext4), a buffered write of
 * 8 MiB is now and then several times slower than the same bytes in pieces
 * (420 MB: 0.05 s, but up to 0.8 s in one run of three); in pieces of up to
 * 2 MiB it is steady, and no slower. */
#define WRITE_PIECE ((size_t)2 << 20)

int tc_dst_pwrite(const tc_dst *o, uint64_t off, const void *p, size_t n, tc_diag *d)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = pwrite(o->fd, b, n < WRITE_PIECE ? n : WRITE_PIECE, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return tc_dst_fail(o, errno, d);
        }
        if (w == 0)
            return tc_dst_fail(o, EIO, d);
        b += w;
        off += (uint64_t)w;
        n -= (size_t)w;
    }
    return 0;
}

void tc_dst_seek(tc_dst *o, uint64_t off) { o->pos = off; }

void tc_dst_reserve(const tc_dst *o, uint64_t off, uint64_t n)
{
    if (n)
        (void)fallocate(o->fd, 0, (off_t)off, (off_t)n);
}

bool tc_dst_clone(const tc_dst *o, uint64_t off, int fd, uint64_t in_off, uint64_t n)
{
#ifdef FICLONERANGE
    struct file_clone_range r = {.src_fd = fd, .src_offset = in_off, .src_length = n, .dest_offset = off};
    if (!n || ((off | in_off | n) % TC_SHARE_BLOCK))
        return false;
    int rc;
    do
        rc = ioctl(o->fd, FICLONERANGE, &r);
    while (rc < 0 && errno == EINTR);
    return rc == 0;
#else
    (void)o, (void)off, (void)fd, (void)in_off, (void)n;
    return false;
#endif
}

void tc_dst_writeback(const tc_dst *o, uint64_t off, uint64_t n)
{
    /* whole pages only: a partial page at either end is shared with what is
     * written next to the range (a header, a descriptor), and that write
     * should not wait for the page's write-back */
    if (!o->sync)
        return;
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
    uint64_t a = (off + page - 1) / page * page, b = (off + n) / page * page;
    if (a < b)
        sync_file_range(o->fd, (off_t)a, (off_t)(b - a), SYNC_FILE_RANGE_WRITE);
}

void tc_dst_writeback_pos(tc_dst *o)
{
    if (o->pos - o->synced >= (32u << 20)) {
        tc_dst_writeback(o, o->synced, o->pos - o->synced);
        o->synced = o->pos;
    }
}

/* ---- finishing ---------------------------------------------------------------- */

int tc_dst_finish(tc_dst *o, tc_diag *d)
{
    if (o->fd < 0)
        return 0;
    int rc = 0;
    if (o->sync && fsync(o->fd) < 0)
        rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "fsync failed: %s", strerror(errno));
    if (close(o->fd) < 0 && !rc)
        rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "close failed: %s", strerror(errno));
    o->fd = -1;
    if (rc)
        tc_dst_abort(o);
    return rc;
}

int tc_dst_publish(tc_dst *o, tc_diag *d)
{
    if (rename(o->tmp, o->target) < 0) {
        int rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot rename the finished file into place: %s",
                            strerror(errno));
        tc_dst_abort(o);
        return rc;
    }
    pending_drop(o->tmp);
    char *copy = o->sync ? strdup(o->target) : NULL;
    if (copy) {
        int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* the file is complete; a failure here loses nothing written */
            close(dfd);
        }
        free(copy);
    }
    free(o->tmp);
    free(o->target);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->fd = -1;
    return 0;
}

int tc_dst_commit(tc_dst *o, tc_diag *d)
{
    int rc = tc_dst_finish(o, d);
    return rc ? rc : tc_dst_publish(o, d);
}

void tc_dst_abort(tc_dst *o)
{
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp) {
        unlink(o->tmp);
        pending_drop(o->tmp);
    }
    free(o->tmp);
    free(o->target);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}
