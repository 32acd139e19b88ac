#include "map.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t sip_key[2];
static pthread_once_t sip_once = PTHREAD_ONCE_INIT;

static void sip_init(void)
{
    if (getrandom(sip_key, sizeof sip_key, GRND_NONBLOCK) != (ssize_t)sizeof sip_key) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sip_key[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
        sip_key[1] = (uint64_t)ts.tv_sec * 0xbf58476d1ce4e5b9ull ^ (uint64_t)(uintptr_t)&ts;
    }
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                         \
    do {                                                                                                 \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                        \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                           \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                           \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                        \
    } while (0)

uint64_t tc_hash_bytes(const void *p, size_t len)
{
    pthread_once(&sip_once, sip_init);
    const uint8_t *s = p;
    size_t i = 0;
    uint64_t v0 = sip_key[0] ^ 0x736f6d6570736575ull, v1 = sip_key[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = sip_key[0] ^ 0x6c7967656e657261ull, v3 = sip_key[1] ^ 0x7465646279746573ull;
    for (; i + 8 <= len; i += 8) {
        uint64_t m;
        memcpy(&m, s + i, 8); /* the words little-endian, as SipHash reads them */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        m = __builtin_bswap64(m);
#endif
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t t = 0;
    memcpy(&t, s + i, len - i);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    t = __builtin_bswap64(t);
#endif
    uint64_t m = (uint64_t)len << 56 | t;
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    uint64_t h = v0 ^ v1 ^ v2 ^ v3;
    return h ? h : 1;
}

/* Word-pair keys (pointers, ids, counts and hashes, looked up for every
 * memo entry and dict key of a pickle) take a cheaper hash keyed with the
 * same secret: the words xored with it, mixed by two 64x64->128-bit
 * multiplications folded to 64 bits (wyhash's mix). Without the secret no
 * key can be chosen to land in a given slot. */
static inline uint64_t mum(uint64_t x, uint64_t y)
{
    __uint128_t r = (__uint128_t)x * y;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static uint64_t hash2(uint64_t a, uint64_t b)
{
    pthread_once(&sip_once, sip_init);
    uint64_t h = mum(a ^ sip_key[0] ^ 0xa0761d6478bd642full, b ^ sip_key[1] ^ 0xe7037ed1a0b428dbull);
    h = mum(h ^ sip_key[1] ^ 0x8ebc6af09c88c6e3ull, sip_key[0] ^ 0x589965cc75374cc3ull);
    return h ? h : 1;
}

/* The slot holding the key, or the empty slot where it would go. */
static size_t slot(const tc_map *m, uint64_t h, uint64_t a, uint64_t b, bool bytes, bool *found)
{
    size_t j = (size_t)h & (m->cap - 1);
    for (;; j = (j + 1) & (m->cap - 1)) {
        const tc_map_slot *e = &m->s[j];
        if (!e->hash)
            break;
        if (e->hash != h || e->b != b)
            continue;
        if (bytes ? !b || !memcmp((const void *)(uintptr_t)e->a, (const void *)(uintptr_t)a, (size_t)b) : e->a == a) {
            *found = true;
            return j;
        }
    }
    *found = false;
    return j;
}

static int grow(tc_map *m)
{
    if (m->cap > SIZE_MAX / 2 / sizeof *m->s)
        return -1;
    size_t cap = m->cap ? m->cap * 2 : 64;
    tc_map_slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->s[i].hash) {
            size_t j = (size_t)m->s[i].hash & (cap - 1);
            while (s[j].hash)
                j = (j + 1) & (cap - 1);
            s[j] = m->s[i];
        }
    free(m->s);
    m->s = s;
    m->cap = cap;
    return 0;
}

static uint64_t *find(const tc_map *m, uint64_t h, uint64_t a, uint64_t b, bool bytes)
{
    if (!m->cap)
        return NULL;
    bool found;
    size_t j = slot(m, h, a, b, bytes, &found);
    return found ? &m->s[j].val : NULL;
}

static int put(tc_map *m, uint64_t h, uint64_t a, uint64_t b, bool bytes, uint64_t val, uint64_t *old)
{
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return -1;
    bool found;
    size_t j = slot(m, h, a, b, bytes, &found);
    if (found) {
        if (old)
            *old = m->s[j].val;
        return 0;
    }
    m->s[j] = (tc_map_slot){a, b, h, val};
    m->n++;
    return 1;
}

uint64_t *tc_map_find(const tc_map *m, const void *key, size_t len)
{
    return m->cap ? find(m, tc_hash_bytes(key, len), (uint64_t)(uintptr_t)key, len, true) : NULL;
}

int tc_map_put(tc_map *m, const void *key, size_t len, uint64_t val, uint64_t *old)
{
    return put(m, tc_hash_bytes(key, len), (uint64_t)(uintptr_t)key, len, true, val, old);
}

uint64_t *tc_map_find2(const tc_map *m, uint64_t a, uint64_t b)
{
    return m->cap ? find(m, hash2(a, b), a, b, false) : NULL;
}

int tc_map_put2(tc_map *m, uint64_t a, uint64_t b, uint64_t val, uint64_t *old)
{
    return put(m, hash2(a, b), a, b, false, val, old);
}

void tc_map_free(tc_map *m)
{
    if (m) {
        free(m->s);
        memset(m, 0, sizeof *m);
    }
}

/* The slot holding name (or the empty one where it goes), from its hash h. */
static size_t name_slot(const tc_nameidx *x, uint64_t h, const char *name, bool *found)
{
    uint32_t hi = (uint32_t)(h >> 32);
    size_t j = (size_t)h & (x->cap - 1);
    for (;; j = (j + 1) & (x->cap - 1)) {
        const struct tc_nameidx_slot *e = &x->s[j];
        if (!e->at)
            break;
        if (e->hash == hi && !strcmp(x->names[e->at - 1], name)) {
            *found = true;
            return j;
        }
    }
    *found = false;
    return j;
}

int tc_nameidx_init(tc_nameidx *x, const char *const *names, size_t n)
{
    memset(x, 0, sizeof *x);
    if (n >= UINT32_MAX || n > SIZE_MAX / 4 / sizeof *x->s)
        return -1;
    size_t cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    if (!(x->s = calloc(cap, sizeof *x->s)))
        return -1;
    x->cap = cap;
    x->names = names;
    return 0;
}

int tc_nameidx_add(tc_nameidx *x, size_t i, size_t *was)
{
    uint64_t h = tc_hash_bytes(x->names[i], strlen(x->names[i]));
    bool found;
    size_t j = name_slot(x, h, x->names[i], &found);
    if (found) {
        if (was)
            *was = x->s[j].at - 1;
        return 0;
    }
    x->s[j] = (struct tc_nameidx_slot){(uint32_t)(i + 1), (uint32_t)(h >> 32)};
    return 1;
}

int tc_nameidx_make(tc_nameidx *x, const char *const *names, size_t n)
{
    if (tc_nameidx_init(x, names, n) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        tc_nameidx_add(x, i, NULL);
    return 0;
}

bool tc_nameidx_get(const tc_nameidx *x, const char *name, size_t *at)
{
    if (!x->cap)
        return false;
    bool found;
    size_t j = name_slot(x, tc_hash_bytes(name, strlen(name)), name, &found);
    if (found && at)
        *at = x->s[j].at - 1;
    return found;
}

void tc_nameidx_free(tc_nameidx *x)
{
    if (x) {
        free(x->s);
        memset(x, 0, sizeof *x);
    }
}
