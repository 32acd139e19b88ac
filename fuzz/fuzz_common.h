/* Shared helpers of the fuzz targets: inputs as anonymous in-memory files
 * (memfd) opened by path through /proc/self/fd, so the file readers run
 * exactly as on disk without touching the disk. */
#ifndef TC_FUZZ_COMMON_H
#define TC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where a target makes many files: $TMPDIR, else /dev/shm where there is one (no disk, no
 * journal), else /tmp. */
static inline const char *fz_tmp_base(void)
{
    struct stat st;
    const char *base = getenv("TMPDIR");
    if (!base)
        base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    return base;
}

/* A folder of this process's own under /tmp, made once (tag names the target), and
 * fz_spill writing name (a path inside it, its folders made by the caller) with n bytes. */
static inline const char *fz_folder(const char *tag)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/tc-fuzz-%s-%d", tag, (int)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

static inline int fz_spill(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    if (n)
        fwrite(p, 1, n, f);
    return fclose(f);
}

/* An in-memory file holding data; its path in path. -1 on failure. */
static inline int fz_memfd(const uint8_t *data, size_t size, char *path, size_t plen)
{
    int fd = memfd_create("tensorctl-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (size && tc_write_all(fd, data, size)) {
        close(fd);
        return -1;
    }
    snprintf(path, plen, "/proc/self/fd/%d", fd);
    return fd;
}

/* A sink that hashes and counts what it is given (a tensor streamed to the end). */
typedef struct fz_sum {
    uint64_t bytes, x;
} fz_sum;

static inline int fz_sum_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    (void)d;
    fz_sum *s = ctx;
    const uint8_t *p = buf;
    for (size_t i = 0; i < n; i++)
        s->x = s->x * 31 + p[i];
    s->bytes += n;
    return 0;
}

/* An invariant the code under test broke: crash loudly so the fuzzer keeps the input. */
#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant failed: %s: ", #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
