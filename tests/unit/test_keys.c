/* tc_keymap_make: key surgery's order (choose, strip, rename, add), the prefix
 * names share, and the mappings it refuses (two names made one, a name emptied). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

static void map_ok(const tc_keyops *o, const char *const *in, size_t n, const char *const *want, const char *stripped)
{
    tc_keymap m;
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_keymap_make(o, in, n, &m, &d), 0, "%s", d.msg);
    cr_assert_eq(m.n, n);
    for (size_t i = 0; i < n; i++) {
        if (!want[i])
            cr_assert_null(m.name[i], "'%s' should be left out, got '%s'", in[i], m.name[i]);
        else
            cr_assert_str_eq(m.name[i], want[i]);
    }
    if (stripped)
        cr_assert_str_eq(m.stripped, stripped);
    else
        cr_assert_null(m.stripped);
    tc_keymap_free(&m);
}

static void map_fails(const tc_keyops *o, const char *const *in, size_t n, const char *msg)
{
    tc_keymap m;
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_keymap_make(o, in, n, &m, &d), TC_ERR_USAGE);
    cr_assert(strstr(d.msg, msg), "message '%s' lacks '%s'", d.msg, msg);
    cr_assert_null(m.name);
}

Test(keys, shared_first_component)
{
    const char *in[] = {"module.fc.weight", "module.fc.bias", "module.out.weight"};
    const char *want[] = {"fc.weight", "fc.bias", "out.weight"};
    map_ok(&(tc_keyops){.strip = true}, in, 3, want, "module.");
    const char *compiled[] = {"_orig_mod.enc.w", "_orig_mod.b"};
    const char *want2[] = {"enc.w", "b"};
    map_ok(&(tc_keyops){.strip = true}, compiled, 2, want2, "_orig_mod.");
    /* one component, not all the shared ones */
    const char *deep[] = {"model.encoder.x", "model.encoder.y"};
    const char *want3[] = {"encoder.x", "encoder.y"};
    map_ok(&(tc_keyops){.strip = true}, deep, 2, want3, "model.");
}

Test(keys, whole_components_only)
{
    /* "mod" is shared as characters, not as a component */
    const char *in[] = {"model.a", "modules.b"};
    char buf[64];
    cr_assert(!tc_keys_shared_prefix(in, 2, buf, sizeof buf));
    map_fails(&(tc_keyops){.strip = true}, in, 2, "share no first component");
    const char *flat[] = {"weight", "bias"};
    cr_assert(!tc_keys_shared_prefix(flat, 2, buf, sizeof buf));
}

Test(keys, explicit_prefix)
{
    const char *in[] = {"_orig_mod.w", "b"};
    const char *want[] = {"w", "b"};
    map_ok(&(tc_keyops){.strip = true, .strip_prefix = "_orig_mod."}, in, 2, want, "_orig_mod.");
    /* a name that is the prefix itself keeps it */
    const char *self[] = {"module.", "module.w"};
    const char *want2[] = {"module.", "w"};
    map_ok(&(tc_keyops){.strip = true, .strip_prefix = "module."}, self, 2, want2, "module.");
}

Test(keys, order_choose_strip_rename_add)
{
    const char *in[] = {"module.enc.weight", "module.enc.bias", "module.bn.num_batches_tracked", "module.head.w"};
    const char *const rn[] = {"^enc\\.(.*)$=encoder.\\1"};
    const char *const drop[] = {"*tracked"};
    const char *const only[] = {"module.enc.*", "module.bn.*"};
    tc_keyops o = {.strip = true, .rename = rn, .nrename = 1, .drop = drop, .ndrop = 1, .only = only, .nonly = 2,
                   .add_prefix = "net."};
    const char *want[] = {"net.encoder.weight", "net.encoder.bias", NULL, NULL};
    map_ok(&o, in, 4, want, "module.");
}

Test(keys, rename_first_match_escapes)
{
    const char *in[] = {"a.a.a"};
    const char *const rn[] = {"a=b"};
    const char *want[] = {"b.a.a"};
    map_ok(&(tc_keyops){.rename = rn, .nrename = 1}, in, 1, want, NULL);
    const char *const eq[] = {"^a\\.=x\\=y\\\\"};
    const char *want2[] = {"x=y\\a.a"};
    map_ok(&(tc_keyops){.rename = eq, .nrename = 1}, in, 1, want2, NULL);
    const char *const bad[] = {"(=x"};
    map_fails(&(tc_keyops){.rename = bad, .nrename = 1}, in, 1, "--rename '(=x'");
    const char *const noeq[] = {"abc"};
    map_fails(&(tc_keyops){.rename = noeq, .nrename = 1}, in, 1, "REGEX=REPL");
}

Test(keys, refusals)
{
    const char *clash[] = {"module.w", "w"};
    map_fails(&(tc_keyops){.strip = true, .strip_prefix = "module."}, clash, 2,
              "'module.w' and 'w' would both be named 'w'");
    const char *in[] = {"x.weight", "x.bias"};
    const char *const rn[] = {".*="};
    map_fails(&(tc_keyops){.rename = rn, .nrename = 1}, in, 2, "'x.weight' would have no name left");
    const char *twice[] = {"x", "x"};
    map_fails(&(tc_keyops){0}, twice, 2, "'x' and 'x' would both be named 'x'");
}
