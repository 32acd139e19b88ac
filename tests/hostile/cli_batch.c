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
    TC_VEC(char *) args = {0};
    while ((len = getline(&line, &cap, f)) >= 0) {
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        if (!len)
            continue;
        args.n = 0;
        if (tc_vec_push(&args, (char *)"tensorctl")) {
            rc = 1;
            break;
        }
        for (char *p = line; p && !rc;) {
            char *tab = strchr(p, '\t');
            if (tab)
                *tab++ = '\0';
            rc = tc_vec_push(&args, p) ? 1 : 0;
            p = tab;
        }
        if (rc || tc_vec_push(&args, NULL)) {
            rc = 1;
            break;
        }
        fputs("cli_batch: RUN", stderr);
        for (size_t i = 1; i + 1 < args.n; i++)
            fprintf(stderr, " %s", args.v[i]);
        fputc('\n', stderr);
        fflush(stderr);
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
    else if (!ferror(f))
        fprintf(stderr, "cli_batch: out of memory\n");
    tc_vec_free(&args);
    free(line);
    fclose(f);
    return rc;
}
