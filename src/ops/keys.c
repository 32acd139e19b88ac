#include "keys.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "plan.h"
#include "strmap.h"

bool tc_keyops_any(const tc_keyops *o)
{
    return o && (o->strip || o->add_prefix || o->nrename || o->ndrop || o->nonly);
}

/* Split "REGEX=REPL" at its first '=' not escaped with a backslash; '\=' becomes '='. */
static int split_rename(const char *arg, char **re, char **repl, tc_diag *d)
{
    size_t n = strlen(arg);
    char *r = malloc(n + 1);
    if (!r)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t k = 0;
    const char *p = arg;
    for (; *p && *p != '='; p++) {
        if (p[0] == '\\' && p[1] == '=')
            p++;
        r[k++] = *p;
    }
    r[k] = 0;
    if (*p != '=') {
        free(r);
        return tc_fail(d, TC_ERR_USAGE, "--rename '%s': expected REGEX=REPL", arg);
    }
    if (!(*repl = strdup(p + 1))) {
        free(r);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    *re = r;
    return 0;
}

static int compile(const char *arg, regex_t *rx, char **repl, tc_diag *d)
{
    char *re = NULL;
    int rc = split_rename(arg, &re, repl, d);
    if (rc)
        return rc;
    int e = regcomp(rx, re, REG_EXTENDED);
    if (e) {
        char why[200];
        regerror(e, rx, why, sizeof why);
        free(re);
        free(*repl);
        return tc_fail(d, TC_ERR_USAGE, "--rename '%s': %s", arg, why);
    }
    free(re);
    return 0;
}

int tc_keyops_check(const tc_keyops *o, tc_diag *d)
{
    for (size_t i = 0; i < o->nrename; i++) {
        regex_t rx;
        char *repl;
        int rc = compile(o->rename[i], &rx, &repl, d);
        if (rc)
            return rc;
        regfree(&rx);
        free(repl);
    }
    if (o->strip_prefix && !*o->strip_prefix)
        return tc_fail(d, TC_ERR_USAGE, "--strip-prefix=: give a prefix, or no '=' for the shared one");
    return 0;
}

bool tc_keys_shared_prefix(const char *const *names, size_t n, char *out, size_t len)
{
    if (!n || !names[0])
        return false;
    const char *dot = strchr(names[0], '.');
    if (!dot || (size_t)(dot - names[0] + 2) > len)
        return false;
    size_t l = (size_t)(dot - names[0]) + 1;
    for (size_t i = 1; i < n; i++)
        if (names[i] && (strncmp(names[i], names[0], l) || !names[i][l]))
            return false;
    if (!names[0][l])
        return false;
    memcpy(out, names[0], l);
    out[l] = 0;
    return true;
}

/* s with the first match of rx replaced by repl (\0..\9 the match and its groups); NULL when out of memory. */
static char *substitute(const regex_t *rx, const char *repl, const char *s)
{
    regmatch_t m[10];
    if (regexec(rx, s, 10, m, 0))
        return strdup(s);
    tc_buf out = TC_BUF_INIT(0);
    tc_buf_add(&out, s, (size_t)m[0].rm_so);
    for (const char *p = repl; *p; p++) {
        if (*p == '\\' && p[1] >= '0' && p[1] <= '9') {
            int g = *++p - '0';
            if (m[g].rm_so >= 0)
                tc_buf_add(&out, s + m[g].rm_so, (size_t)(m[g].rm_eo - m[g].rm_so));
        } else if (*p == '\\' && p[1]) { /* \\, \= and any other escaped character: itself */
            tc_buf_putc(&out, *++p);
        } else {
            tc_buf_putc(&out, *p);
        }
    }
    tc_buf_puts(&out, s + m[0].rm_eo);
    return tc_buf_take(&out);
}

void tc_keymap_free(tc_keymap *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->name[i]);
    free(m->name);
    free(m->stripped);
    memset(m, 0, sizeof *m);
}

static int keymap_make(const tc_keyops *o, const char *const *names, size_t n, bool distinct, tc_keymap *m,
                       tc_diag *d);

int tc_keymap_make(const tc_keyops *o, const char *const *names, size_t n, tc_keymap *m, tc_diag *d)
{
    return keymap_make(o, names, n, true, m, d);
}

int tc_keymap_make_any(const tc_keyops *o, const char *const *names, size_t n, tc_keymap *m, tc_diag *d)
{
    return keymap_make(o, names, n, false, m, d);
}

static int keymap_make(const tc_keyops *o, const char *const *names, size_t n, bool distinct, tc_keymap *m,
                       tc_diag *d)
{
    memset(m, 0, sizeof *m);
    int rc = 0;
    regex_t *rx = calloc(o->nrename + 1, sizeof *rx);
    char **repl = calloc(o->nrename + 1, sizeof *repl);
    size_t ncompiled = 0;
    tc_nameidx seen = {0};
    const char **kept = malloc((n + 1) * sizeof *kept);
    if (!(m->name = calloc(n + 1, sizeof *m->name)) || !rx || !repl || !kept ||
        (distinct && tc_nameidx_init(&seen, (const char *const *)m->name, n) < 0)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    m->n = n;
    for (; ncompiled < o->nrename; ncompiled++)
        if ((rc = compile(o->rename[ncompiled], &rx[ncompiled], &repl[ncompiled], d)))
            goto done;
    /* which names stay */
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        bool stay = (!o->nonly || tc_glob_any(o->only, o->nonly, names[i])) && !tc_glob_any(o->drop, o->ndrop, names[i]);
        if (stay)
            kept[nk++] = names[i];
        else
            m->ndropped++;
    }
    /* the prefix to take off */
    char shared[512];
    const char *strip = o->strip_prefix;
    if (o->strip && !strip) {
        if (!tc_keys_shared_prefix(kept, nk, shared, sizeof shared)) {
            rc = tc_fail(d, TC_ERR_USAGE,
                         "--strip-prefix: the names share no first component to take off (give --strip-prefix=P)");
            goto done;
        }
        strip = shared;
    }
    bool took = false;
    size_t sl = strip ? strlen(strip) : 0, al = o->add_prefix ? strlen(o->add_prefix) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = names[i];
        if ((o->nonly && !tc_glob_any(o->only, o->nonly, s)) || tc_glob_any(o->drop, o->ndrop, s))
            continue;
        if (strip && !strncmp(s, strip, sl) && s[sl]) {
            s += sl;
            took = true;
        }
        char *cur = strdup(s);
        for (size_t r = 0; cur && r < o->nrename; r++) {
            char *next = substitute(&rx[r], repl[r], cur);
            free(cur);
            cur = next;
        }
        if (cur && al) {
            tc_buf p = TC_BUF_INIT(0);
            tc_buf_add(&p, o->add_prefix, al);
            tc_buf_puts(&p, cur);
            free(cur);
            cur = tc_buf_take(&p);
        }
        if (!cur) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            goto done;
        }
        m->name[i] = cur;
        if (!*cur) {
            rc = tc_fail(d, TC_ERR_USAGE, "'%s' would have no name left", names[i]);
            goto done;
        }
        size_t was;
        if (distinct && !tc_nameidx_add(&seen, i, &was)) {
            rc = tc_fail(d, TC_ERR_USAGE, "'%s' and '%s' would both be named '%s'", names[was], names[i], cur);
            goto done;
        }
    }
    if (took && !(m->stripped = strdup(strip)))
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
done:
    for (size_t r = 0; r < ncompiled; r++) {
        regfree(&rx[r]);
        free(repl[r]);
    }
    free(rx);
    free(repl);
    free(kept);
    tc_nameidx_free(&seen);
    if (rc)
        tc_keymap_free(m);
    return rc;
}

/* name quoted as a shell word (to paste into --drop), its controls escaped for the terminal. */
static void shell_word(tc_buf *b, const char *name)
{
    bool single = !strchr(name, '\'');
    tc_buf_putc(b, single ? '\'' : '"');
    for (const char *p = name; *p; p++) {
        if (!single && strchr("\"$`\\", *p))
            tc_buf_putc(b, '\\');
        tc_buf_esc(b, p, 1);
    }
    tc_buf_putc(b, single ? '\'' : '"');
}

/* Where o's tensor sits: the key that holds it, quoted when it is text. */
static void describe(tc_buf *b, const tc_outname *o)
{
    const tc_tensor *t = o->c ? tc_ckpt_tensor(o->c, o->t) : NULL;
    const tc_keyed *k = t && t->keyed >= 0 ? tc_ckpt_keyed(o->c, (size_t)t->keyed) : NULL;
    if (!k || t->item >= k->nkeys) {
        tc_buf_putc(b, '\'');
        tc_buf_esc(b, o->before ? o->before : o->name, strlen(o->before ? o->before : o->name));
        tc_buf_putc(b, '\'');
        return;
    }
    const char *key = k->keys[t->item];
    tc_buf_puts(b, k->attrs ? "the attribute " : "the key ");
    if (k->text[t->item])
        tc_buf_putc(b, '\'');
    tc_buf_esc(b, key, strlen(key));
    if (k->text[t->item])
        tc_buf_putc(b, '\'');
    if (k->name[0]) {
        tc_buf_puts(b, " of '");
        tc_buf_esc(b, k->name, strlen(k->name));
        tc_buf_putc(b, '\'');
    } else {
        tc_buf_puts(b, " of the top level");
    }
}

int tc_outnames_check(const tc_outname *v, size_t n, tc_diag *d)
{
    tc_strmap seen = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t was;
        int put = tc_strmap_put(&seen, v[i].name, i, &was);
        if (put < 0) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        } else if (put == 0) {
            const tc_outname *a = &v[was], *b = &v[i];
            const char *pa = a->before ? a->before : a->name, *pb = b->before ? b->before : b->name;
            tc_buf m = TC_BUF_INIT(900);
            tc_buf_puts(&m, "two tensors would be written as '");
            tc_buf_esc(&m, b->name, strlen(b->name));
            tc_buf_puts(&m, "': ");
            describe(&m, a);
            if (a->c && b->c && a->c != b->c)
                tc_buf_printf(&m, " in %s", tc_ckpt_path(a->c));
            tc_buf_puts(&m, " and ");
            describe(&m, b);
            if (a->c && b->c && a->c != b->c)
                tc_buf_printf(&m, " in %s", tc_ckpt_path(b->c));
            if (strcmp(pa, pb))
                tc_buf_puts(&m, " (key surgery made their names alike; --rename or --drop tells them apart)");
            else {
                tc_buf_puts(&m, " (their keys flatten to one name; --drop ");
                shell_word(&m, b->name);
                tc_buf_puts(&m, " leaves both out)");
            }
            rc = a->c ? tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(a->c), TC_NO_OFFSET, "%s", tc_buf_str(&m))
                      : tc_fail(d, TC_ERR_USAGE, "%s", tc_buf_str(&m));
            tc_buf_free(&m);
        }
    }
    tc_strmap_free(&seen);
    return rc;
}

int tc_badkey_fail(const tc_ckpt *c, const tc_tensor *t, const char *name, tc_diag *d)
{
    tc_buf m = TC_BUF_INIT(900);
    tc_buf_puts(&m, "tensor ");
    shell_word(&m, name);
    tc_buf_printf(&m, ": a key on its path is %s, which no state_dict name can be (torch names tensors with text); "
                      "--drop ", t->badkey);
    shell_word(&m, name);
    tc_buf_puts(&m, " leaves it out");
    int rc = tc_fail_at(d, TC_ERR_USAGE, tc_ckpt_path(c), TC_NO_OFFSET, "%s", tc_buf_str(&m));
    tc_buf_free(&m);
    return rc;
}
