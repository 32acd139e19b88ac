/* Every command of tensorctl, in the order --help and the man page list them,
 * tensorctl's usage, and the entry that runs one. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

extern const tc_cmd tc_cmd_inspect, tc_cmd_to_cpu, tc_cmd_to_cuda, tc_cmd_convert, tc_cmd_extract, tc_cmd_diff, tc_cmd_consolidate, tc_cmd_devices, tc_cmd_scan;
extern const tc_cmd tc_cmd_test;

const tc_cmd *const tc_cmds[] = {
    &tc_cmd_inspect, &tc_cmd_scan, &tc_cmd_to_cpu, &tc_cmd_to_cuda, &tc_cmd_convert, &tc_cmd_extract, &tc_cmd_consolidate, &tc_cmd_diff, &tc_cmd_devices, &tc_cmd_test, NULL,
};

/* What each command does, for tensorctl's own --help (a command's --help says it at length). */
static const struct {
    const tc_cmd *cmd;
    const char *what;
} briefs[] = {
    {&tc_cmd_inspect, "list tensors, storages, contents and a safety verdict"},
    {&tc_cmd_scan, "judge every checkpoint under folders, caches and archives"},
    {&tc_cmd_to_cpu, "rewrite a checkpoint so that it loads on the CPU"},
    {&tc_cmd_to_cuda, "rewrite a checkpoint so that it loads on a GPU"},
    {&tc_cmd_convert, "convert between .pt and .safetensors, one file or a sharded set"},
    {&tc_cmd_extract, "write the model weights of a training checkpoint"},
    {&tc_cmd_consolidate, "merge a sharded or distributed checkpoint into one state_dict"},
    {&tc_cmd_diff, "compare the tensors of two checkpoints"},
    {&tc_cmd_devices, "list the CUDA devices"},
};

static const char *cmd_brief(const tc_cmd *cmd)
{
    for (size_t i = 0; i < sizeof briefs / sizeof briefs[0]; i++)
        if (briefs[i].cmd == cmd)
            return briefs[i].what;
    return cmd->synopsis;
}

static const tc_cmd *find_cmd(const char *name)
{
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        if (!strcmp(name, (*c)->name))
            return *c;
    return NULL;
}

static void unknown_cmd(const char *name)
{
    const char *names[32];
    size_t n = 0;
    for (const tc_cmd *const *c = tc_cmds; *c && n < 32; c++)
        names[n++] = (*c)->name;
    names[n++] = "help";
    const char *near = tc_nearest(name, strlen(name), names, n);
    if (near)
        fprintf(stderr, "tensorctl: unknown command '%s'; did you mean '%s'?\n", TC_ESC(name), near);
    else
        fprintf(stderr, "tensorctl: unknown command '%s'\n", TC_ESC(name));
}

/* tensorctl's own usage: the commands and the exit statuses. */
static void print_usage(FILE *f)
{
    fprintf(f, "usage: tensorctl COMMAND [options] FILE...\n\n"
               "Inspect and rewrite PyTorch checkpoints without running them.\n\ncommands:\n");
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        fprintf(f, "  %-13s %s\n", (*c)->name, cmd_brief(*c));
    fprintf(f, "  %-13s %s\n", "help COMMAND", "the options of a command (as tensorctl COMMAND --help)");
    fprintf(f, "\noptions:\n  -h, --help     this list\n  -V, --version  print the version\n"
               "\n'tensorctl COMMAND --help' describes a command; 'man tensorctl' all of them.\nexit status:");
    size_t col = strlen("exit status:");
    for (const tc_exit_info *e = tc_exits; e->brief; e++) {
        char item[160];
        snprintf(item, sizeof item, "%d %s%s", e->code, e->brief, e[1].brief ? "," : "");
        if (col + 1 + strlen(item) > 79) { /* wrapped between items, within 80 columns */
            fprintf(f, "\n ");
            col = 1;
        }
        fprintf(f, " %s", item);
        col += 1 + strlen(item);
    }
    fprintf(f, "\n");
}

int tc_cli(int argc, char **argv)
{
    tc_verbosity = 1; /* each run starts from the defaults: the fuzz target runs many in one process */
    if (argc < 2) {
        print_usage(stderr);
        return TC_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* as git help CMD: the command's own help */
        const tc_cmd *c = find_cmd(argv[2]);
        if (!c) {
            unknown_cmd(argv[2]);
            return TC_EXIT_USAGE;
        }
        tc_print_cmd_help(c);
        return TC_EXIT_OK;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        print_usage(stdout);
        return TC_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("tensorctl %s\n", TC_VERSION);
        return TC_EXIT_OK;
    }
    const tc_cmd *c = find_cmd(argv[1]);
    if (c)
        return c->run(c, argc - 2, argv + 2);
    unknown_cmd(argv[1]);
    fprintf(stderr, "'tensorctl --help' lists the commands.\n");
    return TC_EXIT_USAGE;
}
