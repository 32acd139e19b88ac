#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


int tc_verbosity = 1;

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

static const tc_opt *find_long(const tc_opt *o, const char *name, size_t len)
{
    for (; o->id; o++)
        if (strlen(o->lng) == len && !strncmp(o->lng, name, len))
            return o;
    return NULL;
}

static int parse_args(const tc_cmd *cmd, int argc, char **argv, tc_args *a)
{
    memset(a, 0, sizeof *a);
    a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
    if (!a->pos) {
        tc_err(NULL, "out of memory");
        return -1;
    }
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        char *s = argv[i];
        if (only_pos || s[0] != '-' || !s[1]) {
            a->pos[a->npos++] = s;
            continue;
        }
        if (!strcmp(s, "--")) {
            only_pos = true;
            continue;
        }
        const tc_opt *o = NULL;
        const char *val = NULL;
        if (s[1] == '-') {
            const char *eq = strchr(s + 2, '=');
            size_t len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
            o = find_long(cmd->opts, s + 2, len);
            if (eq)
                val = eq + 1;
        } else {
            for (const tc_opt *p = cmd->opts; p->id; p++)
                if (p->shrt == s[1])
                    o = p;
            if (o && s[2])
                val = s + 2;
        }
        if (!o) {
            tc_err(NULL, "%s: unknown option '%s' (see 'tensorctl %s --help')", cmd->name, s, cmd->name);
            return -1;
        }
        if (o->arg && !val) {
            if (i + 1 >= argc) {
                tc_err(NULL, "%s: option --%s needs a value (%s)", cmd->name, o->lng, o->arg);
                return -1;
            }
            val = argv[++i];
        } else if (!o->arg && val) {
            tc_err(NULL, "%s: option --%s takes no value", cmd->name, o->lng);
            return -1;
        }
        a->set[o->id] = true;
        a->val[o->id] = val;
        if (o->repeat) {
            if (a->nrep[o->id] == TC_MAX_REPEAT) {
                tc_err(NULL, "%s: option --%s given more than %d times", cmd->name, o->lng, TC_MAX_REPEAT);
                return -1;
            }
            a->rep[o->id][a->nrep[o->id]++] = val;
        }
    }
    if (a->set[OPT_QUIET])
        tc_verbosity = 0;
    if (a->set[OPT_VERBOSE])
        tc_verbosity = 2;
    return 0;
}

int tc_parse(const tc_cmd *cmd, int argc, char **argv, tc_args *a)
{
    int rc = parse_args(cmd, argc, argv, a);
    if (!rc && a->set[OPT_HELP]) {
        tc_print_cmd_help(cmd);
        rc = 1;
    }
    if (rc) {
        free(a->pos);
        a->pos = NULL;
    }
    return rc;
}

int tc_parse_exit(int parse_rc) { return parse_rc < 0 ? TC_EXIT_USAGE : TC_EXIT_OK; }

void tc_print_cmd_help(const tc_cmd *cmd)
{
    printf("usage: tensorctl %s\n\n%s\n\noptions:\n", cmd->synopsis, cmd->summary);
    for (const tc_opt *o = cmd->opts; o->id; o++) {
        char left[64];
        if (o->shrt)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->shrt, o->lng, o->arg ? " " : "", o->arg ? o->arg : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->lng, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-30s %s\n", left, o->help);
    }
}

int tc_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    static const struct {
        const char *suf;
        double mul;
    } units[] = {{"", 1},           {"B", 1},          {"K", 1e3},        {"KB", 1e3},    {"KiB", 1024.0},
                 {"M", 1e6},        {"MB", 1e6},       {"MiB", 1048576.0}, {"G", 1e9},     {"GB", 1e9},
                 {"GiB", 1073741824.0}, {"T", 1e12},   {"TB", 1e12},      {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].suf)) {
            double b = v * units[i].mul;
            if (b >= 1.8e19)
                return -1;
            *out = (uint64_t)b;
            return 0;
        }
    return -1;
}

int tc_limits_from_args(const tc_args *a, tc_limits *lim)
{
    static const struct {
        int id;
        const char *name;
    } m[] = {{OPT_MAX_PICKLE, "max-pickle-size"}, {OPT_MAX_DEPTH, "max-depth"}, {OPT_MAX_OBJECTS, "max-objects"},
             {OPT_MAX_ENTRIES, "max-entries"}, {OPT_MAX_HEADER, "max-header-size"}};
    tc_limits def = TC_LIMITS_DEFAULT;
    *lim = def;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        if (!a->set[m[i].id])
            continue;
        uint64_t v;
        if (tc_parse_size(a->val[m[i].id], &v) || v == 0) {
            tc_err(NULL, "--%s: '%s' is not a positive size", m[i].name, a->val[m[i].id]);
            return -1;
        }
        if (m[i].id == OPT_MAX_PICKLE)
            lim->max_pickle_bytes = v;
        else if (m[i].id == OPT_MAX_DEPTH)
            lim->max_depth = v > 100000 ? 100000 : (uint32_t)v;
        else if (m[i].id == OPT_MAX_ENTRIES)
            lim->max_entries = v;
        else if (m[i].id == OPT_MAX_HEADER)
            lim->max_header = v;
        else
            lim->max_objects = v;
    }
    return 0;
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
