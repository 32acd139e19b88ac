/* Checkpoints that lie, through tc_ckpt_open and through `tensorctl inspect`
 * (exit status 3, one stderr line "tensorctl: FILE: ..."). Inputs are real
 * corpus files cut or edited, and small checkpoints built here. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pickle.h"
#include "zip.h"
#include "format.h"
#include "unit_util.h"

static char *T; /* temp dir of the test */

static void setup(void) { T = tmpdir_new(); }
static void teardown(void) { tmpdir_rm(T); }

/* 300 s a test: legacy_truncated_everywhere opens two files anew at every byte, a minute and more
 * under the sanitizers on a busy machine (meson's own timeout still bounds the whole run) */
TestSuite(ckpt, .init = setup, .fini = teardown, .timeout = 300);

/* ---- helpers --------------------------------------------------------------------- */

static int open_ck(const char *path, const tc_limits *lim, tc_diag *d, tc_ckpt **out)
{
    tc_limits def = TC_LIMITS_DEFAULT;
    return tc_open(out, path, lim ? lim : &def, d);
}

/* tc_ckpt_open fails cleanly with a one-line message holding frag (NULL: any). */
static void ck_fails_lim(const char *path, const tc_limits *lim, const char *frag, const char *what)
{
    tc_diag d = {0};
    tc_ckpt *c = (tc_ckpt *)1;
    int rc = open_ck(path, lim, &d, &c);
    cr_assert_neq(rc, 0, "%s: opened a bad checkpoint", what);
    cr_assert_null(c, "%s: *out set on failure", what);
    cr_assert_eq(rc, d.code);
    cr_assert(d.msg[0], "%s: no message", what);
    cr_assert_null(strchr(d.msg, '\n'), "%s: message spans lines: %s", what, d.msg);
    if (frag)
        cr_assert(strstr(d.msg, frag), "%s: message '%s' lacks '%s'", what, d.msg, frag);
}

static void ck_fails(const char *path, const char *frag, const char *what) { ck_fails_lim(path, NULL, frag, what); }

static tc_ckpt *ck_opens(const char *path)
{
    tc_diag d = {0};
    tc_ckpt *c = NULL;
    cr_assert_eq(open_ck(path, NULL, &d, &c), 0, "%s: %s", path, d.msg);
    cr_assert_not_null(c);
    return c;
}

/* Run `tensorctl inspect path`: exit status, and stderr's text (caller frees). */
static int run_inspect(const char *path, char **err)
{
    const char *exe = getenv("TENSORCTL");
    cr_assert(exe && *exe, "TENSORCTL is not set");
    char errpath[4096];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", T);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0)
            _exit(125);
        dup2(fd, 2);
        dup2(nul, 1);
        execl(exe, exe, "inspect", path, (char *)NULL);
        _exit(126);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "tensorctl inspect %s died with signal %d", path, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    size_t n;
    char *text = (char *)slurp(errpath, &n); /* terminated */
    cr_assert_not_null(text);
    *err = text;
    return WEXITSTATUS(st);
}

/* Exit status 3 and exactly one stderr line "tensorctl: PATH: ...frag...". */
static void cli_bad_file(const char *path, const char *frag)
{
    char *err;
    int ex = run_inspect(path, &err);
    cr_assert_eq(ex, 3, "tensorctl inspect %s: exit %d, expected 3; stderr: %s", path, ex, err);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "tensorctl: %s: ", path);
    cr_assert(!strncmp(err, prefix, strlen(prefix)), "stderr does not start with '%s': %s", prefix, err);
    size_t len = strlen(err);
    cr_assert(len && err[len - 1] == '\n', "stderr is not one terminated line: %s", err);
    cr_assert_null(memchr(err, '\n', len - 1), "stderr has more than one line: %s", err);
    if (frag)
        cr_assert(strstr(err, frag), "stderr lacks '%s': %s", frag, err);
    free(err);
}

/* ---- building checkpoints ------------------------------------------------------------- */

static void p_int(bbuf *b, int64_t v)
{
    bb_put(b, "\x8a\x08", 2);
    bb_u64(b, (uint64_t)v);
}

static void p_str(bbuf *b, const char *s)
{
    bb_u8(b, 'X');
    bb_u32(b, (uint32_t)strlen(s));
    bb_str(b, s);
}

static void p_global(bbuf *b, const char *m, const char *n)
{
    bb_u8(b, 'c');
    bb_str(b, m);
    bb_u8(b, '\n');
    bb_str(b, n);
    bb_u8(b, '\n');
}

typedef struct tdesc {
    const char *stype; /* storage class */
    const char *key;
    int64_t numel, offset;
    int ndim, stride_ndim;
    int64_t size[8], stride[8];
    size_t record;      /* bytes in data/<key> */
    bool no_record, no_version, no_pkl, torchscript;
    const char *byteorder;
    size_t pad;         /* a string of this many bytes in the object (legacy: long pickles) */
    bool ramp;          /* the record's byte i is i (else zeros) */
} tdesc;

/* {'w': _rebuild_tensor_v2(persid, offset, size, stride, False, OrderedDict())} */
static void state_dict_pickle(bbuf *b, const tdesc *t, bool legacy)
{
    bb_put(b, "\x80\x02}(", 4);
    p_str(b, "w");
    p_global(b, "torch._utils", "_rebuild_tensor_v2");
    bb_put(b, "((", 2);
    p_str(b, "storage");
    p_global(b, "torch", t->stype);
    p_str(b, t->key);
    p_str(b, "cpu");
    p_int(b, t->numel);
    if (legacy)
        bb_u8(b, 'N');
    bb_put(b, "tQ", 2);
    p_int(b, t->offset);
    bb_u8(b, '(');
    for (int i = 0; i < t->ndim; i++)
        p_int(b, t->size[i]);
    bb_put(b, "t(", 2);
    for (int i = 0; i < (t->stride_ndim ? t->stride_ndim : t->ndim); i++)
        p_int(b, t->stride[i]);
    bb_put(b, "t\x89", 2);
    p_global(b, "collections", "OrderedDict");
    bb_put(b, ")RtR", 4);
    if (t->pad) {
        p_str(b, "pad");
        bb_u8(b, 'X');
        bb_u32(b, (uint32_t)t->pad);
        for (size_t i = 0; i < t->pad; i++)
            bb_u8(b, 'p');
    }
    bb_put(b, "u.", 2);
}

static const tdesc good = {"FloatStorage", "0", 6, 0, 2, 0, {2, 3}, {3, 1}, 24, 0, 0, 0, 0, NULL, 0, 0};

static const char *write_zip_ckpt(const char *name, const tdesc *t)
{
    const char *path = in_dir(T, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fd);
    cr_assert_eq(tc_zipw_init(&w, &wd_, "ckpt", &d), 0);
    bbuf pk = {0};
    state_dict_pickle(&pk, t, false);
    if (!t->no_pkl)
        cr_assert_eq(tc_zipw_add(&w, "data.pkl", pk.p, pk.n, &d), 0);
    if (t->byteorder)
        cr_assert_eq(tc_zipw_add(&w, "byteorder", t->byteorder, strlen(t->byteorder), &d), 0);
    if (t->torchscript)
        cr_assert_eq(tc_zipw_add(&w, "constants.pkl", "\x80\x02).", 4, &d), 0);
    if (!t->no_record) {
        char rn[64];
        snprintf(rn, sizeof rn, "data/%s", t->key);
        uint8_t *data = calloc(1, t->record + 1);
        for (size_t i = 0; t->ramp && i < t->record; i++)
            data[i] = (uint8_t)i;
        cr_assert_eq(tc_zipw_add(&w, rn, data, t->record, &d), 0);
        free(data);
    }
    if (!t->no_version)
        cr_assert_eq(tc_zipw_add(&w, "version", "3\n", 2, &d), 0);
    cr_assert_eq(tc_zipw_finish(&w, &d), 0);
    tc_zipw_free(&w);
    close(fd);
    bb_free(&pk);
    return path;
}

static const char *write_legacy_ckpt(const char *name, const tdesc *t, int64_t header_numel, size_t data_len)
{
    bbuf b = {0};
    bb_put(&b, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
    bb_put(&b, "\x80\x02M\xe9\x03.", 6);
    bb_put(&b, "\x80\x02}(", 4);
    p_str(&b, "protocol_version");
    bb_put(&b, "M\xe9\x03", 3);
    p_str(&b, "little_endian");
    bb_put(&b, "\x88u.", 3);
    state_dict_pickle(&b, t, true);
    bb_put(&b, "\x80\x02]", 3);
    p_str(&b, t->key);
    bb_put(&b, "a.", 2);
    bb_u64(&b, (uint64_t)header_numel);
    for (size_t i = 0; i < data_len; i++)
        bb_u8(&b, (uint8_t)i);
    const char *path = in_dir(T, name);
    spit(path, b.p, b.n);
    bb_free(&b);
    return path;
}

/* ---- built checkpoints ------------------------------------------------------------------ */

Test(ckpt, built_good_files_open)
{
    tc_ckpt *c = ck_opens(write_zip_ckpt("good.pt", &good));
    cr_assert_str_eq(tc_ckpt_format(c), "torch-zip");
    cr_assert_eq(tc_ckpt_ntensors(c), 1);
    cr_assert_str_eq(tc_ckpt_tensor(c, 0)->name, "w");
    cr_assert_eq(tc_ckpt_tensor(c, 0)->numel, 6);
    cr_assert_eq(tc_ckpt_nstorages(c), 1);
    cr_assert_eq(tc_ckpt_storage(c, 0)->nbytes, 24);
    cr_assert_eq(tc_ckpt_storage(c, 0)->file_off % 64, 0);
    tc_ckpt_close(c);
    c = ck_opens(write_legacy_ckpt("good_legacy.pt", &good, 6, 24));
    cr_assert_str_eq(tc_ckpt_format(c), "torch-legacy");
    cr_assert_eq(tc_ckpt_ntensors(c), 1);
    tc_ckpt_close(c);
    /* a legacy file whose pickles run past the first 1 MiB read */
    tdesc big = good;
    big.pad = 1500000;
    c = ck_opens(write_legacy_ckpt("big_legacy.pt", &big, 6, 24));
    cr_assert_eq(tc_ckpt_ntensors(c), 1);
    tc_ckpt_close(c);
    /* an empty tensor may sit at any offset; the edge of the storage is fine */
    tdesc e = good;
    e.size[0] = 0;
    e.offset = 1000;
    tc_ckpt_close(ck_opens(write_zip_ckpt("empty_tensor.pt", &e)));
    e = good;
    e.ndim = 1;
    e.size[0] = 1;
    e.offset = 5;
    tc_ckpt_close(ck_opens(write_zip_ckpt("last_elem.pt", &e)));
    tc_ckpt_close(NULL);
}

Test(ckpt, record_shorter_than_storage)
{
    tdesc t = good;
    t.record = 20;
    const char *p = write_zip_ckpt("short.pt", &t);
    ck_fails(p, "needs 24", "short record");
    cli_bad_file(p, "needs");
    t.record = 28; /* torch 2.14 refuses a longer record too */
    ck_fails(write_zip_ckpt("long.pt", &t), "needs 24", "long record");
    t.record = 0;
    ck_fails(write_zip_ckpt("zero.pt", &t), "needs 24", "empty record");
    /* legacy: the data ends early */
    const char *lp = write_legacy_ckpt("short_legacy.pt", &good, 6, 20);
    ck_fails(lp, "needs 24 bytes past the end", "short legacy storage");
    cli_bad_file(lp, "needs");
    ck_fails(write_legacy_ckpt("numel_legacy.pt", &good, 5, 24), "5 elements, but the pickle says 6",
             "legacy numel");
}

Test(ckpt, sizes_that_overflow)
{
    tdesc t = good;
    t.size[0] = (int64_t)1 << 62;
    t.size[1] = 8;
    const char *p = write_zip_ckpt("ovf1.pt", &t);
    ck_fails(p, "overflow", "size product");
    cli_bad_file(p, "overflow");
    t = good;
    t.ndim = 3;
    t.size[0] = t.size[1] = t.size[2] = (int64_t)1 << 22;
    t.stride[0] = t.stride[1] = t.stride[2] = 0;
    ck_fails(write_zip_ckpt("ovf2.pt", &t), "overflow", "three dims of 2^22");
    t = good;
    t.ndim = 1;
    t.size[0] = 4;
    t.stride[0] = INT64_MAX;
    ck_fails(write_zip_ckpt("ovf3.pt", &t), "overflow", "stride");
    /* element count times element size */
    t = good;
    t.numel = (int64_t)1 << 62;
    ck_fails(write_zip_ckpt("ovf4.pt", &t), "overflow", "storage bytes");
    t.stype = "DoubleStorage";
    t.numel = INT64_MAX;
    ck_fails(write_zip_ckpt("ovf5.pt", &t), "overflow", "storage bytes (double)");
    /* a tensor's bytes */
    t = good;
    t.ndim = 2;
    t.size[0] = (int64_t)1 << 31;
    t.size[1] = (int64_t)1 << 31;
    t.stride[0] = t.stride[1] = 0;
    ck_fails(write_zip_ckpt("ovf6.pt", &t), "overflow", "tensor bytes");
}

Test(ckpt, offset_past_the_storage)
{
    tdesc t = good;
    t.offset = 1;
    const char *p = write_zip_ckpt("past1.pt", &t);
    ck_fails(p, "past the storage", "offset 1");
    cli_bad_file(p, "past the storage");
    t.offset = (int64_t)1 << 40;
    ck_fails(write_zip_ckpt("past2.pt", &t), "past the storage", "offset 2^40");
    t.offset = INT64_MAX;
    ck_fails(write_zip_ckpt("past3.pt", &t), "past the storage", "offset INT64_MAX");
    t = good;
    t.stride[0] = 4;
    ck_fails(write_zip_ckpt("past4.pt", &t), "past the storage", "strides");
    t = good;
    t.offset = -1;
    ck_fails(write_zip_ckpt("neg_off.pt", &t), "storage offset is not a non-negative integer", "negative offset");
    t = good;
    t.size[1] = -3;
    ck_fails(write_zip_ckpt("neg_size.pt", &t), "not a non-negative integer", "negative size");
    t = good;
    t.stride_ndim = 1;
    ck_fails(write_zip_ckpt("ndim.pt", &t), "size has 2 dimensions, stride 1", "ndim mismatch");
    t = good;
    t.ndim = 65;
    for (int i = 0; i < 8; i++)
        t.size[i] = t.stride[i] = 1;
    t.ndim = 8; /* stay inside the arrays: 65 dims are tested through the corpus edit below */
    tc_ckpt_close(ck_opens(write_zip_ckpt("eight_dims.pt", &t)));
    /* legacy too */
    t = good;
    t.offset = 3;
    ck_fails(write_legacy_ckpt("past_legacy.pt", &t, 6, 24), "past the storage", "legacy offset");
}

Test(ckpt, missing_and_foreign_records)
{
    tdesc t = good;
    t.no_record = true;
    ck_fails(write_zip_ckpt("norec.pt", &t), "no record ckpt/data/0", "no data record");
    t = good;
    t.no_version = true;
    ck_fails(write_zip_ckpt("nover.pt", &t), "version", "no version");
    t = good;
    t.no_pkl = true;
    ck_fails(write_zip_ckpt("nopkl.pt", &t), "data.pkl", "no data.pkl");
    t = good;
    t.torchscript = true;
    ck_fails(write_zip_ckpt("ts.pt", &t), "TorchScript", "torchscript");
    t = good;
    t.byteorder = "middle";
    ck_fails(write_zip_ckpt("middle.pt", &t), "neither 'little' nor 'big'", "byteorder neither");
    t = good;
    t.stype = "NoSuchStorage";
    ck_fails(write_zip_ckpt("stype.pt", &t), "unknown type", "storage type");
    t = good;
    t.no_record = true; /* the key is refused before any record is looked for */
    t.key = "../x";
    ck_fails(write_zip_ckpt("key.pt", &t), "not a valid record name", "key with a slash");
    t.key = "..";
    ck_fails(write_zip_ckpt("key2.pt", &t), "not a valid record name", "key ..");
    t.key = "";
    ck_fails(write_zip_ckpt("key3.pt", &t), "not a valid record name", "empty key");
    /* an entry outside the top folder: rename the second in the central
     * directory (not the version record, which torch looks for first) */
    size_t n;
    const char *p = write_zip_ckpt("outside.pt", &good);
    uint8_t *f = slurp(p, &n);
    zip_ends e;
    cr_assert(zip_find_ends(f, n, &e));
    size_t second = (size_t)e.cd_off + 46 + tc_le16(f + e.cd_off + 28);
    memcpy(f + second + 46, "xxxx", 4);
    spit(p, f, n);
    free(f);
    ck_fails(p, "outside the top folder", "foreign entry");
    cli_bad_file(p, "outside the top folder");
}

Test(ckpt, not_a_checkpoint)
{
    const char *empty = in_dir(T, "empty.pt");
    spit(empty, "", 0);
    ck_fails(empty, "not a checkpoint", "empty file");
    cli_bad_file(empty, "not a checkpoint");
    const char *text = in_dir(T, "notes.txt");
    spit(text, "hello, world\n", 13);
    ck_fails(text, "not a checkpoint", "text file");
    cli_bad_file(text, NULL);
    const char *pk = in_dir(T, "plain.pkl");
    spit(pk, "\x80\x02}q\x00.", 6);
    ck_fails(pk, "not a checkpoint", "a bare pickle");
    cli_bad_file(pk, NULL);
    const char *zip = in_dir(T, "zipsig.pt");
    spit(zip, "PK\x03\x04", 4);
    ck_fails(zip, "too small", "a zip signature alone");
    cli_bad_file(zip, NULL);
    const char *magic = in_dir(T, "magic_only.pt");
    spit(magic, "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
    ck_fails(magic, NULL, "legacy magic alone");
    cli_bad_file(magic, NULL);
    /* I/O errors are not bad files: exit 1 */
    tc_diag d = {0};
    tc_ckpt *c = (tc_ckpt *)1;
    cr_assert_eq(open_ck(in_dir(T, "does-not-exist.pt"), NULL, &d, &c), TC_ERR_IO);
    cr_assert_null(c);
    tc_diag d2 = {0};
    cr_assert_eq(open_ck(T, NULL, &d2, &c), TC_ERR_IO);
    cr_assert(strstr(d2.msg, "directory"), "%s", d2.msg);
}

Test(ckpt, shared_dag_without_tensors_is_walked_once)
{
    /* l0 = []; l(k+1) = [lk, lk]: 2^60 paths through 61 lists, none to a tensor. Each list is
     * walked once (a subtree found to hold no tensor is not walked again), so the file opens,
     * with no tensor; 2^60 paths to a tensor are the complexity suite's shared_doubling. */
    static const char head[] = "\x80\x02]q\x00", step[] = "0(h\x00h\x00lq\x00";
    bbuf b = {0};
    bb_put(&b, head, sizeof head - 1);
    for (int i = 0; i < 60; i++)
        bb_put(&b, step, sizeof step - 1);
    bb_put(&b, ".", 1);
    /* wrap as a checkpoint: a zip with data.pkl and version */
    const char *path = in_dir(T, "dag.pt");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fd);
    cr_assert_eq(tc_zipw_init(&w, &wd_, "dag", &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "data.pkl", b.p, b.n, &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "version", "3\n", 2, &d), 0);
    cr_assert_eq(tc_zipw_finish(&w, &d), 0);
    tc_zipw_free(&w);
    close(fd);
    bb_free(&b);
    tc_limits lim = TC_LIMITS_DEFAULT;
    lim.max_objects = 100000;
    tc_ckpt *c = NULL;
    tc_diag d2 = {0};
    cr_assert_eq(open_ck(path, &lim, &d2, &c), 0, "2^60 paths without a tensor: %s", d2.msg);
    cr_assert_eq(tc_ckpt_ntensors(c), 0);
    tc_ckpt_close(c);
}

/* ---- corpus files --------------------------------------------------------------------------- */

static const char *const corpus_files[] = {
    "torch-2/lm_cuda0.pt",        "torch-2/lm_cpu.pt",         "torch-2/train_ckpt_cuda.pt",
    "torch-2/mixed_devices.pt",   "torch-2/dtypes_views.pt",   "torch-2/dataparallel_cuda1.pt",
    "torch-2/legacy_cuda0.pt",    "torch-2/whole_module_cuda0.pt",
    "torch-2/lightning_style_cuda0.ckpt", "torch-2/new_dtypes_cuda0.pt", "torch-2/malicious.pt",
    "torch-1/lm_cuda0.pt",        "torch-1/legacy_cuda0.pt",   "torch-1/train_ckpt_cuda.pt",
    "torch-1/whole_module_cuda0.pt", "torch-1/dtypes_views.pt", "torch-1/malicious.pt",
};

Test(ckpt, corpus_opens)
{
    for (size_t i = 0; i < sizeof corpus_files / sizeof *corpus_files; i++) {
        tc_ckpt *c = ck_opens(corpus_path(corpus_files[i]));
        cr_assert_gt(tc_ckpt_ntensors(c), 0, "%s: no tensors", corpus_files[i]);
        tc_ckpt_close(c);
    }
}

Test(ckpt, malicious_is_reported_and_never_runs)
{
    const char *victim = "/tmp/tensorctl_pwned";
    struct stat before;
    bool existed = stat(victim, &before) == 0;
    for (int v = 0; v < 2; v++) {
        tc_ckpt *c = ck_opens(corpus_path(v ? "torch-1/malicious.pt" : "torch-2/malicious.pt"));
        cr_assert(tc_ckpt_has_dangerous(c));
        bool found = false;
        for (size_t i = 0; i < tc_ckpt_nglobals(c); i++)
            found |= !strcmp(tc_ckpt_global(c, i)->name, "posix.system") && tc_ckpt_global(c, i)->dangerous && !tc_ckpt_global(c, i)->allowed;
        cr_assert(found, "posix.system not flagged");
        tc_ckpt_close(c);
    }
    struct stat after;
    if (!existed)
        cr_assert_neq(stat(victim, &after), 0, "opening malicious.pt ran its payload");
    else
        cr_assert(stat(victim, &after) == 0 && after.st_mtime == before.st_mtime, "payload touched %s", victim);
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

/* Cuts sorted longest first, so that each prefix is the file truncated
 * further (rewriting thousands of files is slow on a busy disk). */
static size_t sort_cuts(uint64_t *cuts, size_t n, size_t size)
{
    qsort(cuts, n, sizeof *cuts, cmp_desc);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (cuts[i] < size && (!u || cuts[u - 1] != cuts[i]))
            cuts[u++] = cuts[i];
    return u;
}

static void cut_to(const char *path, uint64_t k) { cr_assert_eq(truncate(path, (off_t)k), 0); }

static void truncations(const char *rel, bool every_byte, size_t cli_every)
{
    size_t n;
    uint8_t *f = slurp(corpus_path(rel), &n);
    cr_assert_not_null(f, "missing %s", corpus_path(rel));
    char path[4096];
    snprintf(path, sizeof path, "%s/trunc.pt", T);
    char where[256];
    /* record boundaries (zip), then evenly spaced offsets */
    uint64_t cuts[8192];
    size_t nc = zip_boundaries(f, n, cuts, 4096);
    if (every_byte) {
        nc = 0;
        for (size_t k = 0; k < n; k++)
            cuts[nc++] = k;
    } else {
        for (size_t i = 0; i < 300; i++)
            cuts[nc++] = n * i / 300;
    }
    size_t tested = 0;
    nc = sort_cuts(cuts, nc, n);
    spit(path, f, n);
    for (size_t i = 0; i < nc; i++) {
        cut_to(path, cuts[i]);
        snprintf(where, sizeof where, "%s cut to %llu bytes", rel, (unsigned long long)cuts[i]);
        ck_fails(path, NULL, where);
        if (cli_every && tested++ % cli_every == 0)
            cli_bad_file(path, NULL);
    }
    /* zip: drop the records after each boundary but keep the central directory */
    zip_ends e;
    if (zip_find_ends(f, n, &e)) {
        size_t nb = zip_boundaries(f, n, cuts, 4096);
        for (size_t i = 0; i < nb; i++) {
            if (cuts[i] >= e.cd_off)
                continue;
            size_t cn;
            uint8_t *cut = zip_cut(f, n, cuts[i], &cn);
            cr_assert_not_null(cut);
            spit(path, cut, cn);
            free(cut);
            snprintf(where, sizeof where, "%s with bytes %llu..%llu removed", rel, (unsigned long long)cuts[i],
                     (unsigned long long)e.cd_off);
            tc_diag d = {0};
            tc_ckpt *c = NULL;
            if (open_ck(path, NULL, &d, &c) == 0) {
                /* torch's reader opens it too when what went is no record it reads (a last data
                 * descriptor, .data/serialization_id): every storage must then read back whole,
                 * its CRC-32 right */
                for (size_t k = 0; k < tc_ckpt_nstorages(c); k++) {
                    const tc_storage *s = tc_ckpt_storage(c, k);
                    tc_rd r;
                    uint8_t buf[4096];
                    size_t got;
                    uint32_t crc = (uint32_t)crc32(0, NULL, 0);
                    cr_assert_eq(tc_storage_open(c, k, &r, &d), 0, "%s: %s", where, d.msg);
                    for (uint64_t done = 0; done < s->nbytes; done += got) {
                        size_t want = s->nbytes - done < sizeof buf ? (size_t)(s->nbytes - done) : sizeof buf;
                        cr_assert_eq(tc_rd_read(&r, buf, want, &got, &d), 0, "%s: %s", where, d.msg);
                        crc = (uint32_t)crc32(crc, buf, (uInt)got);
                    }
                    tc_rd_close(&r);
                    cr_assert(!s->crc_known || crc == s->crc, "%s: storage %s reads wrong bytes", where, s->key);
                }
                tc_ckpt_close(c);
                continue;
            }
            ck_fails(path, NULL, where);
            if (cli_every)
                cli_bad_file(path, NULL);
        }
    }
    free(f);
}

Test(ckpt, zip_truncated_at_every_boundary)
{
    truncations("torch-2/lm_cuda0.pt", false, 25);
    truncations("torch-1/lm_cuda0.pt", false, 0);
    truncations("torch-2/new_dtypes_cuda0.pt", false, 0);
}

Test(ckpt, legacy_truncated_everywhere)
{
    /* boundaries: the five pickles and every storage's count and bytes */
    static const char *const files[] = {"torch-2/legacy_cuda0.pt", "torch-1/legacy_cuda0.pt"};
    for (int fi = 0; fi < 2; fi++) {
        tc_ckpt *c = ck_opens(corpus_path(files[fi]));
        size_t n;
        uint8_t *f = slurp(corpus_path(files[fi]), &n);
        uint64_t cuts[1024];
        size_t nc = 0;
        pk_graph *g = pk_graph_new();
        size_t pos = 0;
        for (int i = 0; i < 5; i++) {
            tc_diag d = {0};
            pk_obj *r;
            size_t used;
            pk_read_opts o = {.limits = PK_LIMITS_DEFAULT};
            cr_assert_eq(pk_read(g, f + pos, n - pos, &o, &r, &used, &d), 0, "%s", d.msg);
            pos += used;
            cuts[nc++] = pos;
            cuts[nc++] = pos - 1;
        }
        pk_graph_free(g);
        for (size_t i = 0; i < tc_ckpt_nstorages(c) && nc + 4 < 1024; i++) {
            cuts[nc++] = tc_ckpt_storage(c, i)->file_off - 8;
            cuts[nc++] = tc_ckpt_storage(c, i)->file_off - 1;
            cuts[nc++] = tc_ckpt_storage(c, i)->file_off;
            cuts[nc++] = tc_ckpt_storage(c, i)->file_off + tc_ckpt_storage(c, i)->nbytes - 1;
        }
        tc_ckpt_close(c);
        char path[4096];
        snprintf(path, sizeof path, "%s/legacy_trunc.pt", T);
        char where[128];
        nc = sort_cuts(cuts, nc, n);
        spit(path, f, n);
        for (size_t i = 0; i < nc; i++) {
            cut_to(path, cuts[i]);
            snprintf(where, sizeof where, "%s cut to %llu", files[fi], (unsigned long long)cuts[i]);
            ck_fails(path, NULL, where);
            if (i % 3 == 0)
                cli_bad_file(path, NULL);
        }
        /* and every byte: the loader regrows its buffer on a cut pickle */
        spit(path, f, n);
        for (size_t k = n; k-- > 0;) {
            cut_to(path, k);
            snprintf(where, sizeof where, "%s cut to %zu", files[fi], k);
            ck_fails(path, NULL, where);
        }
        free(f);
    }
}

/* ---- corpus files edited -------------------------------------------------------------------- */

typedef void (*edit_fn)(const char *rel, uint8_t **data, size_t *len, void *ctx);

/* Copy the zip at src to dst record by record through tc_zipw, letting fn
 * change any record's bytes. */
static void rezip(const char *src, const char *dst, edit_fn fn, void *ctx)
{
    size_t n;
    uint8_t *file = slurp(src, &n);
    cr_assert_not_null(file);
    tc_src s;
    tc_src_init_mem(&s, file, n, src);
    tc_zip z;
    tc_diag d = {0};
    tc_zip_limits lim = {.max_entries = 10000};
    cr_assert_eq(tc_zip_open(&z, &s, &lim, &d), 0, "%s", d.msg);
    const char *slash = strchr(z.e[0].name, '/');
    char archive[256];
    snprintf(archive, sizeof archive, "%.*s", (int)(slash - z.e[0].name), z.e[0].name);
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    tc_zipw w;
    tc_dst wd_ = UNIT_DST(fd);
    cr_assert_eq(tc_zipw_init(&w, &wd_, archive, &d), 0);
    for (size_t i = 0; i < z.n; i++) {
        uint8_t *data;
        size_t len;
        cr_assert_eq(tc_zip_read_all(&z, &z.e[i], 1u << 30, true, &data, &len, &d), 0, "%s", d.msg);
        const char *rel = z.e[i].name + strlen(archive) + 1;
        fn(rel, &data, &len, ctx);
        cr_assert_eq(tc_zipw_add(&w, rel, data, len, &d), 0, "%s", d.msg);
        free(data);
    }
    cr_assert_eq(tc_zipw_finish(&w, &d), 0);
    tc_zipw_free(&w);
    close(fd);
    tc_zip_free(&z);
    free(file);
}

static void keep(const char *rel, uint8_t **data, size_t *len, void *ctx)
{
    (void)rel;
    (void)data;
    (void)len;
    (void)ctx;
}

static void shorten_data0(const char *rel, uint8_t **data, size_t *len, void *ctx)
{
    (void)data;
    if (!strcmp(rel, "data/0"))
        *len -= *(size_t *)ctx;
}

typedef void (*graph_fn)(pk_obj *rebuild_args);
static pk_graph *edit_graph; /* the graph edit_pickle's callbacks grow */

static void first_rebuild(void *ctx, pk_obj *o)
{
    pk_obj **found = ctx;
    if (!*found && o->kind == PK_CALL && pk_is_global(o->func, "torch._utils", "_rebuild_tensor_v2") &&
        o->args && o->args->kind == PK_TUPLE && o->args->n >= 4)
        *found = o->args;
}

/* data.pkl read, one tensor's rebuild arguments changed by fn, written back. */
static void edit_pickle(const char *rel, uint8_t **data, size_t *len, void *ctx)
{
    if (strcmp(rel, "data.pkl"))
        return;
    pk_graph *g = pk_graph_new();
    pk_obj *root;
    tc_diag d = {0};
    cr_assert_eq(read_pk(g, *data, *len, NULL, &root, &d), 0, "%s", d.msg);
    pk_obj *args = NULL;
    edit_graph = g;
    pk_graph_foreach(g, first_rebuild, &args);
    cr_assert_not_null(args);
    ((graph_fn)ctx)(args);
    uint8_t *out;
    size_t olen;
    cr_assert_eq(pk_write(g, root, 1000, &out, &olen, &d), 0, "%s", d.msg);
    free(*data);
    *data = out;
    *len = olen;
    pk_graph_free(g);
}

static void huge_sizes(pk_obj *a)
{
    pk_obj *size = a->items[2];
    cr_assert_geq(size->n, 1);
    /* new nodes, not edits of the old: the reader shares the node of each small int */
    for (size_t i = 0; i < size->n; i++)
        size->items[i] = pk_new_int(edit_graph, (int64_t)1 << 40);
    if (size->n == 1) { /* one dimension cannot overflow: add two */
        pk_push(edit_graph, size, size->items[0]);
        pk_push(edit_graph, size, size->items[0]);
        pk_push(edit_graph, a->items[3], a->items[3]->items[0]);
        pk_push(edit_graph, a->items[3], a->items[3]->items[0]);
    }
}

static void offset_past(pk_obj *a)
{
    cr_assert_eq(a->items[1]->kind, PK_INT);
    a->items[1] = pk_new_int(edit_graph, (int64_t)1 << 33);
}

static void stride_past(pk_obj *a)
{
    pk_obj *st = a->items[3];
    cr_assert_geq(st->n, 1);
    st->items[0] = pk_new_int(edit_graph, (int64_t)1 << 30);
}

static void many_dims(pk_obj *a)
{
    pk_obj *size = a->items[2], *st = a->items[3];
    while (size->n < 65) {
        pk_push(edit_graph, size, size->items[size->n - 1]);
        pk_push(edit_graph, st, st->items[st->n - 1]);
    }
}

static void storage_not_persid(pk_obj *a) { a->items[0] = a->items[1]; }

Test(ckpt, corpus_edits)
{
    static const char *const files[] = {"torch-2/lm_cuda0.pt", "torch-1/lm_cuda0.pt",
                                        "torch-2/dtypes_views.pt"};
    char dst[4096];
    snprintf(dst, sizeof dst, "%s/edited.pt", T);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *src = corpus_path(files[i]);
        /* the copy itself is fine */
        rezip(src, dst, keep, NULL);
        tc_ckpt *c = ck_opens(dst);
        tc_ckpt_close(c);
        size_t cut = 4;
        rezip(src, dst, shorten_data0, &cut);
        ck_fails(dst, "needs", "data/0 four bytes short");
        cli_bad_file(dst, "needs");
        rezip(src, dst, edit_pickle, (void *)huge_sizes);
        ck_fails(dst, "overflow", "sizes of 2^40");
        cli_bad_file(dst, "overflow");
        rezip(src, dst, edit_pickle, (void *)offset_past);
        ck_fails(dst, "past the storage", "offset 2^33");
        cli_bad_file(dst, "past the storage");
        rezip(src, dst, edit_pickle, (void *)stride_past);
        ck_fails(dst, "past the storage", "stride 2^30");
        rezip(src, dst, edit_pickle, (void *)many_dims);
        ck_fails(dst, "dimensions", "65 dimensions");
        rezip(src, dst, edit_pickle, (void *)storage_not_persid);
        ck_fails(dst, "not a persistent id", "storage replaced");
    }
}

Test(ckpt, limits_from_the_caller)
{
    tc_limits lim = TC_LIMITS_DEFAULT;
    lim.max_objects = 50;
    ck_fails_lim(corpus_path("torch-2/lm_cuda0.pt"), &lim, "--max-objects", "max objects");
    lim = (tc_limits)TC_LIMITS_DEFAULT;
    lim.max_depth = 3;
    ck_fails_lim(corpus_path("torch-2/train_ckpt_cuda.pt"), &lim, "--max-depth", "max depth");
    lim = (tc_limits)TC_LIMITS_DEFAULT;
    lim.max_pickle_bytes = 100;
    ck_fails_lim(corpus_path("torch-2/lm_cuda0.pt"), &lim, "--max-pickle-size", "max pickle bytes");
    lim = (tc_limits)TC_LIMITS_DEFAULT;
    lim.max_entries = 3;
    ck_fails_lim(corpus_path("torch-2/lm_cuda0.pt"), &lim, "limit of 3", "max entries");
}

/* BUG (reported, disabled until fixed): --max-pickle-size is ignored for a
 * legacy file whose pickles fit in the first 1 MiB. formats/torch_legacy.c
 * open_legacy starts with cap = 1 << 20 whatever c->lim.max_pickle_bytes
 * says, and only consults the limit when the buffer must grow. The zip
 * format refuses the same 12 KB of pickles under a 100-byte limit. Fix:
 * start with cap = min(1 << 20, max_pickle_bytes) (so a cut pickle at the
 * limit reports TC_ERR_LIMIT), or check `end > max_pickle_bytes` after
 * parse(). */
Test(ckpt, legacy_honours_max_pickle_size)
{
    tc_limits lim = TC_LIMITS_DEFAULT;
    lim.max_pickle_bytes = 100;
    ck_fails_lim(corpus_path("torch-2/legacy_cuda0.pt"), &lim, "--max-pickle-size", "legacy max pickle bytes");
}

/* BUG (reported, disabled until fixed): `tensorctl inspect` prints tensor
 * names as the pickle spells them, control characters included. A key
 * "a\nb\rc\x1b[31m" starts a new table line, returns the cursor and sends an
 * ANSI escape to the terminal of whoever inspects an untrusted file. Fix in
 * src/cli/cmd_inspect.c: escape bytes < 0x20 and 0x7f (e.g. as \n, \r,
 * \x1b) in every name and string printed by the table and the contents
 * listing (the --json output is already escaped by cJSON). */
Test(ckpt, inspect_escapes_control_characters)
{
    tdesc t = good;
    static const char evil_key[] = "0";
    t.key = evil_key;
    char path[4096];
    snprintf(path, sizeof path, "%s", write_zip_ckpt("ctl.pt", &t));
    /* rename the tensor: rebuild data.pkl with the hostile key */
    bbuf pk = {0};
    state_dict_pickle(&pk, &t, false);
    static const char wkey[] = "X\x01\x00\x00\x00w";
    uint8_t *at = memmem(pk.p, pk.n, wkey, sizeof wkey - 1);
    cr_assert_not_null(at);
    static const char hostile[] = "a\nb\rc\x1b[31m";
    bbuf np = {0};
    bb_put(&np, pk.p, (size_t)(at - pk.p));
    bb_u8(&np, 'X');
    bb_u32(&np, sizeof hostile - 1);
    bb_put(&np, hostile, sizeof hostile - 1);
    bb_put(&np, at + sizeof wkey - 1, pk.n - (size_t)(at - pk.p) - (sizeof wkey - 1));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    tc_zipw w;
    tc_diag d = {0};
    tc_dst wd_ = UNIT_DST(fd);
    cr_assert_eq(tc_zipw_init(&w, &wd_, "ckpt", &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "data.pkl", np.p, np.n, &d), 0);
    uint8_t zeros[24] = {0};
    cr_assert_eq(tc_zipw_add(&w, "data/0", zeros, 24, &d), 0);
    cr_assert_eq(tc_zipw_add(&w, "version", "3\n", 2, &d), 0);
    cr_assert_eq(tc_zipw_finish(&w, &d), 0);
    tc_zipw_free(&w);
    close(fd);
    bb_free(&pk);
    bb_free(&np);
    tc_ckpt *c = ck_opens(path);
    cr_assert_eq(tc_ckpt_ntensors(c), 1);
    cr_assert_str_eq(tc_ckpt_tensor(c, 0)->name, hostile);
    tc_ckpt_close(c);
    /* run inspect with stdout captured */
    char outpath[4096];
    snprintf(outpath, sizeof outpath, "%s/stdout.txt", T);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        execl(getenv("TENSORCTL"), "tensorctl", "inspect", path, (char *)NULL);
        _exit(126);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t n;
    uint8_t *out = slurp(outpath, &n);
    for (size_t i = 0; i < n; i++)
        cr_assert(out[i] == '\n' || (out[i] >= 0x20 && out[i] != 0x7f),
                  "inspect printed control byte 0x%02x from a tensor name at offset %zu", out[i], i);
    free(out);
}

Test(ckpt, deflated_records_read)
{
    tc_ckpt *c = ck_opens(data_path("deflated_ckpt.pt"));
    cr_assert_eq(tc_ckpt_ntensors(c), 1);
    cr_assert_eq(tc_ckpt_nstorages(c), 1);
    const tc_storage *s = tc_ckpt_storage(c, 0);
    cr_assert(!s->stored, "a deflated record read as raw bytes");
    cr_assert_eq(s->nbytes, 24);
    tc_rd r;
    tc_diag d = {0};
    cr_assert_eq(tc_storage_open(c, 0, &r, &d), 0, "%s", d.msg);
    cr_assert_null(r.src, "a deflated record is no plain range");
    float v[6];
    size_t got, total = 0;
    cr_assert_eq(tc_rd_read(&r, v, 10, &got, &d), 0, "%s", d.msg);
    cr_assert_eq(got, 10);
    total += got;
    cr_assert_eq(tc_rd_read(&r, (uint8_t *)v + total, 100, &got, &d), 0, "%s", d.msg);
    cr_assert_eq(got, 14);
    cr_assert_eq(tc_rd_read(&r, v, 100, &got, &d), 0);
    cr_assert_eq(got, 0);
    tc_rd_close(&r);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(v[i], (float)(i + 1));
    tc_ckpt_close(c);
    /* the same file cut short fails like any other */
    size_t n;
    uint8_t *f = slurp(data_path("deflated_ckpt.pt"), &n);
    char path[4096];
    snprintf(path, sizeof path, "%s/deflated_cut.pt", T);
    for (size_t k = 0; k < n; k += 13) {
        spit(path, f, k);
        ck_fails(path, NULL, "deflated checkpoint cut");
    }
    free(f);
}

/* A big-endian file (byteorder 'big'): read through the driver, every float32's bytes reversed,
 * whatever the sizes of the reads (here one byte, then three, then the rest), and the record's
 * own CRC-32 checked once all of it is read; the output's CRC is not the record's. */
Test(ckpt, big_endian_swapped_as_read)
{
    tdesc t = good;
    t.byteorder = "big";
    t.ramp = true;
    tc_ckpt *c = ck_opens(write_zip_ckpt("big.pt", &t));
    cr_assert_eq(tc_ckpt_nstorages(c), 1);
    const tc_storage *s = tc_ckpt_storage(c, 0);
    cr_assert(!s->stored, "a swapped storage is not copied as it lies");
    cr_assert(!s->crc_known, "a swapped storage's CRC-32 is not the record's");
    tc_rd r;
    tc_diag d = {0};
    cr_assert_eq(tc_storage_open(c, 0, &r, &d), 0, "%s", d.msg);
    uint8_t got[24];
    size_t n = 0, g = 0;
    const size_t steps[] = {1, 3, 20};
    for (size_t k = 0; k < 3; k++) {
        cr_assert_eq(tc_rd_read(&r, got + n, steps[k], &g, &d), 0, "%s", d.msg);
        cr_assert_eq(g, steps[k]);
        n += g;
    }
    for (size_t i = 0; i < sizeof got; i++)
        cr_assert_eq(got[i], (uint8_t)(i / 4 * 4 + 3 - i % 4), "byte %zu: %u", i, got[i]);
    tc_rd_close(&r);
    tc_ckpt_close(c);
}
