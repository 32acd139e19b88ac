/* caffe2's PyTorchStreamReader over miniz (zip.h): what torch's zip reader
 * checks before and besides miniz, the same in torch 1.13 and 2.x. */
#include "zip.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* std::stoull(s) on the record's bytes as a C string: leading white space,
 * an optional sign (a '-' negates modulo 2^64), decimal digits up to the
 * first other byte. 0, or 1 when it throws (no digits, or past 2^64 - 1). */
static int stoull(const char *s, uint64_t *out)
{
    while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
        s++;
    bool neg = false;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (*s < '0' || *s > '9')
        return 1;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned dg = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - dg) / 10)
            return 1;
        v = v * 10 + dg;
    }
    *out = neg ? 0 - v : v;
    return 0;
}

/* CPython's strict UTF-8 decoder's verdict (pybind11 turns each record name
 * into a str with it): no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 9;
        if (k == 9 || n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += k + 1;
    }
    return true;
}

void tc_zip_torch_free(tc_zip_torch *t)
{
    if (!t)
        return;
    free(t->archive);
    t->archive = NULL;
}

const tc_zip_entry *tc_zip_torch_find(const tc_zip_torch *t, const tc_zip *z, const char *name)
{
    tc_buf b = TC_BUF_INIT(0);
    tc_buf_add(&b, t->archive, t->alen);
    tc_buf_putc(&b, '/');
    tc_buf_puts(&b, name);
    const tc_zip_entry *e = tc_buf_oom(&b) ? NULL : tc_zip_find(z, tc_buf_str(&b));
    tc_buf_free(&b);
    return e;
}

int tc_zip_torch_init(tc_zip_torch *t, const tc_zip *z, uint64_t max, tc_diag *d)
{
    memset(t, 0, sizeof *t);
    uint8_t head[8];
    int rc;
    if (z->src->size > 8) {
        if ((rc = tc_src_read(z->src, 0, head, 8, "zip header", d)))
            return rc;
        if (!memcmp(head, "PYTORCH1", 8))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "an archive of torch's preview release (PYTORCH1), which torch "
                           "refuses");
    }
    if (!z->n)
        return tc_fail(d, TC_ERR_FORMAT, "zip archive has no entries");
    const tc_zip_entry *first = &z->e[0];
    const char *slash = memchr(first->name, '/', first->nlen);
    if (!slash)
        return tc_fail(d, TC_ERR_FORMAT, "zip entry '%s' is not inside a top folder (not a torch checkpoint)",
                       first->name);
    t->alen = (size_t)(slash - first->name);
    if (memchr(first->name, 0, t->alen))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "zip: the top folder's name holds a NUL byte");
    if (!(t->archive = malloc(t->alen + 1)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    memcpy(t->archive, first->name, t->alen);
    t->archive[t->alen] = 0;
    const char *rec = ".data/version";
    const tc_zip_entry *v = tc_zip_torch_find(t, z, rec);
    if (!v && (v = tc_zip_torch_find(t, z, rec = "version")) == NULL)
        rc = tc_fail(d, TC_ERR_FORMAT, "no %s/version record (torch refuses such files)", t->archive);
    uint8_t *text = NULL;
    size_t len = 0;
    if (!v || (rc = tc_zip_read_all(z, v, max, false, &text, &len, d))) {
        tc_zip_torch_free(t);
        return rc;
    }
    tc_buf b = TC_BUF_INIT(64);
    tc_buf_esc(&b, (const char *)text, strnlen((const char *)text, len));
    char *s = malloc(len + 1);
    if (s) {
        memcpy(s, text, len);
        s[len] = 0;
    }
    free(text);
    if (!s)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    else if (stoull(s, &t->version))
        rc = tc_fail(d, TC_ERR_FORMAT, "%s/%s record '%s' is not a number (torch refuses the file)", t->archive, rec,
                     tc_buf_str(&b));
    else if (t->version < 1 || t->version > 10)
        rc = tc_fail(d, TC_ERR_UNSUPPORTED,
                     "%s/%s record says %llu; torch reads versions 1 to 10 (torch refuses the file)", t->archive, rec,
                     (unsigned long long)t->version);
    free(s);
    tc_buf_free(&b);
    /* torch 2.x's constructor reads .data/serialization_id too, when there is one */
    t->readers = z->readers;
    const tc_zip_entry *sid = rc ? NULL : tc_zip_torch_find(t, z, ".data/serialization_id");
    if (sid && (t->readers & TC_ZIP_TORCH2)) {
        tc_diag tmp = TC_DIAG_INIT;
        uint8_t *id = NULL;
        size_t idl;
        if (tc_zip_unreadable(sid) || tc_zip_read_all(z, sid, max, false, &id, &idl, &tmp)) {
            if (t->readers == TC_ZIP_TORCH2)
                rc = tc_fail(d, TC_ERR_FORMAT, "%s/.data/serialization_id record: %s (torch 2.x refuses the file)",
                             t->archive, tc_zip_unreadable(sid) ? tc_zip_unreadable(sid) : tmp.msg);
            t->readers &= ~(unsigned)TC_ZIP_TORCH2;
        }
        free(id);
    }
    if (rc)
        tc_zip_torch_free(t);
    return rc;
}

int tc_zip_torch_records(const tc_zip_torch *t, const tc_zip *z, tc_diag *d)
{
    for (size_t i = 0; i < z->n; i++) {
        char name[512];
        tc_zip_listed_name(&z->e[i], name);
        size_t l = strlen(name);
        if (l < t->alen + 1 || memcmp(name, t->archive, t->alen) || name[t->alen] != '/')
            return tc_fail(d, TC_ERR_FORMAT, "zip entry '%s' is outside the top folder '%s/' (torch refuses this)",
                           name, t->archive);
        if (!utf8((const uint8_t *)name + t->alen + 1, l - t->alen - 1)) {
            char esc[600];
            return tc_fail(d, TC_ERR_FORMAT,
                           "zip entry '%s' is not UTF-8: torch.load's list of the records fails on it (torch "
                           "refuses the file)",
                           tc_esc(name, esc, sizeof esc));
        }
    }
    return 0;
}
