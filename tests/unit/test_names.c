/* tc_names_strip_prefix: the prefix each side's names share, an explicit
 * prefix, and the mappings it refuses (two names made one, a name emptied). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

static void strip_ok(const char *const *in, size_t n, const char *prefix, const char *const *want, const char *used)
{
    char **out = NULL, *got = NULL;
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_names_strip_prefix(&out, &got, in, n, prefix, &d), 0, "%s", d.msg);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(out[i], want[i]);
    cr_assert_str_eq(got, used);
    tc_names_free(out, n);
    free(got);
}

static void strip_fails(const char *const *in, size_t n, const char *prefix, const char *msg)
{
    char **out = NULL, *got = NULL;
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_names_strip_prefix(&out, &got, in, n, prefix, &d), TC_ERR_USAGE);
    cr_assert(strstr(d.msg, msg), "message '%s' lacks '%s'", d.msg, msg);
    cr_assert_null(out);
    cr_assert_null(got);
}

Test(names, dataparallel_prefix_found)
{
    const char *in[] = {"module.fc.weight", "module.fc.bias", "module.out.weight"};
    const char *want[] = {"fc.weight", "fc.bias", "out.weight"};
    strip_ok(in, 3, NULL, want, "module.");
}

Test(names, whole_components_only)
{
    /* "mod" is shared as characters, not as a component */
    const char *in[] = {"model.a", "modules.b"};
    strip_ok(in, 2, NULL, in, "");
    const char *in2[] = {"model.encoder.x", "model.encoder.y.z"};
    const char *want2[] = {"x", "y.z"};
    strip_ok(in2, 2, NULL, want2, "model.encoder.");
}

Test(names, last_component_kept)
{
    const char *in[] = {"a.b.c"};
    const char *want[] = {"c"};
    strip_ok(in, 1, NULL, want, "a.b.");
    const char *in2[] = {"a.b", "a.b.c"};
    const char *want2[] = {"b", "b.c"};
    strip_ok(in2, 2, NULL, want2, "a.");
    const char *in3[] = {"weight", "bias"};
    strip_ok(in3, 2, NULL, in3, "");
    strip_ok(NULL, 0, NULL, NULL, "");
}

Test(names, explicit_prefix)
{
    const char *in[] = {"_orig_mod.w", "b"};
    const char *want[] = {"w", "b"};
    strip_ok(in, 2, "_orig_mod.", want, "_orig_mod.");
    strip_ok(want, 2, "_orig_mod.", want, ""); /* no name had it */
    strip_ok(in, 2, "", in, "");
}

Test(names, refusals)
{
    const char *clash[] = {"module.w", "w"};
    strip_fails(clash, 2, "module.", "'module.w' and 'w' would both be named 'w'");
    const char *empty[] = {"module.", "module.w"};
    strip_fails(empty, 2, "module.", "'module.' would have no name left");
    const char *twice[] = {"x", "x"};
    strip_fails(twice, 2, "", "'x' and 'x' would both be named 'x'");
}
