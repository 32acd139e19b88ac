/* The options several commands share, the exit statuses, and parsing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "dest.h"
#include "device.h"
#include "keys.h"
#include "shard_index.h"
#include "verdict.h"

const tc_exit_info tc_exits[] = {
    {TC_EXIT_OK, "ok", "Success; for diff, the inputs are equal."},
    {TC_EXIT_FAIL, "failure (diff: different)",
     "Failure: an I/O error (a full disk, an unreadable file, an unwritable folder),\n"
     "memory, or a CUDA error; or, for devices, CUDA not usable. For diff: the\n"
     "inputs differ (as for\n.BR cmp (1)\nand\n.BR diff (1));\n"
     "diff's own failures exit 5."},
    {TC_EXIT_USAGE, "usage",
     "Usage: a bad command line, or a request that cannot be met (an existing\n"
     "output without \\-\\-force, a \\-\\-keep that would split a shared storage)."},
    {TC_EXIT_BADFILE, "bad input file",
     "Bad input: the file is truncated, corrupt, not a checkpoint, of an\n"
     "unsupported kind, or over a limit."},
    {TC_EXIT_UNSAFE, "unsafe file (any refusal on safety grounds)",
     "Unsafe: loading the file takes\n.BR weights_only=False ,\n"
     "which imports and calls globals outside torch's allowlist (or its bytes have a\n"
     "second reading that does). inspect reports them. Every refusal on safety\n"
     "grounds exits 4, whatever the command (to\\-cpu, to\\-cuda, convert, extract,\n"
     "consolidate, of one file or of a set): a rewrite that keeps the object graph\n"
     "refuses any such file, an output of tensors alone (safetensors, extract, a\n"
     "consolidated state_dict) only one that would run code (a dangerous global or\n"
     "a second reading; a TorchScript archive's own classes and helpers are read\n"
     "without running them, the verdict given as a warning), unless given\n"
     "\\-\\-safe\\-globals for the globals or \\-\\-allow\\-unsafe."},
    {TC_EXIT_DIFF_FAIL, "diff failure",
     "diff only: an I/O error or out of memory, what makes the other commands exit 1\n"
     "(diff's 1 means the inputs differ). Its other errors keep their statuses: 2\n"
     "usage, 3 bad input, 4 a file that is not a checkpoint and would run code\n"
     "when loaded."},
    {0, NULL, NULL},
};

const tc_opt tc_opt_help = {.id = OPT_HELP, .shrt = 'h', .lng = "help", .text = &tc_text_help};

const tc_opt tc_opt_force = {.id = OPT_FORCE, .shrt = 'f', .lng = "force", .text = &tc_text_force};

const tc_opt tc_opt_no_sync = {.id = OPT_NO_SYNC, .lng = "no-sync", .text = &tc_text_no_sync};

const tc_opt tc_opt_dtype = {.id = OPT_DTYPE, .lng = "dtype", .arg = "TYPE", .text = &tc_text_dtype,
                             .kind = TC_KIND_DTYPE};
/* convert's: a GGUF output takes its types too (the command says which an output takes) */
const tc_opt tc_opt_dtype_gguf = {.id = OPT_DTYPE, .lng = "dtype", .arg = "TYPE", .text = &tc_text_dtype,
                                  .kind = TC_KIND_DTYPE_GGUF};

bool tc_dtype_is_cast_target(tc_dtype t)
{
    return t == TC_DT_F16 || t == TC_DT_BF16 || t == TC_DT_F32 || t == TC_DT_F64 || t == TC_DT_F8E4M3FN ||
           t == TC_DT_F8E5M2;
}

tc_dtype tc_dtype_from_arg(const char *s)
{
    /* The names torch gives these dtypes (torch.half is torch.float16, torch.float
     * float32, torch.double float64), the short ones of common tools (fp16, bf16, f32,
     * safetensors' F16 and F8_E4M3), in any case, "torch." before them or not. numpy's
     * byte counts (f2, f8) are left out: "f8" is float64 there and float8 to others. */
    static const struct {
        const char *name;
        tc_dtype t;
    } alias[] = {
        {"half", TC_DT_F16},          {"fp16", TC_DT_F16},         {"f16", TC_DT_F16},
        {"bf16", TC_DT_BF16},         {"float", TC_DT_F32},        {"fp32", TC_DT_F32},
        {"f32", TC_DT_F32},           {"double", TC_DT_F64},       {"fp64", TC_DT_F64},
        {"f64", TC_DT_F64},           {"f8_e4m3", TC_DT_F8E4M3FN}, {"fp8_e4m3", TC_DT_F8E4M3FN},
        {"fp8_e4m3fn", TC_DT_F8E4M3FN}, {"e4m3", TC_DT_F8E4M3FN},  {"f8_e5m2", TC_DT_F8E5M2},
        {"fp8_e5m2", TC_DT_F8E5M2},   {"e5m2", TC_DT_F8E5M2},
    };
    if (!s)
        return TC_DT_INVALID;
    if (!strncasecmp(s, "torch.", 6))
        s += 6;
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (!strcasecmp(s, alias[i].name))
            return alias[i].t;
    for (int t = 1; t < TC_DT_COUNT; t++)
        if (tc_dtype_is_cast_target((tc_dtype)t) && !strcasecmp(s, tc_dtype_name((tc_dtype)t)))
            return (tc_dtype)t;
    return TC_DT_INVALID;
}

const tc_opt tc_opt_keep = {.id = OPT_KEEP, .lng = "keep", .arg = "GLOB", .flags = TC_OPT_REPEAT,
                            .text = &tc_text_keep, .kind = TC_KIND_GLOB};

const tc_opt tc_opt_only = {.id = OPT_ONLY, .lng = "only", .arg = "GLOB", .flags = TC_OPT_REPEAT,
                            .text = &tc_text_only, .kind = TC_KIND_GLOB};

const tc_opt tc_opt_allow_unsafe = {.id = OPT_ALLOW_UNSAFE, .lng = "allow-unsafe", .text = &tc_text_allow_unsafe};

const tc_opt tc_opt_safe_globals = {.id = OPT_SAFE_GLOBALS, .lng = "safe-globals", .arg = "NAME[,NAME...]",
                                    .flags = TC_OPT_REPEAT, .text = &tc_text_safe_globals, .kind = TC_KIND_GLOBALS};

const tc_opt tc_opt_strip_prefix = {.id = OPT_STRIP_PREFIX, .lng = "strip-prefix", .arg = "P",
                                    .flags = TC_OPT_VALUE_OPTIONAL, .text = &tc_text_strip_prefix};
const tc_opt tc_opt_add_prefix = {.id = OPT_ADD_PREFIX, .lng = "add-prefix", .arg = "P", .text = &tc_text_add_prefix};
const tc_opt tc_opt_rename = {.id = OPT_RENAME, .lng = "rename", .arg = "REGEX=REPL", .flags = TC_OPT_REPEAT,
                              .text = &tc_text_rename};
const tc_opt tc_opt_drop = {.id = OPT_DROP, .lng = "drop", .arg = "GLOB", .flags = TC_OPT_REPEAT,
                            .text = &tc_text_drop, .kind = TC_KIND_GLOB};
const tc_opt tc_opt_only_keys = {.id = OPT_ONLY_KEYS, .lng = "only-keys", .arg = "GLOB", .flags = TC_OPT_REPEAT,
                                 .text = &tc_text_only_keys, .kind = TC_KIND_GLOB};

const tc_opt tc_opt_max_expand = {.id = OPT_MAX_EXPAND, .lng = "max-expand", .arg = "N", .def = "16",
                                  .text = &tc_text_max_expand, .kind = TC_KIND_COUNT, .min = 1};
const tc_opt tc_opt_part = {.id = OPT_PART, .lng = "part", .arg = "I/N|index", .text = &tc_text_part,
                            .kind = TC_KIND_PART, .max = 100000};

/* One row, one parser for every command that writes sets (convert, extract, consolidate): the same words mean
 * the same set whichever writes it. */
const tc_opt tc_opt_max_shard = {.id = OPT_MAX_SHARD, .lng = "max-shard-size", .arg = "SIZE", .def = "5GB",
                                 .text = &tc_text_max_shard_size, .kind = TC_KIND_SIZE, .min = 1};

const tc_opt tc_opt_from = {.id = OPT_FROM, .lng = "from", .arg = "KEY", .text = &tc_text_from};
const tc_opt tc_opt_ema = {.id = OPT_EMA, .lng = "ema", .text = &tc_text_ema};
const tc_opt tc_opt_key = {.id = OPT_KEY, .lng = "key", .arg = "KEY", .text = &tc_text_key};

const tc_opt tc_opt_json_wrote = {.id = OPT_JSON, .lng = "json", .text = &tc_text_json};

const tc_opt tc_opt_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_quiet};

/* The defaults of the limits are TC_LIMITS_DEFAULT's (the cli test checks they agree). */
const tc_opt tc_opt_max_pickle = {.id = OPT_MAX_PICKLE, .lng = "max-pickle-size", .arg = "SIZE", .def = "1GiB",
                                  .text = &tc_text_max_pickle_size, .kind = TC_KIND_SIZE, .min = 1};
const tc_opt tc_opt_max_depth = {.id = OPT_MAX_DEPTH, .lng = "max-depth", .arg = "N", .def = "1000",
                                 .text = &tc_text_max_depth, .kind = TC_KIND_COUNT, .min = 1};
const tc_opt tc_opt_max_objects = {.id = OPT_MAX_OBJECTS, .lng = "max-objects", .arg = "N", .def = "20000000",
                                   .text = &tc_text_max_objects, .kind = TC_KIND_COUNT, .min = 1};
const tc_opt tc_opt_max_entries = {.id = OPT_MAX_ENTRIES, .lng = "max-entries", .arg = "N", .def = "1000000",
                                   .text = &tc_text_max_entries, .kind = TC_KIND_COUNT, .min = 1};
const tc_opt tc_opt_max_header = {.id = OPT_MAX_HEADER, .lng = "max-header-size", .arg = "SIZE", .def = "100MiB",
                                  .text = &tc_text_max_header_size, .kind = TC_KIND_SIZE, .min = 1};
const tc_opt tc_opt_max_inflate = {.id = OPT_MAX_INFLATE, .lng = "max-inflate-ratio", .arg = "N", .def = "100",
                                   .text = &tc_text_max_inflate_ratio, .kind = TC_KIND_COUNT, .min = 1};

/* ---- parsing ------------------------------------------------------------------------ */

/* Edit distance with adjacent transpositions ("inpsect" is one from "inspect"), for
 * the suggestion after an unknown command or option; names are short. */
static size_t edit_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 40 || lb > 40)
        return (size_t)-1;
    size_t d[41][41];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *tc_nearest(const char *s, size_t len, const char *const *names, size_t n)
{
    /* close enough to be a slip of the fingers: 1 edit in short names, 2 in longer ones */
    size_t best = len < 5 ? 2 : 3;
    const char *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t e = edit_distance(s, len, names[i]);
        if (e < best) {
            best = e;
            pick = names[i];
        }
    }
    return pick;
}

/* The option named --NAME (len bytes of name): its exact name, else the one option
 * it is a prefix of, as getopt_long takes them. NULL after printing why not. */
static const tc_opt *find_long(const tc_cmd *cmd, const char *arg, const char *name, size_t len)
{
    const tc_opt *const *o = cmd->opts, *pick = NULL;
    size_t nprefix = 0;
    for (; *o; o++) {
        if (strlen((*o)->lng) == len && !strncmp((*o)->lng, name, len))
            return *o;
        if (len && strlen((*o)->lng) > len && !strncmp((*o)->lng, name, len)) {
            pick = *o;
            nprefix++;
        }
    }
    if (nprefix == 1)
        return pick;
    char line[600];
    tc_buf b = tc_buf_fixed(line, sizeof line);
    if (nprefix > 1) {
        for (o = cmd->opts; *o; o++)
            if (strlen((*o)->lng) > len && !strncmp((*o)->lng, name, len)) {
                tc_buf_sep(&b, ", ");
                tc_buf_printf(&b, "--%s", (*o)->lng);
            }
        tc_err(NULL, "%s: option '%s' is ambiguous: %s", cmd->name, arg, line);
        return NULL;
    }
    const char *names[64];
    size_t n = 0;
    for (o = cmd->opts; *o && n < 64; o++)
        names[n++] = (*o)->lng;
    const char *near = tc_nearest(name, len, names, n);
    if (near)
        tc_err(NULL, "%s: unknown option '%s'; did you mean '--%s'? (see 'tensorctl %s --help')", cmd->name, arg,
               near, cmd->name);
    else
        tc_err(NULL, "%s: unknown option '%s' (see 'tensorctl %s --help')", cmd->name, arg, cmd->name);
    return NULL;
}

/* An option whose value may be left out, given as "--NAME VALUE": VALUE is its value
 * when it ends with '.' as the prefixes of dotted tensor names do ("module.",
 * "_orig_mod.") and names nothing on disk; otherwise it stays an argument. */
static bool takes_next_as_value(const tc_opt *o, const char *next)
{
    struct stat st;
    return (o->flags & TC_OPT_VALUE_OPTIONAL) && next && next[0] && next[0] != '-' && tc_ends_with(next, ".") &&
           stat(next, &st) != 0;
}

/* The room a value s may take in tc_args' block: its text (a copy, NUL-terminated) and its names (NAME[,NAME...]:
 * at most one in two bytes). */
static void room_for(const char *s, size_t *text, size_t *names)
{
    size_t n = strlen(s);
    *text += n + 1;
    *names += n / 2 + 1;
}

/* a's one heap block (cli.h): pos, then the room of the typed slots. Every value taken is a row's default or
 * an argument of argv (or its end, after '=' or a short option's letter), each taken once, so what they can
 * hold bounds it. */
static int alloc_block(const tc_cmd *cmd, int argc, char **argv, tc_args *a)
{
    size_t npos = (size_t)argc + 1, text = 0, names = 1; /* the names' NULL */
    for (int i = 0; i < argc; i++)
        room_for(argv[i], &text, &names);
    for (const tc_opt *const *o = cmd->opts; *o; o++)
        if ((*o)->def)
            room_for((*o)->def, &text, &names);
    a->pos = calloc(1, (npos + names) * sizeof(char *) + text);
    if (!a->pos) {
        tc_err(NULL, "out of memory");
        return -1;
    }
    a->globals = (const char **)(a->pos + npos);
    a->captglobals = names;
    a->text = (char *)(a->globals + names);
    a->captext = text;
    return 0;
}

static int parse_args(const tc_cmd *cmd, int argc, char **argv, tc_args *a)
{
    memset(a, 0, sizeof *a);
    if (alloc_block(cmd, argc, argv, a))
        return -1;
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
            o = find_long(cmd, s, s + 2, len);
            if (!o)
                return -1;
            if (eq)
                val = eq + 1;
            else if (takes_next_as_value(o, i + 1 < argc ? argv[i + 1] : NULL))
                val = argv[++i];
            else if ((o->flags & TC_OPT_VALUE_OPTIONAL) && i + 1 < argc && argv[i + 1][0] != '-') {
                a->bare_opt = o->lng;
                a->bare_next = argv[i + 1];
            }
        } else {
            for (const tc_opt *const *p = cmd->opts; *p; p++)
                if ((*p)->shrt == s[1])
                    o = *p;
            if (o && s[2])
                val = s + 2;
        }
        if (!o) {
            tc_err(NULL, "%s: unknown option '%s' (see 'tensorctl %s --help')", cmd->name, s, cmd->name);
            return -1;
        }
        if (o->arg && !val && !(o->flags & TC_OPT_VALUE_OPTIONAL)) {
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
        if ((o->flags & TC_OPT_REPEAT)) {
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

/* ---- values, by their kind ------------------------------------------------------------ */

/* The place of v among the words of arg ("auto|cpu|cuda": "cpu" is 1), or -1. */
static int word_of(const char *arg, const char *v)
{
    size_t len = strlen(v);
    for (int k = 0;; k++) {
        size_t n = strcspn(arg, "|");
        if (n == len && !strncmp(arg, v, n))
            return k;
        if (!arg[n])
            return -1;
        arg += n + 1;
    }
}

/* --dtype for a GGUF output: a type gguf-py's quantisers write, by ggml's name, or torch's
 * name of F32, F16, BF16; TC_Q_NONE when none. */
static tc_qtype gguf_type_of(const char *v)
{
    tc_qtype t = tc_qtype_from_name(v);
    if (t == TC_Q_NONE)
        t = tc_qtype_of_dtype(tc_dtype_from_name(v));
    return t != TC_Q_NONE && tc_qtype_get(t)->encodes ? t : TC_Q_NONE;
}

/* A copy of len bytes of s, NUL-terminated, in a's block; NULL (never: the block is sized for every value) when
 * it has no room. */
static char *hold_text(tc_args *a, const char *s, size_t len)
{
    if (len >= a->captext - a->ntext)
        return NULL;
    char *p = a->text + a->ntext;
    memcpy(p, s, len);
    p[len] = 0;
    a->ntext += len + 1;
    return p;
}

/* --safe-globals' value v: each name of it (empty ones skipped) into a->globals; -1 after printing why one
 * cannot be admitted. */
static int take_globals(const tc_opt *o, const char *v, tc_args *a)
{
    size_t len = strlen(v);
    char *t = hold_text(a, v, len);
    if (!t) {
        tc_err(NULL, "--%s '%s': out of memory", o->lng, v);
        return -1;
    }
    for (char *p = t; p < t + len;) {
        size_t n = strcspn(p, ",");
        p[n] = 0;
        if (n && !tc_verdict_admissible(p)) {
            if (n == len)
                tc_err(NULL, "--%s '%s' cannot be admitted (a module.name outside the os, posix, nt and sys modules, "
                       "which torch never allows)", o->lng, v);
            else
                tc_err(NULL, "--%s '%s': '%s' cannot be admitted (a module.name outside the os, posix, nt and sys "
                       "modules, which torch never allows)", o->lng, v, p);
            return -1;
        }
        if (n && a->nglobals + 1 >= a->captglobals) {
            tc_err(NULL, "--%s '%s': out of memory", o->lng, v);
            return -1;
        }
        if (n)
            a->globals[a->nglobals++] = p;
        p += n + 1;
    }
    return 0;
}

void tc_err_dtype(const char *v)
{
    tc_err(NULL, "--dtype '%s': choose float16 (fp16, half), bfloat16 (bf16), float32 (fp32), float64 (fp64), "
           "float8_e4m3fn or float8_e5m2", v);
}

/* v, a value of o, into o's typed slot in a; -1 after printing why it is not one. Every
 * message is "--NAME 'VALUE' ..." (a device's, the device parser's own after "--NAME"). */
static int take_value(const tc_opt *o, const char *v, tc_args *a)
{
    int id = o->id;
    uint64_t n;
    switch (o->kind) {
    case TC_KIND_TEXT:
    case TC_KIND_PATH:
    case TC_KIND_GLOB:
        return 0;
    case TC_KIND_COUNT:
        if (!tc_parse_count(v, &n) && n >= o->min && (!o->max || n <= o->max)) {
            a->num[id] = n;
            return 0;
        }
        if (o->max)
            tc_err(NULL, "--%s '%s' is not a whole number from %llu to %llu", o->lng, v, (unsigned long long)o->min,
                   (unsigned long long)o->max);
        else if (o->min == 1)
            tc_err(NULL, "--%s '%s' is not a positive whole number", o->lng, v);
        else if (o->min)
            tc_err(NULL, "--%s '%s' is not a whole number of at least %llu", o->lng, v, (unsigned long long)o->min);
        else
            tc_err(NULL, "--%s '%s' is not a whole number", o->lng, v);
        return -1;
    case TC_KIND_SIZE:
        if (!tc_parse_size(v, &n) && n >= o->min) {
            a->num[id] = n;
            return 0;
        }
        tc_err(NULL, "--%s '%s' is not a %ssize", o->lng, v, o->min ? "positive " : "");
        return -1;
    case TC_KIND_REAL: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= 0) || isinf(x)) {
            tc_err(NULL, "--%s '%s' is not a number >= 0", o->lng, v);
            return -1;
        }
        a->real[id] = x;
        return 0;
    }
    case TC_KIND_WORDS: {
        int k = word_of(o->arg, v);
        if (k < 0) {
            char line[256];
            tc_buf b = tc_buf_fixed(line, sizeof line);
            for (const char *w = o->arg; *w;) {
                size_t len = strcspn(w, "|");
                if (w != o->arg)
                    tc_buf_puts(&b, w[len] ? ", " : " or ");
                tc_buf_add(&b, w, len);
                w += len + (w[len] == '|');
            }
            tc_err(NULL, "--%s '%s': choose %s", o->lng, v, line);
            return -1;
        }
        a->word[id] = k;
        return 0;
    }
    case TC_KIND_DEVICE: {
        tc_diag d = TC_DIAG_INIT;
        if (tc_device_target(v, a->dev[id], sizeof a->dev[id], &d)) {
            tc_err(NULL, "--%s %s", o->lng, d.msg);
            return -1;
        }
        return 0;
    }
    case TC_KIND_DEVMAP: {
        const char *eq = strchr(v, '=');
        size_t len = eq ? (size_t)(eq - v) : 0;
        tc_diag d = TC_DIAG_INIT;
        tc_device dv;
        if (a->nmap == TC_MAX_REPEAT) { /* map[] holds every --map of a command, whichever row gave it */
            tc_err(NULL, "--%s given more than %d times", o->lng, TC_MAX_REPEAT);
            return -1;
        }
        if (!eq || len >= sizeof a->map[0].from) {
            tc_err(NULL, "--%s '%s': expected FROM=TO, e.g. cuda:1=cuda:0", o->lng, v);
            return -1;
        }
        memcpy(a->map[a->nmap].from, v, len);
        a->map[a->nmap].from[len] = 0;
        if (tc_device_parse_tag(a->map[a->nmap].from, &dv, &d)) {
            tc_err(NULL, "--%s '%s': %s", o->lng, v, d.msg);
            return -1;
        }
        if (tc_device_target(eq + 1, a->map[a->nmap].to, sizeof a->map[0].to, &d)) {
            tc_err(NULL, "--%s '%.60s': %s", o->lng, v, d.msg);
            return -1;
        }
        a->nmap++;
        return 0;
    }
    case TC_KIND_PART: {
        const char *slash = strchr(v, '/');
        char left[24];
        uint64_t i, k;
        if (!strcmp(v, "index")) {
            a->part.index = true;
            return 0;
        }
        if (!slash || (size_t)(slash - v) >= sizeof left) {
            tc_err(NULL, "--%s '%s': expected I/N (1 <= I <= N) or index", o->lng, v);
            return -1;
        }
        memcpy(left, v, (size_t)(slash - v));
        left[slash - v] = 0;
        if (tc_parse_count(left, &i) || tc_parse_count(slash + 1, &k) || !i || i > k || k > o->max) {
            tc_err(NULL, "--%s '%s': expected I/N with 1 <= I <= N <= %llu, or index", o->lng, v,
                   (unsigned long long)o->max);
            return -1;
        }
        a->part.i = (unsigned)i;
        a->part.n = (unsigned)k;
        a->part.index = false;
        return 0;
    }
    case TC_KIND_TAG:
        if (!*v || strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, "..")) {
            tc_err(NULL, "--%s '%s': give the name of a step folder of DIR (global_step1000)", o->lng, v);
            return -1;
        }
        a->name[id] = v;
        return 0;
    case TC_KIND_KEY:
        if (!*v || strchr(v, '.')) {
            tc_err(NULL, "--%s '%s': give the first component of the names (model, state_dict)", o->lng, v);
            return -1;
        }
        a->name[id] = v;
        return 0;
    case TC_KIND_GLOBALS:
        return take_globals(o, v, a);
    case TC_KIND_KV: {
        char why[200];
        tc_gguf_wkv w;
        if (a->nkv == TC_MAX_REPEAT) { /* kv[] holds every --kv of a command */
            tc_err(NULL, "--%s given more than %d times", o->lng, TC_MAX_REPEAT);
            return -1;
        }
        if (tc_gguf_kv_parse(v, &w, why, sizeof why)) {
            tc_err(NULL, "--%s '%s': %s", o->lng, v, why);
            return -1;
        }
        if (!(w.key = hold_text(a, v, strcspn(v, "=")))) { /* the parser's KEY: v up to its '=' */
            tc_err(NULL, "--%s '%s': out of memory", o->lng, v);
            return -1;
        }
        a->kv[a->nkv++] = w;
        return 0;
    }
    case TC_KIND_DTYPE:
    case TC_KIND_DTYPE_GGUF: {
        tc_dtype t = tc_dtype_from_arg(v);
        a->dtype[id] = tc_dtype_is_cast_target(t) ? t : TC_DT_INVALID;
        if (o->kind == TC_KIND_DTYPE_GGUF) {
            a->qtype[id] = gguf_type_of(v);
            return 0;
        }
        if (a->dtype[id] == TC_DT_INVALID) {
            tc_err_dtype(v);
            return -1;
        }
        return 0;
    }
    }
    return 0;
}

/* Every value given to cmd's options, and the defaults of those not given, into their typed slots. */
static int take_values(const tc_cmd *cmd, tc_args *a)
{
    for (const tc_opt *const *p = cmd->opts; *p; p++) {
        const tc_opt *o = *p;
        if (!o->arg)
            continue;
        if (!a->set[o->id]) {
            if (o->def && take_value(o, o->def, a))
                return -1;
        } else if (o->flags & TC_OPT_REPEAT) {
            for (size_t i = 0; i < a->nrep[o->id]; i++)
                if (a->rep[o->id][i] && take_value(o, a->rep[o->id][i], a))
                    return -1;
        } else if (a->val[o->id] && take_value(o, a->val[o->id], a)) {
            return -1;
        }
    }
    return 0;
}

int tc_parse(const tc_cmd *cmd, int argc, char **argv, tc_args *a)
{
    int rc = parse_args(cmd, argc, argv, a);
    if (!rc && a->set[OPT_HELP]) {
        tc_print_cmd_help(cmd);
        rc = 1;
    }
    if (!rc)
        rc = take_values(cmd, a);
    if (rc) {
        free(a->pos);
        a->pos = NULL;
    }
    return rc;
}

int tc_parse_exit(int parse_rc) { return parse_rc < 0 ? TC_EXIT_USAGE : TC_EXIT_OK; }

void tc_hint_bare_value(const tc_args *a)
{
    if (a->bare_opt)
        tc_err(NULL, "'%s' after --%s was taken as a FILE: give a value as --%s=%s (only a value ending with '.' may "
               "follow as its own argument)", a->bare_next, a->bare_opt, a->bare_opt, a->bare_next);
}

/* The width help is wrapped to: the terminal's when stdout is one (at most 100, for
 * lines that still read as lines), 80 otherwise, as man and most tools do. */
static size_t help_width(void)
{
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col > 100 ? 100 : ws.ws_col;
    return 80;
}

/* text (its newlines taken as spaces) from column col, wrapped between words to width,
 * every further line indented to column indent; a word longer than a line keeps whole. */
static void put_wrapped(const char *text, size_t col, size_t indent, size_t width)
{
    const char *p = text;
    bool first = true;
    while (*p) {
        while (*p == ' ' || *p == '\n')
            p++;
        size_t n = strcspn(p, " \n");
        if (!n)
            break;
        if (!first && col + 1 + n > width) {
            printf("\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)n, p);
        col += n;
        p += n;
        first = false;
    }
    putchar('\n');
}

void tc_print_cmd_help(const tc_cmd *cmd)
{
    size_t width = help_width();
    printf("usage: tensorctl %s\n\n", cmd->synopsis);
    put_wrapped(cmd->summary, 0, 0, width);
    printf("\noptions:\n");
    for (const tc_opt *const *p = cmd->opts; *p; p++) {
        const tc_opt *o = *p;
        char left[64], help[1024];
        const char *sep = (o->flags & TC_OPT_VALUE_OPTIONAL) ? "[=" : o->arg ? " " : "", *close = (o->flags & TC_OPT_VALUE_OPTIONAL) ? "]" : "";
        if (o->shrt)
            snprintf(left, sizeof left, "-%c, --%s%s%s%s", o->shrt, o->lng, sep, o->arg ? o->arg : "", close);
        else
            snprintf(left, sizeof left, "    --%s%s%s%s", o->lng, sep, o->arg ? o->arg : "", close);
        tc_buf h = tc_buf_fixed(help, sizeof help);
        tc_buf_puts(&h, o->text->help);
        if (o->def)
            tc_buf_printf(&h, " (default %s)", o->def);
        /* the help beside the option, in a column of its own; on a narrow terminal, under it */
        size_t llen = strlen(left);
        if (width >= 72 && llen <= 30) {
            printf("  %-30s ", left);
            put_wrapped(help, 33, 33, width);
        } else {
            printf("  %s\n        ", left);
            put_wrapped(help, 8, 8, width);
        }
    }
}

int tc_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) /* NaN too: no size, and no integer to convert it to */
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

int tc_keyops_from_args(const tc_args *a, tc_keyops *k)
{
    memset(k, 0, sizeof *k);
    k->strip = a->set[OPT_STRIP_PREFIX];
    k->strip_prefix = a->val[OPT_STRIP_PREFIX];
    k->add_prefix = a->val[OPT_ADD_PREFIX];
    k->rename = a->rep[OPT_RENAME];
    k->nrename = a->nrep[OPT_RENAME];
    k->drop = a->rep[OPT_DROP];
    k->ndrop = a->nrep[OPT_DROP];
    k->only = a->rep[OPT_ONLY_KEYS];
    k->nonly = a->nrep[OPT_ONLY_KEYS];
    tc_diag d = TC_DIAG_INIT;
    if (tc_keyops_check(k, &d)) {
        tc_err_diag(&d);
        return -1;
    }
    return 0;
}

unsigned tc_dst_flags_from_args(const tc_args *a)
{
    return (a->set[OPT_FORCE] ? TC_DST_FORCE : 0) | (a->set[OPT_NO_SYNC] ? TC_DST_NO_SYNC : 0);
}

void tc_part_from_args(const tc_args *a, unsigned *part, unsigned *nparts, bool *index_only)
{
    bool set = a->set[OPT_PART];
    *part = set ? a->part.i : 0;
    *nparts = set ? a->part.n : 0;
    *index_only = set && a->part.index;
}

int tc_parse_count(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 0;
}

void tc_max_expand_from_args(const tc_args *a, uint64_t *out)
{
    if (a->set[OPT_MAX_EXPAND])
        *out = a->num[OPT_MAX_EXPAND];
}

const tc_opt tc_opt_names = {.id = OPT_NAMES, .lng = "names", .arg = "file|hf", .def = "file", .text = &tc_text_names,
                             .kind = TC_KIND_WORDS};

void tc_limits_from_args(const tc_args *a, tc_limits *lim)
{
    static const int ids[] = {OPT_MAX_PICKLE, OPT_MAX_DEPTH, OPT_MAX_OBJECTS, OPT_MAX_ENTRIES, OPT_MAX_HEADER,
                              OPT_MAX_INFLATE};
    tc_limits def = TC_LIMITS_DEFAULT;
    *lim = def;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        int id = ids[i];
        if (!a->set[id])
            continue;
        uint64_t v = a->num[id];
        if (id == OPT_MAX_PICKLE)
            lim->max_pickle_bytes = v;
        else if (id == OPT_MAX_DEPTH)
            lim->max_depth = v > 100000 ? 100000 : (uint32_t)v;
        else if (id == OPT_MAX_ENTRIES)
            lim->max_entries = v;
        else if (id == OPT_MAX_HEADER)
            lim->max_header = v;
        else if (id == OPT_MAX_INFLATE)
            lim->max_inflate_ratio = v;
        else
            lim->max_objects = v;
    }
    if (a->set[OPT_NAMES]) /* file|hf */
        lim->names = a->word[OPT_NAMES] == 1 ? TC_NAMES_HF : TC_NAMES_FILE;
}

uint64_t tc_max_shard_from_args(const tc_args *a)
{
    return a->set[OPT_MAX_SHARD] ? a->num[OPT_MAX_SHARD] : 0;
}

int tc_sharded_output(const tc_args *a, const char *out, bool *sharded, uint64_t *max_shard)
{
    *max_shard = tc_max_shard_from_args(a);
    *sharded = tc_index_path(out) || a->set[OPT_MAX_SHARD] || a->set[OPT_PART];
    if (*sharded && !tc_index_path(out) && !tc_names_folder(out)) {
        tc_err(out, "a sharded output (%s) goes to a folder (ending in '/') or an index (NAME.safetensors.index.json, "
               "NAME.bin.index.json)", a->set[OPT_MAX_SHARD] ? "--max-shard-size" : "--part");
        return -1;
    }
    return 0;
}

const char *tc_from_arg(const tc_args *a, const char **opt)
{
    /* --key is --from; given both, --from (the documented name) wins */
    bool from = a->set[OPT_FROM];
    if (opt)
        *opt = from ? "--from" : "--key";
    return from ? a->val[OPT_FROM] : a->set[OPT_KEY] ? a->val[OPT_KEY] : NULL;
}
