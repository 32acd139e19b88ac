/* Messages, exit statuses, progress. */
#include <cjson/cJSON.h>

#include "buf.h"
#include "cli.h"
#include "format.h"
#include "safety.h"
#include "shard_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


int tc_verbosity = 1;
static char last_error[4096]; /* tc_last_error: what the last error line said, after "tensorctl: " */

/* One line on stderr: "tensorctl: KIND FILE: message". The subject is
 * escaped as stdout escapes names; the message is escaped whole once
 * formatted, so a name a caller put in as it came (an argument, text of the
 * file) reaches the terminal as \xNN too, never as a control sequence or a
 * second line, and text that was escaped already passes unchanged. Built
 * in arrays: a message still comes out when memory has run out. */
static void vmsg(const char *kind, const char *file, const char *fmt, va_list ap)
{
    char raw[2048], line[4096];
    tc_buf r = tc_buf_fixed(raw, sizeof raw);
    tc_buf_vprintf(&r, fmt, ap);
    tc_buf b = tc_buf_fixed(line, sizeof line);
    tc_buf_puts(&b, "tensorctl: ");
    tc_buf_puts(&b, kind);
    if (file) {
        tc_buf_escs(&b, file);
        tc_buf_puts(&b, ": ");
    }
    tc_buf_esc(&b, raw, tc_buf_len(&r));
    fprintf(stderr, "%s\n", line);
    if (!*kind) /* an error: what --json's failure record says */
        memcpy(last_error, line + strlen("tensorctl: "), strlen(line) - strlen("tensorctl: ") + 1);
}

void tc_put_json(const char *s)
{
    size_t n = strlen(s);
    if (tc_json_plain(s, n) == n) { /* nearly always: nothing to change */
        fputs(s, stdout);
        return;
    }
    tc_buf b = TC_BUF_INIT(0);
    tc_buf_json(&b, s, n);
    fputs(tc_buf_oom(&b) ? s : tc_buf_str(&b), stdout); /* out of memory: as cJSON wrote it */
    tc_buf_free(&b);
}

void tc_put_json_line(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    if (s) {
        tc_put_json(s);
        fputc('\n', stdout);
    }
    free(s);
    cJSON_Delete(o);
}

cJSON *tc_json_int(int64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, v);
    return cJSON_CreateRaw(t);
}

cJSON *tc_json_uint(uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    return cJSON_CreateRaw(t);
}

void tc_err(const char *file, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg("", file, fmt, ap);
    va_end(ap);
}

void tc_warn(const char *file, const char *fmt, ...)
{
    if (tc_verbosity < 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vmsg("warning: ", file, fmt, ap);
    va_end(ap);
}

int tc_err_diag(const tc_diag *d)
{
    tc_err(d->file[0] ? d->file : NULL, "%s", d->msg);
    return tc_exit_for(d->code);
}

int tc_exit_for(int status)
{
    switch (status) {
    case TC_OK: return TC_EXIT_OK;
    case TC_ERR_FORMAT:
    case TC_ERR_LIMIT:
    case TC_ERR_UNSUPPORTED: return TC_EXIT_BADFILE;
    case TC_ERR_UNSAFE: return TC_EXIT_UNSAFE;
    case TC_ERR_USAGE: return TC_EXIT_USAGE;
    default: return TC_EXIT_FAIL;
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void tc_progress_init(tc_progress *p, const char *label, bool enabled)
{
    p->enabled = enabled && tc_verbosity >= 1 && isatty(2);
    p->start = now();
    p->last = 0;
    p->label = label;
}

/* The terminal's width (stderr's), else $COLUMNS, else 80. */
static int term_columns(void)
{
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int n = c ? atoi(c) : 0;
    return n > 0 ? n : 80;
}

void tc_progress_cb(void *ctx, uint64_t done, uint64_t total)
{
    tc_progress *p = ctx;
    if (!p->enabled)
        return;
    double t = now(), el = t - p->start;
    if (el < 1.0 || t - p->last < 0.1)
        return;
    p->last = t;
    double rate = done / (el > 0 ? el : 1), left = rate > 0 ? (total - done) / rate : 0;
    int pct = total ? (int)(100.0 * done / total) : 100;
    char d[16], tot[16], r[16], tail[96], line[512];
    tc_human_bytes(done, d, sizeof d);
    tc_human_bytes(total, tot, sizeof tot);
    tc_human_bytes((uint64_t)rate, r, sizeof r);
    snprintf(tail, sizeof tail, " %3d%% %s/%s %s/s %.0fs left", pct, d, tot, r, left);
    /* One line that fits: a wrapped line would start a new one at every update. The
     * bar takes what the label and figures leave, up to 25 columns; on a narrow
     * terminal it goes first, then the figures are cut. */
    int width = term_columns() - 1, fixed = (int)(strlen(p->label) + strlen(tail)) + 3, bar = width - fixed;
    if (bar > 25)
        bar = 25;
    tc_buf b = tc_buf_fixed(line, sizeof line);
    tc_buf_puts(&b, p->label);
    if (bar >= 5) {
        tc_buf_puts(&b, " [");
        for (int i = 0; i < bar; i++)
            tc_buf_putc(&b, i < pct * bar / 100 ? '#' : '.');
        tc_buf_putc(&b, ']');
    }
    tc_buf_puts(&b, tail);
    size_t len = tc_buf_len(&b);
    if (width > 0 && len > (size_t)width)
        line[width] = 0;
    fprintf(stderr, "\r%s\033[K", line);
}

void tc_progress_end(tc_progress *p)
{
    if (p->enabled && p->last > 0)
        fprintf(stderr, "\r\033[K");
}

bool tc_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

bool tc_names_folder(const char *path)
{
    struct stat st;
    return tc_ends_with(path, "/") || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

bool tc_names_one_file(const char *path)
{
    return !tc_index_path(path) && tc_outname_format(path) != TC_OUTNAME_NONE && !tc_names_folder(path);
}

int tc_input_path(const char *arg, char **path)
{
    if (!strcmp(arg, "-")) {
        tc_err(NULL, "'-': reading a checkpoint from standard input is not supported: tensorctl reads by seeking "
               "and needs a seekable regular file (save the stream to a file first; ./- names a file called -)");
        return TC_EXIT_USAGE;
    }
    tc_diag d = TC_DIAG_INIT;
    char *file = NULL;
    int rc = tc_model_folder(arg, &file, &d);
    if (rc < 0)
        return tc_err_diag(&d);
    if (rc == 0) {
        if (tc_verbosity > 0)
            fprintf(stderr, "tensorctl: %s: a model folder: reading %s\n", TC_ESC(arg), TC_ESC(file));
        *path = file;
        return 0;
    }
    if (!(*path = strdup(arg))) {
        tc_err(NULL, "out of memory");
        return TC_EXIT_FAIL;
    }
    return 0;
}

/* The extension of a checkpoint's name that tc_output_path replaces: its length, 0 when none. */
static size_t ckpt_ext_len(const char *name, size_t n)
{
    static const char *const exts[] = {".safetensors", ".pt", ".bin", ".pth", ".ckpt", ".gguf", NULL};
    for (const char *const *e = exts; *e; e++) {
        size_t l = strlen(*e);
        if (n > l && !memcmp(name + n - l, *e, l))
            return l;
    }
    return 0;
}

int tc_output_path(const char *out, const char *in, const char *ext, char **path)
{
    struct stat st;
    bool folder = stat(out, &st) == 0 && S_ISDIR(st.st_mode);
    if (!folder && tc_ends_with(out, "/")) {
        tc_err(out, "is not a folder (create it first, or name the output file)");
        return TC_EXIT_USAGE;
    }
    tc_buf b = TC_BUF_INIT(0);
    if (folder) {
        size_t l = strlen(in);
        while (l > 1 && in[l - 1] == '/')
            l--;
        size_t k = l;
        while (k > 0 && in[k - 1] != '/')
            k--;
        size_t o = strlen(out);
        while (o > 1 && out[o - 1] == '/')
            o--;
        size_t n = l - k;
        if (ext)
            n -= ckpt_ext_len(in + k, n);
        tc_buf_printf(&b, "%.*s/%.*s%s", (int)o, out, (int)n, in + k, ext ? ext : "");
    } else {
        tc_buf_puts(&b, out);
    }
    *path = tc_buf_oom(&b) ? NULL : strdup(tc_buf_str(&b));
    tc_buf_free(&b);
    if (!*path) {
        tc_err(NULL, "out of memory");
        return TC_EXIT_FAIL;
    }
    return 0;
}

int tc_output_file(const tc_args *a, const char *out, const char *in, char **path)
{
    struct stat st;
    if (!(stat(out, &st) == 0 && S_ISDIR(st.st_mode)))
        return tc_output_path(out, in, NULL, path); /* out itself (or the error of a missing NAME/) */
    /* the extension of the format asked for; a torch name keeps its own (.bin stays .bin) */
    bool f = a->set[OPT_FORMAT];
    int w = a->word[OPT_FORMAT];
    const char *ext = NULL;
    int own = tc_index_path(in) ? TC_OUTNAME_NONE : tc_outname_format(in);
    if (f ? w == TC_FORMAT_PT : own == TC_OUTNAME_PT)
        ext = own == TC_OUTNAME_PT ? strrchr(in, '.') : ".pt";
    else if (f ? w == TC_FORMAT_SAFETENSORS : own == TC_OUTNAME_ST)
        ext = ".safetensors";
    else if (f || tc_ends_with(in, ".gguf")) /* --format's last word, gguf */
        ext = ".gguf";
    if (!ext) {
        tc_err(out, "is a folder, and the input's name gives no format for the file written into it: give "
               "--format (--format safetensors writes %s/NAME.safetensors)", out);
        return TC_EXIT_USAGE;
    }
    return tc_output_path(out, in, ext, path);
}

/* ---- --json of the commands that write ------------------------------------------------------ */

tc_wrote tc_wrote_run;

void tc_wrote_begin(const char *command, const char *input, bool json)
{
    free(tc_wrote_run.output);
    tc_wrote_run = (tc_wrote){.command = command, .input = input, .t0 = now(), .json = json};
    last_error[0] = 0;
}

void tc_wrote_set(const char *output, size_t files, size_t tensors, uint64_t bytes, uint64_t tensor_bytes)
{
    tc_wrote *w = &tc_wrote_run;
    free(w->output);
    w->output = output ? strdup(output) : NULL;
    w->files = files;
    w->tensors = tensors;
    w->bytes = bytes;
    w->tensor_bytes = tensor_bytes;
    w->done = true;
}

void tc_wrote_target(const char *output)
{
    tc_wrote *w = &tc_wrote_run;
    if (!w->done && output) {
        free(w->output);
        w->output = strdup(output);
    }
}

bool tc_wrote_line(void)
{
    return tc_verbosity > 0 && !tc_wrote_run.json;
}

const char *tc_last_error(void)
{
    return last_error;
}

void tc_last_error_clear(void)
{
    last_error[0] = 0;
}

int tc_wrote_end(int exit_status)
{
    tc_wrote *w = &tc_wrote_run;
    if (w->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "command", w->command ? w->command : "");
        if (w->input)
            cJSON_AddStringToObject(o, "input", w->input);
        else
            cJSON_AddNullToObject(o, "input");
        if (w->output)
            cJSON_AddStringToObject(o, "output", w->output);
        else
            cJSON_AddNullToObject(o, "output");
        if (!exit_status && w->done) {
            char t[32];
            cJSON_AddNumberToObject(o, "files", (double)w->files);
            cJSON_AddNumberToObject(o, "tensors", (double)w->tensors);
            snprintf(t, sizeof t, "%" PRIu64, w->bytes); /* exactly, past 2^53 too */
            cJSON_AddItemToObject(o, "bytes", cJSON_CreateRaw(t));
            snprintf(t, sizeof t, "%" PRIu64, w->tensor_bytes);
            cJSON_AddItemToObject(o, "tensor_bytes", cJSON_CreateRaw(t));
            snprintf(t, sizeof t, "%.3f", now() - w->t0);
            cJSON_AddItemToObject(o, "seconds", cJSON_CreateRaw(t));
        } else {
            cJSON_AddStringToObject(o, "error", last_error[0] ? last_error : "failed");
        }
        cJSON_AddNumberToObject(o, "exit_status", exit_status);
        tc_put_json_line(o);
    }
    free(w->output);
    *w = (tc_wrote){0};
    return exit_status;
}

const tc_outsuffix tc_outsuffixes[] = {
    {".safetensors", TC_OUTNAME_ST},    {".safetensors.index.json", TC_OUTNAME_ST},
    {".pt", TC_OUTNAME_PT},             {".bin", TC_OUTNAME_PT},
    {".pth", TC_OUTNAME_PT},            {".ckpt", TC_OUTNAME_PT},
    {".pt.index.json", TC_OUTNAME_PT},  {".bin.index.json", TC_OUTNAME_PT},
    {".pth.index.json", TC_OUTNAME_PT}, {NULL, TC_OUTNAME_NONE},
};

int tc_outname_format(const char *path)
{
    for (const tc_outsuffix *n = tc_outsuffixes; n->suffix; n++)
        if (tc_ends_with(path, n->suffix))
            return n->format;
    return TC_OUTNAME_NONE;
}

int tc_output_format(const tc_args *a, const char *out)
{
    if (a->set[OPT_FORMAT]) /* pt|safetensors (convert's gguf is written before this is asked) */
        return a->word[OPT_FORMAT] == TC_FORMAT_PT ? TC_OUTNAME_PT : TC_OUTNAME_ST;
    int fmt = tc_outname_format(out);
    if (fmt == TC_OUTNAME_NONE) {
        tc_err(out, "cannot tell the output format from the name (.safetensors, .pt, .bin, .pth, .ckpt or "
               ".index.json); give --format");
        return -1;
    }
    return fmt;
}

void tc_warn_list(const char *out, const char *what, char *const *v, size_t n)
{
    /* about a line of names (the last one shown cut with "..."), then how many there are */
    char line[761];
    tc_buf b = tc_buf_fixed(line, sizeof line);
    size_t i = 0;
    for (; i < n && !tc_buf_cut(&b); i++) {
        tc_buf_sep(&b, ", ");
        tc_buf_escs(&b, v[i]);
    }
    if (tc_buf_cut(&b))
        tc_warn(out, "%s: %s (%zu in all)", what, line, n);
    else
        tc_warn(out, "%s: %s", what, line);
}

/* Decimal units, as --max-shard-size 5GB and the sizes people type mean them (5GB is
 * 5 000 000 000 bytes, as in Hugging Face's max_shard_size): one system for every
 * size tensorctl prints, in progress lines, summaries and messages. */
void tc_human_bytes(uint64_t b, char *out, size_t n)
{
    if (b < 1000)
        snprintf(out, n, "%" PRIu64 " B", b);
    else if (b < 999950)
        snprintf(out, n, "%.1f KB", b / 1e3);
    else if (b < 999950000ull)
        snprintf(out, n, "%.1f MB", b / 1e6);
    else if (b < 999995000000ull)
        snprintf(out, n, "%.2f GB", b / 1e9);
    else
        snprintf(out, n, "%.2f TB", b / 1e12);
}

void tc_print_sharing(const char *out, uint64_t file_bytes, uint64_t shared, uint64_t copied)
{
    if (tc_verbosity < 2)
        return;
    char h[32];
    tc_human_bytes(shared, h, sizeof h);
    fprintf(stderr,
            "tensorctl: %s: %" PRIu64 " bytes: %" PRIu64 " shared with the input (%s of cloned blocks), %" PRIu64
            " copied, %" PRIu64 " written\n",
            TC_ESC(out), file_bytes, shared, h, copied, file_bytes - shared - copied);
}

void tc_unsafe_note(const tc_ckpt *c, const char *in)
{
    if (!tc_safety_script_only(c)) {
        tc_warn(in, "its globals outside torch's allowlist stay behind: the output holds tensors only");
        return;
    }
    char why[900];
    tc_safety_why(c, why, sizeof why);
    tc_warn(in, "UNSAFE to load: %s; its tensors were read without running anything, and the output holds only "
                "them", why);
}

void tc_print_removed(const char *index, char *const *names, size_t n)
{
    if (!n || tc_verbosity < 1)
        return;
    tc_buf b = TC_BUF_INIT(2000);
    for (size_t i = 0; i < n; i++) {
        tc_buf_sep(&b, ", ");
        tc_buf_esc(&b, names[i], strlen(names[i]));
    }
    char e[600];
    fprintf(stderr, "tensorctl: %s: removed %zu shard%s of the set it replaced, which the new one does not have: %s\n",
            tc_esc(index, e, sizeof e), n, tc_s(n), tc_buf_str(&b));
    tc_buf_free(&b);
}
