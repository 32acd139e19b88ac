/* gen_completions SHELL OUT: the completion script of bash, zsh or fish,
 * generated from the command tables (see completions.c). Run by the build. */
#include <stdio.h>

#include "cli.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_completions bash|zsh|fish OUT\n");
        return 2;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    int rc = tc_completions(out, argv[1]);
    if (fclose(out) != 0)
        rc = -1;
    if (rc)
        remove(argv[2]);
    return rc ? 1 : 0;
}
