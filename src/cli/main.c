#include <stdio.h>
#include <string.h>

#include "cli.h"

extern const tc_cmd tc_cmd_inspect, tc_cmd_to_cpu, tc_cmd_to_cuda, tc_cmd_convert, tc_cmd_devices;

const tc_cmd *const tc_cmds[] = {
    &tc_cmd_inspect, &tc_cmd_to_cpu, &tc_cmd_to_cuda, &tc_cmd_convert, &tc_cmd_devices, NULL,
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tensorctl COMMAND [options] FILE...\n\n"
               "Inspect and rewrite PyTorch checkpoints without running them.\n\ncommands:\n");
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        fprintf(f, "  %-9s %s\n", (*c)->name, (*c)->synopsis);
    fprintf(f, "\n'tensorctl COMMAND --help' describes a command; 'man tensorctl' all of them.\n"
               "exit status: 0 ok, 1 failure, 2 usage, 3 bad input file, 4 dangerous file\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TC_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return TC_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tensorctl %s\n", TC_VERSION);
        return TC_EXIT_OK;
    }
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        if (!strcmp(argv[1], (*c)->name))
            return (*c)->run(*c, argc - 2, argv + 2);
    fprintf(stderr, "tensorctl: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return TC_EXIT_USAGE;
}
