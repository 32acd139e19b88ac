#include "filepool.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int tc_filepool_add(tc_filepool *p, const char *name, const char *path, uint64_t size, size_t *out, tc_diag *d)
{
    tc_pfile *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name)) || !(f->path = strdup(path)) || tc_vec_push(&p->f, f)) {
        if (f) {
            free(f->name);
            free(f->path);
        }
        free(f);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    f->owner = p;
    f->src.fd = -1;
    f->size = size;
    *out = p->f.n - 1;
    return 0;
}

static void file_close(tc_pfile *f)
{
    if (f->src.fd < 0)
        return;
    tc_src_close(&f->src);
    f->src.fd = -1;
    f->owner->nopen--;
}

void tc_filepool_close_idle(tc_filepool *p)
{
    for (size_t i = 0; i < p->f.n; i++)
        if (!p->f.v[i]->readers)
            file_close(p->f.v[i]);
}

int tc_filepool_open(tc_filepool *p, size_t i, const tc_src **src, tc_diag *d)
{
    tc_pfile *f = p->f.v[i];
    if (f->src.fd < 0) {
        /* past the bound, those nothing reads go first */
        for (size_t k = 0; k < p->f.n && p->nopen >= TC_FILEPOOL_OPEN; k++)
            if (!p->f.v[k]->readers)
                file_close(p->f.v[k]);
        tc_src s;
        int rc = tc_src_open_file(&s, f->path, d);
        if (rc)
            return rc;
        if (s.size != f->size) {
            tc_src_close(&s);
            return tc_fail_at(d, TC_ERR_IO, f->path, TC_NO_OFFSET,
                              "changed size while being read (%" PRIu64 " bytes, was %" PRIu64 ")", s.size, f->size);
        }
        f->src = s;
        p->nopen++;
    }
    *src = &f->src;
    return 0;
}

static void reader_close(tc_rd *r)
{
    tc_pfile *f = r->state;
    if (f && !--f->readers && f->owner->nopen > TC_FILEPOOL_OPEN)
        file_close(f);
    r->state = NULL;
}

int tc_filepool_reader(tc_filepool *p, size_t i, uint64_t off, uint64_t len, tc_rd *r, tc_diag *d)
{
    const tc_src *src;
    int rc = tc_filepool_open(p, i, &src, d);
    if (rc)
        return rc;
    tc_pfile *f = p->f.v[i];
    f->readers++;
    tc_rd_range(r, src, off, len);
    r->close = reader_close;
    r->state = f;
    return 0;
}

void tc_filepool_free(tc_filepool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->f.n; i++) {
        tc_pfile *f = p->f.v[i];
        tc_src_close(&f->src);
        free(f->name);
        free(f->path);
        free(f);
    }
    tc_vec_free(&p->f);
    p->nopen = 0;
}
