/* Pickle reader, opcode by opcode, and its error paths. Inputs are built in
 * memory; obj_pN.pkl come from CPython's pickler (gen_fixtures.py). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pickle.h"
#include "zip.h"
#include "unit_util.h"

#define PK(s) (const uint8_t *)(s), sizeof(s) - 1
#define BB(b, lit) bb_put((b), (lit), sizeof(lit) - 1)

static pk_graph *G;

static void setup(void) { G = pk_graph_new(); }
static void teardown(void) { pk_graph_free(G); }

TestSuite(pickle_read, .init = setup, .fini = teardown);

static pk_obj *ok(const uint8_t *p, size_t n)
{
    tc_diag d = {0};
    pk_obj *root = NULL;
    int rc = read_pk(G, p, n, NULL, &root, &d);
    cr_assert_eq(rc, 0, "pickle rejected: %s", d.msg);
    cr_assert_not_null(root);
    return root;
}

/* The read fails with code and a one-line message containing frag. */
static void bad_lim(const uint8_t *p, size_t n, const pk_limits *lim, int code, const char *frag)
{
    pk_graph *g = pk_graph_new();
    tc_diag d = {0};
    pk_obj *root = NULL;
    int rc = read_pk(g, p, n, lim, &root, &d);
    cr_assert_neq(rc, 0, "accepted a bad pickle (expected '%s')", frag);
    cr_assert_eq(rc, d.code);
    if (code)
        cr_assert_eq(rc, code, "code %d, expected %d (%s)", rc, code, d.msg);
    cr_assert(strstr(d.msg, frag), "message '%s' lacks '%s'", d.msg, frag);
    cr_assert_null(strchr(d.msg, '\n'), "message spans lines: %s", d.msg);
    pk_graph_free(g);
}

static void bad(const uint8_t *p, size_t n, int code, const char *frag) { bad_lim(p, n, NULL, code, frag); }

static void is_int(const pk_obj *o, int64_t v)
{
    cr_assert_eq(o->kind, PK_INT, "kind %d, expected an int", o->kind);
    cr_assert_eq(o->i, v, "int %lld, expected %lld", (long long)o->i, (long long)v);
}

static void is_str(const pk_obj *o, int kind, const char *s, size_t len)
{
    cr_assert_eq(o->kind, kind, "kind %d, expected %d", o->kind, kind);
    cr_assert_eq(o->len, len, "length %zu, expected %zu", o->len, len);
    cr_assert(!memcmp(o->s, s, len), "wrong bytes");
    cr_assert_eq(o->s[len], 0, "not NUL-terminated");
}

static void canon_is(const pk_obj *o, const char *want)
{
    char *c = canon(G, (pk_obj *)o);
    cr_assert_str_eq(c, want);
    free(c);
}

/* ---- framing opcodes ------------------------------------------------------ */

Test(pickle_read, proto_and_stop)
{
    cr_assert_eq(ok(PK("\x80\x02N."))->kind, PK_NONE);
    cr_assert_eq(ok(PK("\x80\x00N."))->kind, PK_NONE);
    cr_assert_eq(ok(PK("\x80\x05N."))->kind, PK_NONE);
    bad(PK("\x80\x06N."), TC_ERR_UNSUPPORTED, "newer than 5");
    bad(PK("\x80"), TC_ERR_FORMAT, "truncated");
    /* STOP ends the read; what follows is not consumed */
    tc_diag d = {0};
    pk_obj *r;
    size_t used = 0;
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT};
    cr_assert_eq(pk_read(G, PK("K\x07.garbage"), &o, &r, &used, &d), 0);
    cr_assert_eq(used, 3);
    is_int(r, 7);
    /* STOP returns the top of the stack; CPython ignores what is below it
     * and any MARK left open (pickle.loads(b'NK\x07.') == 7) */
    bad(PK("."), TC_ERR_FORMAT, "stack underflow");
    is_int(ok(PK("NK\x07.")), 7);
    cr_assert_eq(ok(PK("(N."))->kind, PK_NONE);
    cr_assert_eq(ok(PK("N(N."))->kind, PK_NONE);
    /* ...but not past the top MARK: "unexpected MARK found" */
    bad(PK("(."), TC_ERR_FORMAT, "unexpected MARK found");
    bad(PK("N(."), TC_ERR_FORMAT, "unexpected MARK found");
    bad(PK(""), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, frame)
{
    is_int(ok(PK("\x80\x04\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x05.")), 5);
    /* two frames; the length is advisory */
    is_int(ok(PK("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x05\x95\x01\x00\x00\x00\x00\x00\x00\x00"
                 "0\x95\x03\x00\x00\x00\x00\x00\x00\x00K\x06.")),
           6);
    bad(PK("\x80\x04\x95\x03\x00\x00"), TC_ERR_FORMAT, "truncated");
    /* CPython reads the whole frame before going on: one longer than the rest fails */
    bad(PK("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N."), TC_ERR_FORMAT, "truncated");
}

/* torch.load unpickles from a file object: a read that does not fit in what is
 * left of a FRAME is served from after the frame, skipping the rest (here the
 * '-' of "-1", so torch.load stores at memo 1 where pickle.loads raises
 * "negative PUT argument"). Two readings: refused. */
Test(pickle_read, read_across_frame_end)
{
    bad(PK("\x80\x04K\x01\x95\x02\x00\x00\x00\x00\x00\x00\x00p-1\n."), TC_ERR_UNSUPPORTED,
        "crosses the end of a FRAME");
    bad(PK("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00J\x01\x00\x00\x00."), TC_ERR_UNSUPPORTED,
        "crosses the end of a FRAME");
    /* a read that starts where the frame ends comes from the file: one reading */
    is_int(ok(PK("\x80\x04\x95\x01\x00\x00\x00\x00\x00\x00\x00J\x01\x00\x00\x00.")), 1);
    /* frames inside a frame are read from the outer one's buffer */
    is_int(ok(PK("\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x95\x01\x00\x00\x00\x00\x00\x00\x00K\x05.")), 5);
    /* a frame too short for its opcodes is harmless when reads end at its end */
    is_int(ok(PK("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x05\x95\x01\x00\x00\x00\x00\x00\x00\x00.")), 5);
}

Test(pickle_read, mark_tuple)
{
    pk_obj *t = ok(PK("(K\x01K\x02K\x03K\x04t."));
    cr_assert_eq(t->kind, PK_TUPLE);
    cr_assert_eq(t->n, 4);
    for (int i = 0; i < 4; i++)
        is_int(t->items[i], i + 1);
    t = ok(PK("(t."));
    cr_assert_eq(t->kind, PK_TUPLE);
    cr_assert_eq(t->n, 0);
    /* marks nest */
    canon_is(ok(PK("(K\x01(K\x02tK\x03t.")), "(i:0x1,(i:0x2),i:0x3)");
}

Test(pickle_read, pop)
{
    is_int(ok(PK("K\x01K\x02" "0.")), 1);
    /* POP with a MARK on top removes the MARK, as CPython does */
    is_int(ok(PK("K\x01(0.")), 1);
    bad(PK("0."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, pop_mark)
{
    is_int(ok(PK("K\x01(K\x02K\x03" "1.")), 1);
    is_int(ok(PK("K\x01(1.")), 1);
    bad(PK("K\x01" "1."), TC_ERR_FORMAT, "no MARK");
}

Test(pickle_read, dup)
{
    pk_obj *t = ok(PK("]2\x86."));
    cr_assert_eq(t->kind, PK_TUPLE);
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->items[0], t->items[1], "DUP must share the object");
    cr_assert_eq(t->items[0]->kind, PK_LIST);
    bad(PK("2."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("K\x01(2."), TC_ERR_FORMAT, "stack underflow");
}

/* ---- numbers ---------------------------------------------------------------- */

Test(pickle_read, float_text)
{
    pk_obj *o = ok(PK("F1.5\n."));
    cr_assert_eq(o->kind, PK_FLOAT);
    cr_assert_eq(o->f, 1.5);
    canon_is(ok(PK("F-0.0\n.")), "f:8000000000000000");
    canon_is(ok(PK("Finf\n.")), "f:7ff0000000000000");
    canon_is(ok(PK("F-inf\n.")), "f:fff0000000000000");
    canon_is(ok(PK("Fnan\n.")), "f:7ff8000000000000");
    canon_is(ok(PK("F5e-324\n.")), "f:0000000000000001");
    canon_is(ok(PK("F1e308\n.")), "f:7fe1ccf385ebc8a0");
    bad(PK("F1.5x\n."), TC_ERR_FORMAT, "bad FLOAT text '1.5x'");
    bad(PK("F\n."), TC_ERR_FORMAT, "empty text argument");
    bad(PK("F1.5"), TC_ERR_FORMAT, "newline");
}

Test(pickle_read, binfloat)
{
    pk_obj *o = ok(PK("G\x3f\xf8\x00\x00\x00\x00\x00\x00."));
    cr_assert_eq(o->kind, PK_FLOAT);
    cr_assert_eq(o->f, 1.5);
    canon_is(ok(PK("G\x80\x00\x00\x00\x00\x00\x00\x00.")), "f:8000000000000000");
    /* a NaN keeps its payload bits */
    canon_is(ok(PK("G\x7f\xf4\x00\x00\x00\x00\x12\x34.")), "f:7ff4000000001234");
    bad(PK("G\x3f\xf8\x00."), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, int_text)
{
    is_int(ok(PK("I42\n.")), 42);
    is_int(ok(PK("I-7\n.")), -7);
    is_int(ok(PK("I0\n.")), 0);
    is_int(ok(PK("I9223372036854775807\n.")), INT64_MAX);
    is_int(ok(PK("I-9223372036854775808\n.")), INT64_MIN);
    pk_obj *o = ok(PK("I00\n."));
    cr_assert_eq(o->kind, PK_BOOL);
    cr_assert_eq(o->i, 0);
    o = ok(PK("I01\n."));
    cr_assert_eq(o->kind, PK_BOOL);
    cr_assert_eq(o->i, 1);
    canon_is(ok(PK("I99999999999999999999\n.")), "i:0x56bc75e2d630fffff");
    canon_is(ok(PK("I-9223372036854775809\n.")), "i:-0x8000000000000001");
    bad(PK("I4x2\n."), TC_ERR_FORMAT, "invalid literal for int()");
    bad(PK("I\n."), TC_ERR_FORMAT, "empty text argument");
    bad(PK("I42"), TC_ERR_FORMAT, "newline");
}

Test(pickle_read, binint)
{
    is_int(ok(PK("J\xff\xff\xff\xff.")), -1);
    is_int(ok(PK("J\x00\x00\x00\x80.")), INT32_MIN);
    is_int(ok(PK("J\xff\xff\xff\x7f.")), INT32_MAX);
    is_int(ok(PK("K\xff.")), 255);
    is_int(ok(PK("K\x00.")), 0);
    is_int(ok(PK("M\xff\xff.")), 65535);
    is_int(ok(PK("M\x00\x01.")), 256);
    bad(PK("J\x01\x02\x03"), TC_ERR_FORMAT, "truncated");
    bad(PK("K"), TC_ERR_FORMAT, "truncated");
    bad(PK("M\x01"), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, long_text)
{
    is_int(ok(PK("L123L\n.")), 123);
    is_int(ok(PK("L-5\n.")), -5);
    canon_is(ok(PK("L123456789012345678901234567890L\n.")), "i:0x18ee90ff6c373e0ee4e3f0ad2");
    canon_is(ok(PK("L-123456789012345678901234567890L\n.")), "i:-0x18ee90ff6c373e0ee4e3f0ad2");
    canon_is(ok(PK("L-1180591620717411303424L\n.")), "i:-0x400000000000000000");
    canon_is(ok(PK("L18446744073709551616L\n.")), "i:0x10000000000000000");
    bad(PK("L12a4L\n."), TC_ERR_FORMAT, "invalid literal for int()");
    /* Python 3.11 converts at most 4300 decimal digits (int_max_str_digits),
     * older Pythons any number: read as they read it, and said */
    bbuf b = {0};
    bb_u8(&b, 'L');
    for (int i = 0; i < 4301; i++)
        bb_u8(&b, i ? '0' : '1');
    BB(&b, "\n.");
    uint64_t digits = 0;
    pk_graph *g = pk_graph_new();
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = "t", .long_digits = &digits};
    pk_obj *v;
    tc_diag d = {0};
    cr_assert_eq(pk_read(g, b.p, b.n, &o, &v, NULL, &d), 0, "%s", d.msg);
    cr_assert_eq(v->kind, PK_BIGINT);
    cr_assert_eq(v->len, 1786, "10**4300 takes 1786 bytes, got %zu", v->len);
    cr_assert_eq(digits, 4301);
    pk_graph_free(g);
    bb_free(&b);
    /* past 100000 digits (or 1 MiB of them in all) tensorctl stops, and says that older Pythons read on */
    bb_u8(&b, 'L');
    for (int i = 0; i < 100001; i++)
        bb_u8(&b, '7');
    BB(&b, "\n.");
    bad(b.p, b.n, TC_ERR_UNSAFE, "Pythons before 3.10.7 (3.9.14, 3.8.14, 3.7.14) read on");
    bb_free(&b);
    for (int k = 0; k < 11; k++) {
        bb_u8(&b, 'L');
        for (int i = 0; i < 99999; i++)
            bb_u8(&b, '7');
        BB(&b, "\n0");
    }
    BB(&b, "N.");
    bad(b.p, b.n, TC_ERR_UNSAFE, "past what tensorctl reads in all");
    bb_free(&b);
}

Test(pickle_read, long1_long4)
{
    is_int(ok(PK("\x8a\x00.")), 0);
    is_int(ok(PK("\x8a\x01\xff.")), -1);
    is_int(ok(PK("\x8a\x01\x7f.")), 127);
    is_int(ok(PK("\x8a\x02\x00\x80.")), -32768);
    is_int(ok(PK("\x8a\x02\xff\x00.")), 255);
    is_int(ok(PK("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80.")), INT64_MIN);
    is_int(ok(PK("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f.")), INT64_MAX);
    /* more than 8 bytes: kept as two's complement bytes */
    pk_obj *o = ok(PK("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."));
    cr_assert_eq(o->kind, PK_BIGINT);
    cr_assert_eq(o->len, 9);
    canon_is(o, "i:0x10000000000000000");
    canon_is(ok(PK("\x8a\x0a\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a.")), "i:0xa090807060504030201");
    canon_is(ok(PK("\x8b\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80.")),
             "i:-0x80000000000000000000");
    canon_is(ok(PK("\x8b\x09\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe.")), "i:-0x10000000000000001");
    is_int(ok(PK("\x8b\x01\x00\x00\x00\xfe.")), -2);
    bad(PK("\x8a\x05\x01\x02."), TC_ERR_FORMAT, "past the end");
    bad(PK("\x8b\xff\xff\xff\xff\x01."), TC_ERR_FORMAT, "negative byte count");
    /* redundant sign bytes: the value decides the kind, not the length */
    is_int(ok(PK("\x8a\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00.")), 1);
    is_int(ok(PK("\x8b\x0a\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff\xff\xff.")), -2);
    bad(PK("\x8b\x01\x00"), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, none_true_false)
{
    cr_assert_eq(ok(PK("N."))->kind, PK_NONE);
    pk_obj *t = ok(PK("\x88\x89\x86."));
    cr_assert_eq(t->items[0]->kind, PK_BOOL);
    cr_assert_eq(t->items[0]->i, 1);
    cr_assert_eq(t->items[1]->kind, PK_BOOL);
    cr_assert_eq(t->items[1]->i, 0);
}

/* ---- strings ------------------------------------------------------------------ */

Test(pickle_read, string_text)
{
    is_str(ok(PK("S'abc'\n.")), PK_STR, "abc", 3);
    is_str(ok(PK("S\"abc\"\n.")), PK_STR, "abc", 3);
    is_str(ok(PK("S''\n.")), PK_STR, "", 0);
    is_str(ok(PK("S'a\\nb\\t\\x41\\\\\\'z'\n.")), PK_STR, "a\nb\tA\\'z", 8);
    is_str(ok(PK("S'\\xc3\\xa9'\n.")), PK_STR, "\xc3\xa9", 2);
    bad(PK("Sabc\n."), TC_ERR_FORMAT, "not quoted");
    bad(PK("S'abc\"\n."), TC_ERR_FORMAT, "not quoted");
    bad(PK("S'\n."), TC_ERR_FORMAT, "not quoted");
}

Test(pickle_read, binstring)
{
    is_str(ok(PK("T\x03\x00\x00\x00" "abc.")), PK_STR, "abc", 3);
    is_str(ok(PK("U\x03" "a\x00" "c.")), PK_STR, "a\0c", 3);
    is_str(ok(PK("U\x00.")), PK_STR, "", 0);
    /* the length is unsigned (calc_binsize) */
    bad(PK("T\xff\xff\xff\xff."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("U\x05" "abc"), TC_ERR_FORMAT, "only 3 remain");
}

Test(pickle_read, unicode_raw_escape)
{
    is_str(ok(PK("Vabc\n.")), PK_STR, "abc", 3);
    is_str(ok(PK("Vh\\u00e9llo\n.")), PK_STR, "h\xc3\xa9llo", 6);
    is_str(ok(PK("V\\U0001f600!\n.")), PK_STR, "\xf0\x9f\x98\x80!", 5);
    /* other bytes are latin-1 code points */
    is_str(ok(PK("V\xe9\\x\n.")), PK_STR, "\xc3\xa9\\x", 4);
    /* as CPython writes a backslash and a newline */
    is_str(ok(PK("Va\\u005cb\\u000a\n.")), PK_STR, "a\\b\n", 4);
    /* a short escape is an error (UnicodeDecodeError: truncated \uXXXX escape) */
    bad(PK("V\\u12\n."), TC_ERR_FORMAT, "truncated \\uXXXX escape");
    is_str(ok(PK("V\n.")), PK_STR, "", 0);
}

Test(pickle_read, binunicode)
{
    is_str(ok(PK("X\x02\x00\x00\x00hi.")), PK_STR, "hi", 2);
    is_str(ok(PK("X\x00\x00\x00\x00.")), PK_STR, "", 0);
    is_str(ok(PK("\x8c\x03h\xc3\xa9.")), PK_STR, "h\xc3\xa9", 3);
    is_str(ok(PK("\x8d\x02\x00\x00\x00\x00\x00\x00\x00ok.")), PK_STR, "ok", 2);
    bad(PK("X\x05\x00\x00\x00hi."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x8c\x09hi."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x8d\x02\x00\x00"), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, binbytes)
{
    is_str(ok(PK("B\x02\x00\x00\x00\x00\xff.")), PK_BYTES, "\x00\xff", 2);
    is_str(ok(PK("C\x01\x07.")), PK_BYTES, "\x07", 1);
    is_str(ok(PK("C\x00.")), PK_BYTES, "", 0);
    is_str(ok(PK("\x8e\x03\x00\x00\x00\x00\x00\x00\x00xyz.")), PK_BYTES, "xyz", 3);
    is_str(ok(PK("\x96\x03\x00\x00\x00\x00\x00\x00\x00xyz.")), PK_BYTEARRAY, "xyz", 3);
    is_str(ok(PK("\x96\x00\x00\x00\x00\x00\x00\x00\x00.")), PK_BYTEARRAY, "", 0);
}

Test(pickle_read, huge_lengths_past_the_end)
{
    /* lengths far past the input are refused before any allocation */
    bad(PK("X\xff\xff\xff\xff" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("B\xff\xff\xff\x7f" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x8d\xff\xff\xff\xff\xff\xff\xff\xff" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x8e\x00\x00\x00\x00\x00\x00\x00\x80" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x96\xfe\xff\xff\xff\xff\xff\xff\xff" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("T\xff\xff\xff\x7f" "ab."), TC_ERR_FORMAT, "remain in the pickle");
    bad(PK("\x8b\xff\xff\xff\x7f" "ab."), TC_ERR_FORMAT, "past the end");
}

/* ---- containers ------------------------------------------------------------------- */

Test(pickle_read, list_append)
{
    canon_is(ok(PK("]K\x01" "a.")), "#1=[i:0x1]");
    canon_is(ok(PK("](K\x01K\x02" "e.")), "#1=[i:0x1,i:0x2]");
    canon_is(ok(PK("](e.")), "#1=[]");
    canon_is(ok(PK("(K\x01K\x02l.")), "#1=[i:0x1,i:0x2]");
    canon_is(ok(PK("(l.")), "#1=[]");
    canon_is(ok(PK("]K\x01" "a(K\x02K\x03" "eK\x04" "a.")), "#1=[i:0x1,i:0x2,i:0x3,i:0x4]");
    bad(PK(")K\x01" "a."), TC_ERR_FORMAT, "'tuple' object has no attribute 'extend'");
    bad(PK("}(K\x01" "e."), TC_ERR_FORMAT, "'dict' object has no attribute 'extend'");
    bad(PK("K\x01" "a."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("(K\x01" "e."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("](K\x01(K\x02" "e."), TC_ERR_FORMAT, "'int' object has no attribute 'extend'");
}

Test(pickle_read, append_to_call_result)
{
    pk_obj *o = ok(PK("cmod\nMyList\n)R(K\x01K\x02" "eK\x03" "a."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert_eq(o->items_kind, PK_ITEMS_LIST);
    cr_assert_eq(o->n, 3);
    is_int(o->items[2], 3);
    bad(PK("cmod\nX\n)R(K\x01K\x02u(K\x03" "e."), TC_ERR_UNSUPPORTED, "both list and dict items");
}

Test(pickle_read, dict_setitem)
{
    canon_is(ok(PK("}K\x01K\x02s.")), "#1={i:0x1:i:0x2}");
    canon_is(ok(PK("}(K\x01K\x02K\x03K\x04u.")), "#1={i:0x1:i:0x2,i:0x3:i:0x4}");
    canon_is(ok(PK("(K\x01K\x02" "d.")), "#1={i:0x1:i:0x2}");
    canon_is(ok(PK("(d.")), "#1={}");
    canon_is(ok(PK("}.")), "#1={}");
    bad(PK("(K\x01" "d."), TC_ERR_FORMAT, "odd number of items for DICT");
    bad(PK("}(K\x01u."), TC_ERR_FORMAT, "odd number of items for SETITEMS");
    bad(PK("]K\x01K\x02s."), TC_ERR_FORMAT, "list assignment index out of range");
    bad(PK(")K\x01K\x02s."), TC_ERR_FORMAT, "'tuple' object does not support item assignment");
    bad(PK("}K\x01s."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, ordered_dict_reduce_setitems)
{
    pk_obj *o = ok(PK("\x80\x02\x63\x63ollections\nOrderedDict\nq\x00)Rq\x01(X\x01\x00\x00\x00" "aK\x01X\x01\x00\x00\x00" "bK\x02u."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert(pk_is_global(o->func, "collections", "OrderedDict"));
    cr_assert_eq(o->newobj, 0);
    cr_assert_eq(o->items_kind, PK_ITEMS_DICT);
    cr_assert_eq(o->n, 4);
    canon_is(o, "#1=C0(G:collections.OrderedDict;();;{s:61:i:0x1,s:62:i:0x2})");
}

Test(pickle_read, tuples)
{
    cr_assert_eq(ok(PK(")."))->n, 0);
    canon_is(ok(PK("K\x01\x85.")), "(i:0x1)");
    canon_is(ok(PK("K\x01K\x02\x86.")), "(i:0x1,i:0x2)");
    canon_is(ok(PK("K\x01K\x02K\x03\x87.")), "(i:0x1,i:0x2,i:0x3)");
    bad(PK("K\x01\x86."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("\x85."), TC_ERR_FORMAT, "stack underflow");
    /* TUPLEn cannot reach below a MARK */
    bad(PK("K\x01(K\x02\x86."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("K\x01t."), TC_ERR_FORMAT, "no MARK");
}

Test(pickle_read, sets)
{
    pk_obj *o = ok(PK("\x8f."));
    cr_assert_eq(o->kind, PK_SET);
    cr_assert_eq(o->n, 0);
    canon_is(ok(PK("\x8f(K\x01K\x02\x90.")), "set[i:0x1,i:0x2]");
    canon_is(ok(PK("\x8f(K\x01\x90(K\x02\x90.")), "set[i:0x1,i:0x2]");
    o = ok(PK("(K\x01K\x02\x91."));
    cr_assert_eq(o->kind, PK_FROZENSET);
    canon_is(o, "fset[i:0x1,i:0x2]");
    canon_is(ok(PK("(\x91.")), "fset[]");
    bad(PK("(K\x01\x90."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("K\x01\x91."), TC_ERR_FORMAT, "no MARK");
}

/* ---- memo ----------------------------------------------------------------------- */

Test(pickle_read, put_get_text)
{
    is_int(ok(PK("K\x07p0\n0g0\n.")), 7);
    pk_obj *t = ok(PK("]p12\ng12\n\x86."));
    cr_assert_eq(t->items[0], t->items[1]);
    bad(PK("K\x07p-1\n."), TC_ERR_FORMAT, "negative PUT argument");
    bad(PK("K\x07px\n."), TC_ERR_FORMAT, "bad memo index 'x'");
    bad(PK("K\x07p99999999999999999999999\n."), TC_ERR_FORMAT, "does not fit a Py_ssize_t");
    bad(PK("g3\n."), TC_ERR_FORMAT, "never set");
    bad(PK("g-3\n."), TC_ERR_FORMAT, "memo slot -3 read but never set");
    /* int(text, 10): spaces, a sign, underscores and leading zeros pass */
    is_int(ok(PK("K\x07p 1_0 \ng+010\n.")), 7);
    bad(PK("p0\n."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, binput_binget)
{
    is_int(ok(PK("K\x07q\x00" "0h\x00.")), 7);
    pk_obj *t = ok(PK("]q\xffh\xff\x86."));
    cr_assert_eq(t->items[0], t->items[1]);
    is_int(ok(PK("K\x07r\x05\x01\x00\x00" "0j\x05\x01\x00\x00.")), 7);
    /* a slot can be overwritten */
    is_int(ok(PK("K\x01q\x00" "0K\x02q\x00" "0h\x00.")), 2);
    bad(PK("h\x05."), TC_ERR_FORMAT, "never set");
    bad(PK("K\x01q\x01h\x00."), TC_ERR_FORMAT, "memo slot 0 read but never set");
    bad(PK("j\x00\x00\x01\x00."), TC_ERR_FORMAT, "never set");
    bad(PK("j\xff\xff\xff\xff."), TC_ERR_FORMAT, "never set");
    bad(PK("h"), TC_ERR_FORMAT, "truncated");
    bad(PK("K\x01r\x01\x00"), TC_ERR_FORMAT, "truncated");
}

Test(pickle_read, memoize)
{
    is_int(ok(PK("\x80\x04K\x07\x94" "0h\x00.")), 7);
    canon_is(ok(PK("\x80\x04K\x07\x94" "0K\x08\x94" "0(h\x00h\x01t.")), "(i:0x7,i:0x8)");
    /* MEMOIZE uses the next slot after BINPUTs too */
    canon_is(ok(PK("\x80\x04K\x07q\x00" "0K\x08\x94" "0(h\x00h\x01t.")), "(i:0x7,i:0x8)");
    bad(PK("\x80\x04\x94."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, huge_memo_index)
{
    bad(PK("K\x01r\xff\xff\xff\x7f."), TC_ERR_LIMIT, "memo index");
    bad(PK("K\x01r\xff\xff\xff\xff."), TC_ERR_LIMIT, "memo index");
    bad(PK("K\x01p4000000000\n."), TC_ERR_LIMIT, "memo index");
    pk_limits lim = PK_LIMITS_DEFAULT;
    lim.max_memo = 10;
    bad_lim(PK("K\x01q\x0a."), &lim, TC_ERR_LIMIT, "--max-objects");
}

Test(pickle_read, self_reference)
{
    pk_obj *l = ok(PK("]q\x00h\x00" "a."));
    cr_assert_eq(l->kind, PK_LIST);
    cr_assert_eq(l->n, 1);
    cr_assert_eq(l->items[0], l);
    canon_is(l, "#1=[#1#]");
    pk_obj *d = ok(PK("}q\x00K\x01h\x00s."));
    cr_assert_eq(d->items[1], d);
}

/* ---- globals and calls ------------------------------------------------------------ */

Test(pickle_read, global)
{
    pk_obj *o = ok(PK("cos\nsystem\n."));
    cr_assert_eq(o->kind, PK_GLOBAL);
    cr_assert_str_eq(o->s, "os");
    cr_assert_str_eq(o->name, "system");
    o = ok(PK("c__builtin__\nset\n."));
    cr_assert(pk_is_global(o, "builtins", "set"));
    bad(PK("cos\nsys"), TC_ERR_FORMAT, "newline");
    bad(PK("cos\x00x\nsystem\n."), TC_ERR_UNSUPPORTED, "NUL");
    /* long names are names (CPython has no limit) */
    bbuf b = {0};
    bb_u8(&b, 'c');
    for (int i = 0; i < 600; i++)
        bb_u8(&b, 'm');
    BB(&b, "\nx\n.");
    o = ok(b.p, b.n);
    cr_assert_eq(strlen(o->s), 600);
    bb_free(&b);
}

Test(pickle_read, stack_global)
{
    pk_obj *o = ok(PK("\x80\x04\x8c\x05torch\x94\x8c\x04Size\x94\x93."));
    cr_assert(pk_is_global(o, "torch", "Size"));
    bad(PK("\x8c\x05torchK\x01\x93."), TC_ERR_FORMAT, "STACK_GLOBAL requires str");
    bad(PK("\x8c\x05torch\x93."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("\x8c\x03" "a\x00" "b\x8c\x01" "c\x93."), TC_ERR_UNSUPPORTED, "NUL");
}

Test(pickle_read, reduce)
{
    pk_obj *o = ok(PK("c__builtin__\nlist\n)R."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert_eq(o->newobj, 0);
    cr_assert(pk_is_global(o->func, "builtins", "list"));
    cr_assert_eq(o->args->kind, PK_TUPLE);
    cr_assert_eq(pk_call_global(o), o->func);
    bad(PK(")R."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("cm\nf\n()R."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, build)
{
    pk_obj *o = ok(PK("cmod\nC\n)\x81}(X\x01\x00\x00\x00" "aK\x01ub."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert_eq(o->newobj, 1);
    cr_assert_not_null(o->state);
    canon_is(o, "#1=C1(G:mod.C;();#2={s:61:i:0x1};)");
    bad(PK("]}b."), TC_ERR_FORMAT, "'list' object has no attribute '__dict__'");
    bad(PK("cmod\nC\n)\x81}b}b."), TC_ERR_UNSUPPORTED, "BUILD applied twice");
    bad(PK("}b."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, newobj_newobj_ex)
{
    pk_obj *o = ok(PK("cmod\nC\nK\x01\x85\x81."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert_eq(o->newobj, 1);
    canon_is(o, "#1=C1(G:mod.C;(i:0x1);;)");
    o = ok(PK("cmod\nC\n)}(X\x01\x00\x00\x00kK\x02u\x92."));
    cr_assert_eq(o->newobj, 1);
    cr_assert_not_null(o->kwargs);
    canon_is(o, "#1=C1(G:mod.C;();;;#2={s:6b:i:0x2})");
    bad(PK(")}\x92."), TC_ERR_FORMAT, "stack underflow");
}

Test(pickle_read, inst_obj)
{
    pk_obj *o = ok(PK("(K\x01K\x02imod\ncls\n."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert(pk_is_global(o->func, "mod", "cls"));
    canon_is(o->args, "(i:0x1,i:0x2)");
    o = ok(PK("(cmod\ncls\nK\x01o."));
    cr_assert_eq(o->kind, PK_CALL);
    cr_assert(pk_is_global(o->func, "mod", "cls"));
    canon_is(o->args, "(i:0x1)");
    bad(PK("(o."), TC_ERR_FORMAT, "OBJ without a class");
    bad(PK("imod\ncls\n."), TC_ERR_FORMAT, "no MARK");
}

/* copyreg's extension registry is empty in a fresh interpreter: CPython
 * raises "unregistered extension code" for every code (and "EXT specifies
 * code <= 0" for 0 and, with EXT4, negative ones). */
Test(pickle_read, ext)
{
    bad(PK("\x82\x05."), TC_ERR_UNSUPPORTED, "EXT1 code 5: the extension registry is empty");
    bad(PK("\x83\x05\x01."), TC_ERR_UNSUPPORTED, "EXT2 code 261");
    bad(PK("\x84\x01\x00\x00\x00."), TC_ERR_UNSUPPORTED, "EXT4 code 1");
    bad(PK("\x82\x00."), TC_ERR_FORMAT, "code <= 0");
    bad(PK("\x84\x01\x00\x00\x80."), TC_ERR_FORMAT, "code <= 0");
    bad(PK("\x84\x01\x00"), TC_ERR_FORMAT, "truncated");
}

static int persid_calls;
static pk_obj *persid_seen[4];

static int on_persid(void *ctx, pk_obj *p, tc_diag *d)
{
    (void)d;
    cr_assert_eq(ctx, &persid_calls);
    if (persid_calls < 4)
        persid_seen[persid_calls] = p;
    persid_calls++;
    return 0;
}

static int refuse_persid(void *ctx, pk_obj *p, tc_diag *d)
{
    (void)ctx;
    (void)p;
    return tc_fail(d, TC_ERR_FORMAT, "persid refused by callback");
}

Test(pickle_read, persid)
{
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .on_persid = on_persid, .ctx = &persid_calls};
    tc_diag d = {0};
    pk_obj *r;
    size_t used;
    persid_calls = 0;
    int rc = pk_read(G, PK("Pkey1\nX\x07\x00\x00\x00storageK\x01\x86Q\x86."), &o, &r, &used, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    cr_assert_eq(persid_calls, 2);
    cr_assert_eq(persid_seen[0]->kind, PK_PERSID);
    is_str(persid_seen[0]->args, PK_STR, "key1", 4);
    canon_is(persid_seen[1]->args, "(s:73746f72616765,i:0x1)");
    cr_assert_eq(r->items[0], persid_seen[0]);
    cr_assert_eq(r->items[1], persid_seen[1]);
    /* no callback: persistent ids still become nodes */
    canon_is(ok(PK("K\x05Q.")), "P(i:0x5)");
    /* the callback's failure is the read's failure */
    o.on_persid = refuse_persid;
    tc_diag d2 = {0};
    cr_assert_neq(pk_read(G, PK("K\x05Q."), &o, &r, &used, &d2), 0);
    cr_assert(strstr(d2.msg, "refused by callback"));
    bad(PK("Q."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("Pabc"), TC_ERR_FORMAT, "newline");
}

Test(pickle_read, out_of_band_buffers_rejected)
{
    bad(PK("\x80\x05\x97."), TC_ERR_UNSUPPORTED, "out-of-band");
    /* READONLY_BUFFER: memoryview(bytes) is the bytes themselves; a bytearray
     * would become a memoryview, which the graph has no kind for */
    bad(PK("\x80\x05\x96\x01\x00\x00\x00\x00\x00\x00\x00x\x98."), TC_ERR_UNSUPPORTED,
        "READONLY_BUFFER on a bytearray");
    is_str(ok(PK("\x80\x05\x43\x01x\x98.")), PK_BYTES, "x", 1);
    bad(PK("\x80\x05K\x01\x98."), TC_ERR_FORMAT, "a bytes-like object is required");
}

Test(pickle_read, unknown_opcodes)
{
    static const uint8_t unknown[] = {0x00, 0x01, 'z', 'A', 'D', 'E', 'H', 0x7f, 0x99, 0xa0, 0xfe, 0xff};
    for (size_t i = 0; i < sizeof unknown; i++) {
        uint8_t p[3] = {unknown[i], 'N', '.'};
        bad(p, sizeof p, TC_ERR_FORMAT, "unknown opcode");
    }
    /* the message names the offset and the opcode */
    bad(PK("\x80\x02K\x01\xee."), TC_ERR_FORMAT, "offset 0x4 (opcode 0xee)");
}

Test(pickle_read, message_names_record_and_offset)
{
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = "data.pkl", .base_offset = 0x100};
    tc_diag d = {0};
    pk_obj *r;
    size_t used;
    cr_assert_neq(pk_read(G, PK("\x80\x02h\x29."), &o, &r, &used, &d), 0);
    cr_assert(strstr(d.msg, "data.pkl offset 0x102"), "%s", d.msg);
    cr_assert(strstr(d.msg, "memo slot 41 read but never set"), "%s", d.msg);
}

/* ---- CPython 3.11's answers, one rule each (pickle.loads / torch.load) --------------- */

static pk_obj *ok_py2(const uint8_t *p, size_t n, uint8_t mode)
{
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = "test.pkl", .py2_strings = mode};
    tc_diag d = {0};
    pk_obj *r = NULL;
    size_t used;
    cr_assert_eq(pk_read(G, p, n, &o, &r, &used, &d), 0, "rejected: %s", d.msg);
    return r;
}

static void bad_py2(const uint8_t *p, size_t n, uint8_t mode, const char *frag)
{
    pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = "test.pkl", .py2_strings = mode};
    tc_diag d = {0};
    pk_obj *r = NULL;
    size_t used;
    cr_assert_neq(pk_read(G, p, n, &o, &r, &used, &d), 0, "accepted (expected '%s')", frag);
    cr_assert(strstr(d.msg, frag), "message '%s' lacks '%s'", d.msg, frag);
}

static void is_bool(const pk_obj *o, bool v)
{
    cr_assert_eq(o->kind, PK_BOOL, "kind %d, expected a bool", o->kind);
    cr_assert_eq(o->i, v);
}

/* MEMOIZE stores at len(memo): the number of entries set, not the highest index + 1 */
Test(pickle_read, memoize_counts_entries)
{
    is_int(ok(PK("\x80\x04K\x01q\x05K\x02\x94" "0h\x01.")), 2); /* one entry (5), so MEMOIZE stores at 1 */
    bad(PK("\x80\x04K\x01\x94q\x05\x94h\x01."), TC_ERR_FORMAT, "memo slot 1 read but never set"); /* at 2 */
    /* an index already set does not count twice: MEMOIZE overwrites slot 1 */
    is_int(ok(PK("\x80\x04K\x01q\x01K\x02\x94" "0h\x01.")), 2);
    bad(PK("\x80\x04K\x01q\x01K\x02\x94" "0h\x00."), TC_ERR_FORMAT, "memo slot 0 read but never set");
    /* a gap far out costs no memory proportional to the index */
    is_int(ok(PK("K\x07r\x00\x00\x20\x01" "0K\x08\x94" "0j\x00\x00\x20\x01.")), 7);
    is_int(ok(PK("K\x07r\x00\x00\x20\x01" "0K\x08\x94" "0h\x01.")), 8);
}

/* INT: strtol(text, 0) first; int(text, 0) when strtol overflows or stops early */
Test(pickle_read, int_text_as_strtol)
{
    is_int(ok(PK("I010\n.")), 8);
    is_int(ok(PK("I0x10\n.")), 16);
    is_int(ok(PK("I0X1f\n.")), 31);
    is_int(ok(PK("I 7\n.")), 7);
    is_int(ok(PK("I\t-7\r\n.")), -7);
    is_int(ok(PK("I1_000\n.")), 1000);  /* strtol stops at '_': int('1_000', 0) */
    is_int(ok(PK("I0b11\n.")), 3);      /* no 0b for strtol: int('0b11', 0) */
    is_int(ok(PK("I0_0\n.")), 0);       /* int('0_0', 0), an int, not False */
    cr_assert_eq(ok(PK("I0_0\n."))->kind, PK_INT);
    is_int(ok(PK("I12\x00zz\n.")), 12); /* a NUL ends the text */
    is_int(ok(PK("I01\x00\n.")), 1);
    /* two bytes that strtol reads as 0 or 1 are False and True */
    is_bool(ok(PK("I00\n.")), false);
    is_bool(ok(PK("I01\n.")), true);
    is_bool(ok(PK("I 1\n.")), true);
    is_bool(ok(PK("I+0\n.")), false);
    is_bool(ok(PK("I-0\n.")), false);
    is_bool(ok(PK("I1\x00\n.")), true);
    is_bool(ok(PK("I\x00" "1\n.")), false); /* strtol("") is 0 and ends at the NUL */
    canon_is(ok(PK("I99999999999999999999\n.")), "i:0x56bc75e2d630fffff");
    canon_is(ok(PK("I-0x8000000000000001\n.")), "i:-0x8000000000000001");
    bad(PK("I08\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("I0777777777777777777777777\n."), TC_ERR_FORMAT, "leading zeros"); /* overflows, then int(x, 0) */
    bad(PK("I0x\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("I \n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("I1e3\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("I- 1\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("I0__0\n."), TC_ERR_FORMAT, "invalid literal");
}

/* LONG: int(text, 0) after one trailing 'L' */
Test(pickle_read, long_text_as_int_base0)
{
    is_int(ok(PK("L0_0\n.")), 0);
    is_int(ok(PK("L00\n.")), 0);
    is_int(ok(PK("L1 L\n.")), 1);
    is_int(ok(PK("L-0x_ff\n.")), -255);
    is_int(ok(PK("L0b1010L\n.")), 10);
    is_int(ok(PK("L0o17\n.")), 15);
    is_int(ok(PK("L 1\x0b\n.")), 1);
    is_int(ok(PK("L1\x00x\n.")), 1);
    bad(PK("L010\n."), TC_ERR_FORMAT, "leading zeros");
    bad(PK("LL\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("L\x1c" "1\n."), TC_ERR_FORMAT, "invalid literal"); /* not a space to Python */
    bad(PK("L1__0\n."), TC_ERR_FORMAT, "invalid literal");
    bad(PK("L0x_\n."), TC_ERR_FORMAT, "invalid literal");
    /* the 4300-digit limit is for decimal only */
    bbuf b = {0};
    BB(&b, "L0x");
    for (int i = 0; i < 6000; i++)
        bb_u8(&b, 'f');
    BB(&b, "\n.");
    pk_obj *o = ok(b.p, b.n);
    cr_assert_eq(o->kind, PK_BIGINT);
    cr_assert_eq(o->len, 3001);
    bb_free(&b);
}

/* FLOAT: PyOS_string_to_double, which is not strtod */
Test(pickle_read, float_text_as_python)
{
    canon_is(ok(PK("FInfinity\n.")), "f:7ff0000000000000");
    canon_is(ok(PK("F+iNf\n.")), "f:7ff0000000000000");
    canon_is(ok(PK("F-nan\n.")), "f:fff8000000000000");
    canon_is(ok(PK("FNaN\n.")), "f:7ff8000000000000");
    canon_is(ok(PK("F1e-500\n.")), "f:0000000000000000"); /* underflow is fine */
    canon_is(ok(PK("F1.\n.")), "f:3ff0000000000000");
    canon_is(ok(PK("F.5\n.")), "f:3fe0000000000000");
    canon_is(ok(PK("F1.5\x00x\n.")), "f:3ff8000000000000");
    bad(PK("F0x1p3\n."), TC_ERR_FORMAT, "bad FLOAT"); /* strtod takes hex; Python does not */
    bad(PK("F 1.5\n."), TC_ERR_FORMAT, "bad FLOAT");  /* nor leading spaces */
    bad(PK("F1.5 \n."), TC_ERR_FORMAT, "bad FLOAT");
    bad(PK("F1_0\n."), TC_ERR_FORMAT, "bad FLOAT");
    bad(PK("Finfinit\n."), TC_ERR_FORMAT, "bad FLOAT");
    bad(PK("Fnan(1)\n."), TC_ERR_FORMAT, "bad FLOAT");
    bad(PK("F1e500\n."), TC_ERR_FORMAT, "too large");
    bad(PK("F1e\n."), TC_ERR_FORMAT, "bad FLOAT");
}

/* STRING: the quotes, then PyBytes_DecodeEscape */
Test(pickle_read, string_escapes_as_python)
{
    is_str(ok(PK("S'\\a\\b\\f\\v\\0\\1\\12\\123\\1234'\n.")), PK_STR, "\a\b\f\v\0\1\nSS4", 10);
    is_str(ok(PK("S'\\q'\n.")), PK_STR, "\\q", 2); /* an unknown escape stays */
    is_str(ok(PK("S\"\\x41\"\n.")), PK_STR, "A", 1);
    is_str(ok_py2(PK("S'\\777'\n."), PK_PY2STR_BYTES), PK_BYTES, "\xff", 1); /* low 8 bits */
    bad(PK("S'a\\'\n."), TC_ERR_FORMAT, "trailing \\");
    bad(PK("S'\\x4'\n."), TC_ERR_FORMAT, "invalid \\x escape");
    bad(PK("S'\\x4g'\n."), TC_ERR_FORMAT, "invalid \\x escape");
    bad(PK("S\"a'\n."), TC_ERR_FORMAT, "not quoted");
}

/* Python 2 strings: what torch.load's encoding='utf-8' makes of them, and the other encodings */
Test(pickle_read, python2_strings)
{
    pk_obj *o = ok(PK("U\x02\xc3\xa9."));
    is_str(o, PK_STR, "\xc3\xa9", 2);
    cr_assert(o->flags & PK_F_PY2STR);
    bad(PK("U\x01\xff."), TC_ERR_FORMAT, "not UTF-8");
    bad(PK("S'\\xff'\n."), TC_ERR_FORMAT, "not UTF-8");
    bad(PK("T\x03\x00\x00\x00\xed\xa0\x80."), TC_ERR_FORMAT, "not UTF-8"); /* strict: no surrogates */
    o = ok_py2(PK("U\x01\xff."), PK_PY2STR_BYTES);
    is_str(o, PK_BYTES, "\xff", 1);
    cr_assert(o->flags & PK_F_PY2STR);
    is_str(ok_py2(PK("U\x01\xff."), PK_PY2STR_LATIN1), PK_STR, "\xc3\xbf", 2);
    is_str(ok_py2(PK("U\x01z."), PK_PY2STR_ASCII), PK_STR, "z", 1);
    bad_py2(PK("U\x01\xff."), PK_PY2STR_ASCII, "not ASCII");
    /* bytes are bytes whatever the encoding */
    o = ok(PK("C\x01\xff."));
    cr_assert_eq(o->kind, PK_BYTES);
    cr_assert_eq(o->flags & PK_F_PY2STR, 0);
}

/* BINUNICODE: UTF-8 with 'surrogatepass'; UNICODE: raw-unicode-escape */
Test(pickle_read, unicode_decoding)
{
    pk_obj *o = ok(PK("X\x03\x00\x00\x00\xed\xa0\x80."));
    is_str(o, PK_STR, "\xed\xa0\x80", 3);
    cr_assert(o->flags & PK_F_SURROGATE);
    /* two surrogates stay two (not the pair's code point) */
    is_str(ok(PK("\x8c\x06\xed\xa0\xbd\xed\xb8\x80.")), PK_STR, "\xed\xa0\xbd\xed\xb8\x80", 6);
    cr_assert_eq(ok(PK("\x8c\x02\xc3\xa9."))->flags & PK_F_SURROGATE, 0);
    bad(PK("X\x01\x00\x00\x00\xff."), TC_ERR_FORMAT, "not UTF-8");
    bad(PK("\x8c\x03\xe0\x80\x80."), TC_ERR_FORMAT, "not UTF-8");     /* overlong */
    bad(PK("\x8c\x04\xf4\x90\x80\x80."), TC_ERR_FORMAT, "not UTF-8"); /* past U+10FFFF */
    bad(PK("\x8c\x02\xed\xa0."), TC_ERR_FORMAT, "not UTF-8");         /* cut short */
    o = ok(PK("V\\ud800\n."));
    is_str(o, PK_STR, "\xed\xa0\x80", 3);
    cr_assert(o->flags & PK_F_SURROGATE);
    is_str(ok(PK("V\\x41\n.")), PK_STR, "\\x41", 4);
    is_str(ok(PK("V\\\\u0041\n.")), PK_STR, "\\\\u0041", 7); /* a pair of backslashes starts no escape */
    is_str(ok(PK("V\\\\\\u0041\n.")), PK_STR, "\\\\A", 3);
    is_str(ok(PK("Va\\\n.")), PK_STR, "a\\", 2);
    is_str(ok(PK("V\\U0010ffff\n.")), PK_STR, "\xf4\x8f\xbf\xbf", 4);
    bad(PK("V\\u00e\n."), TC_ERR_FORMAT, "truncated \\uXXXX");
    bad(PK("V\\U0010fffg\n."), TC_ERR_FORMAT, "truncated \\UXXXXXXXX");
    bad(PK("V\\U00110000\n."), TC_ERR_FORMAT, "out of range");
}

/* fix_imports: below protocol 3 (the last PROTO; 0 without one) names go
 * through _compat_pickle; from protocol 3 they are imported as written */
Test(pickle_read, fix_imports_by_protocol)
{
    pk_obj *o = ok(PK("\x80\x02" "c__builtin__\nset\n."));
    cr_assert_str_eq(o->s, "builtins");
    cr_assert_str_eq(o->name, "set");
    cr_assert(o->flags & PK_F_REMAPPED);
    cr_assert_str_eq(o->raw_module, "__builtin__");
    cr_assert_str_eq(o->raw_name, "set");
    o = ok(PK("\x80\x03" "c__builtin__\nset\n."));
    cr_assert_str_eq(o->s, "__builtin__"); /* ModuleNotFoundError in CPython: no such module */
    cr_assert_eq(o->flags & PK_F_REMAPPED, 0);
    cr_assert_null(o->raw_module);
    cr_assert_str_eq(ok(PK("c__builtin__\nset\n."))->s, "builtins");
    cr_assert_str_eq(ok(PK("\x80\x02\x80\x03" "c__builtin__\nset\n."))->s, "__builtin__");
    cr_assert_str_eq(ok(PK("\x80\x03\x80\x02" "c__builtin__\nset\n."))->s, "builtins");
    /* NAME_MAPPING first, then IMPORT_MAPPING */
    cr_assert(pk_is_global(ok(PK("\x80\x02" "cUserDict\nIterableUserDict\n.")), "collections", "UserDict"));
    cr_assert(pk_is_global(ok(PK("\x80\x02" "c__builtin__\nxrange\n.")), "builtins", "range"));
    cr_assert(pk_is_global(ok(PK("\x80\x02" "cexceptions\nValueError\n.")), "builtins", "ValueError"));
    cr_assert(pk_is_global(ok(PK("\x80\x02" "cdbm\nopen\n.")), "dbm.ndbm", "open"));
    cr_assert(pk_is_global(ok(PK("\x80\x03" "cdbm\nopen\n.")), "dbm", "open"));
    cr_assert(pk_is_global(ok(PK("\x80\x02\x8c\x08" "copy_reg\x8c\x0e_reconstructor\x93.")), "copyreg",
                           "_reconstructor"));
    /* fix_imports=False */
    pk_read_opts ro = {.limits = PK_LIMITS_DEFAULT, .no_fix_imports = true};
    tc_diag d = {0};
    pk_obj *r;
    size_t used;
    cr_assert_eq(pk_read(G, PK("\x80\x02" "c__builtin__\nset\n."), &ro, &r, &used, &d), 0);
    cr_assert_str_eq(r->s, "__builtin__");
    /* INST names are ASCII, GLOBAL names UTF-8 */
    cr_assert_str_eq(ok(PK("c\xc3\xa9\nx\n."))->s, "\xc3\xa9");
    bad(PK("c\xff\nx\n."), TC_ERR_FORMAT, "not UTF-8");
    bad(PK("(i\xc3\xa9\nx\n."), TC_ERR_FORMAT, "not ASCII");
}

/* protocol 4: find_class walks a dotted name attribute by attribute */
Test(pickle_read, dotted_names)
{
    pk_obj *o = ok(PK("\x80\x04\x8c\x05torch\x8c\x19_utils._rebuild_tensor_v2\x93."));
    cr_assert(o->flags & PK_F_DOTTED);
    cr_assert_str_eq(o->name, "_utils._rebuild_tensor_v2");
    o = ok(PK("\x80\x03\x8c\x05torch\x8c\x19_utils._rebuild_tensor_v2\x93."));
    cr_assert_eq(o->flags & PK_F_DOTTED, 0); /* one getattr of the whole name */
    cr_assert_eq(ok(PK("\x80\x04\x8c\x05torch\x8c\x04Size\x93."))->flags & PK_F_DOTTED, 0);
    bad(PK("\x80\x04\x8c\x02os\x8c\x0f<locals>.system\x93."), TC_ERR_FORMAT, "Can't get local attribute");
    bad(PK("\x80\x04\x8c\x02os\x8c\x04" "a..b\x93."), TC_ERR_UNSUPPORTED, "empty attribute");
    /* names no import resolves */
    bad(PK("\x80\x04\x8c\x00\x8c\x01x\x93."), TC_ERR_FORMAT, "empty module name");
    bad(PK("\x80\x04\x8c\x02os\x8c\x00\x93."), TC_ERR_UNSUPPORTED, "empty global name");
}

Test(pickle_read, persid_text)
{
    canon_is(ok(PK("P\n.")), "P(s:)");
    bad(PK("P\xc3\xa9\n."), TC_ERR_FORMAT, "must be ASCII");
}

/* POP and POP_MARK see marks, DUP does not reach below one */
Test(pickle_read, marks_and_pops)
{
    is_int(ok(PK("K\x01((0" "0.")), 1);
    is_int(ok(PK("K\x01(N0" "1.")), 1);
    bad(PK("(0" "0."), TC_ERR_FORMAT, "stack underflow");
    bad(PK("K\x01(\x85."), TC_ERR_FORMAT, "stack underflow");
}

/* BUILD: a call result records it; builtins take only what does nothing */
Test(pickle_read, build_on_builtins)
{
    canon_is(ok(PK("]Nb.")), "#1=[]");
    canon_is(ok(PK("]N}\x86" "b.")), "#1=[]");
    bad(PK("]N}K\x01K\x02s\x86" "b."), TC_ERR_FORMAT, "cannot set attributes of a 'list' object");
    bad(PK("]K\x01" "b."), TC_ERR_FORMAT, "state is not a dictionary");
    bad(PK("]NN\x86" "b."), TC_ERR_FORMAT, "slot state is not a dictionary");
    bad(PK("cm\nC\n}b."), TC_ERR_UNSUPPORTED, "BUILD on a global");
    bad(PK("K\x01Q}b."), TC_ERR_UNSUPPORTED, "BUILD on a persistent id");
    bad(PK("cm\nC\n)R}b(K\x01" "e."), TC_ERR_UNSUPPORTED, "APPENDS after BUILD");
}

/* a dict holds each key once: the first key object, the last value;
 * equal means Python's == (1 == 1.0 == True, NaN only equals itself) */
Test(pickle_read, dict_duplicate_keys)
{
    pk_obj *d = ok(PK("}(K\x01K\x02G?\xf0\x00\x00\x00\x00\x00\x00K\x03\x88K\x04u."));
    cr_assert_eq(d->n, 2);
    is_int(d->items[0], 1);
    is_int(d->items[1], 4);
    canon_is(ok(PK("(\x88K\x01K\x01K\x02" "d.")), "#1={T:i:0x2}");
    canon_is(ok(PK("}\x89K\x01sG\x80\x00\x00\x00\x00\x00\x00\x00K\x02sI0\nK\x03s.")), "#1={F:i:0x3}");
    /* strings by content, however written */
    canon_is(ok(PK("}(X\x01\x00\x00\x00" "aK\x01Va\nK\x02S'a'\nK\x03\x8c\x01" "aK\x04u.")), "#1={s:61:i:0x4}");
    canon_is(ok(PK("}(X\x01\x00\x00\x00" "aK\x01" "C\x01" "aK\x02u.")), "#1={s:61:i:0x1,b:61:i:0x2}");
    /* tuples item by item, frozensets as sets */
    canon_is(ok(PK("}(K\x01\x85K\x01G?\xf0\x00\x00\x00\x00\x00\x00\x85K\x02u.")), "#1={(i:0x1):i:0x2}");
    canon_is(ok(PK("}((K\x01K\x02\x91K\x01(K\x02K\x01\x91K\x02u.")), "#1={fset[i:0x1,i:0x2]:i:0x2}");
    /* big ints and floats: 2**64 == 2.0**64, 2**53 + 1 != 2.0**53 */
    d = ok(PK("}(L18446744073709551616\nK\x01G\x43\xf0\x00\x00\x00\x00\x00\x00K\x02u."));
    cr_assert_eq(d->n, 2);
    d = ok(PK("}(L9007199254740993\nK\x01G\x43\x40\x00\x00\x00\x00\x00\x00K\x02u."));
    cr_assert_eq(d->n, 4);
    /* one NaN object is one key, two NaNs are two */
    cr_assert_eq(ok(PK("}Fnan\nq\x00K\x01sh\x00K\x02s."))->n, 2);
    cr_assert_eq(ok(PK("}Fnan\nK\x01sFnan\nK\x02s."))->n, 4);
    /* the same global is the same object; call results are distinct */
    cr_assert_eq(ok(PK("}(cm\nf\nK\x01" "cm\nf\nK\x02u."))->n, 2);
    cr_assert_eq(ok(PK("}(cm\nf\n)RK\x01" "cm\nf\n)RK\x02u."))->n, 4);
    bad(PK("}(]K\x01u."), TC_ERR_FORMAT, "unhashable type: 'list'");
    bad(PK("}((]tK\x01u."), TC_ERR_FORMAT, "unhashable type: 'list'");
    /* a call result's __setitem__ keeps every pair, duplicates too */
    cr_assert_eq(ok(PK("cm\nD\n)R(K\x01K\x02K\x01K\x03u."))->n, 4);
}

Test(pickle_read, set_members_once)
{
    canon_is(ok(PK("\x8f(K\x01\x88G?\xf0\x00\x00\x00\x00\x00\x00K\x02\x90.")), "set[i:0x1,i:0x2]");
    canon_is(ok(PK("(K\x01\x88K\x02\x91.")), "fset[i:0x1,i:0x2]");
    bad(PK("(K\x01\x91(K\x01\x90."), TC_ERR_FORMAT, "'frozenset' object has no attribute 'add'");
    bad(PK("\x8f(K\x01" "e."), TC_ERR_FORMAT, "'set' object has no attribute 'extend'");
    bad(PK("cm\nS\n)R(K\x01\x90."), TC_ERR_UNSUPPORTED, "ADDITEMS");
    bad(PK("\x8f(]\x90."), TC_ERR_FORMAT, "unhashable");
}

/* SETITEM on a list or bytearray assigns in place; APPEND extends a bytearray */
Test(pickle_read, item_assignment_in_place)
{
    canon_is(ok(PK("](K\x01K\x02K\x03" "eK\x00K\x09sJ\xff\xff\xff\xffK\x08s\x88K\x07s.")),
             "#1=[i:0x9,i:0x7,i:0x8]");
    bad(PK("]K\x01" "aK\x01K\x02s."), TC_ERR_FORMAT, "index out of range");
    bad(PK("]K\x01" "aG?\xf0\x00\x00\x00\x00\x00\x00K\x02s."), TC_ERR_FORMAT, "indices must be integers");
    canon_is(ok(PK("\x96\x02\x00\x00\x00\x00\x00\x00\x00" "abK\x63" "a(K\x64\x88" "eK\x00K\x41s.")), "ba:4162636401");
    bad(PK("\x96\x00\x00\x00\x00\x00\x00\x00\x00M\x00\x01" "a."), TC_ERR_FORMAT, "byte must be in range");
    bad(PK("\x96\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x01" "aa."), TC_ERR_FORMAT, "cannot be interpreted as an integer");
    /* nothing to add: any target will do, as in CPython */
    is_int(ok(PK("K\x01(e.")), 1);
    is_int(ok(PK("K\x01(u.")), 1);
    is_int(ok(PK("K\x01(\x90.")), 1);
}

Test(pickle_read, call_argument_checks)
{
    bad(PK("cm\nf\n]R."), TC_ERR_FORMAT, "must be a tuple");
    bad(PK("K\x01)R."), TC_ERR_FORMAT, "not callable");
    bad(PK("K\x01)\x81."), TC_ERR_FORMAT, "must be a type");
    bad(PK("cm\nC\n]\x81."), TC_ERR_FORMAT, "args argument must be a tuple");
    bad(PK("cm\nC\n)]\x92."), TC_ERR_FORMAT, "kwargs argument must be a dict");
    bad(PK("(K\x05o."), TC_ERR_FORMAT, "not callable");
    /* results of calls and persistent ids are called and instantiated like classes */
    canon_is(ok(PK("cm\nf\n)R)R.")), "#1=C0(#2=C0(G:m.f;();;);();;)");
    cr_assert_eq(ok(PK("K\x01Q)\x81."))->kind, PK_CALL);
    /* keyword names must be str; the call sees a copy of the dict */
    bad(PK("cm\nC\n)}(K\x01K\x02u\x92."), TC_ERR_UNSUPPORTED, "keyword names must be str");
    pk_obj *o = ok(PK("(cm\nC\n)}q\x00(X\x01\x00\x00\x00kK\x02u\x92h\x00X\x01\x00\x00\x00jK\x03s0t."));
    cr_assert_eq(o->items[0]->kwargs->n, 2, "the later SETITEM reached the call's kwargs");
}

/* ---- nothing runs ------------------------------------------------------------------ */

Test(pickle_read, dangerous_reduce_only_builds_nodes)
{
    char *dir = tmpdir_new();
    const char *victim = in_dir(dir, "pwned");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "touch %s", victim);
    bbuf payloads[5] = {{0}};
    /* protocol 0: os.system, posix.system; protocol 2: subprocess, eval, exec */
    BB(&payloads[0], "cos\nsystem\n(S'");
    bb_str(&payloads[0], cmd);
    BB(&payloads[0], "'\ntR.");
    BB(&payloads[1], "\x80\x02\x63posix\nsystem\nX");
    bb_u32(&payloads[1], (uint32_t)strlen(cmd));
    bb_str(&payloads[1], cmd);
    BB(&payloads[1], "\x85R.");
    BB(&payloads[2], "\x80\x02\x63subprocess\ncall\n]X\x02\x00\x00\x00shaX\x02\x00\x00\x00-caX");
    bb_u32(&payloads[2], (uint32_t)strlen(cmd));
    bb_str(&payloads[2], cmd);
    BB(&payloads[2], "a\x85R.");
    char code[600];
    snprintf(code, sizeof code, "__import__('os').system('%s')", cmd);
    BB(&payloads[3], "\x80\x02\x63__builtin__\neval\nX");
    bb_u32(&payloads[3], (uint32_t)strlen(code));
    bb_str(&payloads[3], code);
    BB(&payloads[3], "\x85R.");
    BB(&payloads[4], "\x80\x04\x8c\x08" "builtins\x8c\x04" "exec\x93X");
    bb_u32(&payloads[4], (uint32_t)strlen(code));
    bb_str(&payloads[4], code);
    BB(&payloads[4], "\x85R.");
    for (int i = 0; i < 5; i++) {
        pk_obj *o = ok(payloads[i].p, payloads[i].n);
        cr_assert_eq(o->kind, PK_CALL, "payload %d", i);
        cr_assert_eq(o->func->kind, PK_GLOBAL);
        cr_assert_eq(o->args->kind, PK_TUPLE);
        bb_free(&payloads[i]);
    }
    struct stat st;
    cr_assert_neq(stat(victim, &st), 0, "reading a pickle ran its payload");
    tmpdir_rm(dir);
}

/* ---- limits -------------------------------------------------------------------------- */

/* A pickle whose root is nested `levels` steps deep, by one of five routes. */
static void nested(bbuf *b, int kind, int levels)
{
    BB(b, "\x80\x02");
    switch (kind) {
    case 0: /* lists appended into lists */
        for (int i = 0; i < levels + 1; i++)
            bb_u8(b, ']');
        for (int i = 0; i < levels; i++)
            bb_u8(b, 'a');
        break;
    case 1: /* tuples of tuples */
        bb_u8(b, 'N');
        for (int i = 0; i < levels; i++)
            bb_u8(b, 0x85);
        break;
    case 2: /* {1: inner} through SETITEM */
        bb_u8(b, 'N');
        for (int i = 0; i < levels; i++)
            BB(b, "q\x00" "0}K\x01h\x00s");
        break;
    case 3: /* f((inner,)): two levels per step */
        bb_u8(b, 'N');
        for (int i = 0; i < levels; i++)
            BB(b, "\x85q\x00" "0cm\nf\nh\x00R");
        break;
    case 4: /* BUILD state */
        bb_u8(b, 'N');
        for (int i = 0; i < levels; i++)
            BB(b, "q\x00" "0cm\nC\n)\x81h\x00" "b");
        break;
    }
    bb_u8(b, '.');
}

Test(pickle_read, deep_nesting)
{
    pk_limits lim = PK_LIMITS_DEFAULT;
    for (int kind = 0; kind < 5; kind++) {
        int steps = kind == 3 ? 500 : 1000;
        bbuf b = {0};
        nested(&b, kind, steps);
        pk_graph *g = pk_graph_new();
        tc_diag d = {0};
        pk_obj *r;
        cr_assert_eq(read_pk(g, b.p, b.n, &lim, &r, &d), 0, "kind %d at the limit: %s", kind, d.msg);
        cr_assert_eq(r->depth, 1000, "kind %d depth %u", kind, r->depth);
        pk_graph_free(g);
        bb_free(&b);
        nested(&b, kind, steps + 1);
        bad_lim(b.p, b.n, &lim, TC_ERR_LIMIT, "nested deeper than 1000");
        bb_free(&b);
    }
    /* a smaller configured limit */
    lim.max_depth = 10;
    bbuf b = {0};
    nested(&b, 0, 11);
    bad_lim(b.p, b.n, &lim, TC_ERR_LIMIT, "nested deeper than 10");
    bb_free(&b);
}

Test(pickle_read, too_many_marks)
{
    bbuf b = {0};
    for (int i = 0; i < 100000; i++)
        bb_u8(&b, '(');
    bb_u8(&b, '.');
    bad(b.p, b.n, TC_ERR_LIMIT, "nested MARKs");
    bb_free(&b);
}

Test(pickle_read, too_many_objects)
{
    pk_limits lim = PK_LIMITS_DEFAULT;
    lim.max_objects = 10;
    bad_lim(PK("(NNNNNNNNNNNNNNNNNNNNt."), &lim, TC_ERR_LIMIT, "--max-objects");
    bad_lim(PK("(K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01K\x01t."), &lim, TC_ERR_LIMIT,
            "more than 10 objects");
    bad_lim(PK("(cm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\ncm\na\nt."), &lim,
            TC_ERR_LIMIT, "--max-objects");
    /* the same pickle under a limit it fits */
    lim.max_objects = 100;
    pk_graph *g = pk_graph_new();
    tc_diag d = {0};
    pk_obj *r;
    cr_assert_eq(read_pk(g, PK("(NNNNNNNNNNNNNNNNNNNNt."), &lim, &r, &d), 0, "%s", d.msg);
    pk_graph_free(g);
}

/* ---- CPython's pickles, every protocol ---------------------------------------------- */

static char *expected_canon(const char *file)
{
    size_t n;
    char *c = (char *)slurp(data_path(file), &n);
    cr_assert_not_null(c, "missing fixture %s", data_path(file));
    while (n && (c[n - 1] == '\n'))
        n--;
    c[n] = 0;
    return c;
}

typedef struct opseen {
    bool seen[256];
} opseen;

static void note_op(void *ctx, uint8_t op, size_t pos, uint64_t arg)
{
    (void)pos;
    (void)arg;
    ((opseen *)ctx)->seen[op] = true;
}

static const pk_obj *dict_val(const pk_obj *d, const char *key)
{
    for (size_t i = 0; i + 1 < d->n; i += 2)
        if (pk_is_str(d->items[i], key))
            return d->items[i + 1];
    return NULL;
}

static void check_cpython(const char *stem, bool big)
{
    char cname[64];
    snprintf(cname, sizeof cname, "%s.canon", stem);
    char *want = expected_canon(cname);
    /* opcodes each protocol's file must exercise (beyond the common ones) */
    static const char *const must[6] = {
        "(dlpgIVLFtsa.", "}q]hX(u)teJKMG.\x8a" /* no LONG1 in protocol 1: text LONG */,
        "\x80\x8a\x8b\x88\x89\x85\x86\x87", ("\x80" "BC"), "\x95\x94\x8c\x93\x8f\x90\x91", "\x96"};
    for (int p = 0; p < 6; p++) {
        char name[32];
        snprintf(name, sizeof name, "%s_p%d.pkl", stem, p);
        size_t n;
        uint8_t *buf = slurp(data_path(name), &n);
        cr_assert_not_null(buf, "missing fixture %s", name);
        pk_graph *g = pk_graph_new();
        tc_diag d = {0};
        pk_obj *r;
        cr_assert_eq(read_pk(g, buf, n, NULL, &r, &d), 0, "%s: %s", name, d.msg);
        char *got = canon(g, r);
        if (strcmp(got, want)) {
            size_t i = 0;
            while (got[i] && got[i] == want[i])
                i++;
            cr_assert_fail("%s: canonical text differs at %zu: got '%.60s' want '%.60s'", name, i,
                           got + (i > 20 ? i - 20 : 0), want + (i > 20 ? i - 20 : 0));
        }
        free(got);
        /* shared objects stay shared; the cycle is a cycle */
        const pk_obj *cyc = dict_val(r, "cyc");
        cr_assert(cyc && cyc->kind == PK_LIST && cyc->n == 1 && cyc->items[0] == cyc, "%s: cycle", name);
        if (big) {
            const pk_obj *s1 = dict_val(r, "shared1"), *s2 = dict_val(r, "shared2");
            cr_assert(s1 && s1 == s2, "%s: shared list read twice", name);
            cr_assert_eq(dict_val(r, "tup1"), dict_val(r, "tup2"), "%s: shared tuple", name);
        }
        opseen seen = {0};
        char err[128];
        cr_assert_eq(walk_ops(buf, n, note_op, &seen, err, sizeof err), 0, "%s: %s", name, err);
        if (big && p != 1)
            for (const char *m = must[p]; *m; m++)
                cr_assert(seen.seen[(uint8_t)*m], "%s lacks opcode 0x%02x", name, (uint8_t)*m);
        pk_graph_free(g);
        free(buf);
    }
    free(want);
}

Test(pickle_read, cpython_pickles_every_protocol)
{
    check_cpython("obj", true);
    check_cpython("small", false);
}

/* Every strict prefix of a valid pickle fails cleanly and says the input ended. */
static void prefixes_fail(const uint8_t *buf, size_t n, const char *name, size_t stride)
{
    pk_graph *whole = pk_graph_new();
    tc_diag wd = {0};
    pk_obj *wr;
    cr_assert_eq(read_pk(whole, buf, n, NULL, &wr, &wd), 0, "%s: the whole pickle fails: %s", name, wd.msg);
    pk_graph_free(whole);
    for (size_t k = 0; k < n; k += (k + 64 < n ? stride : 1)) {
        pk_graph *g = pk_graph_new();
        tc_diag d = {0};
        pk_obj *r = NULL;
        size_t used = 0;
        bool hit_end = false;
        pk_read_opts o = {.limits = PK_LIMITS_DEFAULT, .what = name, .hit_end = &hit_end};
        /* copy so that a read past the prefix is caught by ASan/valgrind */
        uint8_t *cp = malloc(k ? k : 1);
        memcpy(cp, buf, k);
        int rc = pk_read(g, cp, k, &o, &r, &used, &d);
        cr_assert_neq(rc, 0, "%s: prefix of %zu bytes accepted", name, k);
        cr_assert(d.msg[0] && !strchr(d.msg, '\n'), "%s: prefix %zu: bad message '%s'", name, k, d.msg);
        cr_assert(hit_end, "%s: prefix of %zu bytes failed without noticing the end: %s", name, k, d.msg);
        free(cp);
        pk_graph_free(g);
    }
}

Test(pickle_read, truncated_at_every_byte)
{
    for (int p = 0; p < 12; p++) {
        char name[32];
        snprintf(name, sizeof name, "%s_p%d.pkl", p < 6 ? "small" : "obj", p % 6);
        size_t n;
        uint8_t *buf = slurp(data_path(name), &n);
        cr_assert_not_null(buf);
        /* every byte of the small ones; every 97th (and the last 64) of the big */
        prefixes_fail(buf, n, name, p < 6 ? 1 : 97);
        free(buf);
    }
    prefixes_fail(PK("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19."), "magic", 1);
    prefixes_fail(PK("(S'abc'\nVx\\u1234\nF1.5\nI01\nL5L\ncm\nf\nPk\n(tp0\ng0\n(cm\nC\no(K\x01imod\ncls\nt."), "text", 1);
}

Test(pickle_read, truncated_torch_data_pkl)
{
    static const char *const files[] = {"torch-2/lm_cuda0.pt", "torch-2/train_ckpt_cuda.pt",
                                        "torch-1/whole_module_cuda0.pt"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t n;
        uint8_t *file = slurp(corpus_path(files[f]), &n);
        cr_assert_not_null(file, "missing corpus file %s", corpus_path(files[f]));
        tc_src src;
        tc_src_init_mem(&src, file, n, files[f]);
        tc_zip z;
        tc_diag d = {0};
        tc_zip_limits zl = {.max_entries = 1000};
        cr_assert_eq(tc_zip_open(&z, &src, &zl, &d), 0, "%s", d.msg);
        const tc_zip_entry *e = NULL;
        for (size_t i = 0; i < z.n; i++)
            if (strstr(z.e[i].name, "/data.pkl"))
                e = &z.e[i];
        cr_assert_not_null(e);
        uint8_t *pkl;
        size_t plen;
        cr_assert_eq(tc_zip_read_all(&z, e, 1 << 24, true, &pkl, &plen, &d), 0, "%s", d.msg);
        pk_graph *g = pk_graph_new();
        pk_obj *r;
        cr_assert_eq(read_pk(g, pkl, plen, NULL, &r, &d), 0, "%s", d.msg);
        pk_graph_free(g);
        prefixes_fail(pkl, plen, files[f], 1);
        free(pkl);
        tc_zip_free(&z);
        free(file);
    }
}
