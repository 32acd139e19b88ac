/* TorchScript archives (torch.jit.save): the zip of torch.save with code/,
 * constants.pkl and data.pkl of __torch__.* objects. Tensors are named as
 * scripted_module.state_dict() names them, from the parameters and buffers
 * each module class declares in its code file (torchscript.h). */
#include "torchscript.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "torch_zip.h"

extern const tc_format tc_format_torchscript;

/* ---- the declarations of code/ ------------------------------------------------------ */

struct tc_script {
    tc_script_class *cls;
    size_t n, cap;
    tc_strmap byname;        /* qualified class name -> index into cls */
    char **names;            /* per class: its qualified name */
};

tc_script *tc_script_new(void) { return calloc(1, sizeof(tc_script)); }

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void tc_script_free(tc_script *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free_list(s->cls[i].params, s->cls[i].nparams);
        free_list(s->cls[i].buffers, s->cls[i].nbuffers);
        free(s->names[i]);
    }
    free(s->cls);
    free(s->names);
    tc_strmap_free(&s->byname);
    free(s);
}

size_t tc_script_nclasses(const tc_script *s) { return s ? s->n : 0; }

const tc_script_class *tc_script_class_of(const tc_script *s, const char *qualname)
{
    size_t i;
    return s && tc_strmap_get(&s->byname, qualname, &i) ? &s->cls[i] : NULL;
}

typedef struct line {
    const char *p;
    size_t n;
    size_t no;       /* 1-based */
    const char *what;
    tc_diag *d;
} line;

static int bad(const line *l, const char *why)
{
    return tc_fail(l->d, TC_ERR_FORMAT, "%s line %zu: %s", l->what, l->no, why);
}

static bool ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string literal at *i of l (as c10's printQuotedString writes them), unquoted into a new string. */
static int literal(const line *l, size_t *i, char **out)
{
    char q = l->p[*i];
    size_t end = *i + 1;
    while (end < l->n && l->p[end] != q)
        end += l->p[end] == '\\' ? 2 : 1;
    char *s = malloc(end - *i + 1); /* the unquoted text is never longer than the literal */
    size_t k = 0, j = *i + 1;
    if (!s)
        return tc_fail(l->d, TC_ERR_NOMEM, "out of memory");
    for (; j < l->n && l->p[j] != q; j++) {
        char c = l->p[j];
        if (c == '\\') {
            if (++j >= l->n)
                break;
            static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
            const char *e = strchr(from, l->p[j]);
            if (e && l->p[j]) {
                c = to[e - from];
            } else if (l->p[j] == 'x' && j + 2 < l->n && hexval(l->p[j + 1]) >= 0 && hexval(l->p[j + 2]) >= 0) {
                c = (char)(hexval(l->p[j + 1]) * 16 + hexval(l->p[j + 2]));
                j += 2;
            } else {
                free(s);
                return bad(l, "an escape in a string literal that TorchScript does not write");
            }
            if (!c) {
                free(s);
                return bad(l, "a name holding a NUL byte");
            }
        }
        s[k++] = c;
    }
    if (j >= l->n) {
        free(s);
        return bad(l, "a string literal without its closing quote");
    }
    s[k] = 0;
    *i = j + 1;
    *out = s;
    return 0;
}

/* `[ "a", "b", ]` from *i of l to the end of the line. */
static int string_list(const line *l, size_t i, char ***out, size_t *nout)
{
    size_t n = 0, cap = 0;
    char **v = NULL;
    int rc = 0;
    while (i < l->n && l->p[i] == ' ')
        i++;
    if (i >= l->n || l->p[i] != '[')
        return bad(l, "a declaration of parameters or buffers that is not a list");
    i++;
    for (;;) {
        while (i < l->n && l->p[i] == ' ')
            i++;
        if (i < l->n && l->p[i] == ']') {
            i++;
            break;
        }
        if (i >= l->n || (l->p[i] != '"' && l->p[i] != '\'')) {
            rc = bad(l, "a list of parameters or buffers that is not of string literals");
            break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char **p = realloc(v, nc * sizeof *p);
            if (!p) {
                rc = tc_fail(l->d, TC_ERR_NOMEM, "out of memory");
                break;
            }
            v = p;
            cap = nc;
        }
        if ((rc = literal(l, &i, &v[n])))
            break;
        n++;
        while (i < l->n && l->p[i] == ' ')
            i++;
        if (i < l->n && l->p[i] == ',')
            i++;
        else if (i >= l->n || l->p[i] != ']') {
            rc = bad(l, "a list of parameters or buffers whose items are not separated by commas");
            break;
        }
    }
    while (!rc && i < l->n && (l->p[i] == ' ' || l->p[i] == '\r'))
        i++;
    if (!rc && i < l->n && l->p[i] != '#')
        rc = bad(l, "text after the list of parameters or buffers");
    if (rc) {
        free_list(v, n);
        return rc;
    }
    *out = v;
    *nout = n;
    return 0;
}

/* A new module class named qual; its index or -1. */
static long add_class(tc_script *s, const char *qual, const line *l)
{
    size_t at;
    if (tc_strmap_get(&s->byname, qual, &at))
        return bad(l, "a module class defined twice"), -1;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        tc_script_class *c = realloc(s->cls, nc * sizeof *c);
        if (c)
            s->cls = c;
        char **nm = c ? realloc(s->names, nc * sizeof *nm) : NULL;
        if (!nm)
            return tc_fail(l->d, TC_ERR_NOMEM, "out of memory"), -1;
        s->names = nm;
        s->cap = nc;
    }
    memset(&s->cls[s->n], 0, sizeof s->cls[s->n]);
    if (!(s->names[s->n] = strdup(qual)))
        return tc_fail(l->d, TC_ERR_NOMEM, "out of memory"), -1;
    if (tc_strmap_put(&s->byname, s->names[s->n], s->n, NULL) < 0) {
        free(s->names[s->n]);
        return tc_fail(l->d, TC_ERR_NOMEM, "out of memory"), -1;
    }
    return (long)s->n++;
}

int tc_script_parse(tc_script *s, const char *module, const char *what, const char *text, size_t n, tc_diag *d)
{
    long cur = -1;           /* the module class whose body this is */
    size_t indent = 0;       /* its body's indentation, once seen */
    bool seen_p = false, seen_b = false;
    size_t ml = strlen(module);
    line l = {.what = what, .d = d};
    for (size_t pos = 0; pos < n;) {
        const char *nl = memchr(text + pos, '\n', n - pos);
        l.p = text + pos;
        l.n = nl ? (size_t)(nl - l.p) : n - pos;
        l.no++;
        pos += l.n + (nl != NULL);
        size_t sp = 0;
        while (sp < l.n && (l.p[sp] == ' ' || l.p[sp] == '\t'))
            sp++;
        if (sp == l.n || l.p[sp] == '#' || l.p[sp] == '\r')
            continue;
        if (sp == 0) { /* the left margin: a class starts, or anything else ends the one before */
            cur = -1;
            if (l.n < 6 || memcmp(l.p, "class ", 6))
                continue;
            size_t i = 6, b;
            while (i < l.n && ident(l.p[i]))
                i++;
            if (i == 6 || i >= l.n || l.p[i] != '(')
                continue; /* a class that is no module */
            for (b = i + 1; b < l.n && l.p[b] != ')'; b++)
                ;
            if (b - i - 1 != 6 || memcmp(l.p + i + 1, "Module", 6) || b + 1 >= l.n || l.p[b + 1] != ':')
                continue;
            char *qual = malloc(ml + i - 6 + 2);
            if (!qual)
                return tc_fail(d, TC_ERR_NOMEM, "out of memory");
            memcpy(qual, module, ml);
            qual[ml] = '.';
            memcpy(qual + ml + 1, l.p + 6, i - 6);
            qual[ml + 1 + i - 6] = 0;
            cur = add_class(s, qual, &l);
            free(qual);
            if (cur < 0)
                return d->code;
            indent = 0;
            seen_p = seen_b = false;
            continue;
        }
        if (cur < 0)
            continue;
        if (!indent)
            indent = sp;
        if (sp != indent)
            continue; /* inside a method */
        const char *rest = l.p + sp;
        size_t rn = l.n - sp;
        static const char kp[] = "__parameters__", kb[] = "__buffers__";
        bool is_p = rn > sizeof kp - 1 && !memcmp(rest, kp, sizeof kp - 1) && !ident(rest[sizeof kp - 1]);
        bool is_b = rn > sizeof kb - 1 && !memcmp(rest, kb, sizeof kb - 1) && !ident(rest[sizeof kb - 1]);
        if (!is_p && !is_b)
            continue;
        size_t i = sp + (is_p ? sizeof kp : sizeof kb) - 1;
        while (i < l.n && l.p[i] == ' ')
            i++;
        if (i >= l.n || l.p[i] != '=')
            continue; /* an annotation (`__parameters__ : ...`), not the declaration */
        if ((is_p && seen_p) || (is_b && seen_b))
            return bad(&l, is_p ? "__parameters__ declared twice in one class" : "__buffers__ declared twice in one class");
        tc_script_class *c = &s->cls[cur];
        int rc = is_p ? string_list(&l, i + 1, &c->params, &c->nparams) : string_list(&l, i + 1, &c->buffers, &c->nbuffers);
        if (rc)
            return rc;
        if (is_p)
            seen_p = true;
        else
            seen_b = true;
        c->declared = seen_p && seen_b;
    }
    return 0;
}

/* ---- the driver ----------------------------------------------------------------------- */

static void script_free(void *p) { tc_script_free(p); }

/* Every code/ .py files record's declarations; their text is held to --max-pickle-size in all. */
static int read_code(tc_ckpt *c, tc_tzip *z, tc_script *s, tc_diag *d)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/code/", z->archive);
    size_t pl = strlen(prefix);
    uint64_t total = 0, max = tc_ckpt_limits(c)->max_pickle_bytes;
    int rc = 0;
    for (size_t i = 0; i < z->zip.n && !rc; i++) {
        const tc_zip_entry *e = &z->zip.e[i];
        size_t nl = strlen(e->name);
        if (strncmp(e->name, prefix, pl) || nl < pl + 4 || strcmp(e->name + nl - 3, ".py"))
            continue;
        if ((total += e->usize) > max)
            return tc_fail(d, TC_ERR_LIMIT, "the code/ records take more than %llu bytes (raise with --max-pickle-size)",
                           (unsigned long long)max);
        /* code/a/b/c.py -> a.b.c */
        char *module = strndup(e->name + pl, nl - pl - 3);
        if (!module)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        for (char *p = module; *p; p++)
            if (*p == '/')
                *p = '.';
        uint8_t *text = NULL;
        size_t len = 0;
        if (!(rc = tc_tzip_read(z, c, e, &text, &len, d)))
            rc = tc_script_parse(s, module, e->name + strlen(z->archive) + 1, (const char *)text, len, d);
        free(text);
        free(module);
    }
    return rc;
}

static bool probe(const tc_probe *p) { return p->n >= 4 && !memcmp(p->head, "PK\x03\x04", 4); }

static int open_script(tc_ckpt *c, tc_diag *d)
{
    tc_tzip *z;
    int rc = tc_tzip_open(c, &tc_format_torchscript, &z, d);
    if (rc)
        return rc;
    if (!tc_tzip_listed(z, "constants.pkl"))
        return TC_FORMAT_DECLINE;
    tc_script *s = tc_script_new();
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    z->extra = s;
    z->free_extra = script_free;
    z->tg.script = s;
    if ((rc = tc_tzip_facts(c, z, d)))
        return rc;
    if (z->big)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "a big-endian TorchScript archive (byteorder record 'big'); only "
                       "little-endian ones are read");
    if ((rc = read_code(c, z, s, d)) || (rc = tc_tzip_data(c, z, d)))
        return rc;
    const pk_obj *f = pk_call_global(z->tg.root);
    char qual[1100] = "";
    if (f)
        snprintf(qual, sizeof qual, "%s.%s", f->s, f->name);
    if (!f || !tc_script_class_of(s, qual))
        return tc_fail(d, TC_ERR_UNSUPPORTED,
                       "a TorchScript archive whose data.pkl is not an object of a module class its code/ declares%s%s "
                       "(%zu module classes declared)",
                       f ? ": " : "", qual, tc_script_nclasses(s));
    /* constants.pkl: what torch.jit.load unpickles too, for the verdict (its tensors are no state_dict()'s) */
    const tc_zip_entry *ce = tc_tzip_record(z, "constants.pkl");
    uint8_t *buf = NULL;
    size_t len = 0;
    pk_obj *croot;
    if (!(rc = tc_tzip_read(z, c, ce, &buf, &len, d))) {
        pk_read_opts o = tc_torch_read_opts(&z->tg, "constants.pkl");
        o.on_persid = NULL;
        z->tg.pickle_bytes += len;
        rc = pk_read(z->tg.g, buf, len, &o, &croot, NULL, d);
        if (rc)
            rc = tc_torch_read_failed(&z->tg, rc, "constants.pkl", d);
    }
    free(buf);
    static const char *const refused[TC_NTORCH] = {"a TorchScript archive, which weights_only=True refuses",
                                                   "a TorchScript archive, which weights_only=True refuses"};
    if (rc || (rc = tc_torch_index(&z->tg, d)) || (rc = tc_weights_only(&z->tg, refused, d)))
        return rc;
    return tc_ckpt_add_fact(c, "torchscript", qual, d);
}

const tc_format tc_format_torchscript = {"torchscript", probe, open_script, tc_tzip_open_storage, NULL};
