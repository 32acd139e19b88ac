/* The format registry: tc_formats[], opening a file by probe, the writers by trait. */
#include "buf.h"
#include "format.h"
#include "readings.h"
#include "shard_index.h"
#include "vec.h"
#include "zero.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

extern const tc_format tc_format_torch_zip, tc_format_torch_legacy, tc_format_safetensors,
    tc_format_safetensors_index, tc_format_torch_index, tc_format_dcp, tc_format_torchscript, tc_format_zero,
    tc_format_npy, tc_format_npz, tc_format_torch_tar, tc_format_gguf;

const tc_format *const tc_formats[] = {
    &tc_format_zero, /* a DeepSpeed rank file by its name; declined (to torch-zip) outside a ZeRO folder */
    &tc_format_npz,  /* a zip of .npy members only (it declines any other zip) */
    &tc_format_torch_zip,
    &tc_format_torchscript, /* a zip the torch zip driver declines: one with constants.pkl */
    &tc_format_torch_tar,   /* torch.load tries a tar first: it declines a file whose first block is no tar header */
    &tc_format_torch_legacy,
    &tc_format_safetensors,
    &tc_format_safetensors_index,
    &tc_format_torch_index,
    &tc_format_dcp,
    &tc_format_npy,
    &tc_format_gguf,
    NULL,
};

const tc_format *tc_format_writer(unsigned cap)
{
    for (const tc_format *const *f = tc_formats; *f; f++)
        if (((*f)->caps & cap) == cap && (*f)->write)
            return *f;
    return NULL;
}

int tc_format_write(unsigned cap, const tc_write_job *job, tc_dst *dst, tc_diag *d)
{
    const tc_format *f = tc_format_writer(cap);
    if (!f)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "no format driver writes this output");
    return f->write(job, dst, d);
}

int tc_format_rewrite(unsigned cap, const tc_rewrite_job *job, tc_dst *dst, tc_diag *d)
{
    for (const tc_format *const *f = tc_formats; *f; f++)
        if (((*f)->caps & cap) == cap && (*f)->rewrite)
            return (*f)->rewrite(job, dst, d);
    return tc_fail(d, TC_ERR_UNSUPPORTED, "no format driver rewrites this output whole");
}

/* The names a model folder's checkpoint goes by, as Hugging Face's save_pretrained
 * writes it: one file, or a sharded set's index (the shards beside it are not
 * candidates of their own). */
static bool model_file_name(const char *n)
{
    static const char *const whole[] = {"model.safetensors", "pytorch_model.bin"};
    static const char *const index[] = {".safetensors.index.json", ".bin.index.json", ".pt.index.json",
                                        ".pth.index.json"};
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
        if (!strcmp(n, whole[i]))
            return true;
    size_t l = strlen(n);
    for (size_t i = 0; i < sizeof index / sizeof *index; i++) {
        size_t k = strlen(index[i]);
        if (l > k && !strcmp(n + l - k, index[i]))
            return true;
    }
    return false;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A folder opens through a file of its own (DCP's .metadata, ZeRO's rank files). */
static bool opens_itself(const char *path, size_t l)
{
    tc_buf m = TC_BUF_INIT(0);
    tc_buf_printf(&m, "%.*s/.metadata", (int)l, path);
    struct stat st;
    bool dcp = !tc_buf_oom(&m) && !stat(tc_buf_str(&m), &st) && !S_ISDIR(st.st_mode);
    tc_buf_free(&m);
    if (dcp)
        return true;
    tc_diag scratch = TC_DIAG_INIT;
    char *zf = NULL;
    int rc = tc_zero_folder(path, &zf, &scratch);
    free(zf);
    return rc != 1; /* a ZeRO folder, or a broken one: tc_open says what is wrong with it */
}

int tc_model_folder(const char *path, char **file, tc_diag *d)
{
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode))
        return 1;
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        l--;
    if (opens_itself(path, l))
        return 1;
    DIR *dir = opendir(path);
    if (!dir)
        return 1; /* tc_open says why it cannot be read */
    TC_VEC(char *) found = {0};
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(dir));) {
        if (!model_file_name(e->d_name))
            continue;
        tc_buf f = TC_BUF_INIT(0);
        tc_buf_printf(&f, "%.*s/%s", (int)l, path, e->d_name);
        char *p = tc_buf_oom(&f) ? NULL : strdup(tc_buf_str(&f));
        tc_buf_free(&f);
        if (!p || tc_vec_push(&found, p)) {
            free(p);
            rc = tc_fail_at(d, TC_ERR_NOMEM, path, TC_NO_OFFSET, "out of memory");
        } else if (stat(p, &st) || !S_ISREG(st.st_mode)) {
            free(found.v[--found.n]); /* a folder or a dangling link by that name is no checkpoint */
        }
    }
    closedir(dir);
    if (rc)
        goto done;
    if (found.n == 0) {
        rc = 1;
        goto done;
    }
    if (found.n > 1) {
        qsort(found.v, found.n, sizeof *found.v, by_name);
        char list[900];
        tc_buf b = tc_buf_fixed(list, sizeof list);
        for (size_t i = 0; i < found.n; i++) {
            tc_buf_sep(&b, ", ");
            tc_buf_escs(&b, found.v[i] + l + 1);
        }
        rc = tc_fail_at(d, TC_ERR_USAGE, path, TC_NO_OFFSET,
                        "is a model folder holding %zu checkpoints: %s; name the one to read", found.n, list);
        goto done;
    }
    *file = found.v[0];
    found.n = 0;
done:
    for (size_t i = 0; i < found.n; i++)
        free(found.v[i]);
    tc_vec_free(&found);
    return rc;
}

/* A folder is read through the file that describes it: a distributed checkpoint's .metadata. */
static int open_folder(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        l--;
    char *m = malloc(l + 12);
    if (!m)
        return tc_fail_at(d, TC_ERR_NOMEM, path, TC_NO_OFFSET, "out of memory");
    snprintf(m, l + 12, "%.*s/.metadata", (int)l, path);
    struct stat st;
    int rc;
    char *zf = NULL;
    if (!stat(m, &st) && !S_ISDIR(st.st_mode))
        rc = tc_open(out, m, lim, d);
    else if (!(rc = tc_zero_folder(path, &zf, d))) /* a DeepSpeed save folder, through its rank 0 file */
        rc = tc_open(out, zf, lim, d);
    else if (rc == 1 && !(rc = tc_model_folder(path, &zf, d))) /* a model folder, through its checkpoint */
        rc = tc_open(out, zf, lim, d);
    else if (rc == 1)
        rc = tc_fail_at(d, TC_ERR_IO, path, TC_NO_OFFSET,
                        "is a directory without a .metadata file, DeepSpeed's 'latest', model.safetensors, "
                        "pytorch_model.bin or an *.index.json (not a checkpoint folder)");
    free(zf);
    free(m);
    return rc;
}

/* A new checkpoint reading path, or from (a source the caller keeps) named path. */
static int new_ckpt(tc_ckpt **c, const char *path, const tc_src *from, const tc_limits *lim, tc_diag *d)
{
    return from ? tc_ckpt_new_src(c, path, from, lim, d) : tc_ckpt_new(c, path, lim, d);
}

/* The next driver from *next on whose probe accepts p (*next then past it), or NULL. */
static const tc_format *next_probed(const tc_format *const **next, const tc_probe *p)
{
    for (; **next; (*next)++)
        if ((**next)->probe(p))
            return *(*next)++;
    return NULL;
}

/* Why a file no driver reads is not a checkpoint: torch.load would still
 * unpickle it from byte 0 (said when that imports something), it is empty,
 * or no known format starts with its first bytes (head, hn of them). */
static int not_a_checkpoint(const tc_src *src, const tc_limits *lim, const uint8_t *head, size_t hn, tc_diag *d)
{
    char unsafe[1100];
    int rc = tc_pickle_at_zero(src, lim, unsafe, sizeof unsafe, d);
    if (rc)
        return rc;
    if (unsafe[0])
        return tc_fail(d, TC_ERR_UNSAFE,
                       "not a checkpoint tensorctl reads, but torch.load would unpickle it from byte 0, "
                       "importing %s (and calling what it names)",
                       unsafe);
    if (hn == 0)
        return tc_fail(d, TC_ERR_FORMAT, "not a checkpoint: the file is empty");
    char first[16];
    tc_buf fb = tc_buf_fixed(first, sizeof first);
    for (size_t i = 0; i < hn && i < 4; i++)
        tc_buf_printf(&fb, "%s%02x", i ? " " : "", head[i]);
    return tc_fail(d, TC_ERR_FORMAT,
                   "not a checkpoint: no known format starts with bytes %s (expected a torch zip, legacy "
                   "torch or safetensors file)",
                   first);
}

/* The driver of a file no probe accepted: torch's legacy stream when its
 * first pickle is the legacy magic number pickled another way (protocol 0
 * text: torch.load compares its value); else why it is not a checkpoint. */
static int unprobed(const tc_src *src, const tc_limits *lim, const uint8_t *head, size_t hn, const tc_format **fmt,
                    tc_diag *d)
{
    bool legacy = false;
    int rc = tc_legacy_at_zero(src, lim, &legacy, d);
    if (rc)
        return rc;
    if (!legacy)
        return not_a_checkpoint(src, lim, head, hn, d);
    *fmt = &tc_format_torch_legacy;
    return 0;
}

/* path (or from, named path) opened by the first driver whose probe accepts
 * its head and that does not decline it at open (a zip the torch zip driver
 * finds to be a TorchScript archive goes to the next that probes it, on a
 * new checkpoint), then its other readings judged. */
static int open_any(tc_ckpt **out, const char *path, const tc_src *from, const tc_limits *lim, tc_diag *d)
{
    tc_ckpt *c;
    int rc = new_ckpt(&c, path, from, lim, d);
    if (rc)
        return rc;
    const tc_src *src = tc_ckpt_src(c);
    uint8_t head[TC_PROBE_BYTES] = {0};
    size_t hn = src->size < sizeof head ? (size_t)src->size : sizeof head;
    if ((rc = tc_src_read(src, 0, head, hn, "header", d)))
        goto fail;
    tc_probe p = {head, hn, src->size, path};
    const tc_format *const *next = tc_formats;
    const tc_format *fmt = next_probed(&next, &p);
    for (;;) {
        if (!fmt && (rc = unprobed(tc_ckpt_src(c), lim, head, hn, &fmt, d)))
            goto fail;
        tc_ckpt_set_driver(c, fmt, NULL, NULL);
        tc_ckpt_set_opener(c, tc_open); /* the files c is made of open as any file does */
        if ((rc = fmt->open(c, d)) != TC_FORMAT_DECLINE)
            break;
        tc_ckpt_close(c);
        if ((rc = new_ckpt(&c, path, from, lim, d)))
            return rc;
        fmt = next_probed(&next, &p);
    }
    if (rc || (rc = tc_judge_readings(c, head, hn, d)))
        goto fail;
    *out = c;
    return 0;
fail:
    tc_diag_subject(d, path);
    tc_ckpt_close(c);
    return rc;
}

int tc_open(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    struct stat dst;
    if (stat(path, &dst) == 0 && S_ISDIR(dst.st_mode))
        return open_folder(out, path, lim, d);
    return open_any(out, path, NULL, lim, d);
}

int tc_open_src(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d)
{
    *out = NULL;
    return open_any(out, name, src, lim, d);
}

int tc_index_open_shard(const tc_index *ix, size_t i, const tc_limits *lim, tc_ckpt **out, tc_diag *d)
{
    return tc_index_open_shard_by(ix, i, tc_open, lim, out, d);
}
