/* scan: the walk, the threads and the order of the results (scan.h).
 *
 * The caller's thread walks the roots and hands each regular file to the
 * workers as a numbered slot of a ring; the workers judge files in any order
 * (scan_judge.c); the caller's thread hands the results on in slot order as
 * they complete. When the ring is full it judges queued files itself until
 * the oldest is done, and waits only when every queued file is taken (so
 * --jobs N is N - 1 workers and the walk, which on N cores keeps them all
 * busy without a thread too many). So the output does not depend on the
 * number of threads, and what is held at any time is one ring of results.
 * A file's results are handed on a batch at a time (scan_flush) once it is
 * the oldest, so that an archive of a million members is never held whole:
 * a worker's batch waits in its slot for the caller's thread, which hands
 * it on; a file the caller's thread judges itself hands on what comes
 * before it, then its own batch.
 *
 * Links: a first walk of the roots notes every file a symlink points to;
 * the second judges such a file under the first link's name, and when the
 * walk meets the file itself first (a Hugging Face cache lists blobs/ before
 * snapshots/), it defers it to the end, where it is judged only if no link
 * reached it. Files with several names (hard links, several symlinks) are
 * judged once; every folder is walked once, whichever way it is reached. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "buf.h"
#include "map.h"
#include "scan_int.h"
#include "scan_libarchive.h"

typedef struct slot {
    bool task;             /* a file for a worker; else an item the walk made */
    bool listed;           /* a task the walk did not stat: its other names are looked for as it is handed on */
    bool done;
    bool settled;          /* listed: its other names were looked for (before its first items were handed on) */
    bool unwanted;         /* ... and it had been judged under one of them: its items are not handed on */
    scan_fstat fst;        /* what the worker found the file to be */
    char *path, *target;
    char *dup_of;          /* unwanted: why ("the same file as ...") */
    uint64_t size;
    scan_items items;
    scan_items batch;      /* items its judge handed on early, waiting for the caller's thread */
    uint64_t archives, skipped;
} slot;

/* A folder's entry: its name, and what the listing says it is. */
typedef struct dir_ent {
    char *name;
    uint64_t ino;
    unsigned char type;
} dir_ent;

typedef TC_VEC(dir_ent) dir_list;

typedef struct scan {
    const tc_scan_opts *o;
    tc_scan_totals *t;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_cond_t turn;   /* the oldest slot changed, or its batch was handed on */
    slot *ring;
    uint64_t *queue;       /* slot numbers waiting for a worker, a ring of nring */
    size_t nring;
    uint64_t produced, emitted, qhead, qtail;
    bool closing;
    unsigned idle;         /* workers waiting for work */
    unsigned started;      /* workers that began */
    bool waiting;          /* the caller's thread waits for a slot to be done */
    bool urgent;           /* ... inside a file it judges: every file done and every batch wakes it */
    size_t batch;          /* items of a file held before they are handed on */
    size_t done_since;     /* files judged since it began to wait */
    int fatal;
    bool collect;          /* the first walk: only links are noted */
    tc_map dirs;           /* (dev, ino) of folders walked in this walk */
    TC_VEC(dir_list) kept; /* the first walk's listings, for the second */
    tc_map kept_at;        /* (dev, ino) of a folder -> its listing in kept */
    size_t kept_bytes;
    tc_map pointed;        /* (dev, ino) of files a symlink points to -> 0 */
    tc_map named;          /* (dev, ino) of files judged that have other names -> index into names */
    TC_VEC(char *) names;
    TC_VEC(char *) deferred;
    char *dbuf;            /* the walk's getdents64 buffer, DIR_BUF bytes */
    bool fs_known;         /* fs_dev's file system is known: a kernel one (fs_kernel names it), or not */
    uint64_t fs_dev;
    const char *fs_kernel;
} scan;

#define DIR_BUF ((size_t)32 << 10)

/* The file of slot number `no`, being judged by a worker or (walker) by the caller's thread. */
typedef struct hand {
    scan *s;
    uint64_t no;
    bool walker;
} hand;

static int hand_on(void *ctx, scan_items *items);

/* Judge the file first in the queue (there is one; called and returning with the lock held;
 * walker: on the caller's thread). */
static void judge_next(scan *s, bool walker)
{
    uint64_t no = s->queue[s->qhead++ % s->nring];
    slot *sl = &s->ring[no % s->nring];
    hand h = {s, no, walker};
    scan_flush fl = {hand_on, &h, s->batch};
    pthread_mutex_unlock(&s->mu);
    int rc = scan_file(s->o, sl->path, sl->size, &sl->items, &fl, &sl->archives, &sl->skipped, &sl->fst);
    pthread_mutex_lock(&s->mu);
    if (rc && !s->fatal)
        s->fatal = rc;
    sl->done = true;
    /* the caller's thread, waiting for room in a full ring, is woken once a quarter of it
     * is judged (or nothing is left to hand out), not for each file: else each file would
     * cost two turns between threads */
    if (s->waiting && (s->urgent || ++s->done_since >= s->nring / 4 || s->qhead == s->qtail))
        pthread_cond_signal(&s->done);
}

static void *worker(void *arg)
{
    scan *s = arg;
    pthread_mutex_lock(&s->mu);
    bool first = !s->started++;
    pthread_mutex_unlock(&s->mu);
    if (first) /* libarchive loads while the walk begins, not when the first archive waits for it */
        scan_la_load(NULL);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->qhead == s->qtail && !s->closing) {
            s->idle++;
            pthread_cond_wait(&s->work, &s->mu);
            s->idle--;
        }
        if (s->qhead == s->qtail)
            break;
        judge_next(s, false);
    }
    pthread_mutex_unlock(&s->mu);
    scan_stream_thread_end();
    return NULL;
}

static int first_name(scan *s, const char *path, uint64_t dev, uint64_t ino, bool *dup, tc_buf *why);

/* One more skipped item of the kind skip, counted in t (beside t->skipped). */
static void count_skip(tc_scan_totals *t, scan_skip skip)
{
    t->other_names += skip == SCAN_SKIP_OTHER_NAME;
    t->special += skip == SCAN_SKIP_SPECIAL;
    t->kernel_folders += skip == SCAN_SKIP_KERNEL;
}

/* A file the walk listed without a stat, now judged, before the first of its items is handed on:
 * when it has other names (hard links) and one of them was judged before, it is not judged again,
 * just as walk_file decides for files it stats (sl->unwanted). That is decided here, in walk
 * order, for only the judge has the file's identity. */
static void settle_listed(scan *s, slot *sl)
{
    sl->settled = true;
    sl->size = sl->fst.size;
    if (!sl->fst.known || sl->fst.nlink < 2)
        return;
    bool dup;
    tc_buf r = TC_BUF_INIT(2000);
    int rc = first_name(s, sl->path, sl->fst.dev, sl->fst.ino, &dup, &r);
    if (rc || !dup)
        goto done;
    if (!(sl->dup_of = tc_buf_take(&r))) {
        rc = TC_ERR_NOMEM;
        goto done;
    }
    sl->unwanted = true;
done:
    tc_buf_free(&r);
    if (rc && !s->fatal)
        s->fatal = rc;
}

/* An unwanted file's results, once it is done: only that it is another name of one judged before. */
static void unwanted_item(scan *s, slot *sl)
{
    scan_items_free(&sl->items);
    scan_items_free(&sl->batch);
    sl->archives = sl->skipped = 0;
    sl->task = false; /* as walk_item makes it */
    if (!s->o->report_skipped) {
        s->t->skipped++;
        count_skip(s->t, SCAN_SKIP_OTHER_NAME);
        return;
    }
    scan_job j = {.o = s->o, .path = sl->path, .out = &sl->items};
    scan_item *it = scan_emit(&j, "link", NULL, TC_SCAN_SKIPPED, sl->size, sl->dup_of);
    if (it)
        it->skip = SCAN_SKIP_OTHER_NAME;
    else if (!s->fatal)
        s->fatal = TC_ERR_NOMEM;
}

/* Count and hand on items of the oldest slot sl, then free them (on the caller's thread). */
static void deliver_items(scan *s, const slot *sl, scan_items *items)
{
    tc_scan_totals *t = s->t;
    for (size_t i = 0; i < items->n; i++) {
        const scan_item *x = &items->v[i];
        uint64_t *count[] = {&t->safe, &t->unsafe, &t->unreadable, &t->skipped};
        (*count[x->verdict])++;
        if (x->verdict == TC_SCAN_SKIPPED)
            count_skip(t, x->skip);
        t->members += x->member.n && x->verdict != TC_SCAN_SKIPPED;
        if (x->verdict == TC_SCAN_SKIPPED && !s->o->report_skipped)
            continue;
        tc_scan_item it = {sl->path, (const char *const *)x->member.v, x->member.n, sl->target, x->kind, x->verdict,
                           x->size, x->reason, x->globals.v, x->globals.n, (const char *const *)x->hazards.v,
                           x->hazards.n};
        if (s->o->on_item)
            s->o->on_item(s->o->ctx, &it);
    }
    scan_items_free(items);
}

/* Items of the oldest slot sl, which is not done, handed on early (on the caller's thread). 1 when
 * the file is unwanted (the items are then dropped), else 0. */
static int deliver_early(scan *s, slot *sl, scan_items *items)
{
    if (sl->listed && !sl->settled)
        settle_listed(s, sl);
    if (sl->unwanted) {
        scan_items_free(items);
        return 1;
    }
    deliver_items(s, sl, items);
    return 0;
}

/* Hand on the oldest slot's results (it is done) and free it. */
static void deliver(scan *s, slot *sl)
{
    tc_scan_totals *t = s->t;
    if (sl->task && sl->listed && !sl->settled)
        settle_listed(s, sl);
    if (sl->unwanted)
        unwanted_item(s, sl);
    if (sl->task) {
        t->files++;
        t->bytes += sl->size;
    }
    t->archives += sl->archives;
    t->skipped += sl->skipped;
    deliver_items(s, sl, &sl->batch);
    deliver_items(s, sl, &sl->items);
    free(sl->path);
    free(sl->target);
    free(sl->dup_of);
    memset(sl, 0, sizeof *sl);
}

/* The batch a worker left in the oldest slot sl, handed on (called and returning with the lock
 * held): the worker waits for it to be taken before it leaves another, and learns then whether
 * the file is wanted. */
static void deliver_batch(scan *s, slot *sl)
{
    scan_items b = sl->batch; /* sl->batch stays set until it is handed on */
    pthread_mutex_unlock(&s->mu);
    deliver_early(s, sl, &b);
    pthread_mutex_lock(&s->mu);
    sl->batch = (scan_items){0};
    pthread_cond_broadcast(&s->turn);
}

/* The oldest slot (it is done) handed on (called and returning with the lock held). */
static void deliver_oldest(scan *s, slot *sl)
{
    pthread_mutex_unlock(&s->mu);
    deliver(s, sl);
    pthread_mutex_lock(&s->mu);
    s->emitted++;
    pthread_cond_broadcast(&s->turn);
}

/* The oldest slot handed on if it is done, or the batch its worker left (called and returning with
 * the lock held): 2 when the slot was handed on whole, 1 for a batch, 0 when it has neither yet. */
static int hand_on_oldest(scan *s)
{
    slot *o = &s->ring[s->emitted % s->nring];
    if (o->done) {
        deliver_oldest(s, o);
        return 2;
    }
    if (o->batch.n) {
        deliver_batch(s, o);
        return 1;
    }
    return 0;
}

/* scan_flush's fn for the file of slot h->no: its items so far, handed on once it is the oldest
 * (items is that slot's own list). A worker leaves them in the slot for the caller's thread; the
 * caller's thread, judging the file itself, hands on every slot before it first. */
static int hand_on(void *ctx, scan_items *items)
{
    hand *h = ctx;
    scan *s = h->s;
    slot *sl = &s->ring[h->no % s->nring];
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (!h->walker) {
        while (s->emitted != h->no || sl->batch.n)
            pthread_cond_wait(&s->turn, &s->mu);
        if (sl->unwanted) { /* (said when its first batch was handed on) */
            scan_items_free(items);
            rc = 1;
        } else {
            sl->batch = *items;
            *items = (scan_items){0};
            if (s->waiting)
                pthread_cond_signal(&s->done);
        }
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    while (s->emitted != h->no)
        if (!hand_on_oldest(s)) { /* its judge is a worker: wait for it to finish or leave a batch */
            s->waiting = s->urgent = true;
            pthread_cond_wait(&s->done, &s->mu);
            s->waiting = s->urgent = false;
        }
    pthread_mutex_unlock(&s->mu);
    return deliver_early(s, sl, items);
}

/* Deliver the slots that are done, in order; with `wait`, at least the oldest. */
static void drain(scan *s, bool wait)
{
    pthread_mutex_lock(&s->mu);
    while (s->emitted < s->produced) {
        int got = hand_on_oldest(s);
        if (got) {
            wait = wait && got == 1; /* (a batch is part of the oldest: it is not done yet) */
            continue;
        }
        if (!wait)
            break;
        if (s->qhead != s->qtail) { /* files wait for a judge: this thread is one while the ring is full */
            judge_next(s, true);
            continue;
        }
        s->waiting = true;
        s->done_since = 0;
        pthread_cond_wait(&s->done, &s->mu);
        s->waiting = false;
    }
    pthread_mutex_unlock(&s->mu);
}

/* The next slot, once the ring has room (its results so far handed on). */
static slot *next_slot(scan *s)
{
    while (s->produced - s->emitted >= s->nring)
        drain(s, true);
    return &s->ring[s->produced % s->nring];
}

/* A file for the workers (path and target are taken over; listed: not stat'd, size unknown). */
static int submit(scan *s, char *path, char *target, uint64_t size, bool listed)
{
    slot *sl = next_slot(s);
    sl->task = true;
    sl->listed = listed;
    sl->path = path;
    sl->target = target;
    sl->size = size;
    pthread_mutex_lock(&s->mu);
    s->queue[s->qtail++ % s->nring] = s->produced++;
    if (s->idle)
        pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    drain(s, false);
    return 0;
}

/* A regular file for the workers that the walk did not stat. */
static int submit_listed(scan *s, const char *path)
{
    char *p = strdup(path);
    return p ? submit(s, p, NULL, SCAN_SIZE_UNKNOWN, true) : TC_ERR_NOMEM;
}

/* An item the walk makes itself (a file it cannot reach, a duplicate; skip: why it is skipped). */
static int walk_item(scan *s, const char *path, const char *kind, tc_scan_verdict v, scan_skip skip, const char *why,
                     uint64_t size)
{
    if (v == TC_SCAN_SKIPPED && !s->o->report_skipped) {
        s->t->skipped++;
        count_skip(s->t, skip);
        return 0;
    }
    slot *sl = next_slot(s);
    scan_job j = {.o = s->o, .path = path, .out = &sl->items}; /* emits only: no judge */
    scan_item *it = NULL;
    if (!(sl->path = strdup(path)) || !(it = scan_emit(&j, kind, NULL, v, size, why))) {
        free(sl->path);
        sl->path = NULL;
        return TC_ERR_NOMEM;
    }
    it->skip = skip;
    pthread_mutex_lock(&s->mu);
    sl->done = true;
    s->produced++;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int walk_at(scan *s, int dirfd, const char *name, const char *path, unsigned depth);
static int walk(scan *s, const char *path) { return walk_at(s, AT_FDCWD, path, path, 0); }

/* Folders deeper than this are named by their paths, so that the walk holds at most this many open */
#define WALK_FDS 64

/* Whether the file (dev, ino) had a name judged before (*dup; *why then says which). 0, or
 * TC_ERR_NOMEM. */
static int same_as(scan *s, uint64_t dev, uint64_t ino, bool *dup, tc_buf *why)
{
    uint64_t *first = tc_map_find2(&s->named, dev, ino);
    *dup = first != NULL;
    if (!first)
        return 0;
    tc_buf_puts(why, "the same file as ");
    tc_buf_esc(why, s->names.v[*first], strlen(s->names.v[*first]));
    return tc_buf_oom(why) ? TC_ERR_NOMEM : 0;
}

/* same_as, and when it had none, path noted as its first name. */
static int first_name(scan *s, const char *path, uint64_t dev, uint64_t ino, bool *dup, tc_buf *why)
{
    int rc = same_as(s, dev, ino, dup, why);
    if (rc || *dup)
        return rc;
    char *p = strdup(path);
    if (!p || tc_vec_push(&s->names, p)) {
        free(p);
        return TC_ERR_NOMEM;
    }
    return tc_map_put2(&s->named, dev, ino, s->names.n - 1, NULL) < 0 ? TC_ERR_NOMEM : 0;
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const dir_ent *)a)->name, ((const dir_ent *)b)->name);
}

static void list_free(dir_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].name);
    tc_vec_free(l);
}

/* What the first walk keeps of its listings for the second, at most (beyond it, the second walk
 * lists those folders again): so that a tree is listed once, in bounded memory. */
#define KEEP_BYTES ((size_t)16 << 20)

/* The entries of the folder open as fd in name order, read with getdents64 into the walk's own
 * buffer (opendir would fstat the folder, set its flags twice and allocate a buffer of its own,
 * three system calls and a malloc a folder). keep: every entry (the first walk keeps them for the
 * second); else the first walk leaves regular files out. A read that fails ends the listing, as
 * readdir's end does. 0, or TC_ERR_NOMEM. */
static int read_dir(scan *s, int fd, bool keep, dir_list *out)
{
    dir_list l = {0};
    for (;;) {
        ssize_t got = getdents64(fd, s->dbuf, DIR_BUF);
        if (got <= 0)
            break;
        for (size_t at = 0; at < (size_t)got;) {
            const struct dirent64 *e = (const struct dirent64 *)(s->dbuf + at); /* (records of d_reclen bytes) */
            at += e->d_reclen;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            /* the first walk notes only where links lead: a regular file it need not even stat */
            if (s->collect && !keep && e->d_type == DT_REG)
                continue;
            dir_ent x = {strdup(e->d_name), (uint64_t)e->d_ino, e->d_type};
            if (!x.name || tc_vec_push(&l, x)) {
                free(x.name);
                list_free(&l);
                return TC_ERR_NOMEM;
            }
            if (keep)
                s->kept_bytes += sizeof x + strlen(x.name) + 1;
        }
    }
    if (l.n) /* (none: an empty folder, or the first walk's folder of regular files only) */
        qsort(l.v, l.n, sizeof *l.v, cmp_ent);
    *out = l;
    return 0;
}

/* The kernel's own file systems, by statfs's f_type: their files are made by the kernel as they are
 * read (processes, devices, settings), so no model file lies there, and a walk into them reads
 * thousands of files that are not (many unreadable) and, through /proc/PID/root, the whole system
 * again. The walk does not enter such a folder; a root the command names is walked whatever it is. */
static const struct {
    unsigned long type;
    const char *name;
} kernel_fs[] = {
    {0x9fa0, "proc"},          {0x62656572, "sysfs"},      {0x1cd1, "devpts"},     {0x27e0eb, "cgroup"},
    {0x63677270, "cgroup2"},   {0x64626720, "debugfs"},    {0x74726163, "tracefs"}, {0x73636673, "securityfs"},
    {0xcafe4a11, "bpf"},       {0x6165676c, "pstore"},     {0x62656570, "configfs"}, {0x65735543, "fusectl"},
    {0xf97cff8c, "selinuxfs"}, {0xde5e81e4, "efivarfs"},   {0x42494e4d, "binfmt_misc"}, {0x19800202, "mqueue"},
    {0x6e736673, "nsfs"},
};

/* The name of the kernel file system the folder name (in at) lies on, of device dev, or NULL. The
 * answer for the last device asked about is kept: a walk stays on one file system but where a
 * mount point leads it to another. */
static const char *kernel_fs_of(scan *s, int at, const char *name, uint64_t dev)
{
    if (s->fs_known && s->fs_dev == dev)
        return s->fs_kernel;
    struct statfs sf;
    int fd = openat(at, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
    bool got = fd >= 0 && fstatfs(fd, &sf) == 0;
    if (fd >= 0)
        close(fd);
    if (!got)
        return NULL; /* (not kept: walk_dir says why it cannot read the folder) */
    s->fs_kernel = NULL;
    for (size_t i = 0; i < sizeof kernel_fs / sizeof *kernel_fs && !s->fs_kernel; i++)
        if ((unsigned long)sf.f_type == kernel_fs[i].type)
            s->fs_kernel = kernel_fs[i].name;
    s->fs_known = true;
    s->fs_dev = dev;
    return s->fs_kernel;
}

/* The folder name (in the folder at) at path: its entries in name order (as the first walk listed
 * them, where it kept its listing), each looked up in it. A regular file no symlink points to is
 * handed to the judges unstat'd: they open it anyway. */
static int walk_dir(scan *s, int at, const char *name, const char *path, const struct stat *st, unsigned depth)
{
    uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
    const char *kfs = depth ? kernel_fs_of(s, at, name, dev) : NULL;
    if (kfs) {
        if (s->collect)
            return 0;
        tc_buf r = TC_BUF_INIT(200);
        tc_buf_printf(&r, "a folder of the kernel's %s file system, which holds no model files: not walked "
                      "(name it to scan it)", kfs);
        int rc = walk_item(s, path, "kernel folder", TC_SCAN_SKIPPED, SCAN_SKIP_KERNEL, tc_buf_str(&r), 0);
        tc_buf_free(&r);
        return rc;
    }
    int p = tc_map_put2(&s->dirs, dev, ino, 0, NULL);
    if (p <= 0)
        return p < 0 ? TC_ERR_NOMEM : 0; /* walked already: a link to a folder of the tree, or a loop */
    uint64_t *k = s->collect ? NULL : tc_map_find2(&s->kept_at, dev, ino);
    bool keep = s->collect && s->kept_bytes < KEEP_BYTES;
    bool lazy = k && s->kept.v[*k].v; /* listed by the first walk: opened only to look an entry up */
    int fd = lazy ? -1 : openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dir_list names = {0};
    int rc = 0;
    if (lazy) { /* this walk takes the listing over */
        names = s->kept.v[*k];
        s->kept.v[*k] = (dir_list){0};
    } else if (fd >= 0 && (rc = read_dir(s, fd, keep, &names))) {
        goto done;
    }
    if (fd < 0 && !lazy) {
        int e = errno;
        if (s->collect)
            return 0;
        tc_buf r = TC_BUF_INIT(300);
        tc_buf_printf(&r, "cannot read the folder: %s", strerror(e));
        rc = walk_item(s, path, "folder", TC_SCAN_UNREADABLE, SCAN_SKIP_NOT_MODEL, tc_buf_str(&r), 0);
        tc_buf_free(&r);
        return rc;
    }
    if (depth >= WALK_FDS) { /* entries looked up by their paths: the folder is not held open */
        if (fd >= 0)
            close(fd);
        fd = -1;
        lazy = false;
    }
    size_t l = strlen(path);
    bool slash = l && path[l - 1] == '/';
    for (size_t i = 0; i < names.n && !rc && !s->fatal; i++) {
        const dir_ent *x = &names.v[i];
        if (s->collect && x->type == DT_REG)
            continue; /* listed only to be kept */
        tc_buf child = TC_BUF_INIT(0);
        tc_buf_add(&child, path, l);
        if (!slash)
            tc_buf_add(&child, "/", 1);
        tc_buf_puts(&child, x->name);
        const char *cp = tc_buf_str(&child);
        /* a link's target is known by the inode its stat gave, which the listing gives too (unless a
         * file is mounted over the entry: then it is judged under both names) */
        bool listed = x->type == DT_REG && !tc_map_find2(&s->pointed, dev, x->ino);
        if (!listed && lazy) { /* (if it cannot be opened now, its entries are looked up by their paths) */
            fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            lazy = false;
        }
        if (tc_buf_oom(&child))
            rc = TC_ERR_NOMEM;
        else if (listed)
            rc = submit_listed(s, cp);
        else
            rc = walk_at(s, fd >= 0 ? fd : AT_FDCWD, fd >= 0 ? x->name : cp, cp, depth + 1);
        tc_buf_free(&child);
    }
    if (rc || !keep || !names.n)
        goto done;
    if (tc_vec_push(&s->kept, names)) {
        rc = TC_ERR_NOMEM;
        goto done;
    }
    names = (dir_list){0}; /* the kept listings' now */
    if (tc_map_put2(&s->kept_at, dev, ino, s->kept.n - 1, NULL) < 0)
        rc = TC_ERR_NOMEM;
done:
    if (fd >= 0)
        close(fd);
    list_free(&names);
    return rc;
}

/* A regular file the walk reached at path (through a symlink when link;
 * late: deferred to the end, when no link reached it). */
static int walk_file(scan *s, const char *path, const struct stat *st, bool link, bool late)
{
    uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
    if (s->collect) {
        if (link && tc_map_put2(&s->pointed, dev, ino, 0, NULL) < 0)
            return TC_ERR_NOMEM;
        return 0;
    }
    bool pointed = tc_map_find2(&s->pointed, dev, ino) != NULL;
    /* a file no link points to may share its identity with a listed one (a hard link, named again
     * as a root): their names are noted as they are handed on, so those before are handed on first */
    if (!link && !pointed && st->st_nlink > 1)
        while (s->emitted < s->produced)
            drain(s, true);
    if (link || pointed || st->st_nlink > 1) {
        bool defer = !link && pointed && !late; /* a symlink names it: judged under that name, or at the end */
        bool dup;
        tc_buf r = TC_BUF_INIT(2000);
        int rc = defer ? same_as(s, dev, ino, &dup, &r) : first_name(s, path, dev, ino, &dup, &r);
        if (rc || dup) {
            if (dup && !rc) /* judged under an earlier name */
                rc = walk_item(s, path, "link", TC_SCAN_SKIPPED, SCAN_SKIP_OTHER_NAME, tc_buf_str(&r),
                               (uint64_t)st->st_size);
            tc_buf_free(&r);
            return rc;
        }
        tc_buf_free(&r);
        if (defer) {
            char *p = strdup(path);
            if (!p || tc_vec_push(&s->deferred, p)) {
                free(p);
                return TC_ERR_NOMEM;
            }
            return 0;
        }
    }
    char *path2 = strdup(path), *target = link ? realpath(path, NULL) : NULL;
    if (!path2) {
        free(target);
        return TC_ERR_NOMEM;
    }
    return submit(s, path2, target, (uint64_t)st->st_size, false);
}

/* What the walk meets at path, looked up as name in the folder dirfd. */
static int walk_at(scan *s, int dirfd, const char *name, const char *path, unsigned depth)
{
    struct stat lst, st;
    if (fstatat(dirfd, name, &lst, AT_SYMLINK_NOFOLLOW) < 0) {
        if (s->collect)
            return 0;
        tc_buf r = TC_BUF_INIT(300);
        tc_buf_printf(&r, "cannot open: %s", strerror(errno));
        int rc = walk_item(s, path, "unreadable", TC_SCAN_UNREADABLE, SCAN_SKIP_NOT_MODEL, tc_buf_str(&r), 0);
        tc_buf_free(&r);
        return rc;
    }
    bool link = S_ISLNK(lst.st_mode);
    st = lst;
    if (link && fstatat(dirfd, name, &st, 0) < 0) {
        if (s->collect)
            return 0;
        int e = errno;
        char to[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, to, sizeof to - 1);
        to[n < 0 ? 0 : n] = 0;
        tc_buf r = TC_BUF_INIT(PATH_MAX + 200);
        tc_buf_puts(&r, "a symlink to ");
        tc_buf_esc(&r, to, strlen(to));
        tc_buf_printf(&r, ", which cannot be reached: %s", strerror(e));
        int rc = walk_item(s, path, "symlink", TC_SCAN_UNREADABLE, SCAN_SKIP_NOT_MODEL, tc_buf_str(&r), 0);
        tc_buf_free(&r);
        return rc;
    }
    if (S_ISDIR(st.st_mode))
        return walk_dir(s, dirfd, name, path, &st, depth);
    if (S_ISREG(st.st_mode))
        return walk_file(s, path, &st, link, false);
    if (s->collect)
        return 0;
    const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
    tc_buf r = TC_BUF_INIT(100);
    tc_buf_printf(&r, "not a regular file (%s): never opened", what);
    int rc = walk_item(s, path, "special file", TC_SCAN_SKIPPED, SCAN_SKIP_SPECIAL, tc_buf_str(&r), 0);
    tc_buf_free(&r);
    return rc;
}

/* The files deferred for a link that never came: judged under their own names. */
static int walk_deferred(scan *s)
{
    int rc = 0;
    for (size_t i = 0; i < s->deferred.n && !rc && !s->fatal; i++) {
        struct stat st;
        const char *p = s->deferred.v[i];
        if (stat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
            rc = walk(s, p);
            continue;
        }
        bool dup;
        tc_buf r = TC_BUF_INIT(2000);
        rc = same_as(s, (uint64_t)st.st_dev, (uint64_t)st.st_ino, &dup, &r);
        if (dup && !rc) /* judged through a link */
            rc = walk_item(s, p, "link target", TC_SCAN_SKIPPED, SCAN_SKIP_OTHER_NAME, tc_buf_str(&r),
                           (uint64_t)st.st_size);
        tc_buf_free(&r);
        if (rc || dup)
            continue;
        rc = walk_file(s, p, &st, false, true); /* no link reached it after all */
    }
    return rc;
}

static unsigned online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (unsigned)n;
}

int tc_scan_run(const char *const *roots, size_t nroots, const tc_scan_opts *o, tc_scan_totals *t, tc_diag *d)
{
    memset(t, 0, sizeof *t);
    scan s = {0};
    s.o = o;
    s.t = t;
    unsigned nth = o->jobs ? o->jobs : online_cpus();
    s.nring = nth * 8 < 64 ? 64 : (size_t)nth * 8;
    s.ring = calloc(s.nring, sizeof *s.ring);
    s.queue = calloc(s.nring, sizeof *s.queue);
    pthread_t *th = calloc(nth, sizeof *th);
    s.dbuf = malloc(DIR_BUF);
    if (!s.ring || !s.queue || !th || !s.dbuf) {
        free(s.ring);
        free(s.queue);
        free(th);
        free(s.dbuf);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.work, NULL);
    pthread_cond_init(&s.done, NULL);
    pthread_cond_init(&s.turn, NULL);
    s.batch = o->batch ? o->batch : 256;
    /* nth judges: this thread (while the ring is full, and at the end) and nth - 1 workers; if
     * fewer start, the same results come slower */
    unsigned started = 0;
    int rc = 0;
    for (; started + 1 < nth; started++)
        if (pthread_create(&th[started], NULL, worker, &s))
            break;
    /* the first walk notes what links point to */
    s.collect = true;
    for (size_t i = 0; !rc && i < nroots; i++)
        rc = walk(&s, roots[i]);
    tc_map_free(&s.dirs);
    s.collect = false;
    for (size_t i = 0; !rc && i < nroots && !s.fatal; i++)
        rc = walk(&s, roots[i]);
    if (rc)
        goto done;
    rc = walk_deferred(&s);
done:
    /* let the workers finish what is queued, then hand on the rest */
    while (s.emitted < s.produced)
        drain(&s, true);
    pthread_mutex_lock(&s.mu);
    s.closing = true;
    pthread_cond_broadcast(&s.work);
    pthread_mutex_unlock(&s.mu);
    for (unsigned i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    scan_stream_thread_end(); /* this thread judged files too */
    rc = rc ? rc : s.fatal; /* the walk's failure first, then the workers' */
    if (rc == TC_ERR_NOMEM && !d->code)
        tc_fail(d, rc, "out of memory");
    for (size_t i = 0; i < s.nring; i++)
        if (s.ring[i].path || s.ring[i].items.n || s.ring[i].batch.n) {
            scan_items_free(&s.ring[i].items);
            scan_items_free(&s.ring[i].batch);
            free(s.ring[i].path);
            free(s.ring[i].target);
            free(s.ring[i].dup_of);
        }
    for (size_t i = 0; i < s.names.n; i++)
        free(s.names.v[i]);
    tc_vec_free(&s.names);
    for (size_t i = 0; i < s.deferred.n; i++)
        free(s.deferred.v[i]);
    tc_vec_free(&s.deferred);
    tc_map_free(&s.dirs);
    for (size_t i = 0; i < s.kept.n; i++)
        list_free(&s.kept.v[i]);
    tc_vec_free(&s.kept);
    tc_map_free(&s.kept_at);
    tc_map_free(&s.pointed);
    tc_map_free(&s.named);
    pthread_cond_destroy(&s.work);
    pthread_cond_destroy(&s.done);
    pthread_cond_destroy(&s.turn);
    pthread_mutex_destroy(&s.mu);
    free(s.ring);
    free(s.queue);
    free(th);
    free(s.dbuf);
    return rc;
}
