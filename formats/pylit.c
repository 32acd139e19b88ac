/* Python literals (pylit.h). */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "pylit.h"

typedef struct lit {
    const char *p, *end;
    bool longs;       /* versions 1.0 and 2.0: a Python 2 'L' after an integer is dropped, as numpy does */
    int depth;
    const char *err;  /* what is wrong, at p */
} lit;


void tc_pylit_free(lv *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->v.n; i++)
        tc_pylit_free(v->v.v[i]);
    tc_vec_free(&v->v);
    free(v->s);
    free(v);
}

static lv *lv_new(lit *L, lv_kind k)
{
    lv *v = calloc(1, sizeof *v);
    if (!v)
        L->err = "out of memory";
    else
        v->k = k;
    return v;
}

static void skip_space(lit *L)
{
    while (L->p < L->end) {
        char c = *L->p;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f')
            L->p++;
        else if (c == '#')
            while (L->p < L->end && *L->p != '\n')
                L->p++;
        else
            break;
    }
}

static bool is_ident(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_utf8(tc_buf *b, uint32_t cp)
{
    if (cp < 0x80) {
        tc_buf_putc(b, (char)cp);
    } else if (cp < 0x800) {
        tc_buf_putc(b, (char)(0xC0 | cp >> 6));
        tc_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        tc_buf_putc(b, (char)(0xE0 | cp >> 12));
        tc_buf_putc(b, (char)(0x80 | (cp >> 6 & 0x3F)));
        tc_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
    } else {
        tc_buf_putc(b, (char)(0xF0 | cp >> 18));
        tc_buf_putc(b, (char)(0x80 | (cp >> 12 & 0x3F)));
        tc_buf_putc(b, (char)(0x80 | (cp >> 6 & 0x3F)));
        tc_buf_putc(b, (char)(0x80 | (cp & 0x3F)));
    }
}

/* One string literal (with its prefix), appended to b: Python's escapes in
 * a plain literal, none in a raw one. Triple quotes and \N{...} are refused. */
static bool string_part(lit *L, tc_buf *b, bool *bytes)
{
    bool raw = false, by = false;
    while (L->p < L->end && strchr("rRbBuU", *L->p)) {
        raw |= *L->p == 'r' || *L->p == 'R';
        by |= *L->p == 'b' || *L->p == 'B';
        L->p++;
    }
    *bytes = by;
    char q = *L->p++;
    if (L->p + 1 < L->end && L->p[0] == q && L->p[1] == q) {
        L->err = "a triple-quoted string (not read)";
        return false;
    }
    while (L->p < L->end && *L->p != q) {
        char c = *L->p++;
        if (c == '\n') {
            L->err = "a newline inside a string";
            return false;
        }
        if (c != '\\' || raw) {
            if (c == '\\' && L->p < L->end) /* a raw string keeps the backslash and the quote after it */
                tc_buf_putc(b, c), c = *L->p++;
            tc_buf_putc(b, c);
            continue;
        }
        if (L->p >= L->end)
            break;
        char e = *L->p++;
        const char *simple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
        const char *m = NULL;
        for (const char *s = simple; *s; s += 2)
            if (*s == e)
                m = s;
        if (m) {
            tc_buf_putc(b, m[1]);
        } else if (e == '\n') {
            /* a line continuation inside the string */
        } else if (e >= '0' && e <= '7') {
            unsigned v = (unsigned)(e - '0');
            for (int k = 0; k < 2 && L->p < L->end && *L->p >= '0' && *L->p <= '7'; k++)
                v = v * 8 + (unsigned)(*L->p++ - '0');
            if (by)
                tc_buf_putc(b, (char)v);
            else
                put_utf8(b, v);
        } else if (e == 'x' || (!by && (e == 'u' || e == 'U'))) {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < nd; k++) {
                int h = L->p < L->end ? hexval(*L->p) : -1;
                if (h < 0) {
                    L->err = "a bad escape in a string";
                    return false;
                }
                v = v * 16 + (uint32_t)h;
                L->p++;
            }
            if (v > 0x10FFFF) {
                L->err = "a bad escape in a string";
                return false;
            }
            if (by)
                tc_buf_putc(b, (char)v);
            else
                put_utf8(b, v);
        } else if (e == 'N' && !by) {
            L->err = "a \\N{...} escape (not read)";
            return false;
        } else {
            tc_buf_putc(b, '\\'); /* Python keeps an unknown escape as it is */
            tc_buf_putc(b, e);
        }
    }
    if (L->p >= L->end) {
        L->err = "a string that does not end";
        return false;
    }
    L->p++;
    return true;
}

/* Adjacent literals join into one, as Python's parser joins them. */
static lv *string_lit(lit *L)
{
    tc_buf b = TC_BUF_INIT(0);
    bool first_bytes = false, bytes;
    int parts = 0;
    for (;;) {
        skip_space(L);
        const char *q = L->p;
        while (q < L->end && strchr("rRbBuU", *q) && q - L->p < 2)
            q++;
        if (q >= L->end || (*q != '\'' && *q != '"'))
            break;
        if (!string_part(L, &b, &bytes))
            goto fail;
        if (parts++ && bytes != first_bytes) {
            L->err = "bytes and str literals joined";
            goto fail;
        }
        first_bytes = bytes;
    }
    if (tc_buf_oom(&b)) {
        L->err = "out of memory";
        goto fail;
    }
    lv *v = lv_new(L, first_bytes ? LV_BYTES : LV_STR);
    if (v) {
        v->len = tc_buf_len(&b);
        v->s = tc_buf_take(&b);
        if (!v->s && !(v->s = calloc(1, 1))) {
            free(v);
            L->err = "out of memory";
            return NULL;
        }
    }
    tc_buf_free(&b);
    return v;
fail:
    tc_buf_free(&b);
    return NULL;
}

/* An integer literal (decimal, 0x, 0o, 0b; underscores between digits), or another number. */
static lv *number_lit(lit *L)
{
    const char *s = L->p;
    int base = 10;
    if (*s == '0' && s + 1 < L->end && strchr("xXoObB", s[1])) {
        base = s[1] == 'x' || s[1] == 'X' ? 16 : s[1] == 'o' || s[1] == 'O' ? 8 : 2;
        s += 2;
        if (s < L->end && *s == '_')
            s++;
    }
    uint64_t v = 0;
    bool huge = false, any = false, zeros = true;
    const char *p = s;
    for (; p < L->end; p++) {
        if (*p == '_' && any && p + 1 < L->end && hexval(p[1]) >= 0)
            continue;
        int h = hexval(*p);
        if (h < 0 || h >= base)
            break;
        if (base == 10 && *p != '0')
            zeros = false;
        if (v > (UINT64_MAX - (uint64_t)h) / (uint64_t)base)
            huge = true;
        else
            v = v * (uint64_t)base + (uint64_t)h;
        any = true;
    }
    if (!any) {
        L->err = "a malformed number";
        return NULL;
    }
    if (p < L->end && (*p == '.' || *p == 'e' || *p == 'E' || *p == 'j' || *p == 'J')) {
        /* a float or a complex: a literal, but not one numpy's header checks accept */
        while (p < L->end && (is_ident(*p) || *p == '.' || ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E'))))
            p++;
        L->p = p;
        return lv_new(L, LV_OTHER);
    }
    if (base == 10 && *s == '0' && p - s > 1 && !zeros) {
        L->err = "an integer with a leading zero";
        return NULL;
    }
    if (L->longs && p < L->end && (*p == 'L' || *p == 'l'))
        p++;
    if (p < L->end && is_ident(*p)) {
        L->err = "a malformed number";
        return NULL;
    }
    L->p = p;
    lv *n = lv_new(L, LV_INT);
    if (n) {
        n->huge = huge || v > INT64_MAX;
        n->i = (int64_t)(v > INT64_MAX ? INT64_MAX : v);
    }
    return n;
}

static lv *expr(lit *L);

/* Items up to close, separated by commas (a trailing one allowed); in
 * braces, key ':' value when the first item has a ':' after it (a dict; c
 * becomes LV_DICT), else a set. *commas counts the separators. */
static bool items(lit *L, lv *c, char close, size_t *commas)
{
    *commas = 0;
    bool dict = false;
    for (;;) {
        skip_space(L);
        if (L->p < L->end && *L->p == close) {
            L->p++;
            return true;
        }
        lv *x = expr(L);
        if (!x || tc_vec_push(&c->v, x)) {
            if (x)
                L->err = "out of memory";
            tc_pylit_free(x);
            return false;
        }
        skip_space(L);
        if (close == '}' && c->v.n == 1 && L->p < L->end && *L->p == ':') {
            dict = true;
            c->k = LV_DICT;
        }
        if (dict) {
            if (L->p >= L->end || *L->p != ':') {
                L->err = "a dict item without ':'";
                return false;
            }
            L->p++;
            if (!(x = expr(L)) || tc_vec_push(&c->v, x)) {
                if (x)
                    L->err = "out of memory";
                tc_pylit_free(x);
                return false;
            }
            skip_space(L);
        }
        if (L->p < L->end && *L->p == ',') {
            L->p++;
            (*commas)++;
            continue;
        }
        if (L->p < L->end && *L->p == close) {
            L->p++;
            return true;
        }
        L->err = "a missing ',' or closing bracket";
        return false;
    }
}

static lv *expr(lit *L)
{
    skip_space(L);
    if (L->p >= L->end) {
        L->err = "the header ends early";
        return NULL;
    }
    if (++L->depth > TC_PYLIT_MAX_DEPTH) {
        L->err = "nested too deep";
        return NULL;
    }
    lv *v = NULL;
    char c = *L->p;
    const char *q = L->p;
    while (q < L->end && strchr("rRbBuU", *q) && q - L->p < 2)
        q++;
    if (q < L->end && (*q == '\'' || *q == '"')) {
        v = string_lit(L);
    } else if (c >= '0' && c <= '9') {
        v = number_lit(L);
    } else if (c == '-' || c == '+') {
        L->p++;
        skip_space(L);
        if (L->p < L->end && *L->p >= '0' && *L->p <= '9' && (v = number_lit(L)) && v->k == LV_INT && c == '-')
            v->i = -v->i;
    } else if (c == '(' || c == '[' || c == '{') {
        L->p++;
        if ((v = lv_new(L, c == '(' ? LV_TUPLE : c == '[' ? LV_LIST : LV_OTHER))) {
            size_t commas;
            if (!items(L, v, c == '(' ? ')' : c == '[' ? ']' : '}', &commas)) {
                tc_pylit_free(v);
                v = NULL;
            } else if (c == '{' && !v->v.n) { /* {} is an empty dict */
                v->k = LV_DICT;
            } else if (c == '(' && v->v.n == 1 && !commas) { /* (x) is x */
                lv *x = v->v.v[0];
                v->v.n = 0;
                tc_pylit_free(v);
                v = x;
            }
        }
    } else if (is_ident(c)) {
        const char *s = L->p;
        while (L->p < L->end && is_ident(*L->p))
            L->p++;
        size_t n = (size_t)(L->p - s);
        if (n == 4 && !memcmp(s, "True", 4)) {
            if ((v = lv_new(L, LV_BOOL)))
                v->i = 1;
        } else if (n == 5 && !memcmp(s, "False", 5)) {
            v = lv_new(L, LV_BOOL);
        } else if (n == 4 && !memcmp(s, "None", 4)) {
            v = lv_new(L, LV_NONE);
        } else {
            L->err = "a name that is not a literal";
        }
    } else {
        L->err = "a character that starts no literal";
    }
    L->depth--;
    return v;
}


lv *tc_pylit_parse(const char *p, const char *end, bool longs, const char **err, const char **at)
{
    lit L = {p, end, longs, 0, NULL};
    lv *v = expr(&L);
    if (v) {
        skip_space(&L);
        if (L.p != end) {
            tc_pylit_free(v);
            v = NULL;
            L.err = "text after the literal";
        }
    }
    if (!v) {
        *err = L.err ? L.err : "not a literal";
        *at = L.p;
    }
    return v;
}
