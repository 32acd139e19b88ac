/* test: an integrity test of checkpoints, as gzip -t and unzip -t are (verify.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "format.h"
#include "verify.h"

static const tc_opt o_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_test_quiet};
static const tc_opt *const opts[] = {&tc_opt_help, &o_quiet, TC_LIMIT_OPTS, NULL};

int tc_test_ckpt(const char *path, const tc_ckpt *c, const tc_limits *lim, bool say)
{
    tc_diag d = TC_DIAG_INIT;
    tc_verify_report rep;
    tc_progress prog;
    tc_progress_init(&prog, "testing", true);
    int rc = tc_verify(c, lim, tc_progress_cb, &prog, &rep, &d);
    tc_progress_end(&prog);
    if (rc)
        return tc_err_diag(&d);
    if (!say || tc_verbosity < 1)
        return TC_EXIT_OK;
    char h[32];
    tc_human_bytes(rep.bytes, h, sizeof h);
    printf("%s: OK (%s", TC_ESC(path), tc_ckpt_format(c));
    if (rep.records)
        printf(": %zu zip records, each one's CRC-32 checked", rep.records);
    if (rep.storages) {
        printf("%s %zu storages read whole", rep.records ? ";" : ":", rep.storages);
        if (rep.storage_crcs == rep.storages)
            printf(", each one's CRC-32 checked");
        else if (rep.storage_crcs)
            printf(", %zu with a CRC-32 checked", rep.storage_crcs);
    }
    printf("; %s read)\n", h);
    if (!rep.records && rep.storage_crcs < rep.storages)
        printf("%s: note: %s keeps no checksum of its tensor data: its sizes hold, but a changed byte in the data "
               "cannot be seen\n", TC_ESC(path), tc_ckpt_format(c));
    return TC_EXIT_OK;
}

/* One file tested: its exit status. */
static int test_one(const char *arg, const tc_limits *lim)
{
    char *in = NULL;
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    int ex = tc_input_path(arg, &in);
    if (!ex && tc_open(&c, in, lim, &d))
        ex = tc_err_diag(&d);
    if (!ex)
        ex = tc_test_ckpt(arg, c, lim, true);
    tc_ckpt_close(c);
    free(in);
    return ex;
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_limits lim;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    tc_limits_from_args(&a, &lim);
    bool usable = a.npos > 0;
    if (a.npos < 1)
        tc_err(NULL, "test: no FILE given (see 'tensorctl test --help')");
    /* the worst status over the files, as inspect's: a failure of one file does not stop the others */
    int ex = usable ? TC_EXIT_OK : TC_EXIT_USAGE;
    for (int i = 0; usable && i < a.npos; i++) {
        int e = test_one(a.pos[i], &lim);
        if (e > ex)
            ex = e;
    }
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_test = {
    "test", "test [options] FILE...",
    "Test the integrity of checkpoints, as gzip -t and unzip -t do: read every byte and check every check the\n"
    "format records: each zip record's CRC-32 (torch's format, TorchScript, npz), the sizes and offsets of\n"
    "every tensor (safetensors, legacy torch, shards, distributed checkpoints), each storage's CRC-32 where\n"
    "one is kept. Formats without checksums can show only that their sizes hold. Prints FILE: OK per file.\n"
    "Not a safety verdict (see inspect). Exit status: 0 every file intact, 3 one corrupt, truncated or not\n"
    "a checkpoint, 1 a read error, 2 usage; the highest over the files.",
    opts, run};
