/* scan on one file: the input is the file (an in-memory memfd, opened by
 * path), judged as scan judges a file it meets in a folder: a checkpoint, a
 * pickle, an archive walked member by member (nested to depth 3), a
 * compressed stream, its items handed on one at a time. What must hold: every item has a verdict and a kind;
 * an unsafe one names a global or a hazard; an unreadable or skipped one
 * says why; the totals add up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "scan.h"

typedef struct seen {
    uint64_t n[4];
} seen;

static void on_item(void *ctx, const tc_scan_item *it)
{
    seen *s = ctx;
    FZ_CHECK(it->verdict <= TC_SCAN_SKIPPED && it->kind && it->kind[0], "an item without verdict or kind");
    FZ_CHECK(it->verdict != TC_SCAN_UNSAFE || it->nglobals || it->nhazards, "unsafe, naming nothing");
    FZ_CHECK(it->verdict == TC_SCAN_SAFE || (it->reason && it->reason[0]), "%s without a reason", it->kind);
    for (size_t i = 0; i < it->nmember; i++)
        FZ_CHECK(it->member[i] != NULL, "a member without a name");
    s->n[it->verdict]++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    seen s = {{0}};
    /* batch 1: every item after a file's first is handed on as it is made, between members and
     * inside nested archives */
    tc_scan_opts o = {.jobs = 1, .max_archive_depth = 3, .report_skipped = true, .on_item = on_item, .ctx = &s,
                      .batch = 1};
    o.lim = (tc_limits){.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                        .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 20};
    tc_scan_totals t;
    tc_diag d = TC_DIAG_INIT;
    const char *roots[] = {path};
    int rc = tc_scan_run(roots, 1, &o, &t, &d);
    FZ_CHECK(!rc || d.msg[0], "a failed scan says why");
    if (!rc) {
        FZ_CHECK(t.files == 1, "one file reached, %llu counted", (unsigned long long)t.files);
        FZ_CHECK(t.safe == s.n[0] && t.unsafe == s.n[1] && t.unreadable == s.n[2] && t.skipped == s.n[3],
                 "the totals are not the items'");
    }
    close(fd);
    return 0;
}
