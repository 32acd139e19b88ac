/* The man page from its template and the option tables.
 *
 * Markers in the template, each on a line of its own:
 *   @SYNOPSIS@         one line per command, from its synopsis
 *   @OPTIONS name@     the options of command name, in its table's order
 *   @EXIT STATUS@      every exit status
 * Everything else is copied as it is; an option the prose mentions
 * (\-\-name) must be one some command takes, so prose and tables cannot
 * drift apart. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* s with every '-' as roff's "\-". */
static void roff_dashes(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '-')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void synopsis(FILE *out)
{
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        const char *rest = (*c)->synopsis + strlen((*c)->name);
        if (c != tc_cmds)
            fprintf(out, ".br\n");
        fprintf(out, ".B tensorctl %s\n", (*c)->name);
        while (*rest == ' ')
            rest++;
        if (*rest) {
            roff_dashes(out, rest);
            fputc('\n', out);
        }
    }
}

static void option(FILE *out, const tc_opt *o)
{
    fprintf(out, ".TP\n");
    if (o->arg && o->shrt)
        fprintf(out, ".BI \\-%c \", \" \\-\\-", o->shrt);
    else if (o->arg)
        fprintf(out, ".BI \\-\\-");
    else if (o->shrt)
        fprintf(out, ".BR \\-%c \", \" \\-\\-", o->shrt);
    else
        fprintf(out, ".B \\-\\-");
    roff_dashes(out, o->lng);
    if ((o->flags & TC_OPT_VALUE_OPTIONAL))
        fprintf(out, " \"[=%s]\"", o->arg);
    else if (o->arg)
        fprintf(out, " \" %s\"", o->arg);
    fputc('\n', out);
    if (o->text->man) {
        fprintf(out, "%s\n", o->text->man);
    } else { /* the help line as a sentence */
        fputc(toupper((unsigned char)o->text->help[0]), out);
        fprintf(out, "%s.\n", o->text->help + 1);
    }
    if (o->def)
        fprintf(out, "Default:\n.BR %s .\n", o->def);
}

static const tc_cmd *command(const char *name)
{
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        if (!strcmp((*c)->name, name))
            return *c;
    return NULL;
}

/* Every "\-\-name" in line is an option of some command. */
static int known_options(const char *line, int lineno)
{
    for (const char *p = strstr(line, "\\-\\-"); p; p = strstr(p + 4, "\\-\\-")) {
        char name[64];
        size_t k = 0;
        for (const char *q = p + 4; k + 1 < sizeof name && (isalnum((unsigned char)*q) || *q == '\\'); q++) {
            if (*q == '\\') {
                if (q[1] != '-')
                    break;
                q++;
            }
            name[k++] = *q;
        }
        name[k] = 0;
        bool found = false;
        for (const tc_cmd *const *c = tc_cmds; *c && !found; c++)
            for (const tc_opt *const *o = (*c)->opts; *o && !found; o++)
                found = !strcmp((*o)->lng, name);
        if (!found) {
            fprintf(stderr, "man template line %d: --%s is no option of any command\n", lineno, name);
            return -1;
        }
    }
    return 0;
}

int tc_man_page(FILE *out, const char *template_path)
{
    FILE *in = fopen(template_path, "r");
    if (!in) {
        perror(template_path);
        return -1;
    }
    char line[4096];
    int rc = 0, lineno = 0;
    while (!rc && fgets(line, sizeof line, in)) {
        lineno++;
        if (!strcmp(line, "@SYNOPSIS@\n")) {
            synopsis(out);
        } else if (!strcmp(line, "@EXIT STATUS@\n")) {
            for (const tc_exit_info *e = tc_exits; e->brief; e++)
                fprintf(out, ".IP %d\n%s\n", e->code, e->man);
        } else if (!strncmp(line, "@OPTIONS ", 9)) {
            char *end = strchr(line + 9, '@');
            if (end)
                *end = 0;
            const tc_cmd *c = command(line + 9);
            if (!c) {
                fprintf(stderr, "man template line %d: no command '%s'\n", lineno, line + 9);
                rc = -1;
                break;
            }
            for (const tc_opt *const *o = c->opts; *o; o++)
                option(out, *o);
        } else if (line[0] == '@') {
            fprintf(stderr, "man template line %d: unknown marker %s", lineno, line);
            rc = -1;
        } else {
            rc = known_options(line, lineno);
            fputs(line, out);
        }
    }
    fclose(in);
    return rc;
}
