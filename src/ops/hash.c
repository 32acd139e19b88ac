#include "hash.h"

#include "stream.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sha_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    if (!EVP_DigestUpdate(ctx, buf, n))
        return tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    return 0;
}

int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, uint64_t max_expand, char hex[65], tc_diag *d)
{
    int rc = tc_expand_check(c, t, t->dtype, max_expand, d);
    if (rc)
        return rc;
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    if (!m || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(m);
        return tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
    }
    rc = tc_tensor_elements(c, t, t->dtype, sha_sink, m, NULL, d);
    unsigned char md[32];
    unsigned len = 0;
    if (!rc && !EVP_DigestFinal_ex(m, md, &len))
        rc = tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    EVP_MD_CTX_free(m);
    if (!rc)
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return rc;
}
