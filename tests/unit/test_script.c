/* The declarations of TorchScript code files (formats/script_decl.c): which
 * module classes there are and the attributes each declares as parameters and
 * buffers, read as text; malformed declarations fail naming file and line. */
#include <criterion/criterion.h>

#include <string.h>

#include "torchscript.h"

static tc_script *parse_ok(const char *module, const char *text)
{
    tc_script *s = tc_script_new();
    tc_diag d = TC_DIAG_INIT;
    cr_assert_not_null(s);
    cr_assert_eq(tc_script_parse(s, module, "code/x.py", text, strlen(text), &d), 0, "%s", d.msg);
    return s;
}

static void parse_fails(const char *text, const char *needle)
{
    tc_script *s = tc_script_new();
    tc_diag d = TC_DIAG_INIT;
    cr_assert_eq(tc_script_parse(s, "__torch__", "code/x.py", text, strlen(text), &d), TC_ERR_FORMAT, "%s", text);
    cr_assert(strstr(d.msg, needle), "'%s' lacks '%s'", d.msg, needle);
    cr_assert(strstr(d.msg, "code/x.py line "), "'%s' names no line", d.msg);
    tc_script_free(s);
}

Test(script, declarations_in_order)
{
    tc_script *s = parse_ok("__torch__.torch.nn.modules.linear",
                            "class Linear(Module):\n"
                            "  __parameters__ = [\"weight\", \"bias\", ]\n"
                            "  __buffers__ = []\n"
                            "  bias : Tensor\n"
                            "  weight : Tensor\n"
                            "  plain : Tensor\n"
                            "  in_features : Final[int] = 3\n"
                            "  def forward(self: __torch__.torch.nn.modules.linear.Linear,\n"
                            "    input: Tensor) -> Tensor:\n"
                            "    __parameters__ = [\"not\", \"this\"]\n"
                            "    return input\n"
                            "class Helper:\n"
                            "  __parameters__ = [\"nor\", ]\n"
                            "class Seq(Module):\n"
                            "  __parameters__ = []\n"
                            "  __buffers__ = [\"running_mean\", 'n\\x41\\\\b\\\"', ]\n"
                            "  __annotations__[\"nA\\\\b\\\"\"] = Tensor\n"
                            "  running_mean : Tensor\n");
    cr_assert_eq(tc_script_nclasses(s), 2);
    const tc_script_class *c = tc_script_class_of(s, "__torch__.torch.nn.modules.linear.Linear");
    cr_assert_not_null(c);
    /* the annotated ones, in annotation order, as torch's class type holds them */
    cr_assert_eq(c->nparams, 2);
    cr_assert_str_eq(c->params[0], "bias");
    cr_assert_str_eq(c->params[1], "weight");
    cr_assert_eq(c->nbuffers, 0);
    cr_assert_null(tc_script_class_of(s, "__torch__.torch.nn.modules.linear.Helper"));
    c = tc_script_class_of(s, "__torch__.torch.nn.modules.linear.Seq");
    cr_assert_not_null(c);
    cr_assert_eq(c->nparams, 0);
    cr_assert_eq(c->nbuffers, 2);
    cr_assert_str_eq(c->buffers[0], "nA\\b\"");
    cr_assert_str_eq(c->buffers[1], "running_mean");
    tc_script_free(s);
}

Test(script, only_the_class_body_declares)
{
    /* strings, brackets and methods hold text that looks like declarations: none of it is one */
    tc_script *s = parse_ok("__torch__",
                            "class Net(Module):\n"
                            "  __parameters__ = [\"w\", ]\n"
                            "  __buffers__ = []\n"
                            "  w : Tensor\n"
                            "  def forward(self: __torch__.Net, x: Tensor) -> Tensor:\n"
                            "    \"\"\"doc\n"
                            "__parameters__ = [\"w\", \"secret\"]\n"
                            "  secret : Tensor\n"
                            "\"\"\"\n"
                            "    y = torch.add(x,\n"
                            "  __buffers__ = [\"b\"]\n"
                            "      x)\n"
                            "    s = '# not a comment'  # __buffers__ = [\"c\"]\n"
                            "    return y\n"
                            "  __parameters__ = [\"w\", \"late\", ] # torch takes every list\n"
                            "  late : Tensor\n");
    const tc_script_class *c = tc_script_class_of(s, "__torch__.Net");
    cr_assert_not_null(c);
    cr_assert_eq(c->nparams, 2);
    cr_assert_str_eq(c->params[0], "w");
    cr_assert_str_eq(c->params[1], "late");
    cr_assert_eq(c->nbuffers, 0);
    cr_assert(c->declared);
    tc_script_free(s);
    /* adjacent literals are one string to TorchScript's parser */
    s = parse_ok("__torch__", "class A(Module):\n  __parameters__ = [\"a\" 'b', ]\n  __buffers__ = []\n  ab : Tensor\n");
    c = tc_script_class_of(s, "__torch__.A");
    cr_assert_eq(c->nparams, 1);
    cr_assert_str_eq(c->params[0], "ab");
    tc_script_free(s);
}

Test(script, crlf_and_comments)
{
    tc_script *s = parse_ok("__torch__", "# printed\r\nclass Net(Module):\r\n  __parameters__ = [\"p\", ] # x\r\n\r\n"
                                         "  __buffers__ = []\r\n  p : Tensor\r\n");
    const tc_script_class *c = tc_script_class_of(s, "__torch__.Net");
    cr_assert_not_null(c);
    cr_assert_eq(c->nparams, 1);
    cr_assert_str_eq(c->params[0], "p");
    tc_script_free(s);
}

Test(script, malformed)
{
    parse_fails("class A(Module):\n  __parameters__ = [\"a\" b]\n", "separated by commas");
    parse_fails("class A(Module):\n  __parameters__ = [\"a\", b]\n", "string literals");
    parse_fails("class A(Module):\n  __parameters__ = \"a\"\n", "not a list");
    parse_fails("class A(Module):\n  __buffers__ = [\"a\n", "closing quote");
    parse_fails("class A(Module):\n  __buffers__ = [\"\\q\"]\n", "escape");
    parse_fails("class A(Module):\n  __buffers__ = [\"\\x00\"]\n", "NUL");
    parse_fails("class A(Module):\n  __buffers__ = [] extra\n", "text after");
    parse_fails("class A(Module):\n  __parameters__ : List[str]\n", "without a list");
    parse_fails("class A(Module):\n  w : Tensor\n  w : Tensor\n", "declared twice");
    parse_fails("class A(Module):\n  pass\nclass A(Module):\n  pass\n", "defined twice");
    parse_fails("class A(Module):\n  def f(self):\n    return (1,\n", "never closed");
    parse_fails("class A(Module):\n  def f(self):\n    return 1)\n", "closes nothing");
    parse_fails("class A(Module):\n    w : Tensor\n  v : Tensor\n", "indentation");
    parse_fails("class A(Module):\n  s = '''open\n", "closing quote");
}
