/* The defaults the option tables show are the defaults the code uses. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "set.h"
#include "stream.h"

static int fails;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    fails += !ok;
}

int main(void)
{
    tc_limits def = TC_LIMITS_DEFAULT;
    uint64_t v = 0;
    check(!tc_parse_size(tc_opt_max_pickle.def, &v) && v == def.max_pickle_bytes, "--max-pickle-size default");
    check(!tc_parse_count(tc_opt_max_depth.def, &v) && v == def.max_depth, "--max-depth default");
    check(!tc_parse_count(tc_opt_max_objects.def, &v) && v == def.max_objects, "--max-objects default");
    check(!tc_parse_count(tc_opt_max_entries.def, &v) && v == def.max_entries, "--max-entries default");
    check(!tc_parse_size(tc_opt_max_header.def, &v) && v == def.max_header, "--max-header-size default");
    /* every command's rows: the same id never means two options, no long name twice in a command */
    const tc_opt *by_id[OPT_COUNT_] = {0};
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        for (const tc_opt *const *o = (*c)->opts; *o; o++) {
            check((*o)->id > 0 && (*o)->id < OPT_COUNT_, (*o)->lng);
            if (by_id[(*o)->id] && strcmp(by_id[(*o)->id]->lng, (*o)->lng))
                check(0, "one id, two option names");
            by_id[(*o)->id] = *o;
            for (const tc_opt *const *p = (*c)->opts; p != o; p++)
                if (!strcmp((*p)->lng, (*o)->lng) || ((*p)->shrt && (*p)->shrt == (*o)->shrt))
                    check(0, "an option named twice in one command");
        }
    const tc_cmd *convert = NULL;
    for (const tc_cmd *const *c = tc_cmds; *c; c++)
        if (!strcmp((*c)->name, "convert"))
            convert = *c;
    for (const tc_opt *const *o = convert ? convert->opts : NULL; o && *o; o++)
        if ((*o)->id == OPT_MAX_SHARD)
            check(!tc_parse_size((*o)->def, &v) && v == TC_DEFAULT_MAX_SHARD, "--max-shard-size default");
        else if ((*o)->id == OPT_MAX_EXPAND)
            check(!tc_parse_count((*o)->def, &v) && v == TC_DEFAULT_MAX_EXPAND, "--max-expand default");
    /* counts take digits only */
    check(tc_parse_count("1.5K", &v) != 0 && tc_parse_count("10k", &v) != 0 && tc_parse_count("-1", &v) != 0 &&
              tc_parse_count("", &v) != 0 && tc_parse_count("99999999999999999999", &v) != 0,
          "counts refuse fractions, suffixes, signs, nothing and overflow");
    check(!tc_parse_count("1500", &v) && v == 1500, "a count");
    return fails ? 1 : 0;
}
