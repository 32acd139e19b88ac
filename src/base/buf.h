/* A string builder: text grows on the heap (or fills a caller's array), up
 * to an optional limit, and can never be written past its end. Every
 * message, list or name that is built from pieces (file text, numbers,
 * names) goes through one, never through arithmetic on snprintf's return
 * value.
 *
 * Ownership: a heap tc_buf owns its bytes; tc_buf_free releases them (a
 * zeroed or freed buffer is empty and valid). A fixed one (tc_buf_fixed)
 * writes into the caller's array and never allocates, so messages can be
 * built when memory has run out. Appends never fail loudly: past the limit
 * the text is cut and ends with "...", on exhausted memory it stops
 * growing; tc_buf_cut and tc_buf_oom say which. */
#ifndef TC_BUF_H
#define TC_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tc_buf {
    char *p;
    size_t len, cap;
    size_t limit; /* the most bytes of text it holds (0: no limit) */
    bool cut;     /* something appended did not fit under limit */
    bool oom;     /* memory ran out: the text stops where it did */
    bool fixed;   /* p is the caller's array of cap bytes: never reallocated or freed */
} tc_buf;

/* An empty buffer of at most lim bytes of text (0: as much as memory allows). */
#define TC_BUF_INIT(lim) {.p = NULL, .len = 0, .cap = 0, .limit = (lim), .cut = false, .oom = false, .fixed = false}
/* An empty buffer writing into p (n >= 1 bytes, terminated at once): at most n - 1 bytes of text. */
tc_buf tc_buf_fixed(char *p, size_t n);

void tc_buf_add(tc_buf *b, const void *s, size_t n);
void tc_buf_puts(tc_buf *b, const char *s);
void tc_buf_putc(tc_buf *b, char c);
void tc_buf_printf(tc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tc_buf_vprintf(tc_buf *b, const char *fmt, va_list ap);
/* s (n bytes) made safe for a terminal and for one line of text: C0 and C1
 * controls, DEL, bytes that are not UTF-8 and the bidirectional overrides
 * written as \n, \t, \xNN or \u{NNNN}; everything else as it is. */
void tc_buf_esc(tc_buf *b, const char *s, size_t n);
/* The same for a NUL-terminated s (NULL: nothing). */
void tc_buf_escs(tc_buf *b, const char *s);
/* JSON text s (n bytes, as cJSON prints it: C0 controls escaped already)
 * made safe for a terminal without changing what it says: DEL, C1 controls
 * and the bidirectional marks tc_buf_esc escapes written as \uNNNN. */
void tc_buf_json(tc_buf *b, const char *s, size_t n);
/* How many leading bytes of s tc_buf_json keeps as they are (n: s needs no change). */
size_t tc_json_plain(const char *s, size_t n);
/* Separator then text, the first time without the separator: lists. */
void tc_buf_sep(tc_buf *b, const char *sep);

/* The text so far, NUL-terminated ("" when empty); valid until the next append. */
const char *tc_buf_str(const tc_buf *b);
static inline size_t tc_buf_len(const tc_buf *b) { return b->len; }
static inline bool tc_buf_cut(const tc_buf *b) { return b->cut; }
static inline bool tc_buf_oom(const tc_buf *b) { return b->oom; }
/* Empty it, keeping its memory and limit. */
void tc_buf_reset(tc_buf *b);
/* The text, now the caller's to free (NULL when memory ran out; a copy for a
 * fixed buffer); b is left empty. */
char *tc_buf_take(tc_buf *b);
void tc_buf_free(tc_buf *b);

/* One escaped copy of s into out (size n, always terminated, cut with "..."
 * when it does not fit; allocates nothing): for a name printed once in a
 * message. Returns out. */
const char *tc_esc(const char *s, char *out, size_t n);

#endif
