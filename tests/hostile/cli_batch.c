/* cli_batch LIST: the tensorctl commands in LIST, one a line (its arguments separated by tabs,
 * without the program's name), run one after another in this process through tc_cli, as the
 * binary runs them. Each is announced on stderr first ("cli_batch: RUN" and its arguments) and
 * followed there by its exit status ("cli_batch: EXIT N"); what a command prints goes where
 * the binary's would. After the last, "cli_batch: DONE N" (commands run).
 *
 * valgrind_corpus.sh runs it under valgrind: one start-up of valgrind (half a second) for
 * hundreds of commands, each still attributed its own reports by the announcement before them.
 * Exit status: 0 when every line ran (whatever the commands answered), 1 when LIST cannot be
 * read or memory ran out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "vec.h"

typedef TC_VEC(char *) arg_list;

/* *a: the program's name, then line's tab-separated fields (line is cut up), then NULL. 0 or -1. */
static int args_of(char *line, arg_list *a)
{
    a->n = 0;
    if (tc_vec_push(a, (char *)"tensorctl"))
        return -1;
    for (char *p = line; p;) {
        char *tab = strchr(p, '\t');
        if (tab)
            *tab++ = '\0';
        if (tc_vec_push(a, p))
            return -1;
        p = tab;
    }
    return tc_vec_push(a, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cli_batch LIST\n");
        return 1;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, ran = 0;
    ssize_t len;
    int rc = 0;
    arg_list args = {0};
    while (!rc && (len = getline(&line, &cap, f)) >= 0) {
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        if (!len)
            continue;
        if (args_of(line, &args)) {
            fprintf(stderr, "cli_batch: out of memory\n");
            rc = 1;
            continue;
        }
        fputs("cli_batch: RUN", stderr);
        for (size_t i = 1; i + 1 < args.n; i++)
            fprintf(stderr, " %s", args.v[i]);
        fputc('\n', stderr);
        int st = tc_cli((int)args.n - 1, args.v);
        fflush(stdout);
        fprintf(stderr, "cli_batch: EXIT %d\n", st);
        ran++;
    }
    if (!rc && ferror(f)) {
        perror(argv[1]);
        rc = 1;
    }
    if (!rc)
        fprintf(stderr, "cli_batch: DONE %zu\n", ran);
    tc_vec_free(&args);
    free(line);
    fclose(f);
    return rc;
}
