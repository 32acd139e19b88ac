/* Text arguments of protocol-0 opcodes, parsed by CPython 3.11's rules (see
 * pickle_internal.h): strtol and PyLong_FromString for INT/LONG/GET/PUT,
 * PyOS_string_to_double for FLOAT, PyBytes_DecodeEscape for STRING,
 * raw-unicode-escape for UNICODE, and the UTF-8 decoder's strict and
 * 'surrogatepass' verdicts. */
#include "pickle_internal.h"
#include "vec.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C's isspace in the C locale, and Python's Py_ISSPACE on bytes: the same six. */
static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'Z')
        return c - 'A' + 10;
    return 99;
}

/* ---- big integers ------------------------------------------------------------ */

void pkt_big_free(pkt_big *b)
{
    free(b->d);
    b->d = NULL;
    b->n = b->cap = 0;
}

static int big_reserve(pkt_big *b, size_t n)
{
    return tc_grow(&b->d, &b->cap, n, sizeof *b->d);
}

/* b = b * mul + add */
static int big_muladd(pkt_big *b, uint32_t mul, uint32_t add)
{
    uint64_t carry = add;
    for (size_t i = 0; i < b->n; i++) {
        uint64_t v = (uint64_t)b->d[i] * mul + carry;
        b->d[i] = (uint32_t)v;
        carry = v >> 32;
    }
    if (carry) {
        if (big_reserve(b, b->n + 1))
            return -1;
        b->d[b->n++] = (uint32_t)carry;
    }
    return 0;
}

static void big_trim(pkt_big *b)
{
    while (b->n && !b->d[b->n - 1])
        b->n--;
}

int pkt_big_to_le(const pkt_big *b, uint8_t **out, size_t *len)
{
    size_t k = b->n * 4;
    uint8_t *p = malloc(k + 1);
    if (!p)
        return -1;
    for (size_t i = 0; i < b->n; i++)
        for (int j = 0; j < 4; j++)
            p[4 * i + (size_t)j] = (uint8_t)(b->d[i] >> (8 * j));
    while (k && !p[k - 1])
        k--;
    if (!b->neg || !k) {
        if (k && (p[k - 1] & 0x80))
            p[k++] = 0;
    } else {
        unsigned carry = 1;
        for (size_t i = 0; i < k; i++) {
            unsigned v = (uint8_t)~p[i] + carry;
            p[i] = (uint8_t)v;
            carry = v >> 8;
        }
        if (!(p[k - 1] & 0x80))
            p[k++] = 0xFF;
    }
    *out = p;
    *len = k;
    return 0;
}

/* ---- strtol, base 0 -------------------------------------------------------------- */

int64_t pkt_strtol0(const char *s, const char **end, bool *overflow)
{
    const char *p = s;
    *overflow = false;
    while (is_space(*p))
        p++;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && digit_value(p[2]) < 16) {
        base = 16;
        p += 2;
    } else if (p[0] == '0') {
        base = 8;
    }
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    const char *digits = p;
    while (digit_value(*p) < base) {
        uint64_t d = (uint64_t)digit_value(*p++);
        if (v > (limit - d) / (uint64_t)base)
            *overflow = true;
        else
            v = v * (uint64_t)base + d;
    }
    if (p == digits) {
        *end = s;
        return 0;
    }
    *end = p;
    if (*overflow)
        return neg ? INT64_MIN : INT64_MAX;
    return neg ? (int64_t)(0 - v) : (int64_t)v;
}

/* ---- PyLong_FromString ------------------------------------------------------------- */

int pkt_pylong(const char *s, int base, size_t max_digits, pkt_big *out, size_t *ndigits, const char **why)
{
    const char *p = s;
    *why = "invalid literal for int()";
    out->n = 0;
    out->neg = false;
    while (is_space(*p))
        p++;
    if (*p == '+' || *p == '-')
        out->neg = *p++ == '-';
    bool zero_only = false;
    if (base == 0) {
        if (p[0] != '0')
            base = 10;
        else if (p[1] == 'x' || p[1] == 'X')
            base = 16;
        else if (p[1] == 'o' || p[1] == 'O')
            base = 8;
        else if (p[1] == 'b' || p[1] == 'B')
            base = 2;
        else {
            zero_only = true; /* a C-style octal literal: only zeros remain valid */
            base = 10;
        }
        if (base != 10) {
            p += 2;
            if (*p == '_') /* one underscore may follow the prefix */
                p++;
        }
    }
    if (*p == '_')
        return 1;
    const char *start = p;
    size_t digits = 0;
    char prev = 0;
    for (; digit_value(*p) < base || *p == '_'; prev = *p++) {
        if (*p == '_' && prev == '_')
            return 1;
        if (*p != '_')
            digits++;
    }
    if (prev == '_' || !digits)
        return 1;
    *ndigits = base == 10 ? digits : 0;
    if (base == 10 && digits > max_digits) {
        *why = "more decimal digits than are read";
        return 2;
    }
    const char *stop = p;
    while (is_space(*p))
        p++;
    if (*p)
        return 1;
    if (base == 10) {
        uint32_t chunk = 0, mul = 1;
        for (const char *q = start; q < stop; q++) {
            if (*q == '_')
                continue;
            chunk = chunk * 10 + (uint32_t)(*q - '0');
            mul *= 10;
            if (mul == 1000000000) {
                if (big_muladd(out, mul, chunk))
                    return -1;
                chunk = 0;
                mul = 1;
            }
        }
        if (mul > 1 && big_muladd(out, mul, chunk))
            return -1;
    } else {
        unsigned bits = base == 16 ? 4 : base == 8 ? 3 : 1;
        if (big_reserve(out, digits * bits / 32 + 2))
            return -1;
        memset(out->d, 0, (digits * bits / 32 + 2) * sizeof *out->d);
        out->n = digits * bits / 32 + 2;
        size_t bit = 0;
        for (const char *q = stop; q-- > start;) {
            if (*q == '_')
                continue;
            uint64_t d = (uint64_t)digit_value(*q) << (bit % 32);
            out->d[bit / 32] |= (uint32_t)d;
            if (d >> 32)
                out->d[bit / 32 + 1] |= (uint32_t)(d >> 32);
            bit += bits;
        }
    }
    big_trim(out);
    if (zero_only && out->n) {
        *why = "invalid literal for int() with base 0 (leading zeros)";
        return 1;
    }
    return 0;
}

/* ---- PyOS_string_to_double ------------------------------------------------------------ */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool ci_prefix(const char *s, const char *word)
{
    for (; *word; s++, word++)
        if ((*s | 0x20) != *word)
            return false;
    return true;
}

static double from_bits(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

int pkt_pyfloat(const char *s, double *v, const char **end, const char **why)
{
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    size_t nd = 0;
    while (is_digit(*p))
        p++, nd++;
    if (*p == '.')
        for (p++; is_digit(*p); p++)
            nd++;
    if (nd) {
        if (*p == 'e' || *p == 'E') {
            const char *q = p + 1;
            if (*q == '+' || *q == '-')
                q++;
            if (is_digit(*q)) {
                while (is_digit(*q))
                    q++;
                p = q;
            }
        }
        /* The syntax is checked; strtod (correctly rounded, as Python's dtoa)
         * converts it, given the locale's decimal point. */
        size_t len = (size_t)(p - s);
        char *tmp = malloc(len + 8);
        if (!tmp) {
            *why = "out of memory";
            *end = s;
            return 1;
        }
        memcpy(tmp, s, len);
        tmp[len] = 0;
        const char *dp = localeconv()->decimal_point;
        if (dp && dp[0] && (dp[0] != '.' || dp[1])) {
            char *dot = strchr(tmp, '.');
            if (dot) {
                size_t dl = strlen(dp);
                if (dl > 7)
                    dl = 7;
                memmove(dot + dl, dot + 1, strlen(dot + 1) + 1);
                memcpy(dot, dp, dl);
            }
        }
        double x = strtod(tmp, NULL);
        free(tmp);
        *end = p;
        if (isinf(x)) {
            *why = "value too large to convert to float";
            return 1;
        }
        *v = x;
        return 0;
    }
    p = s + (s[0] == '+' || s[0] == '-');
    if (ci_prefix(p, "inf")) {
        p += 3;
        if (ci_prefix(p, "inity"))
            p += 5;
        *v = from_bits(neg ? 0xFFF0000000000000ULL : 0x7FF0000000000000ULL);
    } else if (ci_prefix(p, "nan")) {
        p += 3;
        *v = from_bits(neg ? 0xFFF8000000000000ULL : 0x7FF8000000000000ULL);
    } else {
        *end = s;
        *why = "could not convert string to float";
        return 1;
    }
    *end = p;
    return 0;
}

/* ---- STRING: PyBytes_DecodeEscape ------------------------------------------------------ */

int pkt_decode_escape(const char *s, size_t n, char *out, size_t *outlen, const char **why)
{
    size_t k = 0, i = 0;
    while (i < n) {
        if (s[i] != '\\') {
            out[k++] = s[i++];
            continue;
        }
        if (++i == n) {
            *why = "trailing \\ in string";
            return 1;
        }
        char c = s[i++];
        switch (c) {
        case '\n': break;
        case '\\': out[k++] = '\\'; break;
        case '\'': out[k++] = '\''; break;
        case '"': out[k++] = '"'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 't': out[k++] = '\t'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 'v': out[k++] = '\v'; break;
        case 'a': out[k++] = '\a'; break;
        case 'x':
            if (i + 1 < n && digit_value(s[i]) < 16 && digit_value(s[i + 1]) < 16) {
                out[k++] = (char)(digit_value(s[i]) << 4 | digit_value(s[i + 1]));
                i += 2;
                break;
            }
            *why = "invalid \\x escape";
            return 1;
        default:
            if (c >= '0' && c <= '7') {
                unsigned v = (unsigned)(c - '0');
                for (int j = 0; j < 2 && i < n && s[i] >= '0' && s[i] <= '7'; j++)
                    v = v * 8 + (unsigned)(s[i++] - '0');
                out[k++] = (char)(uint8_t)v; /* \777 keeps its low 8 bits */
            } else { /* not an escape: the backslash stays, the byte is read again */
                out[k++] = '\\';
                i--;
            }
            break;
        }
    }
    *outlen = k;
    return 0;
}

/* ---- UTF-8 -------------------------------------------------------------------------- */

static size_t put_utf8(char *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (char)(0x80 | (c >> 6 & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

size_t pkt_latin1_to_utf8(const uint8_t *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += put_utf8(out + k, s[i]);
    return k;
}

static bool cont(uint8_t c) { return (c & 0xC0) == 0x80; }

int pkt_utf8_check(const uint8_t *s, size_t n, bool surrogatepass, bool *surrogates, size_t *bad)
{
    *surrogates = false;
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t left = n - i;
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (left < 2 || !cont(s[i + 1]))
                goto fail;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (left < 3 || !cont(s[i + 1]) || !cont(s[i + 2]))
                goto fail;
            if (c == 0xE0 && s[i + 1] < 0xA0)
                goto fail;
            if (c == 0xED && s[i + 1] >= 0xA0) {
                if (!surrogatepass)
                    goto fail;
                *surrogates = true;
            }
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (left < 4 || !cont(s[i + 1]) || !cont(s[i + 2]) || !cont(s[i + 3]))
                goto fail;
            if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))
                goto fail;
            i += 4;
        } else {
            goto fail;
        }
    }
    return 0;
fail:
    *bad = i;
    return 1;
}

/* ---- UNICODE: raw-unicode-escape ------------------------------------------------------- */

int pkt_raw_unicode_escape(const char *s, size_t n, char *out, size_t *outlen, bool *surrogates,
                           const char **why)
{
    size_t k = 0, i = 0;
    *surrogates = false;
    while (i < n) {
        uint8_t c = (uint8_t)s[i++];
        if (c != '\\' || i == n) {
            k += put_utf8(out + k, c);
            continue;
        }
        char e = s[i++];
        if (e != 'u' && e != 'U') { /* "\\\\" stays two backslashes: the pair never starts an escape */
            out[k++] = '\\';
            k += put_utf8(out + k, (uint8_t)e);
            continue;
        }
        size_t w = e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t j = 0; j < w; j++, i++) {
            if (i >= n || digit_value(s[i]) >= 16) {
                *why = w == 4 ? "truncated \\uXXXX escape" : "truncated \\UXXXXXXXX escape";
                return 1;
            }
            v = v << 4 | (uint32_t)digit_value(s[i]);
        }
        if (v > 0x10FFFF) {
            *why = "\\Uxxxxxxxx out of range";
            return 1;
        }
        if (v >= 0xD800 && v <= 0xDFFF)
            *surrogates = true;
        k += put_utf8(out + k, v);
    }
    *outlen = k;
    return 0;
}
