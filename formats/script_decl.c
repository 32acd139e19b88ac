/* The declarations of a TorchScript archive's code/ files, read as text
 * (torchscript.h): a lexer of the lines, the statements of a class body, the
 * parameters and buffers each module class declares. Apart from the driver
 * (torchscript.c), below the torch walker, which asks it which attributes of
 * a module class are parameters and buffers: the walker then needs nothing of
 * the driver. */
#include "torchscript.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "strmap.h"
#include "vec.h"

/* ---- the declarations of code/ ------------------------------------------------------ */

typedef TC_VEC(char *) names;

typedef struct cls {
    names params, buffers; /* as declared, then (once the class ends) the annotated ones in annotation order */
    names attrs;           /* annotated attributes, in order */
    tc_strmap attr_ix;     /* attrs by name: a class may declare very many */
    bool seen_p, seen_b;
} cls;

struct tc_script {
    TC_VEC(cls) cls;
    TC_VEC(tc_script_class) out;
    TC_VEC(char *) quals;    /* per class: its qualified name */
    tc_strmap byname;        /* qualified class name -> index */
};

tc_script *tc_script_new(void) { return calloc(1, sizeof(tc_script)); }

static void free_names(names *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->v[i]);
    tc_vec_free(v);
}

void tc_script_free(tc_script *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->cls.n; i++) {
        free_names(&s->cls.v[i].params);
        free_names(&s->cls.v[i].buffers);
        free_names(&s->cls.v[i].attrs);
        tc_strmap_free(&s->cls.v[i].attr_ix);
    }
    for (size_t i = 0; i < s->quals.n; i++)
        free(s->quals.v[i]);
    tc_vec_free(&s->cls);
    tc_vec_free(&s->out);
    tc_vec_free(&s->quals);
    tc_strmap_free(&s->byname);
    free(s);
}

size_t tc_script_nclasses(const tc_script *s) { return s ? s->cls.n : 0; }

/* A class's key: its module ASCII-lowercased (torch finds a module's code
 * file by a lookup that ignores letter case), a dot, its name as it is. */
static char *class_key(const char *module, size_t ml, const char *name, size_t nl)
{
    tc_buf b = TC_BUF_INIT(0);
    for (size_t i = 0; i < ml; i++)
        tc_buf_putc(&b, module[i] >= 'A' && module[i] <= 'Z' ? (char)(module[i] + 32) : module[i]);
    tc_buf_putc(&b, '.');
    tc_buf_add(&b, name, nl);
    char *k = tc_buf_take(&b);
    tc_buf_free(&b);
    return k;
}

const tc_script_class *tc_script_class_of(const tc_script *s, const char *qualname)
{
    const char *dot = strrchr(qualname, '.');
    if (!s || !dot)
        return NULL;
    char *key = class_key(qualname, (size_t)(dot - qualname), dot + 1, strlen(dot + 1));
    size_t i;
    bool found = key && tc_strmap_get(&s->byname, key, &i);
    free(key);
    return found ? &s->out.v[i] : NULL;
}

/* The text of one file as torch's lexer (torch/csrc/jit/frontend/lexer.h)
 * sees it: strings in one or three quotes of either kind (a backslash takes
 * the next byte with it; only triple quotes hold newlines), comments from #
 * to the end of the line, brackets inside which newlines are white space,
 * and a backslash before a newline joining two lines. A logical line is a
 * statement; its indentation is that of its first line. */
typedef struct lex {
    const char *p;
    size_t n;
    const char *what;
    tc_diag *d;
} lex;

typedef struct lline {
    size_t start, end;    /* [start, end) of the statement's text */
    size_t indent, lineno;
} lline;

typedef TC_VEC(lline) llines;

static int bad_at(const lex *L, size_t lineno, const char *why)
{
    return tc_fail(L->d, TC_ERR_FORMAT, "%s line %zu: %s", L->what, lineno, why);
}

/* The string literal at *i (its quotes), past it; 0 or an error. */
static int skip_string(const lex *L, size_t *i, size_t *lineno)
{
    char q = L->p[*i];
    size_t ql = *i + 2 < L->n && L->p[*i + 1] == q && L->p[*i + 2] == q ? 3 : 1, e = *i + ql, at = *lineno;
    for (;;) {
        if (e >= L->n)
            return bad_at(L, at, "a string literal without its closing quote");
        if (L->p[e] == q && (ql == 1 || (e + 2 < L->n && L->p[e + 1] == q && L->p[e + 2] == q)))
            break;
        if (L->p[e] == '\n') {
            if (ql == 1)
                return bad_at(L, at, "a string literal without its closing quote");
            (*lineno)++;
        }
        if (L->p[e] == '\\' && e + 1 < L->n) {
            if (L->p[e + 1] == '\n')
                (*lineno)++;
            e++;
        }
        e++;
    }
    *i = e + ql;
    return 0;
}

static int logical_lines(const lex *L, llines *out)
{
    size_t i = 0, lineno = 1;
    while (i < L->n) {
        /* the start of a physical line outside any bracket: its indentation */
        size_t indent = 0, first = lineno;
        while (i < L->n && (L->p[i] == ' ' || L->p[i] == '\t'))
            i++, indent++;
        if (i >= L->n)
            break;
        if (L->p[i] == '\n' || L->p[i] == '\r' || L->p[i] == '#') {
            while (i < L->n && L->p[i] != '\n')
                i++;
            i++, lineno++;
            continue; /* a blank line, or a comment alone */
        }
        size_t start = i, depth = 0, end;
        for (;;) {
            if (i >= L->n) {
                if (depth)
                    return bad_at(L, first, "a bracket that is never closed");
                end = i;
                break;
            }
            char c = L->p[i];
            if (c == '"' || c == '\'') {
                int rc = skip_string(L, &i, &lineno);
                if (rc)
                    return rc;
                continue;
            }
            if (c == '#') {
                while (i < L->n && L->p[i] != '\n')
                    i++;
                continue;
            }
            if (c == '\\' && i + 1 < L->n && L->p[i + 1] == '\n') {
                i += 2, lineno++;
                continue;
            }
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}') {
                if (!depth)
                    return bad_at(L, lineno, "a closing bracket that closes nothing");
                depth--;
            } else if (c == '\n') {
                lineno++;
                if (!depth) {
                    end = i++;
                    break;
                }
            }
            i++;
        }
        if (tc_vec_push(out, ((lline){start, end, indent, first})))
            return tc_fail(L->d, TC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

/* ---- a statement's tokens -------------------------------------------------------------- */

enum { T_END, T_IDENT, T_STRING, T_PUNCT };

typedef struct tok {
    int kind;
    const char *p; /* T_IDENT: its text; T_PUNCT: the byte; T_STRING: its first quote */
    size_t n;
} tok;

typedef struct stmt {
    const lex *L;
    size_t i, end, lineno;
} stmt;

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The next token of the statement (white space, comments and the newlines
 * brackets hold are skipped). */
static int next_tok(stmt *S, tok *t, tc_diag *d)
{
    const char *p = S->L->p;
    for (;;) {
        while (S->i < S->end && (p[S->i] == ' ' || p[S->i] == '\t' || p[S->i] == '\r' || p[S->i] == '\n' ||
                                 (p[S->i] == '\\' && S->i + 1 < S->end && p[S->i + 1] == '\n')))
            S->i += p[S->i] == '\\' ? 2 : 1;
        if (S->i < S->end && p[S->i] == '#') {
            while (S->i < S->end && p[S->i] != '\n')
                S->i++;
            continue;
        }
        break;
    }
    if (S->i >= S->end) {
        *t = (tok){T_END, NULL, 0};
        return 0;
    }
    size_t at = S->i;
    char c = p[at];
    if (c == '"' || c == '\'') {
        size_t ln = S->lineno;
        int rc = skip_string(S->L, &S->i, &ln);
        *t = (tok){T_STRING, p + at, S->i - at};
        return rc;
    }
    if (ident_char(c) && !(c >= '0' && c <= '9')) {
        while (S->i < S->end && ident_char(p[S->i]))
            S->i++;
        *t = (tok){T_IDENT, p + at, S->i - at};
        return 0;
    }
    (void)d;
    S->i++;
    *t = (tok){T_PUNCT, p + at, 1};
    return 0;
}

static bool is_ident(const tok *t, const char *word)
{
    return t->kind == T_IDENT && t->n == strlen(word) && !memcmp(t->p, word, t->n);
}

static bool is_punct(const tok *t, char c) { return t->kind == T_PUNCT && t->p[0] == c; }

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string literal's value appended to b (the escapes c10's printQuotedString
 * writes; any other is refused). */
static int literal(const stmt *S, const tok *t, tc_buf *b)
{
    char q = t->p[0];
    size_t ql = t->n >= 6 && t->p[1] == q && t->p[2] == q ? 3 : 1;
    const char *s = t->p + ql, *e = t->p + t->n - ql;
    for (; s < e; s++) {
        char c = *s;
        if (c == '\\') {
            if (++s >= e)
                break;
            static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
            const char *x = strchr(from, *s);
            if (x && *s)
                c = to[x - from];
            else if (*s == 'x' && e - s > 2 && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
                c = (char)(hexval(s[1]) * 16 + hexval(s[2]));
                s += 2;
            } else
                return bad_at(S->L, S->lineno, "an escape in a string literal that TorchScript does not write");
        }
        if (!c)
            return bad_at(S->L, S->lineno, "a name holding a NUL byte");
        tc_buf_putc(b, c);
    }
    return 0;
}

/* `[ "a", "b" "c", ]` and nothing after it: each item a string literal, or
 * adjacent ones (one string to Python and to TorchScript's parser). */
static int string_list(stmt *S, names *out, tc_diag *d)
{
    tok t;
    int rc = next_tok(S, &t, d);
    if (rc)
        return rc;
    if (!is_punct(&t, '['))
        return bad_at(S->L, S->lineno, "a declaration of parameters or buffers that is not a list");
    if ((rc = next_tok(S, &t, d)))
        return rc;
    while (!is_punct(&t, ']')) {
        if (t.kind != T_STRING)
            return bad_at(S->L, S->lineno, "a list of parameters or buffers that is not of string literals");
        tc_buf b = TC_BUF_INIT(0);
        while (!rc && t.kind == T_STRING && !(rc = literal(S, &t, &b)))
            rc = next_tok(S, &t, d);
        char *v = rc ? NULL : tc_buf_take(&b);
        tc_buf_free(&b);
        if (rc)
            return rc;
        if (!v || tc_vec_push(out, v)) {
            free(v);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        if (is_punct(&t, ','))
            rc = next_tok(S, &t, d);
        else if (!is_punct(&t, ']'))
            return bad_at(S->L, S->lineno, "a list of parameters or buffers whose items are not separated by commas");
        if (rc)
            return rc;
    }
    if ((rc = next_tok(S, &t, d)))
        return rc;
    return t.kind == T_END ? 0 : bad_at(S->L, S->lineno, "text after the list of parameters or buffers");
}

/* v's names by name (the keys are v's own strings). */
static int index_names(const names *v, tc_strmap *m)
{
    for (size_t i = 0; i < v->n; i++)
        if (tc_strmap_put(m, v->v[i], i, NULL) < 0)
            return -1;
    return 0;
}

/* One statement of a module class's body, as importClass reads it: the
 * __parameters__ and __buffers__ lists (each time they come: torch takes
 * them all), attribute annotations `name : Type` and
 * `__annotations__["name"] = Type` (the class's attributes, in order),
 * constants `name : Type = value`, methods. */
static int class_statement(stmt *S, cls *k, tc_diag *d)
{
    tok t, u;
    int rc = next_tok(S, &t, d);
    if (rc || t.kind != T_IDENT || is_ident(&t, "def"))
        return rc;
    if ((rc = next_tok(S, &u, d)))
        return rc;
    bool is_p = is_ident(&t, "__parameters__"), is_b = is_ident(&t, "__buffers__");
    if (is_p || is_b) {
        if (is_punct(&u, ':')) { /* an annotation, then the value torch reads */
            while (u.kind != T_END && !is_punct(&u, '='))
                if ((rc = next_tok(S, &u, d)))
                    return rc;
            if (u.kind == T_END)
                return bad_at(S->L, S->lineno, "a declaration of parameters or buffers without a list");
        }
        if (!is_punct(&u, '='))
            return 0;
        *(is_p ? &k->seen_p : &k->seen_b) = true;
        return string_list(S, is_p ? &k->params : &k->buffers, d);
    }
    char *name = NULL;
    if (is_ident(&t, "__annotations__") && is_punct(&u, '[')) {
        tok str, close;
        tc_buf b = TC_BUF_INIT(0);
        if ((rc = next_tok(S, &str, d)) || str.kind != T_STRING || (rc = literal(S, &str, &b)) ||
            (rc = next_tok(S, &close, d)) || !is_punct(&close, ']')) {
            tc_buf_free(&b);
            return rc;
        }
        name = tc_buf_take(&b);
        tc_buf_free(&b);
    } else if (is_punct(&u, ':')) {
        while (u.kind != T_END && !is_punct(&u, '='))
            if ((rc = next_tok(S, &u, d)))
                return rc;
        if (u.kind != T_END)
            return 0; /* `name : Type = value`: a constant */
        name = strndup(t.p, t.n);
    } else {
        return 0;
    }
    if (!name)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int put = tc_strmap_put(&k->attr_ix, name, k->attrs.n, NULL);
    if (put == 0) {
        free(name);
        return bad_at(S->L, S->lineno, "an attribute declared twice in one class (torch refuses the class)");
    }
    if (put < 0 || tc_vec_push(&k->attrs, name)) {
        free(name);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

/* The class's parameters and buffers as torch's ClassType holds them: the
 * annotated attributes whose names the lists give, in annotation order. */
static int finish_class(tc_script *s, size_t ci, tc_diag *d)
{
    cls *k = &s->cls.v[ci];
    names p = {0}, b = {0};
    tc_strmap pm = {0}, bm = {0};
    int rc = index_names(&k->params, &pm) || index_names(&k->buffers, &bm)
                 ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : 0;
    for (size_t i = 0; i < k->attrs.n && !rc; i++) {
        names *to = tc_strmap_get(&pm, k->attrs.v[i], NULL) ? &p : tc_strmap_get(&bm, k->attrs.v[i], NULL) ? &b : NULL;
        char *v = to ? strdup(k->attrs.v[i]) : NULL;
        if (to && (!v || tc_vec_push(to, v))) {
            free(v);
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
    }
    tc_strmap_free(&pm);
    tc_strmap_free(&bm);
    free_names(&k->params);
    free_names(&k->buffers);
    k->params = p;
    k->buffers = b;
    s->out.v[ci] = (tc_script_class){p.v, p.n, b.v, b.n, k->seen_p && k->seen_b};
    return rc;
}

/* `class Name(Module):` at the start of a logical line: the name into *nm
 * (*module true), or *module false for any other statement. */
static int class_header(stmt *S, tok *nm, bool *module, tc_diag *d)
{
    tok t[5];
    int rc = next_tok(S, &t[0], d);
    if (rc)
        return rc;
    if (!is_ident(&t[0], "class")) {
        *module = false;
        return 0;
    }
    for (int i = 1; i < 5; i++)
        if ((rc = next_tok(S, &t[i], d)))
            return rc;
    bool m = t[1].kind == T_IDENT && is_punct(&t[2], '(') && is_ident(&t[3], "Module") && is_punct(&t[4], ')');
    if (m)
        *nm = t[1];
    *module = m;
    return 0;
}

/* A new module class, nm of module, declared at line lineno: its places in s
 * (its class, its output, its qualified name and its index by that name). */
static int add_class(tc_script *s, const lex *L, const char *module, const tok *nm, size_t lineno, tc_diag *d)
{
    char *qual = class_key(module, strlen(module), nm->p, nm->n);
    size_t at;
    if (!qual)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if (tc_strmap_get(&s->byname, qual, &at)) {
        free(qual);
        return bad_at(L, lineno, "a module class defined twice");
    }
    if (!tc_vec_extend(&s->cls, 1) || !tc_vec_extend(&s->out, 1) || tc_vec_push(&s->quals, qual)) {
        free(qual);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    if (tc_strmap_put(&s->byname, qual, s->cls.n - 1, NULL) < 0)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory"); /* qual is the list's */
    return 0;
}

int tc_script_parse(tc_script *s, const char *module, const char *what, const char *text, size_t n, tc_diag *d)
{
    lex L = {text, n, what, d};
    llines lines = {0};
    long cur = -1;       /* the module class whose body this is */
    size_t body = 0;     /* its body's indentation, once seen */
    int rc = logical_lines(&L, &lines);
    if (rc)
        goto done;
    for (size_t li = 0; li < lines.n; li++) {
        const lline *l = &lines.v[li];
        stmt S = {&L, l->start, l->end, l->lineno};
        if (l->indent == 0) { /* the left margin: a class starts, or anything else ends the one before */
            if (cur >= 0 && (rc = finish_class(s, (size_t)cur, d)))
                goto done;
            cur = -1;
            tok nm;
            bool mod;
            if ((rc = class_header(&S, &nm, &mod, d)))
                goto done;
            if (!mod)
                continue;
            if ((rc = add_class(s, &L, module, &nm, l->lineno, d)))
                goto done;
            cur = (long)s->cls.n - 1;
            body = 0;
            continue;
        }
        if (cur < 0)
            continue;
        if (!body)
            body = l->indent;
        if (l->indent < body) {
            rc = bad_at(&L, l->lineno, "an indentation that matches no enclosing block");
            goto done;
        }
        if (l->indent == body && (rc = class_statement(&S, &s->cls.v[cur], d))) /* deeper lines are inside a method */
            goto done;
    }
    if (cur >= 0)
        rc = finish_class(s, (size_t)cur, d);
done:
    tc_vec_free(&lines);
    return rc;
}
