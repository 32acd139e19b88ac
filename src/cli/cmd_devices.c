/* devices: what torch.cuda.is_available() and device_count() would say. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cast.h"
#include "cast_cuda.h"
#include "cli.h"

static const tc_opt o_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_devices_quiet};
static const tc_opt o_json = {.id = OPT_JSON, .lng = "json", .text = &tc_text_devices_json};
static const tc_opt *const opts[] = {&tc_opt_help, &o_json, &o_quiet, NULL};

/* "12.4" from CUDA's 12040, or null when unknown */
static cJSON *version(int v)
{
    char t[32];
    if (v <= 0)
        return cJSON_CreateNull();
    snprintf(t, sizeof t, "%d.%d", v / 1000, v % 1000 / 10);
    return cJSON_CreateString(t);
}

static cJSON *bytes(uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    return cJSON_CreateRaw(t);
}

static void print_json(const tc_cuda_info *ci)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *cpu = cJSON_AddObjectToObject(o, "cpu"), *cu = cJSON_AddObjectToObject(o, "cuda");
    cJSON_AddStringToObject(cpu, "cast_path", tc_cast_cpu_path());
    cJSON_AddBoolToObject(cu, "built", ci->compiled);
    cJSON_AddBoolToObject(cu, "usable", ci->available);
    if (ci->available)
        cJSON_AddNullToObject(cu, "why");
    else
        cJSON_AddStringToObject(cu, "why", ci->why);
    cJSON_AddItemToObject(cu, "driver", version(ci->driver_version));
    cJSON_AddItemToObject(cu, "runtime", version(ci->runtime_version));
    cJSON_AddNumberToObject(cu, "count", ci->available ? ci->count : 0);
    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; ci->available && i < ci->count; i++) {
        tc_cuda_device d;
        if (tc_cuda_device_get(&d, i))
            continue;
        cJSON *x = cJSON_CreateObject();
        char cc[24];
        snprintf(cc, sizeof cc, "%d.%d", d.cc_major, d.cc_minor);
        cJSON_AddNumberToObject(x, "index", i);
        cJSON_AddStringToObject(x, "name", d.name);
        cJSON_AddItemToObject(x, "total_bytes", bytes(d.total_mem));
        cJSON_AddItemToObject(x, "free_bytes", bytes(d.free_mem));
        cJSON_AddStringToObject(x, "compute_capability", cc);
        cJSON_AddItemToArray(devs, x);
    }
    tc_put_json_line(o);
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    free(a.pos);
    if (a.set[OPT_JSON] && a.set[OPT_QUIET]) {
        tc_err(NULL, "devices: -q prints nothing; it cannot go with --json");
        return TC_EXIT_USAGE;
    }
    tc_cuda_info ci;
    tc_cuda_query(&ci);
    if (a.set[OPT_JSON]) {
        print_json(&ci);
    } else if (tc_verbosity > 0) {
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
