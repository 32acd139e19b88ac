/* Byte destinations: output files that appear whole or not at all.
 *
 * tc_dst_open makes an unnamed file (O_TMPFILE) in the folder where the
 * output lands, or, where the file system cannot, a hidden temporary there;
 * writes go to it (sequentially with tc_dst_write, or at given offsets with
 * tc_dst_pwrite, which several threads may call at once). tc_dst_finish
 * makes the bytes durable (fsync); tc_dst_publish gives the file its name
 * and syncs the folder (neither syncs with TC_DST_NO_SYNC). tc_dst_commit
 * does both; a set of outputs is finished one by one and published together.
 * tc_dst_abort throws the file away. An unnamed file has no name to leave
 * behind, however the process ends, SIGKILL included; a name is given only to
 * a complete file: at once where nothing is there, else a hidden name renamed
 * over the old file, or with TC_DST_NO_SYNC exchanged with it and the old
 * file then unlinked (a process killed with SIGKILL between the two steps
 * leaves a complete hidden copy of the new file, or of the old one), and every
 * signal that ends the process removes such names when
 * tc_dst_cleanup_on_signals was called.
 *
 * Only a regular file, or a name that is free, is ever replaced: a folder, a
 * link, a named pipe, a device or a socket at the output's name is refused,
 * --force or not; so is "-" (standard output, not written to yet).
 *
 * In place (TC_DST_IN_PLACE): the output replaces an existing file, keeping
 * its mode and owner; when the path is a symbolic link, the file it points to
 * is replaced and the link stays. A link into a content-addressed store (a
 * file named by 40 or 64 hex digits in a "blobs" folder beside "snapshots":
 * the Hugging Face cache) is different: the blob is shared by every revision
 * that links to it and its name is its content's hash, so the new content
 * becomes a new blob, named by the caller (tc_dst_set_blob_name) with its
 * SHA-256, and only that one link is pointed at it; the old blob stays.
 *
 * Replacing (--force over an existing file, or in place) must cost no more
 * than writing a new file. The old file's page cache would otherwise stay
 * until the rename, which then frees all of it on the critical path, while
 * the new file's pages are allocated from memory the old one still holds (on
 * a virtual machine that hands freed memory back to its host, each of those
 * pages is fetched back from the host). So the old file's clean cached pages
 * are dropped early: over --force, all of them at once on a thread of their
 * own from tc_dst_open on; in place, where the old file is the input, each
 * range as soon as it has been read (tc_dst_consumed). Only the cache goes:
 * the old file's bytes stay on disk, untouched, until the rename, and a
 * dirty page (written but not yet on disk) is never pushed out for this.
 *
 * Every failure names the output path as its subject.
 *
 * Ownership: a tc_dst owns its descriptor and path copies; tc_dst_abort and
 * tc_dst_commit release them and accept a zeroed or finished tc_dst. */
#ifndef TC_DEST_H
#define TC_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "diag.h"

enum {
    TC_DST_FORCE = 1,    /* replace an existing file */
    TC_DST_IN_PLACE = 2, /* the path is the input itself: keep its mode, owner and links */
    TC_DST_NO_SYNC = 4,  /* leave durability to the system: no fsync of the file or its folder and no
                          * early write-back (the output still appears whole, but a crash of the machine
                          * soon after may lose it); ignored in place, where the input is at stake */
};

typedef struct tc_dst {
    int fd;              /* -1 once closed */
    char *path;          /* as the caller named it: the subject of messages */
    char *target;        /* where the file lands (a link's target in place) */
    char *tmp;           /* a hidden name beside target (the file's only while tmp_exists) */
    uint64_t pos;        /* tc_dst_write's position */
    uint64_t synced;     /* write-back started up to here */
    bool sync;           /* durable: fsync before the rename, write-back started early */
    bool offload;        /* its file system copies between files itself, the bytes never passing
                          * through this machine (NFS 4.2, SMB3, Ceph): tc_dst_offloads */
    bool replace;        /* an existing file at target may be replaced (--force, in place) */
    bool unnamed;        /* the file has no name yet (O_TMPFILE) */
    bool tmp_exists;     /* the file is named tmp until published */
    bool finished;
    char *blobs;         /* in place in a content-addressed store: its blobs folder */
    char *blob_name;     /* the new blob's name (tc_dst_set_blob_name) */
    bool drop_behind;    /* in place: the input is the old file, its cache dropped as it is read */
    dev_t old_dev;       /* the old file, while drop_behind */
    ino_t old_ino;
    struct tc_dst_drop *drop; /* --force: the thread dropping the old file's cache */
    /* staged (tc_dst_stage): writes into [stage_off, stage_off + stage_len) go to stage */
    uint8_t *stage;
    uint64_t stage_off;
    size_t stage_len;
} tc_dst;

#define TC_DST_INIT {.fd = -1}

int tc_dst_open(tc_dst *o, const char *path, unsigned flags, tc_diag *d);
/* Write n bytes at the current position and advance it. */
int tc_dst_write(tc_dst *o, const void *p, size_t n, tc_diag *d);
/* Write n bytes at off; the position is left alone. Safe from several threads. */
int tc_dst_pwrite(const tc_dst *o, uint64_t off, const void *p, size_t n, tc_diag *d);
/* Stage [off, off + n) of o in buf (the caller's, n bytes): until tc_dst_unstage, tc_dst_pwrite into
 * that range fills buf instead of the file, and nothing else puts bytes there (no clone, no copy in
 * the kernel); the caller writes buf out after. A writer of many small records gathers them so into
 * one write. One range at a time. */
void tc_dst_stage(tc_dst *o, void *buf, uint64_t off, size_t n);
void tc_dst_unstage(tc_dst *o);
/* Move the position (after ranges filled with tc_dst_pwrite). */
void tc_dst_seek(tc_dst *o, uint64_t off);
/* Space for [off, off + n), where the file system can give it ahead of time. */
void tc_dst_reserve(const tc_dst *o, uint64_t off, uint64_t n);
/* Whether copies into o are worth handing to the kernel (copy_file_range):
 * only where the file system copies on its server (NFS 4.2, SMB3, Ceph), so
 * that the bytes never cross the network. On local file systems a copy in the
 * kernel goes through a pipe and writes the page cache in pieces of at most
 * 64 KiB, which on Linux 6.x is about half as fast as large pwrites from
 * several threads; there the bytes are read and written. */
bool tc_dst_offloads(const tc_dst *o);
/* File systems that clone blocks (XFS, btrfs) share a block of one file with
 * another only at the same offset within a block: bytes at offsets that
 * agree modulo TC_SHARE_BLOCK (a multiple of their block size) can share
 * every whole block between them. */
#define TC_SHARE_BLOCK 4096u
/* Make [off, off + n) of o the very blocks of [in_off, in_off + n) of the
 * file fd (FICLONERANGE): off, in_off and n multiples of TC_SHARE_BLOCK.
 * True when the file system took all of it; false when it cannot (another
 * file system, none that clones, offsets not on its blocks), and the caller
 * copies the bytes instead, over whatever part was shared. */
bool tc_dst_clone(const tc_dst *o, uint64_t off, int fd, uint64_t in_off, uint64_t n);
/* Start writing back the whole pages of [off, off + n) so that the final
 * fsync finds little to do. */
void tc_dst_writeback(const tc_dst *o, uint64_t off, uint64_t n);
/* Start write-back of everything before the position, in 32 MiB steps. */
void tc_dst_writeback_pos(tc_dst *o);
/* In place, the input's bytes [off, off + n) of the file fd have been read
 * and are not needed again: when fd is the file o replaces, its clean cached
 * pages there are dropped (whole pages; a range with dirty pages is left
 * alone). Anything else: nothing. */
void tc_dst_consumed(const tc_dst *o, int fd, uint64_t off, uint64_t n);
/* A failure writing to o (from errno e), with o's path as subject. */
int tc_dst_fail(const tc_dst *o, int e, tc_diag *d);

int tc_dst_finish(tc_dst *o, tc_diag *d);
int tc_dst_publish(tc_dst *o, tc_diag *d);
int tc_dst_commit(tc_dst *o, tc_diag *d);
void tc_dst_abort(tc_dst *o);

/* Create the folder dir and its missing parents, remembering the ones made so
 * that a failure (tc_dst_dirs_remove) or a signal removes them again when
 * empty; tc_dst_dirs_keep forgets them once the outputs are in place. */
int tc_dst_mkdirs(const char *dir, tc_diag *d);
void tc_dst_dirs_keep(void);
void tc_dst_dirs_remove(void);

/* On every signal whose default action ends the process and that can be
 * caught (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM,
 * SIGVTALRM, SIGPROF, SIGPIPE, SIGXCPU, the real-time signals, ...; those
 * ignored when the process started stay ignored) remove every hidden name
 * not yet published (and the folders made for them), then end as that
 * signal would have; SIGXFSZ is ignored, so that a write past the file size
 * limit fails (EFBIG) and is handled as an error. */
void tc_dst_cleanup_on_signals(void);

/* In place in a content-addressed store: the old blob's path (which stays),
 * else NULL. */
const char *tc_dst_blob(const tc_dst *o);
/* The new blob's name, hex digits (its SHA-256), given once o is finished
 * and before tc_dst_publish, which refuses a blob without one. */
int tc_dst_set_blob_name(tc_dst *o, const char *hex, tc_diag *d);
/* A new descriptor reading o's file (finished, not yet published), for
 * taking its hash; the caller closes it. -1 on failure. */
int tc_dst_read_fd(const tc_dst *o);

/* True when a and b name the same existing file. */
bool tc_same_file(const char *a, const char *b);

#endif
