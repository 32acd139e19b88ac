/* The base containers: the string builder's limit and escapes, the growable
 * array, the hash map with both kinds of key. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "buf.h"
#include "dest.h"
#include "dl.h"
#include "map.h"
#include "source.h"
#include "strmap.h"
#include "vec.h"

Test(buf, grows_without_limit)
{
    tc_buf b = TC_BUF_INIT(0);
    for (int i = 0; i < 10000; i++)
        tc_buf_printf(&b, "%d,", i % 10);
    cr_assert_eq(tc_buf_len(&b), 20000);
    cr_assert_eq(strlen(tc_buf_str(&b)), 20000);
    cr_assert(!tc_buf_cut(&b));
    cr_assert_eq(strncmp(tc_buf_str(&b), "0,1,2,", 6), 0);
    tc_buf_free(&b);
    cr_assert_str_eq(tc_buf_str(&b), "");
}

Test(buf, cut_at_limit_with_ellipsis)
{
    tc_buf b = TC_BUF_INIT(10);
    tc_buf_puts(&b, "abcd");
    tc_buf_printf(&b, "%s", "efghijklmnop");
    cr_assert(tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "abcdefg...");
    tc_buf_puts(&b, "more");
    cr_assert_str_eq(tc_buf_str(&b), "abcdefg...");
    tc_buf_reset(&b);
    cr_assert(!tc_buf_cut(&b));
    tc_buf_puts(&b, "0123456789");
    cr_assert(!tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "0123456789");
    tc_buf_free(&b);
}

Test(buf, cut_keeps_utf8_whole)
{
    tc_buf b = TC_BUF_INIT(8);
    tc_buf_puts(&b, "ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"); /* ab + 4 x e-acute */
    cr_assert(tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "ab\xc3\xa9...");
    tc_buf_free(&b);
}

Test(buf, printf_cut_keeps_utf8_whole)
{
    tc_buf b = TC_BUF_INIT(8);
    tc_buf_printf(&b, "%s-%d", "ab\xc3\xa9\xc3\xa9\xc3\xa9", 7);
    cr_assert(tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "ab\xc3\xa9...");
    tc_buf_free(&b);
}

Test(buf, full_then_cut_still_ends_with_ellipsis)
{
    tc_buf b = TC_BUF_INIT(6);
    tc_buf_puts(&b, "abcdef"); /* exactly the limit: not cut */
    cr_assert(!tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "abcdef");
    tc_buf_puts(&b, "g"); /* the text already there makes room for the ellipsis */
    cr_assert(tc_buf_cut(&b));
    cr_assert_str_eq(tc_buf_str(&b), "abc...");
    tc_buf_free(&b);
    tc_buf u = TC_BUF_INIT(6);
    tc_buf_puts(&u, "a\xc3\xa9\xc3\xa9");
    tc_buf_printf(&u, "%d", 42);
    cr_assert_str_eq(tc_buf_str(&u), "a\xc3\xa9..."); /* the second e-acute goes whole */
    tc_buf_free(&u);
}

Test(buf, fixed_array)
{
    char a[12];
    memset(a, 'x', sizeof a);
    tc_buf b = tc_buf_fixed(a, sizeof a);
    cr_assert_str_eq(a, "");
    tc_buf_printf(&b, "%s=%d", "key", 1);
    cr_assert_eq(tc_buf_str(&b), a);
    cr_assert_str_eq(a, "key=1");
    tc_buf_puts(&b, ", and more text");
    cr_assert(tc_buf_cut(&b));
    cr_assert(!tc_buf_oom(&b));
    cr_assert_str_eq(a, "key=1, a...");
    cr_assert_eq(strlen(a), sizeof a - 1);
    char *t = tc_buf_take(&b);
    cr_assert_str_eq(t, "key=1, a...");
    free(t);
    tc_buf_free(&b); /* frees nothing: a is the caller's */
    cr_assert_str_eq(a, "");
    char one[1];
    tc_buf z = tc_buf_fixed(one, 1);
    tc_buf_puts(&z, "abc");
    cr_assert_str_eq(one, "");
}

Test(buf, a_long_key_never_overflows)
{
    char key[5000];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = 0;
    tc_buf b = TC_BUF_INIT(200);
    for (int i = 0; i < 3; i++) {
        tc_buf_sep(&b, ", ");
        tc_buf_puts(&b, key);
    }
    cr_assert_eq(tc_buf_len(&b), 200);
    cr_assert(tc_buf_cut(&b));
    tc_buf_free(&b);
}

Test(buf, escapes)
{
    tc_buf b = TC_BUF_INIT(0);
    const char s[] = "a\x1b[8mb\nc\td\x7f" "e\xff" "f\xc2\x9b" "g\xe2\x80\xae" "h\xc3\xa9" "\xed\xa0\x80";
    tc_buf_esc(&b, s, sizeof s - 1);
    cr_assert_str_eq(tc_buf_str(&b),
                     "a\\x1b[8mb\\nc\\td\\x7fe\\xfff\\u{009b}g\\u{202e}h\xc3\xa9\\xed\\xa0\\x80");
    tc_buf_free(&b);
    char out[8];
    cr_assert_str_eq(tc_esc("\x1b\x1b\x1b", out, sizeof out), "\\x1b...");
    char out9[9]; /* an escape is shown whole or not at all */
    cr_assert_str_eq(tc_esc("\x1b\x1b\x1b", out9, sizeof out9), "\\x1b...");
    char out10[10], out11[11];
    cr_assert_str_eq(tc_esc("ab\xe2\x80\xae", out10, sizeof out10), "ab...");
    cr_assert_str_eq(tc_esc("ab\xe2\x80\xae", out11, sizeof out11), "ab\\u{202e}");
    /* escaping escaped text changes nothing: a message can be escaped again whole */
    tc_buf t = TC_BUF_INIT(0);
    tc_buf_esc(&b, s, sizeof s - 1);
    tc_buf_escs(&t, tc_buf_str(&b));
    cr_assert_str_eq(tc_buf_str(&t), tc_buf_str(&b));
    tc_buf_free(&t);
    tc_buf_free(&b);
}

Test(buf, json_kept_but_terminal_safe)
{
    tc_buf b = TC_BUF_INIT(0);
    const char s[] = "{\"a\x7f\xc2\x9b\xe2\x80\xae\xc3\xa9\\u001b\xff\": 1}";
    tc_buf_json(&b, s, sizeof s - 1);
    cr_assert_str_eq(tc_buf_str(&b), "{\"a\\u007f\\u009b\\u202e\xc3\xa9\\u001b\xff\": 1}");
    tc_buf_free(&b);
}

Test(buf, take)
{
    tc_buf b = TC_BUF_INIT(0);
    char *p = tc_buf_take(&b);
    cr_assert_str_eq(p, "");
    free(p);
    tc_buf_puts(&b, "x");
    p = tc_buf_take(&b);
    cr_assert_str_eq(p, "x");
    cr_assert_eq(tc_buf_len(&b), 0);
    free(p);
}

Test(vec, push_and_extend)
{
    TC_VEC(int) a = {0};
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(tc_vec_push(&a, i), 0);
    cr_assert_eq(a.n, 1000);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(a.v[i], i);
    int *z = tc_vec_extend(&a, 5);
    cr_assert_not_null(z);
    cr_assert_eq(a.n, 1005);
    cr_assert_eq(z[4], 0);
    tc_vec_free(&a);
    cr_assert_eq(a.n, 0);
}

Test(vec, overflow_refused)
{
    uint64_t *p = NULL;
    size_t cap = 0;
    cr_assert_eq(tc_grow(&p, &cap, SIZE_MAX / 4, sizeof *p), -1);
    cr_assert_null(p);
    cr_assert_eq(cap, 0);
    cr_assert_eq(tc_grow(&p, &cap, 3, sizeof *p), 0);
    cr_assert_geq(cap, 3);
    free(p);
}

Test(map, bytes_keys)
{
    static char keys[20000][8];
    tc_map m = {0};
    for (int i = 0; i < 20000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        cr_assert_eq(tc_map_put(&m, keys[i], strlen(keys[i]), (uint64_t)i, NULL), 1);
    }
    uint64_t old = 0;
    cr_assert_eq(tc_map_put(&m, "k7", 2, 99, &old), 0);
    cr_assert_eq(old, 7);
    for (int i = 0; i < 20000; i += 7) {
        uint64_t *v = tc_map_find(&m, keys[i], strlen(keys[i]));
        cr_assert_not_null(v);
        cr_assert_eq(*v, (uint64_t)i);
    }
    cr_assert_null(tc_map_find(&m, "k20000", 6));
    cr_assert_null(tc_map_find(&m, "k1", 1)); /* a prefix is another key */
    cr_assert_eq(tc_map_put(&m, "", 0, 5, NULL), 1);
    cr_assert_eq(*tc_map_find(&m, "", 0), 5);
    tc_map_free(&m);
    cr_assert_null(tc_map_find(&m, "k1", 2));
}

Test(map, word_keys)
{
    tc_map m = {0};
    for (uint64_t i = 0; i < 5000; i++)
        cr_assert_eq(tc_map_put2(&m, i, i * 3, i + 1, NULL), 1);
    cr_assert_eq(*tc_map_find2(&m, 10, 30), 11);
    cr_assert_null(tc_map_find2(&m, 10, 31));
    *tc_map_find2(&m, 10, 30) = 77;
    cr_assert_eq(*tc_map_find2(&m, 10, 30), 77);
    tc_map_free(&m);
}

Test(map, name_index)
{
    static char keys[30000][8];
    static const char *names[30001];
    for (int i = 0; i < 30000; i++) {
        snprintf(keys[i], sizeof keys[i], "n%d", i % 20000); /* the last 10000 repeat the first */
        names[i] = keys[i];
    }
    names[30000] = "";
    tc_nameidx x;
    cr_assert_eq(tc_nameidx_make(&x, names, 30001), 0);
    size_t at = 0;
    for (int i = 0; i < 30000; i += 3) {
        cr_assert(tc_nameidx_get(&x, keys[i], &at));
        cr_assert_eq(at, (size_t)(i % 20000), "'%s' at %zu", keys[i], at); /* a repeat keeps its first place */
    }
    cr_assert(tc_nameidx_get(&x, "", &at));
    cr_assert_eq(at, 30000);
    cr_assert(!tc_nameidx_get(&x, "n20000", &at));
    cr_assert(!tc_nameidx_get(&x, "n1 ", &at));
    cr_assert(!tc_nameidx_get(&x, "n", &at)); /* a prefix is another name */
    tc_nameidx_free(&x);
    cr_assert(!tc_nameidx_get(&x, "n1", &at));

    /* added one at a time: a name already there says where */
    cr_assert_eq(tc_nameidx_init(&x, names, 30000), 0);
    cr_assert_eq(tc_nameidx_add(&x, 5, NULL), 1);
    cr_assert_eq(tc_nameidx_add(&x, 20005, &at), 0);
    cr_assert_eq(at, 5);
    cr_assert(!tc_nameidx_get(&x, "n6", &at));
    tc_nameidx_free(&x);
}

Test(map, strmap_wrappers)
{
    tc_strmap m = {0};
    size_t v = 0;
    cr_assert_eq(tc_strmap_put(&m, "a", 1, NULL), 1);
    cr_assert_eq(tc_strmap_put(&m, "a", 2, &v), 0);
    cr_assert_eq(v, 1);
    cr_assert(tc_strmap_get(&m, "a", &v));
    cr_assert(!tc_strmap_get(&m, "b", &v));
    tc_strmap_free(&m);
}

static volatile sig_atomic_t usr1_seen;
static void on_usr1(int sig)
{
    (void)sig;
    usr1_seen++;
}

/* A process that installs the cleanup twice (commands run in one process, as the CLI fuzzer runs
 * them) still hands a signal on to the handler that was there first, once: the second install must
 * not take the first one for what it restores, or the handler would raise to itself for ever. */
/* The small-read cache returns a file's own bytes, across windows of the one descriptor and from
 * a second file; a read it holds costs no read of the file (the file changed behind it still gives
 * the bytes first read: valid only while the sources stay unchanged, as its header says); large,
 * empty, out-of-range and memory reads are left to the caller; a read past the end fails; a file
 * opened under the descriptor of one closed gives its own bytes. */
Test(src_cache, reads_through_windows_and_files)
{
    static uint8_t bytes[2][200000];
    char path[2][32] = {"/tmp/tc-src-cache-XXXXXX", "/tmp/tc-src-cache-XXXXXX"};
    tc_src src[2];
    tc_diag d = {0};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof bytes[k]; i++)
            bytes[k][i] = (uint8_t)(i * 7 + (size_t)k * 13 + i / 251);
        int fd = mkstemp(path[k]);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, bytes[k], sizeof bytes[k]), (ssize_t)sizeof bytes[k]);
        close(fd);
        cr_assert_eq(tc_src_open_file(&src[k], path[k], &d), 0, "%s", d.msg);
    }
    tc_src a = src[0], b = src[1], w;
    cr_assert_eq(tc_src_window(&w, &a, 100000, 50000, &d), 0);
    tc_src_cache c = TC_SRC_CACHE_INIT;
    const uint8_t *p;
    static const uint64_t at[] = {0, 8, 65530, 70000, 100, 199990};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        cr_assert_eq(tc_src_cached(&c, &a, at[i], 10, "a", &p, &d), 0, "%s", d.msg);
        cr_assert_eq(memcmp(p, bytes[0] + at[i], 10), 0, "a at %llu", (unsigned long long)at[i]);
        cr_assert_eq(tc_src_cached(&c, &w, at[i] % 40000, 16, "w", &p, &d), 0, "%s", d.msg);
        cr_assert_eq(memcmp(p, bytes[0] + 100000 + at[i] % 40000, 16), 0);
        cr_assert_eq(tc_src_cached(&c, &b, at[i], 10, "b", &p, &d), 0, "%s", d.msg);
        cr_assert_eq(memcmp(p, bytes[1] + at[i], 10), 0, "b at %llu", (unsigned long long)at[i]);
    }
    /* held: the next read within 64 KiB of the last fill comes from memory */
    cr_assert_eq(tc_src_cached(&c, &a, 1000, 8, "a", &p, &d), 0);
    uint8_t z[8] = {0};
    int wfd = open(path[0], O_WRONLY);
    cr_assert_eq(pwrite(wfd, z, sizeof z, 1008), (ssize_t)sizeof z);
    close(wfd);
    cr_assert_eq(tc_src_cached(&c, &a, 1008, 8, "a", &p, &d), 0);
    cr_assert_eq(memcmp(p, bytes[0] + 1008, 8), 0, "the bytes held, not the file's new ones");
    /* left to the caller */
    cr_assert_eq(tc_src_cached(&c, &a, 0, TC_SRC_CACHE_SMALL + 1, "a", &p, &d), 1);
    cr_assert_eq(tc_src_cached(&c, &a, 0, 0, "a", &p, &d), 1);
    cr_assert_eq(tc_src_cached(&c, &a, sizeof bytes[0] - 4, 8, "a", &p, &d), 1);
    tc_src m;
    tc_src_init_mem(&m, bytes[1], 100, "m");
    cr_assert_eq(tc_src_cached(&c, &m, 0, 8, "m", &p, &d), 1);
    /* a file cut short behind the source: the read fails, naming it */
    cr_assert_eq(truncate(path[1], 150000), 0);
    cr_assert_lt(tc_src_cached(&c, &b, 149000, 2000, "rec", &p, &d), 0);
    cr_assert(strstr(d.msg, "rec") != NULL, "%s", d.msg);
    /* a file closed and another opened under the same descriptor: its own bytes, not those held */
    cr_assert_eq(tc_src_cached(&c, &a, 500, 8, "a", &p, &d), 0);
    int fd_a = a.fd;
    tc_src_close(&a);
    tc_src again;
    cr_assert_eq(tc_src_open_file(&again, path[1], &d), 0, "%s", d.msg);
    cr_assert_eq(again.fd, fd_a, "the descriptor is used again");
    cr_assert_eq(tc_src_cached(&c, &again, 500, 8, "again", &p, &d), 0, "%s", d.msg);
    cr_assert_eq(memcmp(p, bytes[1] + 500, 8), 0, "the second file's bytes");
    tc_src_cache_free(&c);
    cr_assert_eq(c.buf, NULL);
    tc_src_close(&again);
    tc_src_close(&b);
    unlink(path[0]);
    unlink(path[1]);
}

Test(dest, cleanup_installed_twice_hands_a_signal_on_once, .timeout = 10)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
    tc_dst_cleanup_on_signals();
    tc_dst_cleanup_on_signals();
    raise(SIGUSR1);
    cr_assert_eq(usr1_seen, 1);
    sigaction(SIGUSR1, &old, NULL);
}

/* dl.h: a library loaded when first needed, its functions through a typed table */
#define DL_ZLIB_FNS(X) X(crc32) X(zlibVersion)
typedef struct {
    DL_ZLIB_FNS(TC_DL_FIELD)
} dl_zlib;

Test(dl, loads_and_calls_through_the_table)
{
    static const char *const names[] = {DL_ZLIB_FNS(TC_DL_NAME)};
    dl_zlib z;
    char w[200];
    tc_buf why = tc_buf_fixed(w, sizeof w);
    cr_assert_eq(tc_dl_open("libz.so.1", names, 2, &z, &why), 0, "%s", tc_buf_str(&why));
    cr_assert_str_eq(tc_buf_str(&why), "");
    const unsigned char text[] = "123456789";
    cr_assert_eq(z.crc32(0, text, 9), 0xcbf43926u); /* CRC-32's check value */
    cr_assert_eq(z.crc32(0, text, 9), crc32(0, text, 9));
    cr_assert_str_eq(z.zlibVersion(), zlibVersion());
}

Test(dl, get_loads_once_and_says_why_not)
{
    static const char *const names[] = {DL_ZLIB_FNS(TC_DL_NAME)};
    static dl_zlib z;
    static tc_dl ok = TC_DL_INIT("libz.so.1", names, z, "no checksums");
    const char *why = "untouched";
    const dl_zlib *t = tc_dl_get(&ok, &why);
    cr_assert(t == &z);
    cr_assert_str_eq(why, "untouched");
    cr_assert(tc_dl_get(&ok, NULL) == &z);
    cr_assert_eq(t->crc32(0, (const unsigned char *)"123456789", 9), 0xcbf43926u);
    static dl_zlib none;
    static tc_dl missing = TC_DL_INIT("libtensorctl-no-such-library.so.0", names, none, "no checksums");
    cr_assert_null(tc_dl_get(&missing, &why));
    cr_assert_eq(strncmp(why, "no checksums: ", 14), 0, "%s", why);
    cr_assert(strstr(why, "libtensorctl-no-such-library.so.0"), "%s", why);
    const char *again = NULL;
    cr_assert_null(tc_dl_get(&missing, &again));
    cr_assert_str_eq(again, why);
}

Test(dl, says_what_is_missing)
{
    static const char *const names[] = {"crc32", "no_such_function_here"};
    void *t[2];
    char w[300];
    tc_buf why = tc_buf_fixed(w, sizeof w);
    cr_assert_eq(tc_dl_open("libtensorctl-no-such-library.so.0", names, 2, t, &why), -1);
    cr_assert(strstr(tc_buf_str(&why), "libtensorctl-no-such-library.so.0"), "%s", tc_buf_str(&why));
    why = tc_buf_fixed(w, sizeof w);
    cr_assert_eq(tc_dl_open("libz.so.1", names, 2, t, &why), -1);
    cr_assert_str_eq(tc_buf_str(&why), "libz.so.1 lacks no_such_function_here");
}
