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
    if (b->fixed) { /* only when the limit was raised past the array: treated as memory out */
        b->oom = true;
        return false;
    }
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

/* Length of the first n bytes of s (more follow) without a UTF-8 sequence cut in two. */
static size_t whole_utf8(const char *s, size_t n)
{
    while (n > 0 && ((uint8_t)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* Something longer than the room left is being appended: how many of its
 * bytes go before the ellipsis. When even the ellipsis does not fit, the
 * text already there gives way to it (and nothing is appended), so cut text
 * always ends with "..." (unless the limit is shorter than that). */
static size_t cut_room(tc_buf *b)
{
    size_t el = strlen(ELLIPSIS);
    b->cut = true;
    if (b->limit < el)
        return 0;
    size_t before = b->limit - el;
    if (b->len <= before)
        return before - b->len;
    size_t k = whole_utf8(b->p, before);
    /* nor an escape of tc_buf_esc (\n, \xNN, \u{NNNN}) cut in part */
    for (size_t q = k; q-- > 0 && k - q < 8;)
        if (b->p[q] == '\\') {
            char c = b->p[q + 1];
            size_t escape = c == 'x' ? 4 : c == 'u' ? 8 : 2;
            if (q + escape > k)
                k = q;
            break;
        }
    b->len = k;
    b->p[b->len] = 0;
    return 0;
}

static void end_cut(tc_buf *b)
{
    if (b->len + strlen(ELLIPSIS) <= b->limit)
        put(b, ELLIPSIS, strlen(ELLIPSIS));
}

void tc_buf_add(tc_buf *b, const void *s, size_t n)
{
    if (b->cut || b->oom || !n)
        return;
    if (!b->limit || n <= b->limit - b->len) {
        put(b, s, n);
        return;
    }
    size_t room = cut_room(b); /* < n: n passes the limit */
    put(b, s, whole_utf8(s, room));
    end_cut(b);
}

/* s whole or, past the limit, not at all: an escape is never shown in part
 * (nor cut in part later: see cut_room). */
static void add_whole(tc_buf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->cut || b->oom)
        return;
    if (!b->limit || n <= b->limit - b->len) {
        put(b, s, n);
        return;
    }
    cut_room(b);
    end_cut(b);
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
    if (!b->cap && !reserve(b, 0)) /* room to format into at once */
        return;
    /* first into the room there is (under the limit): one vsnprintf when it fits */
    size_t room = b->cap - b->len;
    if (b->limit && room > b->limit - b->len + 1)
        room = b->limit - b->len + 1;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(b->p + b->len, room, fmt, aq);
    va_end(aq);
    if (n >= 0 && (size_t)n < room) {
        b->len += (size_t)n;
        return;
    }
    b->p[b->len] = 0;
    if (n <= 0)
        return;
    if (!b->limit || (size_t)n <= b->limit - b->len) {
        if (reserve(b, (size_t)n)) {
            vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
            b->len += (size_t)n;
        }
        return;
    }
    /* it will be cut: format one byte past what fits (so whole_utf8 can look
     * at it) straight into the buffer, then drop that byte */
    room = cut_room(b);
    if (room && reserve(b, room + 1)) {
        vsnprintf(b->p + b->len, room + 2, fmt, ap);
        b->len += whole_utf8(b->p + b->len, room);
        b->p[b->len] = 0;
    }
    end_cut(b);
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
        char e[16];
        if (c == '\n')
            add_whole(b, "\\n"), i++;
        else if (c == '\r')
            add_whole(b, "\\r"), i++;
        else if (c == '\t')
            add_whole(b, "\\t"), i++;
        else if (c < 0x80 || !(len = utf8_at(u + i, n - i, &cp)))
            snprintf(e, sizeof e, "\\x%02x", c), add_whole(b, e), i++;
        else if (hidden(cp))
            snprintf(e, sizeof e, "\\u{%04x}", (unsigned)cp), add_whole(b, e), i += len;
        else
            tc_buf_add(b, u + i, len), i += len;
    }
}

size_t tc_json_plain(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t run = 0, len;
    uint32_t cp;
    /* eight bytes at a time while none of them is 0x7f or above (JSON is mostly ASCII) */
    for (uint64_t w; run + 8 <= n; run += 8) {
        memcpy(&w, u + run, 8);
        if (((w + 0x0101010101010101ull) | w) & 0x8080808080808080ull)
            break;
    }
    while (run < n && u[run] != 0x7f && !(u[run] >= 0xc2 && (len = utf8_at(u + run, n - run, &cp)) && hidden(cp)))
        run++;
    return run;
}

void tc_buf_json(tc_buf *b, const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n && !b->cut && !b->oom) {
        size_t run = i + tc_json_plain(s + i, n - i), len = 1;
        uint32_t cp = 0x7f;
        tc_buf_add(b, u + i, run - i);
        if ((i = run) >= n)
            break;
        if (u[i] != 0x7f)
            len = utf8_at(u + i, n - i, &cp); /* a hidden code point starts here */
        char e[16];
        snprintf(e, sizeof e, "\\u%04x", (unsigned)cp);
        add_whole(b, e);
        i += len;
    }
}

void tc_buf_escs(tc_buf *b, const char *s)
{
    if (s)
        tc_buf_esc(b, s, strlen(s));
}

const char *tc_buf_str(const tc_buf *b)
{
    return b->p ? b->p : "";
}

tc_buf tc_buf_fixed(char *p, size_t n)
{
    tc_buf b = TC_BUF_INIT(n ? n - 1 : 0);
    b.p = p;
    b.cap = n;
    b.fixed = true;
    if (n)
        p[0] = 0;
    else
        b.oom = true; /* no room even for the terminator */
    return b;
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
    char *p;
    if (b->fixed) {
        p = b->oom ? NULL : strdup(tc_buf_str(b));
        tc_buf_reset(b);
        return p;
    }
    p = b->oom ? NULL : b->p;
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
    if (b && b->fixed) {
        tc_buf_reset(b);
    } else if (b) {
        free(b->p);
        size_t lim = b->limit;
        *b = (tc_buf)TC_BUF_INIT(lim);
    }
}

const char *tc_esc(const char *s, char *out, size_t n)
{
    if (!n)
        return "";
    tc_buf b = tc_buf_fixed(out, n);
    tc_buf_escs(&b, s);
    return out;
}
