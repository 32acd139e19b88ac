/* Messages, exit statuses, progress. */
#include "cli.h"
#include "shard_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


int tc_verbosity = 1;

const char *tc_term_esc(const char *s, char *buf, size_t n)
{
    size_t k = 0;
    for (; *s && k + 5 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7f) {
            buf[k++] = (char)c;
        } else {
            const char *e = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            k += (size_t)(e ? snprintf(buf + k, n - k, "%s", e) : snprintf(buf + k, n - k, "\\x%02x", c));
        }
    }
    buf[k] = 0;
    return buf;
}

static void vmsg(const char *kind, const char *file, const char *fmt, va_list ap)
{
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* one line per message, whatever the input contained */
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) /* no terminal control from file contents */
            *p = *p == '\n' ? ' ' : '?';
    if (file)
        fprintf(stderr, "tensorctl: %s%s: %s\n", kind, file, buf);
    else
        fprintf(stderr, "tensorctl: %s%s\n", kind, buf);
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
    int pct = total ? (int)(100.0 * done / total) : 100, bar = pct / 4;
    char b[26];
    for (int i = 0; i < 25; i++)
        b[i] = i < bar ? '#' : '.';
    b[25] = 0;
    fprintf(stderr, "\r%s [%s] %3d%% %.1f/%.1f MB %.0f MB/s %.0fs left ", p->label, b, pct, done / 1e6,
            total / 1e6, rate / 1e6, left);
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

const tc_outname tc_outnames[] = {
    {".safetensors", TC_OUTNAME_ST},    {".safetensors.index.json", TC_OUTNAME_ST},
    {".pt", TC_OUTNAME_PT},             {".bin", TC_OUTNAME_PT},
    {".pth", TC_OUTNAME_PT},            {".ckpt", TC_OUTNAME_PT},
    {".pt.index.json", TC_OUTNAME_PT},  {".bin.index.json", TC_OUTNAME_PT},
    {".pth.index.json", TC_OUTNAME_PT}, {NULL, TC_OUTNAME_NONE},
};

int tc_outname_format(const char *path)
{
    for (const tc_outname *n = tc_outnames; n->suffix; n++)
        if (tc_ends_with(path, n->suffix))
            return n->format;
    return TC_OUTNAME_NONE;
}

int tc_output_format(const tc_args *a, const char *out)
{
    if (a->set[OPT_FORMAT]) {
        const char *f = a->val[OPT_FORMAT];
        if (!strcmp(f, "pt"))
            return TC_OUTNAME_PT;
        if (!strcmp(f, "safetensors"))
            return TC_OUTNAME_ST;
        tc_err(NULL, "--format '%s': choose pt or safetensors", f);
        return -1;
    }
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
    char line[900];
    size_t l = 0;
    for (size_t i = 0; i < n && l < sizeof line - 80; i++)
        l += (size_t)snprintf(line + l, sizeof line - l, "%s%s", i ? ", " : "", v[i]);
    if (n && l >= sizeof line - 80)
        snprintf(line + l, sizeof line - l, ", ... (%zu in all)", n);
    tc_warn(out, "%s: %s", what, line);
}

void tc_human_bytes(uint64_t b, char *out, size_t n)
{
    if (b < 1024)
        snprintf(out, n, "%" PRIu64 " B", b);
    else if (b < 1048576)
        snprintf(out, n, "%.1f KiB", b / 1024.0);
    else if (b < 1073741824ull)
        snprintf(out, n, "%.1f MiB", b / 1048576.0);
    else
        snprintf(out, n, "%.2f GiB", b / 1073741824.0);
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
            out, file_bytes, shared, h, copied, file_bytes - shared - copied);
}
