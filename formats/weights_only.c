/* What torch.load(weights_only=True) does with a file, per torch: torch
 * 1.13's and 2.x's torch/_weights_only_unpickler.py each read a fixed set of
 * opcodes (2.x's adds BINFLOAT, which 1.13's lacks: no Python float loads
 * there), the globals of their allowlists (verdict.c: which torch accepts
 * each), and these uses of them, which the graph shows:
 *
 *   NEWOBJ        1.13: of nn.Parameter only; 2.x: of an allowed class
 *   REDUCE        of an allowed global only (a call of anything else is refused)
 *   BUILD         on a Tensor, a Parameter or an OrderedDict (2.x: or an object of an allowed class)
 *   APPEND(S)     on a list only
 *   SETITEM(S)    1.13: on anything; 2.x: on a dict, OrderedDict or Counter only
 *   BINPERSID     a tuple whose first item is 'storage' (1.13 raises on an int; a tar's keys pass)
 *
 * and 2.x's admits the globals the user adds (add_safe_globals, which 1.13
 * does not have). A file that passes them loads; the first that fails is
 * what that torch refuses. */
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "map.h"
#include "torch_pickle.h"
#include "verdict.h"

/* 1.13's opcodes, from its _weights_only_unpickler.py; 2.x's are these and BINFLOAT */
static const uint8_t ops_113[] = {'a', 'e', 'h', 'J', 'K', 'M', 'Q', 'q', 'X', 'b', '}', ']', 0x8f, ')', 'c', 0x8a,
                                  'j', 'r', '(', 0x89, 0x88, 0x81, 'N', 0x80, 'R', 's', 'u', 'U', '.', 't', 0x85,
                                  0x86, 0x87};

static const struct opname {
    uint8_t op;
    const char *name;
} opnames[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"}, {'I', "INT"},
    {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"},
    {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
    {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"},
    {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"}, {'r', "LONG_BINPUT"},
    {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"},
    {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"},
    {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
    {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"},
    {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"},
};

static bool accepts_op(int torch, uint8_t op)
{
    if (torch == TC_TORCH_2 && op == 'G')
        return true;
    return memchr(ops_113, op, sizeof ops_113) != NULL;
}

static void op_text(tc_buf *b, uint8_t op)
{
    const char *name = "an unknown opcode";
    for (size_t i = 0; i < sizeof opnames / sizeof opnames[0]; i++)
        if (opnames[i].op == op)
            name = opnames[i].name;
    if (op >= 0x20 && op < 0x7f)
        tc_buf_printf(b, "%s (opcode %u '%c')", name, op, op);
    else
        tc_buf_printf(b, "%s (opcode %u)", name, op);
}

/* A global that torch's weights_only loader accepts: by its table, or added by the user (2.x only). */
static bool accepts_global(int torch, const char *name, bool admitted)
{
    tc_verdict v = tc_verdict_of(name);
    if (torch == TC_TORCH_2 && admitted)
        return true;
    return v.allowed && strstr(v.torch, tc_torch_names[torch]);
}

static bool global_is(const pk_obj *f, const char *mod, const char *name)
{
    return f && f->kind == PK_GLOBAL && !strcmp(f->s, mod) && !strcmp(f->name, name);
}

/* BUILD targets 1.13 takes: what its allowed functions return that is a Tensor, a Parameter or an OrderedDict */
static bool builds_113(const pk_obj *f)
{
    static const char *const rebuild[] = {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_parameter",
                                          "_rebuild_sparse_tensor", "_rebuild_meta_tensor_no_storage",
                                          "_rebuild_sparse_csr_tensor"};
    for (size_t i = 0; i < sizeof rebuild / sizeof rebuild[0]; i++)
        if (global_is(f, "torch._utils", rebuild[i]))
            return true;
    return global_is(f, "collections", "OrderedDict") || global_is(f, "torch.nn.parameter", "Parameter");
}

typedef struct judge {
    int torch;
    tc_map admitted; /* the names --safe-globals admitted (as add_safe_globals would) */
    tc_buf *why;     /* the first refusal, "" until one */
    tc_buf name;     /* the global being judged */
} judge;

/* Whether torch j->torch admits global f: 1.13 looks its name up as the
 * pickle writes it, 2.x after Python 2's names are mapped (fix_imports). */
static bool allowed(judge *j, const pk_obj *f)
{
    tc_buf_reset(&j->name);
    pk_global_qualname(f, j->torch == TC_TORCH_1_13, &j->name);
    const char *name = tc_buf_str(&j->name);
    /* out of memory: refused, and the refusal's text (built in j->why) says so */
    return !tc_buf_oom(&j->name) &&
           accepts_global(j->torch, name, tc_map_find(&j->admitted, name, tc_buf_len(&j->name)) != NULL);
}

static void node(void *ctx, pk_obj *o)
{
    judge *j = ctx;
    if (tc_buf_len(j->why))
        return;
    bool t113 = j->torch == TC_TORCH_1_13;
    char esc[300];
    if (o->kind == PK_GLOBAL && !allowed(j, o)) {
        tc_buf_reset(&j->name);
        pk_global_qualname(o, false, &j->name);
        tc_buf_printf(j->why, "the global %s, outside its allowlist", tc_esc(tc_buf_str(&j->name), esc, sizeof esc));
        return;
    }
    if (o->kind == PK_PERSID) {
        const pk_obj *pid = o->args;
        if (pid->kind == PK_TUPLE ? !(pid->n && pk_is_str(pid->items[0], "storage")) : pid->kind == PK_INT && t113)
            tc_buf_puts(j->why, "a persistent id that is not a storage's (it loads only storages)");
        return;
    }
    if (o->kind == PK_CALL) {
        const pk_obj *f = o->func;
        if (!f || f->kind != PK_GLOBAL) {
            tc_buf_puts(j->why, "a call of something no allowed global names");
            return;
        }
        if (o->newobj && t113 && !global_is(f, "torch.nn.parameter", "Parameter")) {
            tc_buf_printf(j->why, "NEWOBJ of %s.%s (it makes new objects of nn.Parameter only)", f->s, f->name);
            return;
        }
        if (o->state && !(t113 ? builds_113(f) : allowed(j, f))) {
            tc_buf_printf(j->why, "BUILD on what %s.%s returns (it builds Tensors, Parameters and OrderedDicts)",
                          f->s, f->name);
            return;
        }
        if (o->items_kind == PK_ITEMS_LIST) {
            tc_buf_printf(j->why, "APPENDS to what %s.%s returns (it appends to lists only)", f->s, f->name);
            return;
        }
        if (o->items_kind == PK_ITEMS_DICT && !t113 && !global_is(f, "collections", "OrderedDict") &&
            !global_is(f, "collections", "Counter")) {
            tc_buf_printf(j->why, "SETITEMS on what %s.%s returns (it sets items of dicts, OrderedDicts and Counters "
                          "only)", f->s, f->name);
            return;
        }
        return;
    }
    if (o->state && o->kind != PK_CALL)
        tc_buf_puts(j->why, "BUILD on a plain container");
}

/* The graph's every node judged as torch t's weights_only unpickler would, the globals admitted by name. */
static int judge_graph(tc_torch_graph *tg, int t, tc_buf *why, tc_diag *d)
{
    judge j = {t, {0}, why, TC_BUF_INIT(0)};
    int rc = 0;
    for (size_t i = 0; i < tc_ckpt_nglobals(tg->c); i++) {
        const tc_global *g = tc_ckpt_global(tg->c, i);
        if (g->admitted && tc_map_put(&j.admitted, g->name, strlen(g->name), 1, NULL) < 0) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    pk_graph_foreach(tg->g, node, &j);
    if (tc_buf_oom(&j.name))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
done:
    tc_map_free(&j.admitted);
    tc_buf_free(&j.name);
    return rc;
}

/* Whether torch t loads the file with weights_only=True, and why not (refused: a reason found before). */
static int judge_torch(tc_torch_graph *tg, int t, const char *refused, tc_diag *d)
{
    tc_buf why = TC_BUF_INIT(600);
    int rc;
    if (refused) {
        tc_buf_puts(&why, refused);
    } else {
        for (unsigned op = 0; op < 256 && !tc_buf_len(&why); op++)
            if ((tg->ops[op >> 3] >> (op & 7) & 1) && !accepts_op(t, (uint8_t)op)) {
                op_text(&why, (uint8_t)op);
                tc_buf_puts(&why, ", which its weights_only unpickler lacks");
            }
        if (!tc_buf_len(&why) && (rc = judge_graph(tg, t, &why, d)))
            goto done;
    }
    rc = tc_buf_oom(&why) ? tc_fail(d, TC_ERR_NOMEM, "out of memory")
                          : tc_ckpt_set_weights_only(tg->c, t, !tc_buf_len(&why), tc_buf_str(&why), d);
done:
    tc_buf_free(&why);
    return rc;
}

int tc_weights_only(tc_torch_graph *tg, const char *const refused[TC_NTORCH], tc_diag *d)
{
    int rc = 0;
    for (int t = 0; t < TC_NTORCH && !rc; t++)
        rc = judge_torch(tg, t, refused ? refused[t] : NULL, d);
    return rc;
}
