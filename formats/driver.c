/* What the registry and every driver use, below both: a checkpoint's
 * driver (its name for messages, its traits), a storage's reader from its
 * driver, reading through a tc_rd, and the reader of a plain range of a
 * file. */
#include <string.h>

#include "format.h"

const char *tc_ckpt_format(const tc_ckpt *c)
{
    const tc_format *f = tc_ckpt_driver(c);
    return f ? f->name : "unknown";
}

bool tc_ckpt_can(const tc_ckpt *c, unsigned caps)
{
    const tc_format *f = tc_ckpt_driver(c);
    return f && (f->caps & caps) == caps;
}

int tc_storage_open(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    memset(r, 0, sizeof *r);
    const tc_format *f = tc_ckpt_driver(c);
    int rc = f && f->open_storage ? f->open_storage(c, i, r, d)
                                  : tc_fail(d, TC_ERR_UNSUPPORTED, "a %s file has no storages to read", tc_ckpt_format(c));
    r->what = tc_ckpt_storage(c, i)->key;
    tc_diag_subject(d, tc_ckpt_path(c));
    return rc;
}

int tc_rd_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    uint64_t left = r->size - r->done;
    if (n > left)
        n = (size_t)left;
    *got = 0;
    size_t total = 0;
    while (total < n) {
        size_t g = 0;
        int rc = r->read(r, (uint8_t *)buf + total, n - total, &g, d);
        if (rc)
            return rc;
        if (!g)
            return tc_fail(d, TC_ERR_FORMAT, "record for storage '%s' is shorter than its %llu bytes", r->what,
                           (unsigned long long)r->size);
        total += g;
        r->done += g;
    }
    *got = total;
    return 0;
}

void tc_rd_close(tc_rd *r)
{
    if (r && r->close)
        r->close(r);
    if (r)
        r->close = NULL;
}

static int range_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    int rc = tc_src_read(r->src, r->off + r->done, buf, n, r->what ? r->what : "storage", d);
    *got = rc ? 0 : n;
    return rc;
}

void tc_rd_range(tc_rd *r, const tc_src *src, uint64_t off, uint64_t size)
{
    r->src = src;
    r->off = off;
    r->size = size;
    r->done = 0;
    r->read = range_read;
    r->close = NULL;
}
