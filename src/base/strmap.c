#include "strmap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Keys come from the files read, so the hash is keyed with a secret chosen
 * per process (SipHash-1-3): names crafted to collide cannot be made
 * without knowing it, and lookups stay O(1) on hostile input. */
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

static uint64_t hash(const char *s)
{
    pthread_once(&sip_once, sip_init);
    size_t len = strlen(s), i = 0;
    uint64_t v0 = sip_key[0] ^ 0x736f6d6570736575ull, v1 = sip_key[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = sip_key[0] ^ 0x6c7967656e657261ull, v3 = sip_key[1] ^ 0x7465646279746573ull;
    for (; i + 8 <= len; i += 8) {
        uint64_t m = 0;
        for (int k = 0; k < 8; k++)
            m |= (uint64_t)(uint8_t)s[i + k] << (8 * k);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t m = (uint64_t)len << 56;
    for (int k = 0; i + (size_t)k < len; k++)
        m |= (uint64_t)(uint8_t)s[i + k] << (8 * k);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static size_t slot(const tc_strmap *m, const char *key, bool *found)
{
    size_t j = (size_t)hash(key) & (m->cap - 1);
    while (m->key[j]) {
        if (!strcmp(m->key[j], key)) {
            *found = true;
            return j;
        }
        j = (j + 1) & (m->cap - 1);
    }
    *found = false;
    return j;
}

bool tc_strmap_get(const tc_strmap *m, const char *key, size_t *val)
{
    if (!m->cap)
        return false;
    bool found;
    size_t j = slot(m, key, &found);
    if (found && val)
        *val = m->val[j];
    return found;
}

static int grow(tc_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    const char **k = calloc(cap, sizeof *k);
    size_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -1;
    }
    tc_strmap nm = {k, v, 0, cap};
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            bool found;
            size_t j = slot(&nm, m->key[i], &found);
            nm.key[j] = m->key[i];
            nm.val[j] = m->val[i];
        }
    nm.n = m->n;
    free(m->key);
    free(m->val);
    *m = nm;
    return 0;
}

int tc_strmap_put(tc_strmap *m, const char *key, size_t val, size_t *old)
{
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return -1;
    bool found;
    size_t j = slot(m, key, &found);
    if (found) {
        if (old)
            *old = m->val[j];
        return 0;
    }
    m->key[j] = key;
    m->val[j] = val;
    m->n++;
    return 1;
}

void tc_strmap_free(tc_strmap *m)
{
    if (m) {
        free(m->key);
        free(m->val);
        memset(m, 0, sizeof *m);
    }
}
