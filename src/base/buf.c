#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ELLIPSIS "..."

/* Room for need more bytes of text and its terminator; false when memory is out. */
static bool reserve(tc_buf *b, size_t need)
{
    if (b->oom)
        return false;
    if (need > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return false;
    }
    size_t want = b->len + need + 1;
    if (want <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < want)
        cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void put(tc_buf *b, const void *s, size_t n)
{
    if (n && reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
    }
}

void tc_buf_add(tc_buf *b, const void *s, size_t n)
{
    if (b->cut || b->oom || !n)
        return;
    if (!b->limit || n <= b->limit - b->len) {
        put(b, s, n);
        return;
    }
    /* what fits before the ellipsis, not splitting a UTF-8 sequence */
    size_t room = b->limit > b->len + strlen(ELLIPSIS) ? b->limit - b->len - strlen(ELLIPSIS) : 0;
    const uint8_t *u = s;
    while (room > 0 && (u[room] & 0xc0) == 0x80)
        room--;
    put(b, s, room);
    if (b->len + strlen(ELLIPSIS) <= b->limit)
        put(b, ELLIPSIS, strlen(ELLIPSIS));
    b->cut = true;
}

void tc_buf_puts(tc_buf *b, const char *s)
{
    tc_buf_add(b, s, strlen(s));
}

void tc_buf_putc(tc_buf *b, char c)
{
    tc_buf_add(b, &c, 1);
}

void tc_buf_vprintf(tc_buf *b, const char *fmt, va_list ap)
{
    if (b->cut || b->oom)
        return;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n <= 0)
        return;
    if (!b->limit || (size_t)n <= b->limit - b->len) {
        if (reserve(b, (size_t)n)) {
            vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
            b->len += (size_t)n;
        }
        return;
    }
    /* it will be cut: format it apart, then add what fits */
    char *tmp = malloc((size_t)n + 1);
    if (!tmp) {
        b->oom = true;
        return;
    }
    vsnprintf(tmp, (size_t)n + 1, fmt, ap);
    tc_buf_add(b, tmp, (size_t)n);
    free(tmp);
}

void tc_buf_printf(tc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void tc_buf_sep(tc_buf *b, const char *sep)
{
    if (b->len)
        tc_buf_puts(b, sep);
}

/* The code point of the well-formed UTF-8 sequence at s (n bytes left) and
 * its length, or 0 when s does not start one (overlong forms, surrogates and
 * values past U+10FFFF are not well formed). */
static size_t utf8_at(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t len;
    uint32_t v, min;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, v = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, v = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

/* Characters a terminal or a reader could be misled by: C1 controls, the
 * bidirectional embeddings, overrides and isolates, and the marks that
 * reorder text. */
static bool hidden(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void tc_buf_esc(tc_buf *b, const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n && !b->cut && !b->oom) {
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] < 0x7f)
            run++;
        tc_buf_add(b, u + i, run - i);
        if ((i = run) >= n)
            break;
        uint8_t c = u[i];
        uint32_t cp;
        size_t len;
        if (c == '\n')
            tc_buf_puts(b, "\\n"), i++;
        else if (c == '\r')
            tc_buf_puts(b, "\\r"), i++;
        else if (c == '\t')
            tc_buf_puts(b, "\\t"), i++;
        else if (c < 0x80 || !(len = utf8_at(u + i, n - i, &cp)))
            tc_buf_printf(b, "\\x%02x", c), i++;
        else if (hidden(cp))
            tc_buf_printf(b, "\\u{%04x}", (unsigned)cp), i += len;
        else
            tc_buf_add(b, u + i, len), i += len;
    }
}

const char *tc_buf_str(const tc_buf *b)
{
    return b->p ? b->p : "";
}

void tc_buf_reset(tc_buf *b)
{
    b->len = 0;
    b->cut = b->oom = false;
    if (b->p)
        b->p[0] = 0;
}

char *tc_buf_take(tc_buf *b)
{
    char *p = b->oom ? NULL : b->p;
    if (!p && !b->oom)
        p = calloc(1, 1);
    if (b->oom)
        free(b->p);
    size_t lim = b->limit;
    *b = (tc_buf)TC_BUF_INIT(lim);
    return p;
}

void tc_buf_free(tc_buf *b)
{
    if (b) {
        free(b->p);
        size_t lim = b->limit;
        *b = (tc_buf)TC_BUF_INIT(lim);
    }
}

const char *tc_esc(const char *s, char *out, size_t n)
{
    if (!n)
        return "";
    tc_buf b = TC_BUF_INIT(n - 1);
    tc_buf_esc(&b, s, strlen(s));
    if (b.oom)
        snprintf(out, n, "?");
    else
        memcpy(out, tc_buf_str(&b), b.len + 1);
    tc_buf_free(&b);
    return out;
}
