/* The command-line front end: option tables, exit codes, messages.
 * Only code under src/cli prints or exits. */
#ifndef TC_CLI_H
#define TC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

/* Exit statuses, documented in man/tensorctl.1 and pinned by tests. */
enum {
    TC_EXIT_OK = 0,
    TC_EXIT_FAIL = 1,     /* I/O error, out of memory, CUDA failure */
    TC_EXIT_USAGE = 2,    /* bad command line, or a request that cannot be met */
    TC_EXIT_BADFILE = 3,  /* input malformed, unsupported or over a limit */
    TC_EXIT_UNSAFE = 4,   /* the file names dangerous globals */
};

/* One option of a command: drives parsing, --help and the man-page test. */
typedef struct tc_opt {
    int id;
    char shrt;           /* 0 when none */
    const char *lng;     /* without "--" */
    const char *arg;     /* NULL for flags */
    const char *help;
    bool repeat;
} tc_opt;

typedef struct tc_cmd {
    const char *name;
    const char *synopsis;
    const char *summary;
    const tc_opt *opts;  /* terminated by an entry with id 0 */
    int (*run)(const struct tc_cmd *cmd, int argc, char **argv);
} tc_cmd;

extern const tc_cmd *const tc_cmds[];

/* Parsed options: values by id (last wins), repeated ones collected. */
#define TC_MAX_OPTS 64
#define TC_MAX_REPEAT 256
typedef struct tc_args {
    const char *val[TC_MAX_OPTS];
    bool set[TC_MAX_OPTS];
    const char *rep[TC_MAX_OPTS][TC_MAX_REPEAT];
    size_t nrep[TC_MAX_OPTS];
    char **pos;
    int npos;
} tc_args;

/* Common option ids. */
enum {
    OPT_HELP = 1, OPT_QUIET, OPT_VERBOSE, OPT_JSON, OPT_OUTPUT, OPT_FORCE, OPT_IN_PLACE, OPT_DEVICE,
    OPT_MAP, OPT_DTYPE, OPT_KEEP, OPT_ONLY, OPT_ALLOW_UNSAFE, OPT_ENGINE, OPT_MAX_PICKLE, OPT_MAX_DEPTH,
    OPT_MAX_OBJECTS, OPT_FORMAT, OPT_KEY, OPT_MAX_SHARD, OPT_VERIFY_CRC, OPT_NO_PROGRESS, OPT_HASH, OPT_MAX_ENTRIES, OPT_MAX_HEADER,
};

/* The limit options every command that reads checkpoints takes (tc_limits_from_args). */
#define TC_LIMIT_OPTS                                                                                    \
    {OPT_MAX_PICKLE, 0, "max-pickle-size", "SIZE", "largest pickle to read (default 1GiB)", false},      \
    {OPT_MAX_DEPTH, 0, "max-depth", "N", "deepest object nesting to accept (default 1000)", false},      \
    {OPT_MAX_OBJECTS, 0, "max-objects", "N", "most pickle objects to accept (default 20000000)", false}, \
    {OPT_MAX_ENTRIES, 0, "max-entries", "N", "most zip records, safetensors tensors or index entries (default 1000000)", false}, \
    {OPT_MAX_HEADER, 0, "max-header-size", "SIZE", "largest safetensors JSON header (default 100MiB)", false}

/* Parse argv (after the command name): 0 to go on; -1 after printing a
 * misuse, 1 after printing --help (then return tc_parse_exit(rc)). */
int tc_parse(const tc_cmd *cmd, int argc, char **argv, tc_args *a);
int tc_parse_exit(int parse_rc);
void tc_print_cmd_help(const tc_cmd *cmd);

/* Messages: "tensorctl: FILE: message" on stderr. */
void tc_err(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A core failure, with the subject the core named; returns its exit status. */
int tc_err_diag(const tc_diag *d);
void tc_warn(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern int tc_verbosity; /* 0 quiet, 1 normal, 2 verbose */
int tc_exit_for(int status);

/* Limits from --max-* options. Returns -1 after printing on a bad value. */
int tc_limits_from_args(const tc_args *a, tc_limits *lim);
/* "5GB", "100MiB", "1024" -> bytes. */
int tc_parse_size(const char *s, uint64_t *out);

/* Progress bar on stderr when it is a terminal and the work takes > 1 s. */
typedef struct tc_progress {
    bool enabled;
    double start, last;
    const char *label;
} tc_progress;
void tc_progress_init(tc_progress *p, const char *label, bool enabled);
void tc_progress_cb(void *ctx, uint64_t done, uint64_t total);
void tc_progress_end(tc_progress *p);

/* 1536 -> "1.5 KiB" */
void tc_human_bytes(uint64_t b, char *out, size_t n);

#endif
