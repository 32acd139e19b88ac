#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char pending[4096];

const char *tc_out_pending_path(void) { return pending[0] ? pending : NULL; }

bool tc_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int tc_out_open(tc_outfile *o, const char *final_path, bool force, tc_diag *d)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    struct stat st;
    if (!force && lstat(final_path, &st) == 0)
        return tc_fail(d, TC_ERR_USAGE, "%s exists (use --force to replace it)", final_path);
    char *copy = strdup(final_path), *copy2 = strdup(final_path);
    if (!copy || !copy2) {
        free(copy);
        free(copy2);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    const char *dir = dirname(copy), *base = basename(copy2);
    size_t n = strlen(dir) + strlen(base) + 32;
    o->tmp_path = malloc(n);
    o->final_path = strdup(final_path);
    if (!o->tmp_path || !o->final_path) {
        free(copy);
        free(copy2);
        tc_out_abort(o);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    snprintf(o->tmp_path, n, "%s/.%s.tensorctl-XXXXXX", dir, base);
    free(copy);
    free(copy2);
    o->fd = mkostemp(o->tmp_path, O_CLOEXEC);
    if (o->fd < 0) {
        int e = errno;
        free(o->tmp_path);
        o->tmp_path = NULL;
        tc_out_abort(o);
        return tc_fail(d, TC_ERR_IO, "cannot create a file beside %s: %s", final_path, strerror(e));
    }
    if (strlen(o->tmp_path) < sizeof pending)
        memcpy(pending, o->tmp_path, strlen(o->tmp_path) + 1);
    mode_t um = umask(0);
    umask(um);
    if (fchmod(o->fd, 0666 & ~um) < 0) {
        int e = errno;
        tc_out_abort(o);
        return tc_fail(d, TC_ERR_IO, "cannot set permissions: %s", strerror(e));
    }
    return 0;
}

int tc_out_commit(tc_outfile *o, tc_diag *d)
{
    int rc = 0;
    if (fsync(o->fd) < 0)
        rc = tc_fail(d, TC_ERR_IO, "%s: fsync failed: %s", o->final_path, strerror(errno));
    if (close(o->fd) < 0 && !rc)
        rc = tc_fail(d, TC_ERR_IO, "%s: close failed: %s", o->final_path, strerror(errno));
    o->fd = -1;
    if (!rc && rename(o->tmp_path, o->final_path) < 0)
        rc = tc_fail(d, TC_ERR_IO, "cannot rename the finished file to %s: %s", o->final_path, strerror(errno));
    if (rc) {
        tc_out_abort(o);
        return rc;
    }
    pending[0] = 0;
    char *copy = strdup(o->final_path);
    if (copy) {
        int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(copy);
    }
    free(o->tmp_path);
    free(o->final_path);
    o->tmp_path = o->final_path = NULL;
    return 0;
}

void tc_out_abort(tc_outfile *o)
{
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp_path)
        unlink(o->tmp_path);
    pending[0] = 0;
    free(o->tmp_path);
    free(o->final_path);
    o->tmp_path = o->final_path = NULL;
}
