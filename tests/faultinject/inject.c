/* LD_PRELOAD shim that makes one libc call fail, to prove tensorctl handles
 * every I/O error: no output under the final name, no temporary left, one
 * error line, a non-zero exit.
 *
 *   TC_FAULT_CALL=write   which function (write pwrite fsync close rename
 *                         copy_file_range read pread open mkostemp ioctl
 *                         linkat: an unnamed output taking its name;
 *                         renameat2: the names exchanged over an old output;
 *                         unlink: the old output's name removed after that)
 *   TC_FAULT_NTH=3        fail its 3rd call (1-based)
 *   TC_FAULT_ERRNO=ENOSPC ENOSPC, EIO, EACCES, EROFS or a number
 *   TC_FAULT_LOG=path     append "counts: write=N ..." at exit and
 *                         "fired: CALL N" when the failure is injected
 *   TC_FAULT_NO_TMPFILE=1 every open with O_TMPFILE fails with EOPNOTSUPP, as
 *                         on a file system without unnamed files
 *   TC_FAULT_FSTYPE=nfs   fstatfs says every file is on NFS (a file system
 *                         that copies on its server: tensorctl then copies
 *                         with copy_file_range, which the test can fail)
 *
 * Only calls the program makes itself are seen (libc's internal calls, e.g.
 * stdio's, do not go through the PLT). The 64-bit aliases (open64, pread64,
 * pwrite64, mkostemp64) count as their plain names. */
/* the plain and 64-bit names are defined separately: no header redirection */
#undef _FILE_OFFSET_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <unistd.h>

enum { F_WRITE, F_PWRITE, F_FSYNC, F_CLOSE, F_RENAME, F_CFR, F_READ, F_PREAD, F_OPEN, F_MKOSTEMP, F_IOCTL, F_LINKAT,
       F_RENAMEAT2, F_UNLINK, F_N };
static const char *const names[F_N] = {"write", "pwrite", "fsync", "close", "rename", "copy_file_range",
                                       "read", "pread", "open", "mkostemp", "ioctl", "linkat", "renameat2",
                                       "unlink"};
static unsigned long counts[F_N];
static int target = -1;
static unsigned long nth;
static int err_code = EIO;
static int in_shim;

static void say(const char *fmt, ...)
{
    const char *log = getenv("TC_FAULT_LOG");
    if (!log)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int (*ropen)(const char *, int, ...) = dlsym(RTLD_NEXT, "open");
    ssize_t (*rwrite)(int, const void *, size_t) = dlsym(RTLD_NEXT, "write");
    int (*rclose)(int) = dlsym(RTLD_NEXT, "close");
    int fd = ropen(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (rwrite(fd, buf, (size_t)n) < 0) { /* nowhere to report it */
        }
        rclose(fd);
    }
}

__attribute__((constructor)) static void init(void)
{
    const char *c = getenv("TC_FAULT_CALL"), *n = getenv("TC_FAULT_NTH"), *e = getenv("TC_FAULT_ERRNO");
    for (int i = 0; c && i < F_N; i++)
        if (!strcmp(c, names[i]))
            target = i;
    nth = n ? strtoul(n, NULL, 10) : 0;
    if (e) {
        if (!strcmp(e, "ENOSPC"))
            err_code = ENOSPC;
        else if (!strcmp(e, "EIO"))
            err_code = EIO;
        else if (!strcmp(e, "EACCES"))
            err_code = EACCES;
        else if (!strcmp(e, "EROFS"))
            err_code = EROFS;
        else
            err_code = atoi(e);
    }
}

__attribute__((destructor)) static void fini(void)
{
    /* one line, one write; the shim links nothing of tensorctl's (not base's tc_buf), so each
     * piece is checked to fit before it counts */
    char buf[400] = "counts:";
    size_t k = strlen(buf);
    for (int i = 0; i < F_N; i++) {
        int m = snprintf(buf + k, sizeof buf - k, " %s=%lu", names[i], counts[i]);
        if (m < 0 || (size_t)m >= sizeof buf - k) {
            buf[k] = 0;
            break;
        }
        k += (size_t)m;
    }
    in_shim = 1;
    say("%s\n", buf);
}

/* true when this call must fail */
static int hit(int f)
{
    if (in_shim)
        return 0;
    counts[f]++;
    if (f == target && counts[f] == nth) {
        in_shim = 1;
        say("fired: %s %lu\n", names[f], nth);
        in_shim = 0;
        errno = err_code;
        return 1;
    }
    return 0;
}

#define REAL(ret, name, ...)                                                                       \
    static ret (*real)(__VA_ARGS__);                                                               \
    if (!real)                                                                                     \
        real = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, name)

ssize_t write(int fd, const void *b, size_t n)
{
    REAL(ssize_t, "write", int, const void *, size_t);
    return hit(F_WRITE) ? -1 : real(fd, b, n);
}

static ssize_t do_pwrite(const char *sym, int fd, const void *b, size_t n, off_t off)
{
    ssize_t (*real)(int, const void *, size_t, off_t) = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, sym);
    return hit(F_PWRITE) ? -1 : real(fd, b, n, off);
}
ssize_t pwrite(int fd, const void *b, size_t n, off_t off) { return do_pwrite("pwrite", fd, b, n, off); }
ssize_t pwrite64(int fd, const void *b, size_t n, off_t off) { return do_pwrite("pwrite64", fd, b, n, off); }

int fsync(int fd)
{
    REAL(int, "fsync", int);
    return hit(F_FSYNC) ? -1 : real(fd);
}

int close(int fd)
{
    REAL(int, "close", int);
    if (hit(F_CLOSE)) {
        real(fd); /* as Linux does: the descriptor is gone even when close reports an error */
        errno = err_code;
        return -1;
    }
    return real(fd);
}

int rename(const char *a, const char *b)
{
    REAL(int, "rename", const char *, const char *);
    return hit(F_RENAME) ? -1 : real(a, b);
}

int renameat2(int fa, const char *a, int fb, const char *b, unsigned int flags)
{
    REAL(int, "renameat2", int, const char *, int, const char *, unsigned int);
    return hit(F_RENAMEAT2) ? -1 : real(fa, a, fb, b, flags);
}

int unlink(const char *a)
{
    REAL(int, "unlink", const char *);
    return hit(F_UNLINK) ? -1 : real(a);
}

int linkat(int fa, const char *a, int fb, const char *b, int flags)
{
    REAL(int, "linkat", int, const char *, int, const char *, int);
    return hit(F_LINKAT) ? -1 : real(fa, a, fb, b, flags);
}

ssize_t copy_file_range(int fi, off_t *oi, int fo, off_t *oo, size_t n, unsigned int flags)
{
    REAL(ssize_t, "copy_file_range", int, off_t *, int, off_t *, size_t, unsigned int);
    return hit(F_CFR) ? -1 : real(fi, oi, fo, oo, n, flags);
}

ssize_t read(int fd, void *b, size_t n)
{
    REAL(ssize_t, "read", int, void *, size_t);
    return hit(F_READ) ? -1 : real(fd, b, n);
}

static ssize_t do_pread(const char *sym, int fd, void *b, size_t n, off_t off)
{
    ssize_t (*real)(int, void *, size_t, off_t) = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, sym);
    return hit(F_PREAD) ? -1 : real(fd, b, n, off);
}
ssize_t pread(int fd, void *b, size_t n, off_t off) { return do_pread("pread", fd, b, n, off); }
ssize_t pread64(int fd, void *b, size_t n, off_t off) { return do_pread("pread64", fd, b, n, off); }

static int do_open(const char *sym, const char *path, int flags, mode_t mode)
{
    int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, sym);
    if ((flags & O_TMPFILE) == O_TMPFILE && getenv("TC_FAULT_NO_TMPFILE")) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return hit(F_OPEN) ? -1 : real(path, flags, mode);
}
#define MODE_ARG(flags, mode)                                                                      \
    mode_t mode = 0;                                                                               \
    if ((flags) & (O_CREAT | O_TMPFILE)) {                                                         \
        va_list ap;                                                                                \
        va_start(ap, flags);                                                                       \
        mode = (mode_t)va_arg(ap, int);                                                            \
        va_end(ap);                                                                                \
    }
int open(const char *path, int flags, ...)
{
    MODE_ARG(flags, mode);
    return do_open("open", path, flags, mode);
}
int open64(const char *path, int flags, ...)
{
    MODE_ARG(flags, mode);
    return do_open("open64", path, flags, mode);
}

static int do_mkostemp(const char *sym, char *tmpl, int flags)
{
    int (*real)(char *, int) = (int (*)(char *, int))dlsym(RTLD_NEXT, sym);
    return hit(F_MKOSTEMP) ? -1 : real(tmpl, flags);
}
int mkostemp(char *tmpl, int flags) { return do_mkostemp("mkostemp", tmpl, flags); }
int mkostemp64(char *tmpl, int flags) { return do_mkostemp("mkostemp64", tmpl, flags); }

/* tensorctl's ioctls are the clones of file system blocks (FICLONERANGE) */
int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    REAL(int, "ioctl", int, unsigned long, void *);
    return hit(F_IOCTL) ? -1 : real(fd, req, arg);
}

/* TC_FAULT_FSTYPE=nfs: NFS's magic number in place of the real one */
static int as_nfs(void)
{
    const char *t = getenv("TC_FAULT_FSTYPE");
    return t && !strcmp(t, "nfs");
}
int fstatfs(int fd, struct statfs *b)
{
    REAL(int, "fstatfs", int, struct statfs *);
    int rc = real(fd, b);
    if (rc == 0 && as_nfs())
        b->f_type = 0x6969;
    return rc;
}
int fstatfs64(int fd, struct statfs64 *b)
{
    REAL(int, "fstatfs64", int, struct statfs64 *);
    int rc = real(fd, b);
    if (rc == 0 && as_nfs())
        b->f_type = 0x6969;
    return rc;
}
