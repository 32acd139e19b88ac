/* The command-line front end: option tables, exit statuses, messages.
 * Only code under src/cli prints or exits.
 *
 * The contract is written once: every option is one tc_opt row (shared rows
 * live in opts.c, a command's own rows in its file) with its prose in a file
 * of its own (src/cli/options/NAME.opt), and each command lists its rows;
 * parsing, --help and the man page's OPTIONS sections come from those lists, the EXIT STATUS section and the usage line from tc_exits.
 * man/tensorctl.1 is generated from them (gen_man.c), and a test keeps the
 * committed copy equal to what the tables give. */
#ifndef TC_CLI_H
#define TC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h" /* tc_esc: every name printed, on stdout and stderr */

/* An escaped copy of s (tc_esc, cut past 1 KiB) for one printf argument: a
 * name from a file or the command line on its way to a terminal. The copy
 * lives until the end of the enclosing block. */
#define TC_ESC(s) tc_esc((s), (char[1024]){0}, 1024)
#include "ckpt.h"
#include "diag.h"
#include "gguf.h" /* tc_gguf_wkv: --kv's typed slot */
#include "opt_text.h" /* generated from src/cli/options/ */
#include "qtype.h"

/* Exit statuses. */
enum {
    TC_EXIT_OK = 0,
    TC_EXIT_FAIL = 1,     /* I/O error, out of memory, CUDA failure */
    TC_EXIT_USAGE = 2,    /* bad command line, or a request that cannot be met */
    TC_EXIT_BADFILE = 3,  /* input malformed, unsupported or over a limit */
    TC_EXIT_UNSAFE = 4,   /* loading the file is not safe (globals outside the allowlist, a second reading) */
    TC_EXIT_DIFF_FAIL = 5, /* diff only: its 1 means "different" (as cmp's), so its failures take 5 */
};

typedef struct tc_exit_info {
    int code;
    const char *brief;   /* for the usage line: "bad input file" */
    const char *man;     /* the man page's paragraph (roff) */
} tc_exit_info;

/* Every exit status, in order; the last entry has brief NULL. */
extern const tc_exit_info tc_exits[];

/* One option: drives parsing, --help and the man page. */
enum {
    TC_OPT_REPEAT = 1u << 0,         /* may be given more than once; the values accumulate */
    TC_OPT_VALUE_OPTIONAL = 1u << 1, /* the value may be left out; given as --name=VALUE, or as
                                        --name VALUE when VALUE ends with '.' (a dotted prefix) */
};

/* What an option's value is, so that tc_parse checks it once, the same way for every command,
 * and fills its typed slot in tc_args (a bad value: one line naming the option and the value,
 * exit status 2). */
typedef enum tc_kind {
    TC_KIND_TEXT = 0, /* free text, taken as it is (a key, a prefix, FROM=TO; the command reads it) */
    TC_KIND_PATH,     /* a file or folder name */
    TC_KIND_GLOB,     /* a shell pattern for tensor names */
    TC_KIND_COUNT,    /* decimal digits (tc_parse_count) from min to max (max 0: no bound): num[] */
    TC_KIND_SIZE,     /* bytes (tc_parse_size: 5GB, 100MiB), at least min: num[] */
    TC_KIND_REAL,     /* a finite number >= 0: real[] */
    TC_KIND_WORDS,    /* one of the words of arg ("auto|cpu|cuda"): word[], its place in arg from 0 */
    TC_KIND_DEVICE,   /* a device torch.load restores to (tc_device_target): dev[] */
    TC_KIND_DEVMAP,   /* FROM=TO (repeatable): FROM a device tag as a file carries it (any backend's,
                         tc_device_parse_tag), TO a device torch.load restores: map[] (a command has
                         one such row) */
    TC_KIND_PART,     /* I/N, 1 <= I <= N <= max, or the word index: part */
    TC_KIND_DTYPE,    /* a dtype --dtype casts to (tc_dtype_from_arg): dtype[] */
    TC_KIND_DTYPE_GGUF, /* that, or a GGUF type tensorctl encodes; which one the output takes is the
                           command's to say, so no value is refused here: dtype[] (TC_DT_INVALID when
                           none) and qtype[] (TC_Q_NONE when none) */
    TC_KIND_KV,       /* KEY=VALUE or KEY=TYPE:VALUE (repeatable), a GGUF metadata entry (tc_gguf_kv_parse):
                         kv[] (a command has one such row) */
    TC_KIND_TAG,      /* the name of a folder inside the input: not empty, no '/', not . or ..: name[] */
    TC_KIND_KEY,      /* the first component of dotted names: not empty, no '.': name[] */
    TC_KIND_GLOBALS,  /* NAME[,NAME...] (repeatable), globals as module.name that may be admitted as safe
                         (tc_verdict_admissible): globals (a command has one such row) */
} tc_kind;

/* A row holds no prose: its --help line and man paragraph are its file's in src/cli/options/
 * (NAME.opt, turned into tc_text_NAME by gen_opt_text.c at build time). */
typedef struct tc_opt {
    int id;
    char shrt;           /* 0 when none */
    const char *lng;     /* without "--" */
    const char *arg;     /* NULL for flags */
    unsigned flags;      /* TC_OPT_* */
    const char *def;     /* the default, as --help and the man page show it; NULL when none */
    const tc_opt_text *text; /* the help line and the man paragraph (opt_text.h) */
    tc_kind kind;        /* of the value (rows with arg) */
    uint64_t min, max;   /* TC_KIND_COUNT: the bounds (max 0: none); TC_KIND_SIZE: min */
} tc_opt;

typedef struct tc_cmd {
    const char *name;
    const char *synopsis;
    const char *summary;
    const tc_opt *const *opts;  /* NULL-terminated */
    int (*run)(const struct tc_cmd *cmd, int argc, char **argv);
} tc_cmd;

/* Every command, NULL-terminated (commands.c). */
extern const tc_cmd *const tc_cmds[];
/* tensorctl itself: argv as main gets it; the exit status. Prints, never
 * exits, and can run again in the same process (the CLI fuzz target does). */
int tc_cli(int argc, char **argv);

/* Option ids. */
enum {
    OPT_HELP = 1, OPT_QUIET, OPT_VERBOSE, OPT_JSON, OPT_OUTPUT, OPT_FORCE, OPT_IN_PLACE, OPT_DEVICE,
    OPT_MAP, OPT_DTYPE, OPT_KEEP, OPT_ONLY, OPT_ALLOW_UNSAFE, OPT_ENGINE, OPT_MAX_PICKLE, OPT_MAX_DEPTH,
    OPT_MAX_OBJECTS, OPT_FORMAT, OPT_KEY, OPT_MAX_SHARD, OPT_VERIFY_CRC, OPT_HASH, OPT_MAX_ENTRIES,
    OPT_MAX_HEADER, OPT_MAX_INFLATE, OPT_SAFE_GLOBALS, OPT_DROP, OPT_MAX_EXPAND, OPT_STRIP_PREFIX, OPT_ADD_PREFIX, OPT_RENAME,
    OPT_ONLY_KEYS, OPT_ATOL, OPT_RTOL, OPT_EQUAL_NAN, OPT_STATS, OPT_STRICT, OPT_THREADS, OPT_PART, OPT_FROM, OPT_EMA, OPT_NO_SYNC, OPT_TAG, OPT_EXCLUDE_FROZEN,
    OPT_SARIF, OPT_ALL, OPT_JOBS, OPT_ARCHIVE_DEPTH, OPT_NAMES, OPT_KV, OPT_COUNT_
};

/* The dtypes --dtype casts to (tc_opt_dtype): the completions offer them, the commands accept them. */
bool tc_dtype_is_cast_target(tc_dtype t);
/* --dtype's value: a cast target by torch's name or a common spelling (fp16, half,
 * torch.half, BF16, ...); TC_DT_INVALID when none. */
tc_dtype tc_dtype_from_arg(const char *s);
/* Of names[0..n), the one len bytes of s are a likely slip for (a command, an
 * option), or NULL. */
const char *tc_nearest(const char *s, size_t len, const char *const *names, size_t n);

/* --dtype's refusal of s: "--dtype 'S': choose float16 (fp16, half), ..." on stderr. */
void tc_err_dtype(const char *s);
/* The words of every --format row, in this order (a row may stop before gguf): its word[]. */
enum { TC_FORMAT_PT, TC_FORMAT_SAFETENSORS, TC_FORMAT_GGUF };

/* Rows shared by several commands (opts.c); tc_opt_dtype_gguf is convert's --dtype (TC_KIND_DTYPE_GGUF). */
extern const tc_opt tc_opt_help, tc_opt_force, tc_opt_dtype, tc_opt_dtype_gguf, tc_opt_keep, tc_opt_only, tc_opt_allow_unsafe,
    tc_opt_safe_globals, tc_opt_quiet, tc_opt_max_pickle, tc_opt_max_depth, tc_opt_max_objects, tc_opt_max_entries, tc_opt_max_header,
    tc_opt_max_inflate;

extern const tc_opt tc_opt_strip_prefix, tc_opt_add_prefix, tc_opt_rename, tc_opt_drop, tc_opt_only_keys;
extern const tc_opt tc_opt_max_expand;
/* --names file|hf: the names a format with names of its own is read with (tc_limits.names, set by tc_limits_from_args). */
extern const tc_opt tc_opt_names;

/* --no-sync: outputs not fsync'd (tc_dst_flags_from_args). */
extern const tc_opt tc_opt_no_sync;

/* --part I/N | index: a sharded output written by several processes (tc_part_from_args). */
extern const tc_opt tc_opt_part;

/* --max-shard-size SIZE: a sharded output, for every command that writes sets (tc_sharded_output). */
extern const tc_opt tc_opt_max_shard;
/* --from KEY: the weights under one entry (convert, extract); --key is its alias (tc_from_arg). */
extern const tc_opt tc_opt_from, tc_opt_key;
/* --ema: the EMA copy of the weights, of the candidates --from chooses from. */
extern const tc_opt tc_opt_ema;

/* The key surgery every command that writes tensors under names takes (tc_keyops_from_args). */
#define TC_KEY_OPTS &tc_opt_strip_prefix, &tc_opt_add_prefix, &tc_opt_rename, &tc_opt_drop, &tc_opt_only_keys

/* The limit options every command that reads checkpoints takes (tc_limits_from_args). */
#define TC_LIMIT_OPTS                                                                                    \
    &tc_opt_max_pickle, &tc_opt_max_depth, &tc_opt_max_objects, &tc_opt_max_entries, &tc_opt_max_header, \
        &tc_opt_max_inflate

/* Parsed options: values by id (last wins), repeated ones collected. */
#define TC_MAX_REPEAT 256
typedef struct tc_args {
    const char *val[OPT_COUNT_];
    bool set[OPT_COUNT_];
    const char *rep[OPT_COUNT_][TC_MAX_REPEAT];
    size_t nrep[OPT_COUNT_];
    /* The typed values, by the row's kind: of the value given (the last), else of the row's
     * default (def), else 0 (TC_DT_INVALID, TC_Q_NONE, ""). */
    uint64_t num[OPT_COUNT_];      /* TC_KIND_COUNT, TC_KIND_SIZE */
    double real[OPT_COUNT_];       /* TC_KIND_REAL */
    int word[OPT_COUNT_];          /* TC_KIND_WORDS */
    tc_dtype dtype[OPT_COUNT_];    /* TC_KIND_DTYPE, TC_KIND_DTYPE_GGUF */
    tc_qtype qtype[OPT_COUNT_];    /* TC_KIND_DTYPE_GGUF */
    char dev[OPT_COUNT_][32];      /* TC_KIND_DEVICE: the location tag to write */
    struct {
        char from[32], to[32];     /* FROM as given, TO the location tag to write */
    } map[TC_MAX_REPEAT];          /* TC_KIND_DEVMAP: each value, in order */
    size_t nmap;
    struct {
        unsigned i, n;             /* I/N */
        bool index;                /* "index" */
    } part;                        /* TC_KIND_PART */
    const char *name[OPT_COUNT_];  /* TC_KIND_TAG, TC_KIND_KEY: the value (NULL when not given) */
    tc_gguf_wkv kv[TC_MAX_REPEAT]; /* TC_KIND_KV: each value, in order (its key a copy, its value in argv) */
    size_t nkv;
    const char **globals;          /* TC_KIND_GLOBALS: every name of every value, in order, NULL-terminated */
    size_t nglobals;
    /* The positional arguments. pos is also the one heap block of a: after them, the room of what the
     * slots above hold beyond argv (globals' array, its names' text and --kv's keys: text), sized from
     * argv and the rows' defaults so that it cannot run out; free(a->pos) frees them all. */
    char **pos;
    int npos;
    size_t captglobals;            /* globals[] has room for this many (its NULL too) */
    char *text;
    size_t ntext, captext;         /* text's bytes used, of captext */
    /* An option whose value may be left out given bare, and the argument after it,
     * taken as a FILE (for the hint after a wrong count of them); NULL when none. */
    const char *bare_opt, *bare_next;
} tc_args;

/* Parse argv (after the command name): 0 to go on, every value given checked by its row's
 * kind and put in its typed slot (the defaults too); -1 after printing a misuse (an unknown
 * option, a missing value, a bad one: "--NAME 'VALUE' ..."), 1 after printing --help (then
 * return tc_parse_exit(rc)). After 0, free(a->pos) when done. */
int tc_parse(const tc_cmd *cmd, int argc, char **argv, tc_args *a);
int tc_parse_exit(int parse_rc);
/* After a wrong count of FILEs: when --NAME VALUE of an option whose value may be left out
 * made VALUE a FILE, say to write --NAME=VALUE. */
void tc_hint_bare_value(const tc_args *a);
void tc_print_cmd_help(const tc_cmd *cmd);

/* JSON text cJSON printed, on stdout, fit for a terminal (tc_buf_json: DEL, C1 controls
 * and bidirectional marks from names as \uNNNN; the same JSON). */
void tc_put_json(const char *s);
/* The JSON document o as one line on stdout (through tc_put_json), then o deleted. */
struct cJSON;
void tc_put_json_line(struct cJSON *o);
/* A whole number as JSON, printed exactly and without going through a double (cJSON's numbers
 * are doubles, printed and read back to check); NULL when out of memory. */
struct cJSON *tc_json_int(int64_t v);
struct cJSON *tc_json_uint(uint64_t v);

/* Messages: "tensorctl: FILE: message" on stderr. */
void tc_err(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tc_warn(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A core failure, with the subject the core named; returns its exit status. */
int tc_err_diag(const tc_diag *d);
extern int tc_verbosity; /* 0 quiet, 1 normal, 2 verbose */
int tc_exit_for(int status);

/* Limits from --max-* options and --names (their values checked by tc_parse). */
void tc_limits_from_args(const tc_args *a, tc_limits *lim);
/* --max-expand N into *out (left alone when not given). */
void tc_max_expand_from_args(const tc_args *a, uint64_t *out);
/* Key surgery from --strip-prefix, --add-prefix, --rename, --drop, --only-keys
 * (pointing into a). Returns -1 after printing when an option is malformed. */
struct tc_keyops;
int tc_keyops_from_args(const tc_args *a, struct tc_keyops *k);
/* --part: I/N (*part I, *nparts N) or "index" (*index_only); all 0 when not given. */
void tc_part_from_args(const tc_args *a, unsigned *part, unsigned *nparts, bool *index_only);
/* --max-shard-size's value, 0 when not given. */
uint64_t tc_max_shard_from_args(const tc_args *a);
/* Whether OUT and the options ask for a sharded set (*sharded): OUT an index name, or --max-shard-size
 * or --part given, when OUT must name a folder or an index; *max_shard as tc_max_shard_from_args.
 * -1 after printing why not. */
int tc_sharded_output(const tc_args *a, const char *out, bool *sharded, uint64_t *max_shard);
/* The value of --from, or of --key, its alias (NULL when neither); *opt (may be NULL) the one given, for messages. */
const char *tc_from_arg(const tc_args *a, const char **opt);
/* The tc_dst flags --force and --no-sync ask for. */
unsigned tc_dst_flags_from_args(const tc_args *a);
/* "5GB", "100MiB", "1024" -> bytes. */
int tc_parse_size(const char *s, uint64_t *out);
/* A count: decimal digits only ("1000"; no sign, suffix or fraction). */
int tc_parse_count(const char *s, uint64_t *out);

/* Progress bar on stderr when it is a terminal and the work takes > 1 s. */
typedef struct tc_progress {
    bool enabled;
    double start, last;
    const char *label;
} tc_progress;
void tc_progress_init(tc_progress *p, const char *label, bool enabled);
void tc_progress_cb(void *ctx, uint64_t done, uint64_t total);
void tc_progress_end(tc_progress *p);

/* The output format a path's name asks for (".safetensors", ".pt", ".bin", ".pth",
 * ".ckpt", and their ".index.json" sets): TC_OUTNAME_* */
enum { TC_OUTNAME_NONE, TC_OUTNAME_PT, TC_OUTNAME_ST };
int tc_outname_format(const char *path);
/* Those names: each suffix and the format it asks for; the last has suffix NULL. */
typedef struct tc_outsuffix {
    const char *suffix;
    int format;
} tc_outsuffix;
extern const tc_outsuffix tc_outsuffixes[];
/* The output format --format gives, else OUT's name: TC_OUTNAME_PT or _ST; -1 after printing. */
int tc_output_format(const tc_args *a, const char *out);
bool tc_ends_with(const char *s, const char *suffix);
/* path names a folder: it ends with '/' or is an existing one. */
bool tc_names_folder(const char *path);
/* path names one checkpoint file (a name tc_outname_format knows, not an index, not a folder). */
bool tc_names_one_file(const char *path);
/* The checkpoint an input operand names, in *path (free() it): the operand
 * itself, or the file a model folder holds (said on stderr: which one was
 * chosen). "-" is refused: checkpoints are read by seeking. 0, or the exit
 * status after printing why. */
int tc_input_path(const char *arg, char **path);
/* Where one output file goes: out itself, or out/NAME (NAME the input's last
 * component) when out names a folder, as cp writes into one; with ext, NAME's
 * checkpoint extension (.pt, .bin, .pth, .ckpt, .safetensors, .gguf) replaced
 * by it, or ext added when it has none (model.bin -> out/model.safetensors).
 * out ending in '/' must be a folder. *path: free() it. 0, or the exit status
 * after printing why. */
int tc_output_path(const char *out, const char *in, const char *ext, char **path);
/* One output file of a command that may change the format (convert, extract, consolidate): when out
 * is a folder, the file in it (tc_output_path) with the extension of --format's format, else of in's
 * own (its name's: a torch name keeps its extension); out itself otherwise. *path: free() it. 0, or
 * the exit status after printing why (a folder and no format to name the file by). */
int tc_output_file(const tc_args *a, const char *out, const char *in, char **path);

/* --json of the commands that write checkpoints: instead of the "wrote ..." line on stderr, one JSON
 * object on stdout for the run (one line), {"command", "input", "output", "files", "tensors", "bytes",
 * "tensor_bytes", "seconds", "exit_status"} or, when it failed, {"command", "input", "output",
 * "error", "exit_status"} (the error line's message). */
extern const tc_opt tc_opt_json_wrote;
typedef struct tc_wrote {
    const char *command, *input;
    char *output;          /* the file, or a set's index (owned) */
    size_t files;          /* output files (a set: its shards and index) */
    size_t tensors;        /* tensors written (aliases of shared storage included) */
    uint64_t bytes;        /* of every output file */
    uint64_t tensor_bytes; /* of tensor data */
    double t0;
    bool json, done;
} tc_wrote;
extern tc_wrote tc_wrote_run; /* the run's, filled by the command's summary */
/* A run starts: --json asked for or not (the clock starts). */
void tc_wrote_begin(const char *command, const char *input, bool json);
/* What was written (output copied). */
void tc_wrote_set(const char *output, size_t files, size_t tensors, uint64_t bytes, uint64_t tensor_bytes);
/* Where the run writes, once known (what a failure's record names). */
void tc_wrote_target(const char *output);
/* The run ends with exit_status: its record printed (with --json); returns exit_status. */
int tc_wrote_end(int exit_status);
/* Whether the "wrote ..." line goes to stderr: at verbosity 1 and up, and not under --json. */
bool tc_wrote_line(void);
/* The message of the last error line printed (tc_err), "" when none since the run began. */
const char *tc_last_error(void);
void tc_last_error_clear(void);
/* The integrity test of c, opened from path (test and inspect --verify-crc):
 * "PATH: OK (...)" on stdout when say, or the failure on stderr; the exit status. */
int tc_test_ckpt(const char *path, const tc_ckpt *c, const tc_limits *lim, bool say);
/* "tensorctl: OUT: WHAT: a, b, c" on stderr, the list cut short (with its count) past a line. */
void tc_warn_list(const char *out, const char *what, char *const *v, size_t n);
/* After a tensors-only output of an unsafe input: what stayed behind, or for
 * a TorchScript archive read without --allow-unsafe, its verdict. */
void tc_unsafe_note(const tc_ckpt *c, const char *in);
/* The earlier set's shards a set written over its index removed (names), listed. */
void tc_print_removed(const char *index, char *const *names, size_t n);

/* "s" after a count other than 1: "%zu shard%s", n, tc_s(n) */
static inline const char *tc_s(size_t n) { return n == 1 ? "" : "s"; }

/* 1536 -> "1.5 KB" (decimal units) */
void tc_human_bytes(uint64_t b, char *out, size_t n);

/* At -v: of the bytes of what was written (out), how many share the input's
 * blocks (cloned by the file system: counted as the clone calls took them),
 * how many were copied unchanged, and how many tensorctl wrote (casts,
 * pickles, zip records, padding, headers, indexes). */
void tc_print_sharing(const char *out, uint64_t file_bytes, uint64_t shared, uint64_t copied);

/* The man page: the template's text with its @...@ markers replaced from the
 * tables (man.c). Returns 0, or -1 after printing why. */
int tc_man_page(FILE *out, const char *template_path);

/* The completion script of shell ("bash", "zsh" or "fish"), from the same
 * tables (completions.c). Returns 0, or -1 after printing why. */
int tc_completions(FILE *out, const char *shell);

#endif
