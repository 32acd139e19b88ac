#include <stdio.h>
#include <string.h>

#include "cli.h"


int main(int argc, char **argv)
{
    if (argc < 2) {
        tc_print_usage(stderr);
        return TC_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        tc_print_usage(stdout);
        return TC_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tensorctl %s\n", TC_VERSION);
        return TC_EXIT_OK;
    }
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        if (!strcmp(argv[1], (*c)->name))
            return (*c)->run(*c, argc - 2, argv + 2);
    fprintf(stderr, "tensorctl: unknown command '%s'\n", TC_ESC(argv[1]));
    tc_print_usage(stderr);
    return TC_EXIT_USAGE;
}
