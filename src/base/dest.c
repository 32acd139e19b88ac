/* Output files that appear whole or not at all (dest.h). Over 800 lines: one
 * promise kept in one place, for every way a name is given (unnamed file,
 * hidden name, exchange, a content-addressed store's blob and link), the
 * signal cleanup that must see every hidden name, and replacing an old file
 * at the cost of a new one (its cache, its rename, its freeing); split up,
 * each part would need the others' internals. */
#include "dest.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "vec.h"

/* ---- names a signal handler removes --------------------------------------------
 * Only what has a name is listed: a temporary made where the file system
 * cannot make unnamed files, a finished output given a hidden name on its way
 * into place, the folders tc_dst_mkdirs made. An unnamed temporary needs no
 * one to remove it: it goes when its descriptor closes, however the process
 * ends. The tables change only with every signal blocked, so the handler
 * always sees them whole. */

static TC_VEC(char *) pending;
static TC_VEC(char *) made;         /* folders tc_dst_mkdirs created, oldest first */

static void block(sigset_t *old)
{
    sigset_t s;
    sigfillset(&s);
    sigprocmask(SIG_BLOCK, &s, old);
}

static void unblock(const sigset_t *old) { sigprocmask(SIG_SETMASK, old, NULL); }

/* Called with signals blocked. */
static int pending_add(char *path) { return tc_vec_push(&pending, path); }

static void pending_drop(const char *path)
{
    sigset_t old;
    block(&old);
    for (size_t i = 0; i < pending.n; i++)
        if (pending.v[i] == path) {
            pending.v[i] = pending.v[--pending.n];
            break;
        }
    unblock(&old);
}

/* Every signal whose default action ends the process and that a handler can
 * catch (SIGKILL and SIGSTOP cannot be caught; SIGXFSZ is ignored instead). */
static const int fatal_signals[] = {SIGHUP,  SIGINT,  SIGQUIT,   SIGILL,  SIGTRAP, SIGABRT, SIGBUS,
                                    SIGFPE,  SIGUSR1, SIGSEGV,   SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
                                    SIGSTKFLT, SIGXCPU, SIGVTALRM, SIGPROF, SIGIO,  SIGPWR,  SIGSYS};
static struct sigaction before[_NSIG];

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    for (size_t i = 0; i < pending.n; i++)
        unlink(pending.v[i]);
    for (size_t i = made.n; i > 0; i--)
        rmdir(made.v[i - 1]);
    pending.n = made.n = 0;
    /* then what would have happened without us: the default action (or the
     * handler that was there, a sanitizer's); a fault the kernel raised comes
     * back by itself when the faulting instruction runs again */
    sigaction(sig, &before[sig], NULL);
    bool fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
    if (!(fault && si && si->si_code > 0))
        raise(sig);
}

static void catch_one(int sig, const struct sigaction *sa)
{
    struct sigaction old;
    if (sig <= 0 || sig >= _NSIG || sigaction(sig, NULL, &old) < 0)
        return;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
        return; /* ignored when we started (nohup, a background job): it stays so */
    if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_signal)
        return; /* installed by an earlier call: what was there before it stays the one to restore (else the
                   handler would hand the signal back to itself, for ever) */
    before[sig] = old;
    sigaction(sig, sa, NULL);
}

void tc_dst_cleanup_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
        catch_one(fatal_signals[i], &sa);
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
        catch_one(s, &sa);
    signal(SIGXFSZ, SIG_IGN);
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
            char *copy = strdup(p);
            if (copy && tc_vec_push(&made, copy) < 0)
                free(copy); /* it stays, untracked: harmless */
            unblock(&old);
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
    for (size_t i = made.n; i > 0; i--) {
        if (remove)
            rmdir(made.v[i - 1]);
        free(made.v[i - 1]);
    }
    made.n = 0;
    unblock(&old);
}

void tc_dst_dirs_keep(void) { dirs_forget(false); }
void tc_dst_dirs_remove(void) { dirs_forget(true); }

/* ---- the old file's page cache -------------------------------------------------
 * Replacing a file: its clean cached pages go early, so that the rename frees
 * only its blocks and the new file's pages come from memory just freed (see
 * dest.h). Dirty pages are left to the rename, which discards them: dropping
 * them would first write to disk the bytes of a file about to be deleted. */

#if !defined(__NR_cachestat) && (defined(__x86_64__) || defined(__aarch64__) || defined(__riscv))
#define __NR_cachestat 451 /* the same on every architecture (Linux 6.5) */
#endif

/* cachestat(2)'s range and answer, as <linux/mman.h> declares them where it is new enough */
struct cache_range {
    uint64_t off, len;
};
struct cache_stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Whether [off, off + n) of fd (n == 0: to its end) has cached pages and none
 * waiting for the disk. Where the kernel cannot say (before 6.5), no: then
 * nothing is dropped, and the rename frees the cache as it always did. */
static bool cached_and_clean(int fd, uint64_t off, uint64_t n)
{
#ifdef __NR_cachestat
    struct cache_range r = {off, n};
    struct cache_stat cs = {0}; /* (valgrind does not know this call fills it) */
    if (syscall(__NR_cachestat, fd, &r, &cs, 0) == 0)
        return cs.nr_cache && !cs.nr_dirty && !cs.nr_writeback;
#else
    (void)fd, (void)off, (void)n;
#endif
    return false;
}

static void drop_cache(int fd, uint64_t off, uint64_t n)
{
    if (cached_and_clean(fd, off, n))
        (void)posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED);
}

/* Threads dropping an old file's cache now: past a few (a set of many shards
 * replaced at once) the cache is left to the rename, rather than pile up
 * threads and descriptors. */
#define DROP_THREADS 2
#define DROP_STEP ((uint64_t)32 << 20)
static atomic_uint ndropping;

struct tc_dst_drop {
    pthread_t thread;
    int fd;
    uint64_t size;
    atomic_bool stop;
};

static void *drop_main(void *arg)
{
    struct tc_dst_drop *w = arg;
    /* in steps, so that drop_end waits for one step at most */
    for (uint64_t off = 0; off < w->size && !atomic_load(&w->stop); off += DROP_STEP)
        drop_cache(w->fd, off, DROP_STEP);
    return NULL;
}

/* Drop the clean cache of the regular file at path, which o is about to
 * replace, on a thread of its own where one can start. Read-only: the file
 * itself is left as it is. Any failure only leaves the cache where it is. */
static void drop_old(tc_dst *o, const char *path)
{
    struct tc_dst_drop *w = calloc(1, sizeof *w);
    struct stat st;
    if (!w)
        return;
    w->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    bool started = false;
    if (w->fd >= 0 && fstat(w->fd, &st) == 0 && S_ISREG(st.st_mode) &&
        atomic_fetch_add(&ndropping, 1) < DROP_THREADS) {
        w->size = (uint64_t)st.st_size;
        /* every signal blocked: the handler runs on the threads that do the work */
        sigset_t old;
        block(&old);
        started = !pthread_create(&w->thread, NULL, drop_main, w);
        unblock(&old);
        if (!started)
            atomic_fetch_sub(&ndropping, 1);
    }
    if (started) {
        o->drop = w;
        return;
    }
    if (w->fd >= 0)
        close(w->fd);
    free(w);
}

/* The drop of o's old file stopped (within a step) and its descriptor closed:
 * before the rename, so that the old file's last reference is never this
 * thread's, which the process would wait for as it ends (free_old). */
static void drop_end(tc_dst *o)
{
    struct tc_dst_drop *w = o->drop;
    if (!w)
        return;
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL);
    atomic_fetch_sub(&ndropping, 1);
    close(w->fd);
    free(w);
    o->drop = NULL;
}

void tc_dst_consumed(const tc_dst *o, int fd, uint64_t off, uint64_t n)
{
    struct stat st;
    if (!o || !o->drop_behind || fd < 0 || !n || fstat(fd, &st) < 0 || st.st_dev != o->old_dev ||
        st.st_ino != o->old_ino)
        return;
    drop_cache(fd, off, n);
}

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

bool tc_dst_offloads(const tc_dst *o) { return o->offload && !o->stage; }

/* What a file of this mode is, for a refusal; NULL for a regular file. */
static const char *not_regular(mode_t m)
{
    return S_ISREG(m)    ? NULL
           : S_ISDIR(m)  ? "a folder"
           : S_ISLNK(m)  ? "a symbolic link"
           : S_ISFIFO(m) ? "a named pipe (FIFO)"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

static int refuse_kind(const char *path, const char *kind, tc_diag *d)
{
    return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                      "is %s; tensorctl replaces only regular files (name a file, or remove it first)", kind);
}

static bool hex_name(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return !s[n] && (n == 40 || n == 64);
}

/* target lies in a content-addressed store: a file named by 40 or 64 hex
 * digits (its git or SHA-256 hash) in a folder "blobs" beside "snapshots"
 * (the Hugging Face cache). *dir receives the blobs folder (malloc'd). */
static bool in_store(const char *target, char **dir)
{
    const char *slash = strrchr(target, '/');
    if (!slash || !hex_name(slash + 1) || slash - target < 6 || strncmp(slash - 6, "/blobs", 6))
        return false;
    size_t dl = (size_t)(slash - target);
    char *snap = malloc(dl + 8);
    if (!snap)
        return false;
    snprintf(snap, dl + 8, "%.*s/snapshots", (int)(dl - 6), target);
    struct stat st;
    bool yes = stat(snap, &st) == 0 && S_ISDIR(st.st_mode);
    free(snap);
    if (yes && !(*dir = strndup(target, dl)))
        yes = false;
    return yes;
}

/* Finished outputs that keep their descriptor until published: a set of
 * thousands of shards would run out of descriptors, so past this many a
 * finished one takes a hidden name and closes. */
static size_t open_budget(void)
{
    static size_t budget;
    if (!budget) {
        struct rlimit r;
        if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
            r.rlim_cur = r.rlim_max;
            (void)setrlimit(RLIMIT_NOFILE, &r);
        }
        size_t lim = !getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur != RLIM_INFINITY ? (size_t)r.rlim_cur : 1024;
        budget = lim > 512 ? lim / 2 : 128;
    }
    return budget;
}

static size_t nkept_open;  /* finished outputs holding their descriptor */

/* A name for a hidden file beside target: ".BASE.tensorctl-XXXXXX". */
static char *hidden_template(const char *target)
{
    char *c1 = strdup(target), *c2 = strdup(target), *t = NULL;
    if (c1 && c2) {
        const char *dir = dirname(c1), *base = basename(c2);
        size_t n = strlen(dir) + strlen(base) + 32;
        if ((t = malloc(n)))
            snprintf(t, n, "%s/.%s.tensorctl-XXXXXX", dir, base);
    }
    free(c1);
    free(c2);
    return t;
}

/* Fill the six X of a template with random letters and digits. */
static void randomize(char *t)
{
    static const char a[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint8_t r[6];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = (uint8_t)(rand() >> 7);
    char *x = t + strlen(t) - 6;
    for (size_t i = 0; i < 6; i++)
        x[i] = a[r[i] % (sizeof a - 1)];
}

int tc_dst_open(tc_dst *o, const char *path, unsigned flags, tc_diag *d)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    if (!strcmp(path, "-"))
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                          "writing to standard output is not supported: outputs are written by seeking, "
                          "into a seekable regular file; name one");
    struct stat st;
    bool exists = lstat(path, &st) == 0;
    const char *kind = exists ? not_regular(st.st_mode) : NULL;
    if (kind && !((flags & TC_DST_IN_PLACE) && S_ISLNK(st.st_mode)))
        return refuse_kind(path, kind, d);
    if (exists && !(flags & (TC_DST_FORCE | TC_DST_IN_PLACE)))
        return tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET, "exists (use --force to replace it)");
    o->sync = !(flags & TC_DST_NO_SYNC) || (flags & TC_DST_IN_PLACE);
    o->replace = (flags & (TC_DST_FORCE | TC_DST_IN_PLACE)) != 0;
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
        if ((kind = not_regular(st.st_mode))) {
            int rc = tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                                "is %s; --in-place rewrites only regular files", kind);
            tc_dst_abort(o);
            return rc;
        }
        char *blobs = NULL;
        if (in_store(o->target, &blobs)) {
            struct stat ls;
            if (lstat(path, &ls) < 0 || !S_ISLNK(ls.st_mode)) {
                free(blobs);
                int rc = tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                                    "is a blob of a content-addressed store (its name is its content's hash, and "
                                    "other revisions may share it); rewrite it in place through the snapshot link "
                                    "that names it");
                tc_dst_abort(o);
                return rc;
            }
            o->blobs = blobs;
        }
        /* the input is the old file: its cache goes as it is read (a store's old blob stays, shared) */
        o->drop_behind = !o->blobs;
        o->old_dev = st.st_dev;
        o->old_ino = st.st_ino;
    } else if (!(o->target = strdup(path))) {
        return nomem(o, d);
    }
    if (!(o->tmp = hidden_template(o->target)))
        return nomem(o, d);
    /* unnamed until complete; where the file system cannot (no O_TMPFILE), a hidden
     * name, made and registered as one step: a signal between the two would leave it behind */
    char *dir = strndup(o->tmp, (size_t)(strrchr(o->tmp, '/') - o->tmp));
    if (!dir)
        return nomem(o, d);
    o->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    int e = errno;
    free(dir);
    if (o->fd >= 0) {
        o->unnamed = true;
    } else if (e == EOPNOTSUPP || e == EISDIR || e == EINVAL) {
        sigset_t old;
        block(&old);
        o->fd = mkostemp(o->tmp, O_CLOEXEC);
        e = errno;
        int reg = o->fd >= 0 ? pending_add(o->tmp) : 0;
        o->tmp_exists = o->fd >= 0 && !reg;
        unblock(&old);
        if (reg) {
            unlink(o->tmp);
            return nomem(o, d);
        }
    }
    if (o->fd < 0) {
        free(o->tmp);
        o->tmp = NULL;
        tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot create a file beside it: %s", strerror(e));
        tc_dst_abort(o);
        return TC_ERR_IO;
    }
    o->offload = offloads(o->fd);
    if (flags & TC_DST_IN_PLACE) {
        if ((st.st_uid != geteuid() || st.st_gid != getegid()) && fchown(o->fd, st.st_uid, st.st_gid) < 0) {
            e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET,
                       "cannot keep its owner %u:%u on the rewritten file (%s); it is left as it is",
                       (unsigned)st.st_uid, (unsigned)st.st_gid, strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
        if (fchmod(o->fd, st.st_mode & 07777) < 0) {
            e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot keep its permissions: %s", strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
    } else {
        mode_t um = umask(0);
        umask(um);
        if (fchmod(o->fd, 0666 & ~um) < 0) {
            e = errno;
            tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET, "cannot set permissions: %s", strerror(e));
            tc_dst_abort(o);
            return TC_ERR_IO;
        }
        if (exists)
            drop_old(o, path); /* --force over a regular file (checked above; never the input) */
    }
    return 0;
}

/* ---- writing ----------------------------------------------------------------- */

int tc_dst_write(tc_dst *o, const void *p, size_t n, tc_diag *d)
{
    int rc = tc_dst_pwrite(o, o->pos, p, n, d);
    if (rc)
        return rc;
    o->pos += n;
    return 0;
}

/* The most one pwrite asks for. On Linux 6.x (ext4), a buffered write of
 * 8 MiB is now and then several times slower than the same bytes in pieces
 * (420 MB: 0.05 s, but up to 0.8 s in one run of three); in pieces of up to
 * 2 MiB it is steady, and no slower. */
#define WRITE_PIECE ((size_t)2 << 20)

void tc_dst_stage(tc_dst *o, void *buf, uint64_t off, size_t n)
{
    o->stage = buf;
    o->stage_off = off;
    o->stage_len = n;
}

void tc_dst_unstage(tc_dst *o)
{
    o->stage = NULL;
    o->stage_off = 0;
    o->stage_len = 0;
}

/* Whether [off, off + n) lies in the staged range, and whether it meets it at all. */
static bool staged(const tc_dst *o, uint64_t off, uint64_t n)
{
    return o->stage && off >= o->stage_off && n <= o->stage_len && off - o->stage_off <= o->stage_len - n;
}

static bool meets_stage(const tc_dst *o, uint64_t off, uint64_t n)
{
    return o->stage && off < o->stage_off + o->stage_len && o->stage_off < off + n;
}

int tc_dst_pwrite(const tc_dst *o, uint64_t off, const void *p, size_t n, tc_diag *d)
{
    const uint8_t *b = p;
    if (staged(o, off, n)) {
        memcpy(o->stage + (off - o->stage_off), p, n);
        return 0;
    }
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
    if (!n || ((off | in_off | n) % TC_SHARE_BLOCK) || meets_stage(o, off, n))
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

/* Give the unnamed file of o the name `to` (an existing name is never replaced: EEXIST). */
static int link_unnamed(const tc_dst *o, const char *to)
{
    char p[40];
    snprintf(p, sizeof p, "/proc/self/fd/%d", o->fd);
    if (!linkat(AT_FDCWD, p, AT_FDCWD, to, AT_SYMLINK_FOLLOW))
        return 0;
    if (errno != ENOENT || access("/proc/self/fd", X_OK) == 0)
        return -1;
    return linkat(o->fd, "", AT_FDCWD, to, AT_EMPTY_PATH); /* no /proc: needs CAP_DAC_READ_SEARCH */
}

/* The unnamed file of o, complete, under a hidden name (o->tmp), registered
 * for removal on a signal. */
static int name_hidden(tc_dst *o, tc_diag *d)
{
    for (int tries = 0; tries < 64; tries++) {
        randomize(o->tmp);
        sigset_t old;
        block(&old);
        bool linked = !link_unnamed(o, o->tmp);
        int e = errno;
        if (linked && pending_add(o->tmp) < 0) {
            unlink(o->tmp);
            linked = false;
            e = ENOMEM;
        }
        unblock(&old);
        if (linked) {
            o->unnamed = false;
            o->tmp_exists = true;
            return 0;
        }
        if (e != EEXIST)
            return tc_fail_at(d, e == ENOMEM ? TC_ERR_NOMEM : TC_ERR_IO, o->path, TC_NO_OFFSET,
                              "cannot give the finished file a name beside it: %s", strerror(e));
    }
    return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot give the finished file a name beside it: %s",
                      strerror(EEXIST));
}

static int close_fd(tc_dst *o, tc_diag *d)
{
    if (o->fd < 0)
        return 0;
    int rc = close(o->fd) < 0 ? tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "close failed: %s", strerror(errno))
                              : 0;
    o->fd = -1;
    if (o->finished && nkept_open)
        nkept_open--;
    return rc;
}

int tc_dst_finish(tc_dst *o, tc_diag *d)
{
    if (o->finished || o->fd < 0)
        return 0;
    int rc = 0;
    if (o->sync && fsync(o->fd) < 0) {
        rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "fsync failed: %s", strerror(errno));
    } else if (nkept_open + 1 < open_budget()) {
        o->finished = true;
        nkept_open++;
        return 0; /* kept open, unnamed, until published */
    } else if (o->unnamed) {
        rc = name_hidden(o, d);
    }
    int rc2 = close_fd(o, d); /* closed whether or not the file was synced and named */
    o->finished = true;
    rc = rc ? rc : rc2;
    if (rc)
        tc_dst_abort(o);
    return rc;
}

static void sync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (copy) {
        int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd); /* the file is complete; a failure here loses nothing written */
            close(dfd);
        }
        free(copy);
    }
}

static void release(tc_dst *o)
{
    drop_end(o);
    if (o->finished && o->fd >= 0 && nkept_open)
        nkept_open--;
    if (o->fd >= 0)
        close(o->fd);
    free(o->tmp);
    free(o->target);
    free(o->path);
    free(o->blobs);
    free(o->blob_name);
    memset(o, 0, sizeof *o);
    o->fd = -1;
}

/* o's finished file as `to`, a name that must not exist (a new blob). */
static int place_new(tc_dst *o, const char *to, tc_diag *d)
{
    int rc = o->unnamed ? link_unnamed(o, to) : link(o->tmp, to);
    if (rc && errno == EEXIST)
        return 0; /* there already: a store's blob of the same content */
    if (rc)
        return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot put the new blob into place: %s",
                          strerror(errno));
    return 0;
}

/* A link at `at` to `text`, replacing the link there. */
static int repoint(const char *at, const char *text, const char *subject, tc_diag *d)
{
    char *t = hidden_template(at);
    if (!t)
        return tc_fail_at(d, TC_ERR_NOMEM, subject, TC_NO_OFFSET, "out of memory");
    bool made = false;
    int e = EEXIST;
    for (int tries = 0; tries < 64 && !made && e == EEXIST; tries++) {
        randomize(t);
        sigset_t old;
        block(&old);
        made = !symlink(text, t);
        e = errno;
        if (made && pending_add(t) < 0) {
            unlink(t);
            made = false;
            e = ENOMEM;
        }
        unblock(&old);
    }
    if (!made) {
        free(t);
        return tc_fail_at(d, TC_ERR_IO, subject, TC_NO_OFFSET, "cannot make the new link: %s", strerror(e));
    }
    if (rename(t, at) < 0) {
        e = errno;
        unlink(t);
        pending_drop(t);
        free(t);
        return tc_fail_at(d, TC_ERR_IO, subject, TC_NO_OFFSET, "cannot replace the link: %s", strerror(e));
    }
    pending_drop(t);
    free(t);
    return 0;
}

/* In a content-addressed store: the new content as a new blob named by its
 * hash, and the link pointed at it; the old blob is left to what else uses it. */
static int publish_blob(tc_dst *o, tc_diag *d)
{
    if (!o->blob_name) {
        int rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET,
                            "the new blob has no name (its hash was not taken); the store is left as it was");
        tc_dst_abort(o);
        return rc;
    }
    tc_buf blob = TC_BUF_INIT(0), text = TC_BUF_INIT(0);
    tc_buf_printf(&blob, "%s/%s", o->blobs, o->blob_name);
    int rc = 0;
    if (tc_buf_oom(&blob)) {
        rc = tc_fail_at(d, TC_ERR_NOMEM, o->path, TC_NO_OFFSET, "out of memory");
        goto done;
    }
    if (strcmp(tc_buf_str(&blob), o->target)) {
        if ((rc = place_new(o, tc_buf_str(&blob), d)))
            goto done;
        sync_dir_of(tc_buf_str(&blob));
        /* the link's own text with its last component renamed (relative stays relative), else the blob's path */
        char buf[PATH_MAX];
        ssize_t l = readlink(o->path, buf, sizeof buf - 1);
        const char *oldname = strrchr(o->target, '/') + 1;
        if (l > 0) {
            buf[l] = 0;
            char *last = strrchr(buf, '/');
            last = last ? last + 1 : buf;
            if (!strcmp(last, oldname)) {
                tc_buf_add(&text, buf, (size_t)(last - buf));
                tc_buf_puts(&text, o->blob_name);
            }
        }
        if (!tc_buf_len(&text))
            tc_buf_puts(&text, tc_buf_str(&blob));
        if (tc_buf_oom(&text)) {
            rc = tc_fail_at(d, TC_ERR_NOMEM, o->path, TC_NO_OFFSET, "out of memory");
            goto done;
        }
        if ((rc = repoint(o->path, tc_buf_str(&text), o->path, d)))
            goto done;
        if (o->sync)
            sync_dir_of(o->path);
    }
done:
    tc_buf_free(&blob);
    tc_buf_free(&text);
    if (o->tmp_exists) { /* placed by a link of its own: the temporary name goes */
        unlink(o->tmp);
        pending_drop(o->tmp);
        o->tmp_exists = false;
    }
    if (rc) {
        tc_dst_abort(o);
        return rc;
    }
    release(o);
    return 0;
}

/* The last reference to a replaced file, fd: its blocks (and what is left of
 * its cache) are freed as it closes, which on ext4 waits for the journal
 * (0.4 s for 400 MB on a busy disk; cp over an old file waits as long in its
 * truncation). It is freed here, before the command ends: a process left
 * behind to free it later would hold the file system busy after tensorctl
 * has exited (an umount right after would fail). */
static void free_old(int fd) { close(fd); }

/* o's finished file, named o->tmp, as o->target, over the file there. ext4
 * (unless mounted noauto_da_alloc) starts writing out a file renamed over
 * another inside the rename itself, all of it, a guard for programs that
 * replace files without fsync; a new output, or cp over an old one, never
 * waits for that (a fresh rewrite took 0.05 s, the same over its previous
 * output 0.5 s, most of it in that rename). Where durability is asked for,
 * the file is on disk already and a rename costs nothing; without it
 * (TC_DST_NO_SYNC) the two names are exchanged instead, which is as atomic
 * (the name holds the old file, then the new, never neither) and starts no
 * write-out, and the old file, now at o->tmp, is unlinked (a signal before
 * that removes it, as it would the new file before the exchange). Where the
 * exchange cannot be made (a file system without it), a plain rename. */
static int put_over(tc_dst *o)
{
    drop_end(o);
    /* a reference to the old file, so that losing its name does not free it on the way (free_old) */
    int old = open(o->target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    int rc = -1;
#ifdef RENAME_EXCHANGE
    if (!o->sync && !renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->target, RENAME_EXCHANGE)) {
        /* what was there, if it cannot be unlinked (a folder put there since
         * it was checked), goes back where it was, and rename says why not;
         * where even that fails, the new file is in place, and what was there
         * stays under the hidden name, not ours to remove */
        if (!unlink(o->tmp) || renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->target, RENAME_EXCHANGE) < 0)
            rc = 0;
    }
#endif
    if (rc)
        rc = rename(o->tmp, o->target);
    int e = errno;
    if (old >= 0)
        free_old(old);
    errno = e;
    return rc;
}

/* The finished file under its name: linked there at once where nothing is (*linked), else renamed over what
 * is (a hidden name first where the file has none yet). */
static int put_in_place(tc_dst *o, bool *linked, tc_diag *d)
{
    int rc;
    if (o->unnamed) {
        /* nothing there: the finished file takes the name at once (and never replaces one made since) */
        if (!link_unnamed(o, o->target)) {
            *linked = true;
            return 0;
        }
        int e = errno;
        if (e != EEXIST)
            return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot put the finished file into place: %s",
                              strerror(e));
        if (!o->replace)
            return tc_fail_at(d, TC_ERR_USAGE, o->path, TC_NO_OFFSET, "exists (use --force to replace it)");
        if ((rc = name_hidden(o, d)))
            return rc;
    }
    if ((rc = close_fd(o, d)))
        return rc;
    if (put_over(o) < 0)
        return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot rename the finished file into place: %s",
                          strerror(errno));
    return 0;
}

int tc_dst_publish(tc_dst *o, tc_diag *d)
{
    if (o->blobs)
        return publish_blob(o, d);
    /* only a regular file (or nothing) is ever replaced, whatever appeared there since */
    struct stat st;
    const char *kind = lstat(o->target, &st) == 0 ? not_regular(st.st_mode) : NULL;
    if (kind) {
        int rc = refuse_kind(o->path, kind, d);
        tc_dst_abort(o);
        return rc;
    }
    bool linked = false;
    int rc = put_in_place(o, &linked, d);
    if (rc) {
        tc_dst_abort(o);
        return rc;
    }
    if (!linked) { /* renamed: the temporary name is gone */
        pending_drop(o->tmp);
        o->tmp_exists = false;
    }
    if (o->sync)
        sync_dir_of(o->target);
    release(o);
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
    if (o->tmp_exists) {
        unlink(o->tmp);
        pending_drop(o->tmp);
    }
    release(o);
}

/* ---- content-addressed stores -------------------------------------------------- */

const char *tc_dst_blob(const tc_dst *o) { return o->blobs ? o->target : NULL; }

int tc_dst_set_blob_name(tc_dst *o, const char *hex, tc_diag *d)
{
    if (!o->blobs || !hex_name(hex))
        return tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "'%.70s' is no blob name", hex);
    free(o->blob_name);
    if (!(o->blob_name = strdup(hex)))
        return tc_fail_at(d, TC_ERR_NOMEM, o->path, TC_NO_OFFSET, "out of memory");
    return 0;
}

int tc_dst_read_fd(const tc_dst *o)
{
    if (o->fd >= 0)
        return dup(o->fd);
    return o->tmp_exists ? open(o->tmp, O_RDONLY | O_CLOEXEC) : -1;
}
