/* Every command of tensorctl, in the order --help and the man page list them. */
#include "cli.h"

extern const tc_cmd tc_cmd_inspect, tc_cmd_to_cpu, tc_cmd_to_cuda, tc_cmd_convert, tc_cmd_extract, tc_cmd_diff, tc_cmd_consolidate, tc_cmd_devices, tc_cmd_scan;

const tc_cmd *const tc_cmds[] = {
    &tc_cmd_inspect, &tc_cmd_scan, &tc_cmd_to_cpu, &tc_cmd_to_cuda, &tc_cmd_convert, &tc_cmd_extract, &tc_cmd_consolidate, &tc_cmd_diff, &tc_cmd_devices, NULL,
};
