/* The options' prose and their rows, checked both ways: every row of every command points at a
 * text made from a prose file, every prose file of src/cli/options/ became a text (meson lists
 * it), every text is some row's; and every row's value kind holds together (a word row names its
 * words, a count's bounds are in order, every default is a value of its row's kind).
 * usage: test_option_prose OPTIONS_DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int fails, checks;

static void check(int ok, const char *what, const char *name)
{
    checks++;
    if (!ok) {
        printf("FAIL %s: %s\n", name, what);
        fails++;
    }
}

static const tc_opt_text_name *text_named(const char *name, size_t len)
{
    for (const tc_opt_text_name *t = tc_opt_texts; t->name; t++)
        if (strlen(t->name) == len && !strncmp(t->name, name, len))
            return t;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_option_prose OPTIONS_DIR\n");
        return 2;
    }
    /* every prose file is a text */
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 1;
    }
    size_t nfiles = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".opt"))
            continue;
        nfiles++;
        check(text_named(e->d_name, len - 4) != NULL, "a prose file no text was made of (list it in options/meson.build)",
              e->d_name);
    }
    closedir(d);
    size_t ntexts = 0;
    for (const tc_opt_text_name *t = tc_opt_texts; t->name; t++)
        ntexts++;
    check(nfiles == ntexts, "as many prose files as texts", argv[1]);
    /* every row has a text of those, and every text a row */
    for (const tc_opt_text_name *t = tc_opt_texts; t->name; t++) {
        bool used = false;
        for (const tc_cmd *const *c = tc_cmds; *c; c++)
            for (const tc_opt *const *o = (*c)->opts; *o; o++)
                used |= (*o)->text == t->text;
        check(used, "a prose file no row points at", t->name);
        check(t->text->help && t->text->help[0] && !strchr(t->text->help, '\n'), "a help line of one line", t->name);
    }
    for (const tc_cmd *const *c = tc_cmds; *c; c++) {
        for (const tc_opt *const *o = (*c)->opts; *o; o++) {
            const tc_opt *r = *o;
            bool known = false;
            for (const tc_opt_text_name *t = tc_opt_texts; t->name && !known; t++)
                known = t->text == r->text;
            check(r->text && known, "a row without a prose file's text", r->lng);
            if (r->kind == TC_KIND_WORDS)
                check(r->arg && strchr(r->arg, '|'), "a word option's arg names its words (a|b)", r->lng);
            if (r->kind == TC_KIND_COUNT)
                check(!r->max || r->min <= r->max, "a count's bounds in order", r->lng);
            check(r->arg || r->kind == TC_KIND_TEXT, "a flag with a value kind", r->lng);
        }
        /* no arguments at all: every default is parsed by its row's kind (tc_parse fails on a bad one) */
        tc_args *a = malloc(sizeof *a);
        char *none[1] = {NULL};
        int rc = a ? tc_parse(*c, 0, none, a) : -1;
        check(rc == 0, "every default a value of its row's kind", (*c)->name);
        if (a && !rc)
            free(a->pos);
        free(a);
    }
    printf("%d checks, %d failed (%zu prose files)\n", checks, fails, nfiles);
    return fails || !nfiles ? 1 : 0;
}
