#include "names.h"

#include <stdlib.h>
#include <string.h>

#include "strmap.h"

void tc_names_free(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* The longest run of whole dotted components every name starts with. */
static size_t common_prefix(const char *const *names, size_t n)
{
    if (!n)
        return 0;
    size_t len = strlen(names[0]);
    for (size_t i = 1; i < n && len; i++) {
        size_t k = 0;
        while (k < len && names[i][k] && names[i][k] == names[0][k])
            k++;
        len = k;
    }
    while (len && names[0][len - 1] != '.') /* back to a component boundary */
        len--;
    return len;
}

/* No two of the n new names are the same. */
static int distinct(char *const *out, const char *const *names, size_t n, tc_diag *d)
{
    tc_strmap m = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        size_t old;
        int put = tc_strmap_put(&m, out[i], i, &old);
        if (put < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else if (put == 0)
            rc = tc_fail(d, TC_ERR_USAGE, "'%s' and '%s' would both be named '%s'", names[old], names[i], out[i]);
    }
    tc_strmap_free(&m);
    return rc;
}

int tc_names_strip_prefix(char ***out, char **used, const char *const *names, size_t n, const char *prefix,
                          tc_diag *d)
{
    size_t plen = prefix ? strlen(prefix) : common_prefix(names, n);
    char *p = prefix ? strdup(prefix) : strndup(n ? names[0] : "", plen);
    char **v = calloc(n + 1, sizeof *v);
    int rc = 0;
    if (!p || !v)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    bool any = false;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *s = names[i];
        if (plen && !strncmp(s, p, plen)) {
            s += plen;
            any = true;
        }
        if (!*s)
            rc = tc_fail(d, TC_ERR_USAGE, "'%s' would have no name left without the prefix '%s'", names[i], p);
        else if (!(v[i] = strdup(s)))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    if (!rc)
        rc = distinct(v, names, n, d);
    if (rc) {
        tc_names_free(v, n);
        free(p);
        return rc;
    }
    if (!any)
        p[0] = '\0';
    *out = v;
    *used = p;
    return 0;
}
