#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
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
