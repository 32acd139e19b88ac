/* The commands themselves, run in-process through tc_cli as the binary runs
 * them: an argument vector and up to two files made from the input, in a
 * folder of their own, stdout and stderr captured. Layout (each index taken
 * modulo its table):
 *
 *   [0] command  [1] output name  [2] name of file A  [3] name of file B
 *   [4] bit 0: inspect and test take both files (diff always does); bits 1-3: the number of options
 *   per option: [option of the command's table] [value]; value 255: [len] then len bytes
 *   of the value itself; value 254: none (an option whose value may be left out)
 *   [len lo] [len hi] of file A, A's bytes; the rest is file B
 *
 * consolidate reads a folder holding A as .metadata and B as __0_0.distcp.
 * An --output option names a path in the folder (from the value table), so
 * nothing is written outside it.
 * What must hold: an exit status tensorctl documents; a failure (not diff's
 * "different" or devices' "no GPU") says why on stderr and leaves nothing behind (no output, temporary or folder); a
 * success leaves no temporary; the inputs unchanged (unless --in-place
 * succeeded); every line on stderr, and on stdout, fit for a terminal (no
 * control byte, C1 control, bidirectional mark or byte that is not UTF-8:
 * escaping it changes nothing); --json output parses. FZ_CLI_VERBOSE=1 lets
 * the output through. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "fuzz_common.h"
#include "vec.h"

/* Where the sanitizers write their reports while stderr is captured (weak: absent without them). */
void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

static const char *const out_names[] = {
    "", /* no -o (to-cpu/to-cuda: next to the input; convert: out.safetensors) */
    "out.pt", "out.safetensors", "out.bin", "outdir/", "model.safetensors.index.json",
    "pytorch_model.bin.index.json", "\x1b[8mout.pt", "o\xff\xfe.safetensors", "noext", "a\nb.pt", "out.ckpt",
};
static const char *const in_names[] = {
    "model.pt", "model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
    "model-00001-of-00002.safetensors", "pytorch_model.bin.index.json", "pytorch_model-00001-of-00002.bin",
    "m.ckpt", "\x1b[8mevil.pt", "bad\xff\xfe.pt", "line\nbreak.safetensors", "x", "manifest.json",
};
static const char *values[] = {
    "0", "1", "2", "3", "16", "100", "1000", "1KiB", "5GB", "bfloat16", "float16", "float32", "float8_e4m3fn",
    "cpu", "cuda", "auto", "cuda:0", "cuda:1", "cpu=cuda:0", "cuda:0=cpu", "*", "*.weight", "*bias*", "fc1.*",
    "model.", "module.", "state_dict", "model", "ema", "w(.*)=v\\1", "(.*)=x.\\1", "[", "1/2", "2/2", "index",
    "pt", "safetensors", "__main__.Evil", "collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
    "\x1b[8m", "\xff\xfe", "a\nb", "", "1e-3", "nan", "-1", "18446744073709551616", "x=y=z",
    NULL, /* a name of 600 characters, made at start */
};
#define NVALUES (sizeof values / sizeof *values)

static char work[256];     /* the folder, made once; emptied before every run */
static int saved_out = -1, saved_err = -1, cap_out = -1, cap_err = -1;

static void empty(const char *dir);

static void cleanup(void)
{
    empty(work);
    rmdir(work);
}

static void setup(void)
{
    static char longval[601];
    memset(longval, 'k', 600);
    values[NVALUES - 1] = longval;
    snprintf(work, sizeof work, "%s/tc-fuzz-cli-%d", fz_tmp_base(), (int)getpid());
    if (mkdir(work, 0700) && errno != EEXIST) {
        perror(work);
        abort();
    }
    atexit(cleanup);
    saved_out = dup(1);
    saved_err = dup(2);
    cap_out = memfd_create("fuzz-cli-out", MFD_CLOEXEC);
    cap_err = memfd_create("fuzz-cli-err", MFD_CLOEXEC);
    if (saved_out < 0 || saved_err < 0 || cap_out < 0 || cap_err < 0) {
        perror("fuzz_cli: descriptors");
        abort();
    }
    if (__sanitizer_set_report_fd)
        __sanitizer_set_report_fd((void *)(intptr_t)saved_err);
}

/* ---- the folder ------------------------------------------------------------------ */

/* "a/b" (or "ab" with sep ""), the caller's to free; aborts when memory is out. */
static char *join(const char *a, const char *sep, const char *b)
{
    tc_buf t = TC_BUF_INIT(0);
    tc_buf_puts(&t, a);
    tc_buf_puts(&t, sep);
    tc_buf_puts(&t, b);
    char *s = tc_buf_take(&t);
    FZ_CHECK(s, "out of memory");
    return s;
}

static void empty(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *p = join(dir, "/", e->d_name);
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode)) {
            empty(p);
            rmdir(p);
        } else {
            unlink(p);
        }
        free(p);
    }
    if (d)
        closedir(d);
}

/* Every path under dir (relative, folders with a trailing '/'), sorted, one a line. */
static void listing(const char *dir, const char *rel, tc_buf *out)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        if (strcmp(name, ".") && strcmp(name, "..")) {
            char *p = join(dir, "/", name), *r = join(rel, name, "/");
            struct stat st;
            bool sub = !lstat(p, &st) && S_ISDIR(st.st_mode);
            if (!sub)
                r[strlen(r) - 1] = 0;
            tc_buf_printf(out, "%s\n", r);
            if (sub)
                listing(p, r, out);
            free(p);
            free(r);
        }
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
}

static bool same_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool same = true;
    uint8_t buf[65536];
    size_t at = 0, k;
    while (same && (k = fread(buf, 1, sizeof buf, f)) > 0) {
        same = at + k <= n && !memcmp(buf, p + at, k);
        at += k;
    }
    fclose(f);
    return same && at == n;
}

static void spill(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    FZ_CHECK(f && (!n || fwrite(p, 1, n, f) == n) && !fclose(f), "cannot write %s", path);
}

/* ---- the output ------------------------------------------------------------------ */

static void capture(void)
{
    fflush(stdout);
    fflush(stderr);
    if (getenv("FZ_CLI_VERBOSE"))
        return;
    ftruncate(cap_out, 0);
    ftruncate(cap_err, 0);
    lseek(cap_out, 0, SEEK_SET);
    lseek(cap_err, 0, SEEK_SET);
    dup2(cap_out, 1);
    dup2(cap_err, 2);
}

static void release(tc_buf *out, tc_buf *err)
{
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    int fds[2] = {cap_out, cap_err};
    tc_buf *to[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        off_t end = lseek(fds[i], 0, SEEK_END);
        char buf[65536];
        for (off_t at = 0; at < end;) {
            ssize_t k = pread(fds[i], buf, sizeof buf, at);
            if (k <= 0)
                break;
            tc_buf_add(to[i], buf, (size_t)k);
            at += k;
        }
    }
}

/* The first line of text that a terminal could take other than as text, or NULL. */
static const char *unsafe_line(const char *s, size_t n, bool json)
{
    static char line[512];
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (s + i)) : n - i;
        tc_buf b = TC_BUF_INIT(0);
        if (json) {
            tc_buf_json(&b, s + i, len);
            for (size_t k = 0; k < len; k++) /* C0 controls: JSON escapes them itself; indentation is tabs */
                if ((unsigned char)s[i + k] < 0x20 && s[i + k] != '\t')
                    tc_buf_putc(&b, 0);
        } else {
            tc_buf_esc(&b, s + i, len);
        }
        bool ok = tc_buf_oom(&b) || (tc_buf_len(&b) == len && !memcmp(tc_buf_str(&b), s + i, len));
        tc_buf_free(&b);
        if (!ok) {
            tc_buf lb = tc_buf_fixed(line, sizeof line);
            tc_buf_esc(&lb, s + i, len);
            return line;
        }
        i += len + 1;
    }
    return NULL;
}

/* Every JSON document in s parses. */
static bool json_docs(const char *s)
{
    while (*s) {
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
            s++;
        if (!*s)
            break;
        const char *end = NULL;
        cJSON *j = cJSON_ParseWithOpts(s, &end, false);
        if (!j)
            return false;
        cJSON_Delete(j);
        s = end;
    }
    return true;
}

/* ---- the run --------------------------------------------------------------------- */

typedef TC_VEC(char *) strv;

static const tc_cmd *command(uint8_t k)
{
    size_t n = 0;
    while (tc_cmds[n])
        n++;
    return tc_cmds[k % n];
}

static size_t nopts(const tc_cmd *c)
{
    size_t n = 0;
    while (c->opts[n])
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!work[0])
        setup();
    if (size < 5)
        return 0;
    const tc_cmd *cmd = command(data[0]);
    const char *out = out_names[data[1] % (sizeof out_names / sizeof *out_names)];
    const char *na = in_names[data[2] % (sizeof in_names / sizeof *in_names)];
    const char *nb = in_names[data[3] % (sizeof in_names / sizeof *in_names)];
    bool both = data[4] & 1;
    size_t nopt = (data[4] >> 1) & 7, at = 5;
    if (!strcmp(na, nb))
        nb = "second.pt";

    strv argv = {0};
    tc_buf arena = TC_BUF_INIT(0); /* the option texts, NUL-separated; pointers taken once it is whole */
    TC_VEC(size_t) offs = {0};
    bool in_place = false, json = false, help = false;
    for (size_t i = 0; i < nopt && at + 2 <= size; i++) {
        size_t no = nopts(cmd);
        const tc_opt *o = cmd->opts[data[at] % no];
        uint8_t vi = data[at + 1];
        at += 2;
        tc_vec_push(&offs, tc_buf_len(&arena));
        tc_buf_printf(&arena, "--%s", o->lng);
        in_place |= o->id == OPT_IN_PLACE;
        json |= o->id == OPT_JSON;
        help |= o->id == OPT_HELP;
        if (o->id == OPT_OUTPUT) { /* a path: always in the folder */
            tc_buf_printf(&arena, "=%s/%s", work, values[vi % NVALUES]);
        } else if (o->arg && vi == 255 && at < size) { /* a value from the input */
            size_t len = data[at++];
            if (len > size - at)
                len = size - at;
            tc_buf_putc(&arena, '=');
            for (size_t k = 0; k < len; k++)
                tc_buf_putc(&arena, data[at + k] ? (char)data[at + k] : '?');
            at += len;
        } else if (o->arg && !(vi == 254 && (o->flags & TC_OPT_VALUE_OPTIONAL))) {
            tc_buf_printf(&arena, "=%s", values[vi % NVALUES]);
        }
        tc_buf_putc(&arena, 0);
    }
    size_t la = at + 2 <= size ? (size_t)data[at] | (size_t)data[at + 1] << 8 : 0;
    at = at + 2 <= size ? at + 2 : size;
    if (la > size - at)
        la = size - at;
    const uint8_t *fa = data + at, *fb = data + at + la;
    size_t lb = size - at - la;

    empty(work);
    bool dcp = !strcmp(cmd->name, "consolidate");
    char *dir = join(work, "/", "dcp"), *pa = join(dcp ? dir : work, "/", dcp ? ".metadata" : na),
         *pb = join(dcp ? dir : work, "/", dcp ? "__0_0.distcp" : nb),
         *po = join(work, "/", out[0] ? out : "out.safetensors");
    if (dcp)
        mkdir(dir, 0700);
    spill(pa, fa, la);
    spill(pb, fb, lb);
    tc_buf before = TC_BUF_INIT(0);
    listing(work, "", &before);

    tc_vec_push(&argv, (char *)"tensorctl");
    tc_vec_push(&argv, (char *)cmd->name);
    for (size_t i = 0; i < offs.n; i++)
        tc_vec_push(&argv, arena.p + offs.v[i]);
    if (!strcmp(cmd->name, "inspect") || !strcmp(cmd->name, "test") || !strcmp(cmd->name, "diff")) {
        tc_vec_push(&argv, pa);
        if (both || !strcmp(cmd->name, "diff"))
            tc_vec_push(&argv, pb);
    } else if (!strcmp(cmd->name, "convert")) {
        tc_vec_push(&argv, pa);
        tc_vec_push(&argv, po);
    } else if (strcmp(cmd->name, "devices")) {
        bool move = !strcmp(cmd->name, "to-cpu") || !strcmp(cmd->name, "to-cuda");
        tc_vec_push(&argv, dcp ? dir : pa);
        if (out[0] || !move) { /* to-cpu and to-cuda may write next to the input */
            tc_vec_push(&argv, (char *)"-o");
            tc_vec_push(&argv, po);
        }
    }
    tc_vec_push(&argv, NULL);
    FZ_CHECK(!tc_buf_oom(&arena) && argv.v, "out of memory building the arguments");

    if (getenv("FZ_CLI_VERBOSE")) {
        for (size_t i = 0; i + 1 < argv.n; i++)
            fprintf(stderr, "%s%s", i ? " " : "fuzz_cli: ", TC_ESC(argv.v[i]));
        fputc('\n', stderr);
    }
    capture();
    int rc = tc_cli((int)argv.n - 1, argv.v);
    tc_buf so = TC_BUF_INIT(0), se = TC_BUF_INIT(0);
    release(&so, &se);

    FZ_CHECK(rc >= 0 && rc <= 5, "exit status %d", rc);
    /* diff's 1 says "different", devices' 1 "no usable GPU" (on stdout): answers, not failures */
    bool answer = rc == 1 && (!strcmp(cmd->name, "diff") || !strcmp(cmd->name, "devices"));
    bool failed = rc != 0 && !answer;
    const char *bad = unsafe_line(tc_buf_str(&se), tc_buf_len(&se), false);
    FZ_CHECK(!bad, "%s exit %d: stderr line not fit for a terminal: %s", cmd->name, rc, bad);
    bad = unsafe_line(tc_buf_str(&so), tc_buf_len(&so), json);
    FZ_CHECK(!bad, "%s exit %d: stdout line not fit for a terminal: %s", cmd->name, rc, bad);
    if (json && !help && !getenv("FZ_CLI_VERBOSE")) /* --help prints help whatever else is asked */
        FZ_CHECK(json_docs(tc_buf_str(&so)), "%s --json exit %d: stdout does not parse", cmd->name, rc);
    /* inspect's report gives an unsafe file's verdict once, on stdout (verdict: FILE: UNSAFE: ...) */
    bool told = rc == TC_EXIT_UNSAFE && !strcmp(cmd->name, "inspect") && strstr(tc_buf_str(&so), ": UNSAFE: ");
    if (failed && !told && !getenv("FZ_CLI_VERBOSE"))
        FZ_CHECK(tc_buf_len(&se) > 0, "%s exit %d with nothing on stderr", cmd->name, rc);
    if (!(in_place && !failed)) {
        FZ_CHECK(same_file(pa, fa, la), "%s exit %d changed its input A", cmd->name, rc);
        FZ_CHECK(same_file(pb, fb, lb), "%s exit %d changed its input B", cmd->name, rc);
    }
    tc_buf after = TC_BUF_INIT(0);
    listing(work, "", &after);
    if (failed)
        FZ_CHECK(!strcmp(tc_buf_str(&before), tc_buf_str(&after)), "%s exit %d left files behind:\n%s", cmd->name,
                 rc, tc_buf_str(&after));
    else
        FZ_CHECK(!strstr(tc_buf_str(&after), ".tensorctl-"), "%s exit %d left a temporary:\n%s", cmd->name, rc,
                 tc_buf_str(&after));

    tc_buf_free(&before);
    tc_buf_free(&after);
    tc_buf_free(&so);
    tc_buf_free(&se);
    tc_buf_free(&arena);
    tc_vec_free(&offs);
    tc_vec_free(&argv);
    free(dir);
    free(pa);
    free(pb);
    free(po);
    return 0;
}
