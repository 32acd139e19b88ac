/* scan over a folder tree the input builds: folders (some 70 deep, past the 64 the walk holds
 * open), files (empty, text, safe and unsafe pickles, a zip of four members), symlinks to files
 * and folders (loops among them), dangling symlinks, hard links and FIFOs, made under a folder of
 * this process's own. What must hold: the output is the same on one thread and on three, the
 * three handing each file's items on one at a time (the walk order decides it, not the threads
 * nor the batches); each file is judged under one name; the totals are the items'; what is
 * skipped as another name or a special file is counted so. The tree is made in /dev/shm where there is one
 * (a folder made on a disk's file system costs a journal commit). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fuzz_common.h"
#include "scan.h"
#include "vec.h"

#define MAX_OPS 300
#define MAX_NODES 400

typedef struct out {
    tc_buf text;          /* one line per item */
    uint64_t n[4];        /* items by verdict */
    uint64_t others, special;
} out;

static void on_item(void *ctx, const tc_scan_item *it)
{
    out *o = ctx;
    FZ_CHECK(it->verdict <= TC_SCAN_SKIPPED && it->kind && it->kind[0], "an item without verdict or kind");
    FZ_CHECK(it->verdict == TC_SCAN_SAFE || (it->reason && it->reason[0]), "%s without a reason", it->kind);
    tc_buf_printf(&o->text, "%d %s %s", (int)it->verdict, it->kind, it->path);
    for (size_t i = 0; i < it->nmember; i++)
        tc_buf_printf(&o->text, "!%s", it->member[i]);
    tc_buf_printf(&o->text, " %s\n", it->reason ? it->reason : "");
    o->n[it->verdict]++;
    if (it->verdict == TC_SCAN_SKIPPED) {
        o->others += !strcmp(it->kind, "link") || !strcmp(it->kind, "link target");
        o->special += !strcmp(it->kind, "special file");
    }
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

typedef struct node {
    tc_buf path; /* under the root */
    bool dir;
} node;

/* The folder the trees are made in, this process's own; removed at exit. */
static tc_buf base = TC_BUF_INIT(0);

static void remove_base(void) { rmdir(tc_buf_str(&base)); }

static const char *base_folder(void)
{
    if (!tc_buf_len(&base)) {
        tc_buf_printf(&base, "%s/tc-fuzz-walk-%d", fz_tmp_base(), (int)getpid());
        if (!mkdir(tc_buf_str(&base), 0700))
            atexit(remove_base);
    }
    return tc_buf_str(&base);
}

/* batch: a file's items held before they are handed on (0: scan's own) */
static int scan_tree(const char *root, unsigned jobs, size_t batch, out *o, tc_scan_totals *t)
{
    tc_scan_opts opt = {.jobs = jobs, .max_archive_depth = 2, .report_skipped = true, .on_item = on_item, .ctx = o,
                        .batch = batch};
    opt.lim = (tc_limits){.max_pickle_bytes = 1u << 16, .max_objects = 2000, .max_depth = 50, .max_entries = 100,
                          .max_header = 1u << 16, .max_inflate_ratio = 20};
    tc_diag d = TC_DIAG_INIT;
    const char *roots[] = {root};
    int rc = tc_scan_run(roots, 1, &opt, t, &d);
    FZ_CHECK(!rc || d.msg[0], "a failed scan says why");
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a stored zip: b.txt, c.pkl ({}), d.pkl ([]) and last e.pkl (runs posix.system: its globals
     * come after the first items were handed on) */
    static const char zip4[] =
    "\x50\x4b\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\x20\x30\x3a\x36\x06\x00\x00\x00\x06\x00"
    "\x00\x00\x05\x00\x00\x00\x62\x2e\x74\x78\x74\x68\x65\x6c\x6c\x6f\x0a\x50\x4b\x03\x04\x14\x00\x00"
    "\x00\x00\x00\x00\x00\x21\x00\xf2\x91\x02\xc5\x06\x00\x00\x00\x06\x00\x00\x00\x05\x00\x00\x00\x63"
    "\x2e\x70\x6b\x6c\x80\x02\x7d\x71\x00\x2e\x50\x4b\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00"
    "\xcc\x3e\x30\x65\x06\x00\x00\x00\x06\x00\x00\x00\x05\x00\x00\x00\x64\x2e\x70\x6b\x6c\x80\x02\x5d"
    "\x71\x00\x2e\x50\x4b\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\xd4\xda\x90\xf2\x1a\x00\x00"
    "\x00\x1a\x00\x00\x00\x05\x00\x00\x00\x65\x2e\x70\x6b\x6c\x63\x70\x6f\x73\x69\x78\x0a\x73\x79\x73"
    "\x74\x65\x6d\x0a\x28\x53\x27\x74\x72\x75\x65\x27\x0a\x74\x52\x2e\x50\x4b\x01\x02\x14\x03\x14\x00"
    "\x00\x00\x00\x00\x00\x00\x21\x00\x20\x30\x3a\x36\x06\x00\x00\x00\x06\x00\x00\x00\x05\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x00\x00\x00\x00\x62\x2e\x74\x78\x74\x50\x4b\x01\x02\x14"
    "\x03\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\xf2\x91\x02\xc5\x06\x00\x00\x00\x06\x00\x00\x00\x05"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x29\x00\x00\x00\x63\x2e\x70\x6b\x6c\x50\x4b"
    "\x01\x02\x14\x03\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\xcc\x3e\x30\x65\x06\x00\x00\x00\x06\x00"
    "\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x52\x00\x00\x00\x64\x2e\x70\x6b"
    "\x6c\x50\x4b\x01\x02\x14\x03\x14\x00\x00\x00\x00\x00\x00\x00\x21\x00\xd4\xda\x90\xf2\x1a\x00\x00"
    "\x00\x1a\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x01\x7b\x00\x00\x00\x65"
    "\x2e\x70\x6b\x6c\x50\x4b\x05\x06\x00\x00\x00\x00\x04\x00\x04\x00\xcc\x00\x00\x00\xb8\x00\x00\x00"
    "\x00\x00";
#define BODY(lit) {lit, sizeof lit - 1}
    static const struct {
        const char *b;
        size_t n;
    } body[] = {BODY(""), BODY("hello\n"), BODY("cposix\nsystem\n(S'true'\ntR."), BODY("\x80\x02}q\x00."), BODY(zip4)};
#undef BODY
    tc_buf root = TC_BUF_INIT(0);
    tc_buf_printf(&root, "%s/t", base_folder());
    nftw(tc_buf_str(&root), rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (mkdir(tc_buf_str(&root), 0700)) {
        tc_buf_free(&root);
        return 0;
    }
    TC_VEC(node) nodes = {0};
    node top = {TC_BUF_INIT(0), true};
    tc_buf_puts(&top.path, tc_buf_str(&root));
    if (tc_vec_push(&nodes, top))
        tc_buf_free(&top.path);
    for (size_t i = 0; i + 1 < size && i / 2 < MAX_OPS && nodes.n && nodes.n < MAX_NODES; i += 2) {
        uint8_t op = data[i], arg = data[i + 1];
        /* a folder to make it in, and another node to point at */
        size_t ndirs = 0;
        for (size_t k = 0; k < nodes.n; k++)
            ndirs += nodes.v[k].dir;
        size_t pick = arg % ndirs, at = 0;
        for (size_t k = 0; k < nodes.n; k++)
            if (nodes.v[k].dir && !pick--) {
                at = k;
                break;
            }
        const node *other = &nodes.v[(size_t)(arg >> 2) % nodes.n];
        node x = {TC_BUF_INIT(0), false};
        tc_buf_printf(&x.path, "%s/%c%s", tc_buf_str(&nodes.v[at].path), 'a' + (op >> 3) % 6,
                      (op >> 6) == 3 ? ".pkl" : "");
        const char *p = tc_buf_str(&x.path);
        int made = -1;
        switch (op & 7) {
        case 0:
        case 1:
            made = mkdir(p, 0700);
            x.dir = true;
            break;
        case 2: {
            int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
            size_t k = (arg >> 4) % (sizeof body / sizeof body[0]);
            if (fd >= 0) {
                made = tc_write_all(fd, body[k].b, body[k].n) ? -1 : 0;
                close(fd);
            }
            break;
        }
        case 3: /* a symlink to another node (a folder above it makes a loop) */
            made = symlink(tc_buf_str(&other->path), p);
            break;
        case 4:
            made = symlink("missing", p);
            break;
        case 5:
            if (!other->dir)
                made = link(tc_buf_str(&other->path), p);
            break;
        case 6:
            made = mkfifo(p, 0600);
            break;
        case 7: /* folders 70 deep, the deepest kept as a node */
            made = mkdir(p, 0700);
            for (int k = 0; !made && k < 70; k++) {
                tc_buf_puts(&x.path, "/d");
                made = mkdir(tc_buf_str(&x.path), 0700);
            }
            x.dir = true;
            break;
        }
        if (made || tc_vec_push(&nodes, x))
            tc_buf_free(&x.path);
    }
    out one = {TC_BUF_INIT(0), {0}, 0, 0}, three = {TC_BUF_INIT(0), {0}, 0, 0};
    tc_scan_totals t1, t3;
    int rc1 = scan_tree(tc_buf_str(&root), 1, 0, &one, &t1), rc3 = scan_tree(tc_buf_str(&root), 3, 1, &three, &t3);
    if (!rc1 && !rc3) {
        FZ_CHECK(!strcmp(tc_buf_str(&one.text), tc_buf_str(&three.text)),
                 "one thread and three (handing items on one at a time) differ:\n%s---\n%s", tc_buf_str(&one.text),
                 tc_buf_str(&three.text));
        FZ_CHECK(!memcmp(&t1, &t3, sizeof t1), "the totals differ between one thread and three");
        FZ_CHECK(t1.safe == one.n[0] && t1.unsafe == one.n[1] && t1.unreadable == one.n[2] && t1.skipped == one.n[3],
                 "the totals are not the items'");
        FZ_CHECK(t1.other_names == one.others && t1.special == one.special,
                 "other names %llu (items %llu), special files %llu (items %llu)",
                 (unsigned long long)t1.other_names, (unsigned long long)one.others,
                 (unsigned long long)t1.special, (unsigned long long)one.special);
        /* each file judged under one name: no judged path twice */
        const char *s = tc_buf_str(&one.text);
        for (const char *l = s; *l; l = strchr(l, '\n') + 1) {
            if (l[0] == '3') /* skipped */
                continue;
            const char *sp = strchr(strchr(l, ' ') + 1, ' ') + 1, *end = strchr(sp, ' ');
            tc_buf key = TC_BUF_INIT(0);
            tc_buf_add(&key, sp, (size_t)(end - sp));
            tc_buf_puts(&key, " ");
            const char *k = tc_buf_str(&key);
            size_t hits = 0;
            for (const char *m = s; *m; m = strchr(m, '\n') + 1)
                if (m[0] != '3') {
                    const char *q = strchr(strchr(m, ' ') + 1, ' ') + 1;
                    hits += !strncmp(q, k, strlen(k));
                }
            FZ_CHECK(hits == 1, "%s judged %zu times", k, hits);
            tc_buf_free(&key);
        }
    }
    tc_buf_free(&one.text);
    tc_buf_free(&three.text);
    for (size_t k = 0; k < nodes.n; k++)
        tc_buf_free(&nodes.v[k].path);
    tc_vec_free(&nodes);
    nftw(tc_buf_str(&root), rm_one, 16, FTW_DEPTH | FTW_PHYS);
    tc_buf_free(&root);
    return 0;
}
