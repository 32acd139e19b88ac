/* Every command of tensorctl, in the order --help and the man page list them,
 * and the entry that runs one. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

extern const tc_cmd tc_cmd_inspect, tc_cmd_to_cpu, tc_cmd_to_cuda, tc_cmd_convert, tc_cmd_extract, tc_cmd_diff, tc_cmd_consolidate, tc_cmd_devices, tc_cmd_scan;
extern const tc_cmd tc_cmd_test;

const tc_cmd *const tc_cmds[] = {
    &tc_cmd_inspect, &tc_cmd_scan, &tc_cmd_to_cpu, &tc_cmd_to_cuda, &tc_cmd_convert, &tc_cmd_extract, &tc_cmd_consolidate, &tc_cmd_diff, &tc_cmd_devices, &tc_cmd_test, NULL,
};

int tc_cli(int argc, char **argv)
{
    tc_verbosity = 1; /* each run starts from the defaults: the fuzz target runs many in one process */
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
