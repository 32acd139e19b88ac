/* devices: what torch.cuda.is_available() and device_count() would say. */
#include <stdio.h>
#include <stdlib.h>

#include "cast.h"
#include "cast_cuda.h"
#include "cli.h"

static const tc_opt o_quiet = {OPT_QUIET, 'q', "quiet", NULL, "print nothing; exit 0 when CUDA is usable, 1 when not",
                               0, NULL, "Print nothing; only the exit status."};
static const tc_opt *const opts[] = {&tc_opt_help, &o_quiet, NULL};

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    free(a.pos);
    tc_cuda_info ci;
    tc_cuda_query(&ci);
    if (tc_verbosity > 0) {
        printf("cpu: cast path %s\n", tc_cast_cpu_path());
        if (!ci.available) {
            printf("cuda: not usable: %s\n", ci.why);
        } else {
            printf("cuda: usable, %d device%s, driver %d.%d, runtime %d.%d\n", ci.count, tc_s((size_t)ci.count),
                   ci.driver_version / 1000,
                   ci.driver_version % 1000 / 10, ci.runtime_version / 1000, ci.runtime_version % 1000 / 10);
            for (int i = 0; i < ci.count; i++) {
                tc_cuda_device d;
                if (tc_cuda_device_get(&d, i))
                    continue;
                printf("  cuda:%d  %s  %.1f GiB total, %.1f GiB free, compute capability %d.%d\n", i, d.name,
                       d.total_mem / 1073741824.0, d.free_mem / 1073741824.0, d.cc_major, d.cc_minor);
            }
        }
    }
    return ci.available ? TC_EXIT_OK : TC_EXIT_FAIL;
}

const tc_cmd tc_cmd_devices = {
    "devices", "devices [options]",
    "Say whether CUDA is usable here and, if not, why (built without CUDA, no driver, driver too old, no\n"
    "device); list each GPU with its index, name, memory and compute capability. Exit 0 when usable, 1 when\n"
    "not (a machine without a GPU).",
    opts, run};
