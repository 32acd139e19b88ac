/* Shell completions for bash, zsh and fish, from the option tables.
 *
 * Each script is told what --help and the man page are told, by the same rows:
 * the commands (tc_cmds, in their order), each command's options (long and
 * short names, whether they take a value, may be repeated or take their value
 * only after '='), and what a value may be:
 *   a dtype      the dtypes --dtype casts to (tc_dtype_is_cast_target), named
 *                as the dtype table names them (the row's kind, TC_KIND_DTYPE*)
 *   a device     the device types tc_device_target takes, or only the one a
 *                row's "cuda:N" names (TC_KIND_DEVICE)
 *   a path       a file or folder name (TC_KIND_PATH)
 *   a|b|c        the literal alternatives of the row's value (TC_KIND_WORDS:
 *                pt|safetensors, auto|cpu|cuda; and the "index" of I/N|index)
 *   anything else  free text: nothing is offered
 * and the operands of a command whose synopsis names some: folders and the
 * files with the suffixes tensorctl knows (tc_outsuffixes), every file when none match.
 * value_kind() is the one place that reads a row for what its value is.
 *
 * The top level is main.c's: the commands, help, -h/--help and --version. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "device.h"
#include "move.h"

/* A line of a description: the first sentence of a command's summary. */
#define BRIEF_WIDTH 72

typedef enum {
    V_FLAG,  /* no value */
    V_TEXT,  /* free text: nothing to offer */
    V_WORDS, /* one of the words given */
    V_FILE,  /* a file or folder name */
} value_kind;

static bool is_literal(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-' && s[i] != '_')
            return false;
    return true;
}

/* What o's value may be; for V_WORDS, the words (space-separated) into words. */
static value_kind value_kind_of(const tc_opt *o, tc_buf *words)
{
    if (!o->arg)
        return V_FLAG;
    if (o->kind == TC_KIND_DTYPE || o->kind == TC_KIND_DTYPE_GGUF) {
        for (int t = 1; t < TC_DT_COUNT; t++)
            if (tc_dtype_is_cast_target((tc_dtype)t)) {
                tc_buf_sep(words, " ");
                tc_buf_puts(words, tc_dtype_name((tc_dtype)t));
            }
        return V_WORDS;
    }
    if (o->kind == TC_KIND_DEVICE) {
        /* "cuda:N": that device type only (to-cuda); any other placeholder: every type */
        const char *colon = strchr(o->arg, ':');
        for (const char *const *p = tc_device_indexed; *p && colon; p++)
            if (strlen(*p) == (size_t)(colon - o->arg) && !strncmp(*p, o->arg, strlen(*p))) {
                tc_buf_puts(words, *p);
                return V_WORDS;
            }
        tc_buf_puts(words, "cpu");
        for (const char *const *p = tc_device_indexed; *p; p++) {
            tc_buf_sep(words, " ");
            tc_buf_puts(words, *p);
        }
        return V_WORDS;
    }
    if (o->kind == TC_KIND_PATH)
        return V_FILE;
    if (strchr(o->arg, '|')) {
        for (const char *s = o->arg; *s;) {
            size_t n = strcspn(s, "|");
            if (is_literal(s, n)) {
                tc_buf_sep(words, " ");
                tc_buf_add(words, s, n);
            }
            s += n + (s[n] == '|');
        }
        if (tc_buf_len(words))
            return V_WORDS;
    }
    return V_TEXT;
}

/* The synopsis names operands (FILE, IN OUT, DIR) besides bracketed options. */
static bool takes_operands(const tc_cmd *c)
{
    int depth = 0;
    for (const char *s = c->synopsis + strlen(c->name); *s; s++) {
        if (*s == '[')
            depth++;
        else if (*s == ']')
            depth--;
        else if (!depth && (s[-1] == ' ') && isupper((unsigned char)*s))
            return true;
    }
    return false;
}

/* The suffixes of the names tensorctl knows (tc_outsuffixes), without their first '.',
 * separated by sep; with regex, their other dots escaped. */
static void suffixes(tc_buf *b, const char *sep, bool regex)
{
    for (const tc_outsuffix *n = tc_outsuffixes; n->suffix; n++) {
        tc_buf_sep(b, sep);
        for (const char *s = n->suffix + 1; *s; s++) {
            if (regex && *s == '.')
                tc_buf_putc(b, '\\');
            tc_buf_putc(b, *s);
        }
    }
}

/* The first sentence (or clause) of c's summary without its parentheses, on one
 * line, cut at its first comma (or a space) to fit BRIEF_WIDTH, into out. */
static void brief(const tc_cmd *c, tc_buf *out)
{
    tc_buf b = TC_BUF_INIT(0);
    int depth = 0;
    bool space = false; /* a space is due before the next word */
    for (const char *s = c->summary; *s; s++) {
        if (*s == '(') {
            depth++;
        } else if (*s == ')') {
            depth -= depth > 0;
        } else if (!depth) {
            if (strchr(".:;", *s) && (!s[1] || s[1] == ' ' || s[1] == '\n'))
                break;
            if (isspace((unsigned char)*s)) {
                space = tc_buf_len(&b) > 0;
                continue;
            }
            if (space && *s != ',') /* not "checkpoint , x", where a parenthesis was */
                tc_buf_putc(&b, ' ');
            space = false;
            tc_buf_putc(&b, *s);
        }
    }
    const char *t = tc_buf_str(&b);
    size_t n = tc_buf_len(&b);
    if (n > BRIEF_WIDTH) {
        size_t comma = 0, blank = 0;
        for (size_t i = 0; i < BRIEF_WIDTH; i++) {
            if (t[i] == ',' && !comma)
                comma = i;
            if (t[i] == ' ')
                blank = i;
        }
        n = comma ? comma : blank;
    }
    tc_buf_add(out, t, n);
    tc_buf_free(&b);
}

/* ---- bash ---------------------------------------------------------------------------- */

static void bash_cmd(FILE *out, const tc_cmd *c)
{
    fprintf(out, "    %s)\n        case $prev in\n", c->name);
    tc_buf words = TC_BUF_INIT(0), text = TC_BUF_INIT(0), opts = TC_BUF_INIT(0);
    for (const tc_opt *const *p = c->opts; *p; p++) {
        const tc_opt *o = *p;
        tc_buf_sep(&opts, " ");
        tc_buf_printf(&opts, "--%s", o->lng);
        if (o->shrt)
            tc_buf_printf(&opts, " -%c", o->shrt);
        if ((o->flags & TC_OPT_VALUE_OPTIONAL))
            continue; /* its value only after '=' */
        tc_buf_reset(&words);
        value_kind k = value_kind_of(o, &words);
        char names[80];
        if (o->shrt)
            snprintf(names, sizeof names, "-%c|--%s", o->shrt, o->lng);
        else
            snprintf(names, sizeof names, "--%s", o->lng);
        if (k == V_WORDS)
            fprintf(out, "        %s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return ;;\n", names,
                    tc_buf_str(&words));
        else if (k == V_FILE)
            fprintf(out, "        %s) _tensorctl_files \"$cur\" any; return ;;\n", names);
        else if (k == V_TEXT) {
            tc_buf_sep(&text, "|");
            tc_buf_puts(&text, names);
        }
    }
    if (tc_buf_len(&text))
        fprintf(out, "        %s) return ;;\n", tc_buf_str(&text));
    fprintf(out, "        esac\n        opts='%s'\n        files=%s\n        ;;\n", tc_buf_str(&opts),
            takes_operands(c) ? "1" : "");
    tc_buf_free(&words);
    tc_buf_free(&text);
    tc_buf_free(&opts);
}

static void bash(FILE *out, const char *cmds, const char *exts)
{
    fprintf(out,
            "# bash completion for tensorctl                            -*- shell-script -*-\n"
            "# Generated from tensorctl's option tables (gen_completions bash); do not edit.\n\n"
            "# COMPREPLY: folders and the files tensorctl knows by name, or with \"any\" (or\n"
            "# when none match) every file.\n"
            "_tensorctl_files()\n{\n"
            "    local IFS=$'\\n' ext\n"
            "    COMPREPLY=()\n"
            "    if [ \"$2\" != any ]; then\n"
            "        COMPREPLY=($(compgen -d -- \"$1\"))\n"
            "        for ext in %s; do\n"
            "            COMPREPLY+=($(compgen -f -X \"!*.$ext\" -- \"$1\"))\n"
            "        done\n"
            "    fi\n"
            "    [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- \"$1\"))\n"
            "    compopt -o filenames 2>/dev/null\n"
            "}\n\n"
            "_tensorctl()\n{\n"
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts= files= i\n"
            "    # --name=VALUE: bash splits the word at '=' (COMP_WORDBREAKS)\n"
            "    if [ \"$cur\" = = ]; then\n"
            "        cur=\n"
            "    elif [ \"$prev\" = = ] && [ \"$COMP_CWORD\" -ge 3 ]; then\n"
            "        prev=${COMP_WORDS[COMP_CWORD-2]}\n"
            "    fi\n"
            "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
            "        COMPREPLY=($(compgen -W '%s help --help -h --version' -- \"$cur\"))\n"
            "        return\n"
            "    fi\n"
            "    case ${COMP_WORDS[1]} in\n",
            exts, cmds);
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        bash_cmd(out, *c);
    fprintf(out,
            "    help)\n"
            "        [ \"$COMP_CWORD\" -eq 2 ] && COMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n"
            "        return\n"
            "        ;;\n"
            "    *)\n"
            "        return\n"
            "        ;;\n"
            "    esac\n"
            "    # after \"--\" every word is an operand\n"
            "    for ((i = 2; i < COMP_CWORD; i++)); do\n"
            "        if [ \"${COMP_WORDS[i]}\" = -- ]; then\n"
            "            [ -n \"$files\" ] && _tensorctl_files \"$cur\"\n"
            "            return\n"
            "        fi\n"
            "    done\n"
            "    case $cur in\n"
            "    -*) COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\")) ;;\n"
            "    *) [ -n \"$files\" ] && _tensorctl_files \"$cur\" ;;\n"
            "    esac\n"
            "}\n"
            "complete -F _tensorctl tensorctl\n",
            cmds);
}

/* ---- zsh ----------------------------------------------------------------------------- */

/* s inside a single-quoted zsh word, as _arguments reads it (']', ':' and '\' escaped). */
static void zsh_text(FILE *out, const char *s, const char *special)
{
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", out);
        else {
            if (strchr(special, *s))
                fputc('\\', out);
            fputc(*s, out);
        }
    }
}

static void zsh_opt(FILE *out, const tc_opt *o)
{
    tc_buf words = TC_BUF_INIT(0);
    value_kind k = value_kind_of(o, &words);
    bool optional = (o->flags & TC_OPT_VALUE_OPTIONAL);
    const char *lsuf = k == V_FLAG ? "" : optional ? "=-" : "=", *ssuf = k == V_FLAG ? "" : "+";
    /* "(-o --output)": given once, in either form; "*": as often as wanted */
    fputs("                ", out);
    if ((o->flags & TC_OPT_REPEAT))
        fputs("'*'", out);
    else if (o->shrt)
        fprintf(out, "'(-%c --%s)'", o->shrt, o->lng);
    if (o->shrt)
        fprintf(out, "{-%c%s,--%s%s}'[", o->shrt, ssuf, o->lng, lsuf);
    else
        fprintf(out, "'--%s%s[", o->lng, lsuf);
    zsh_text(out, o->text->help, "[]\\");
    fputc(']', out);
    if (k != V_FLAG) {
        fputs(optional ? "::" : ":", out);
        zsh_text(out, o->arg, ":\\");
        if (k == V_WORDS)
            fprintf(out, ":(%s)", tc_buf_str(&words));
        else if (k == V_FILE)
            fputs(":_files", out);
        else
            fputs(": ", out);
    }
    fputs("' \\\n", out);
    tc_buf_free(&words);
}

static void zsh(FILE *out, const char *exts)
{
    fprintf(out,
            "#compdef tensorctl\n"
            "# zsh completion for tensorctl. Generated from its option tables (gen_completions zsh);\n"
            "# do not edit.\n\n"
            "# folders and the files tensorctl knows by name (zsh's _files offers every file when none match)\n"
            "_tensorctl_checkpoints() {\n"
            "    _files -g '*.(%s)(-.)'\n"
            "}\n\n"
            "_tensorctl() {\n"
            "    local curcontext=$curcontext state line ret=1\n"
            "    local -a commands\n"
            "    commands=(\n",
            exts);
    tc_buf b = TC_BUF_INIT(0);
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        tc_buf_reset(&b);
        brief(*c, &b);
        fprintf(out, "        '%s:", (*c)->name);
        zsh_text(out, tc_buf_str(&b), "");
        fputs("'\n", out);
    }
    tc_buf_free(&b);
    fputs("        'help:show the commands, or a command'\\''s options'\n"
          "    )\n"
          "    _arguments -C \\\n"
          "        '(- *)'{-h,--help}'[show the commands and the exit statuses]' \\\n"
          "        '(- *)--version[show the version]' \\\n"
          "        '1:command:->command' \\\n"
          "        '*::argument:->argument' && ret=0\n"
          "    case $state in\n"
          "    command)\n"
          "        _describe -t commands 'tensorctl command' commands && ret=0\n"
          "        ;;\n"
          "    argument)\n"
          "        curcontext=${curcontext%:*:*}:tensorctl-$words[1]:\n"
          "        case $words[1] in\n"
          "        help)\n"
          "            (( CURRENT == 2 )) && _describe -t commands 'tensorctl command' commands && ret=0\n"
          "            ;;\n",
          out);
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        fprintf(out, "        %s)\n            _arguments -s -S \\\n", (*c)->name);
        for (const tc_opt *const *o = (*c)->opts; *o; o++)
            zsh_opt(out, *o);
        if (takes_operands(*c))
            fputs("                '*:checkpoint:_tensorctl_checkpoints' \\\n", out);
        fputs("                && ret=0\n            ;;\n", out);
    }
    fputs("        esac\n"
          "        ;;\n"
          "    esac\n"
          "    return ret\n"
          "}\n\n"
          "_tensorctl \"$@\"\n",
          out);
}

/* ---- fish ---------------------------------------------------------------------------- */

/* s as one single-quoted fish word. */
static void fish_word(FILE *out, const char *s)
{
    fputc('\'', out);
    for (; *s; s++) {
        if (*s == '\'' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('\'', out);
}

static void fish(FILE *out, const char *cmds, const char *exts)
{
    fprintf(out,
            "# fish completion for tensorctl. Generated from its option tables (gen_completions fish);\n"
            "# do not edit.\n\n"
            "function __tensorctl_no_command --description 'no command given yet'\n"
            "    test (count (commandline -opc)) -eq 1\n"
            "end\n\n"
            "function __tensorctl_using --description 'the command being completed is argv[1]'\n"
            "    set -l words (commandline -opc)\n"
            "    test (count $words) -ge 2; and test \"$words[2]\" = \"$argv[1]\"\n"
            "end\n\n"
            "function __tensorctl_checkpoints --description 'folders and the files tensorctl knows by name, "
            "else every file'\n"
            "    set -l paths (__fish_complete_path (commandline -ct))\n"
            "    set -l hits (string match -r -- '^[^\\t]*(?:/|\\.(?:%s))(?:\\t.*)?$' $paths)\n"
            "    if set -q hits[1]\n"
            "        printf '%%s\\n' $hits\n"
            "    else\n"
            "        printf '%%s\\n' $paths\n"
            "    end\n"
            "end\n\n"
            "complete -c tensorctl -f\n"
            "complete -c tensorctl -n __tensorctl_no_command -s h -l help -d 'show the commands and the exit "
            "statuses'\n"
            "complete -c tensorctl -n __tensorctl_no_command -l version -d 'show the version'\n"
            "complete -c tensorctl -n __tensorctl_no_command -a help -d 'show the commands, or a command\\'s "
            "options'\n"
            "complete -c tensorctl -n '__tensorctl_using help' -a '%s'\n",
            exts, cmds);
    tc_buf b = TC_BUF_INIT(0);
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        tc_buf_reset(&b);
        brief(*c, &b);
        fprintf(out, "complete -c tensorctl -n __tensorctl_no_command -a %s -d ", (*c)->name);
        fish_word(out, tc_buf_str(&b));
        fputc('\n', out);
    }
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        fprintf(out, "\n# %s\n", (*c)->name);
        for (const tc_opt *const *p = (*c)->opts; *p; p++) {
            const tc_opt *o = *p;
            tc_buf_reset(&b);
            value_kind k = value_kind_of(o, &b);
            fprintf(out, "complete -c tensorctl -n '__tensorctl_using %s'", (*c)->name);
            if (o->shrt)
                fprintf(out, " -s %c", o->shrt);
            fprintf(out, " -l %s", o->lng);
            if ((o->flags & TC_OPT_VALUE_OPTIONAL))
                k = V_FLAG; /* its value only after '=', which fish cannot say */
            if (k == V_WORDS)
                fprintf(out, " -x -a '%s'", tc_buf_str(&b));
            else if (k == V_FILE)
                fputs(" -r -F", out);
            else if (k == V_TEXT)
                fputs(" -x", out);
            fputs(" -d ", out);
            fish_word(out, o->text->help);
            fputc('\n', out);
        }
        if (takes_operands(*c))
            fprintf(out, "complete -c tensorctl -n '__tensorctl_using %s' -k -a '(__tensorctl_checkpoints)'\n",
                    (*c)->name);
    }
    tc_buf_free(&b);
}

int tc_completions(FILE *out, const char *shell)
{
    tc_buf cmds = TC_BUF_INIT(0), exts = TC_BUF_INIT(0);
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        tc_buf_sep(&cmds, " ");
        tc_buf_puts(&cmds, (*c)->name);
    }
    int rc = 0;
    if (!strcmp(shell, "bash")) {
        suffixes(&exts, " ", false);
        bash(out, tc_buf_str(&cmds), tc_buf_str(&exts));
    } else if (!strcmp(shell, "zsh")) {
        suffixes(&exts, "|", false);
        zsh(out, tc_buf_str(&exts));
    } else if (!strcmp(shell, "fish")) {
        suffixes(&exts, "|", true);
        fish(out, tc_buf_str(&cmds), tc_buf_str(&exts));
    } else {
        fprintf(stderr, "no completions for shell '%s' (bash, zsh or fish)\n", shell);
        rc = -1;
    }
    if (tc_buf_oom(&cmds) || tc_buf_oom(&exts)) {
        fprintf(stderr, "out of memory\n");
        rc = -1;
    }
    tc_buf_free(&cmds);
    tc_buf_free(&exts);
    return rc;
}
