/* pk_read on raw bytes; whatever it accepts must survive pk_write and read
 * back. The first rewrite may change representation (sets, bytes and
 * bytearrays become the calls protocol 2 needs); from then on read+write must
 * be a fixed point: write(read(w)) == w for w = write(read(write(x))). */
#include <string.h>

#include "pickle.h"
#include "fuzz_common.h"

static const pk_limits lim = {.max_objects = 200000, .max_depth = 200, .max_memo = 200000};

typedef struct cnt {
    size_t nodes, globals;
} cnt;

static void count(void *ctx, pk_obj *o)
{
    cnt *c = ctx;
    c->nodes++;
    if (o->kind == PK_GLOBAL) {
        c->globals++;
        (void)pk_module_py3(o->s);
    }
    (void)pk_call_global(o);
}

/* A set, frozenset or bytes is written as a call on a tuple holding a list: three levels where
 * the reader saw one, so the rewrites are written and read back with room for that. */
#define REWRITE_DEPTH (lim.max_depth * 4 + 64)

static void write_read(pk_graph *g, pk_obj *root, uint32_t depth, uint8_t **out, size_t *len, int *rc)
{
    tc_diag d = {0};
    *rc = pk_write(g, root, depth, out, len, &d);
    if (!*rc)
        FZ_CHECK(*len >= 3 && (*out)[0] == 0x80 && (*out)[*len - 1] == '.', "writer output shape");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pk_graph *g = pk_graph_new(), *g2 = NULL, *g3 = NULL;
    uint8_t *w3 = NULL;
    size_t l3 = 0;
    uint8_t *w1 = NULL, *w2 = NULL;
    size_t l1 = 0, l2 = 0, used = 0;
    tc_diag d = {0};
    pk_obj *root = NULL;
    bool hit_end = false;
    pk_read_opts o = {.limits = lim, .what = "fuzz", .hit_end = &hit_end};
    if (!g)
        return 0;
    if (pk_read(g, data, size, &o, &root, &used, &d)) {
        FZ_CHECK(d.code && d.msg[0], "a failure says why");
        goto done;
    }
    FZ_CHECK(used <= size && used > 0 && data[used - 1] == '.', "used %zu of %zu", used, size);
    cnt c = {0};
    pk_graph_foreach(g, count, &c);
    FZ_CHECK(c.nodes == pk_graph_count(g), "foreach saw %zu of %llu nodes", c.nodes,
             (unsigned long long)pk_graph_count(g));

    int rc;
    write_read(g, root, lim.max_depth + 16, &w1, &l1, &rc);
    if (rc)
        goto done; /* cycles through tuples, NEWOBJ_EX, too deep: refused, fine */
    g2 = pk_graph_new();
    pk_obj *r2 = NULL;
    tc_diag d2 = {0};
    pk_read_opts o2 = {.limits = {lim.max_objects * 8, REWRITE_DEPTH, lim.max_objects * 8}, .what = "rewritten"};
    FZ_CHECK(g2 && !pk_read(g2, w1, l1, &o2, &r2, &used, &d2), "rewritten pickle must read back: %s", d2.msg);
    FZ_CHECK(used == l1, "rewritten pickle ends at its STOP");
    write_read(g2, r2, REWRITE_DEPTH, &w2, &l2, &rc);
    FZ_CHECK(!rc, "re-read pickle must write again");
    g3 = pk_graph_new();
    pk_obj *r3 = NULL;
    FZ_CHECK(g3 && !pk_read(g3, w2, l2, &o2, &r3, &used, &d2), "second rewrite must read back: %s", d2.msg);
    write_read(g3, r3, REWRITE_DEPTH, &w3, &l3, &rc);
    FZ_CHECK(!rc, "second rewrite must write again");
    FZ_CHECK(l2 == l3 && !memcmp(w2, w3, l2), "rewriting is a fixed point (%zu vs %zu bytes)", l2, l3);
done:
    free(w1);
    free(w2);
    free(w3);
    pk_graph_free(g);
    pk_graph_free(g2);
    pk_graph_free(g3);
    return 0;
}
