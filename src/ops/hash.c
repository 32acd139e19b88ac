#include "hash.h"

#include "assemble.h"
#include "format.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dl.h"

#ifndef TC_LIBCRYPTO_SONAME
#define TC_LIBCRYPTO_SONAME "libcrypto.so.3"
#endif

#define HASH_CHUNK ((size_t)1 << 20)

/* OpenSSL's libcrypto, loaded when the first hash is taken (dl.h): it is the largest library the
 * binary would otherwise link, and mapping it took more than half of the start-up of every command,
 * though only the hashing ones use it. */
#define CRYPTO_FNS(X)                                                                                    \
    X(EVP_MD_CTX_new) X(EVP_MD_CTX_free) X(EVP_DigestInit_ex) X(EVP_DigestUpdate) X(EVP_DigestFinal_ex) \
    X(EVP_sha256)

static struct crypto {
    CRYPTO_FNS(TC_DL_FIELD)
} C;
static const char *const names[] = {CRYPTO_FNS(TC_DL_NAME)};
_Static_assert(sizeof C == sizeof names / sizeof *names * sizeof(void *), "one pointer per function");
static tc_dl lib = TC_DL_INIT(TC_LIBCRYPTO_SONAME, names, C, "SHA-256 unavailable");

/* A SHA-256 begun in *m (freed with sha_end, also after a failure). */
static int sha_begin(EVP_MD_CTX **m, tc_diag *d)
{
    *m = NULL;
    const char *why;
    if (!tc_dl_get(&lib, &why))
        return tc_fail(d, TC_ERR_UNSUPPORTED, "%s", why);
    if (!(*m = C.EVP_MD_CTX_new()) || !C.EVP_DigestInit_ex(*m, C.EVP_sha256(), NULL))
        return tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
    return 0;
}

static void sha_end(EVP_MD_CTX *m)
{
    if (m)
        C.EVP_MD_CTX_free(m);
}

static int sha_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    return C.EVP_DigestUpdate(ctx, buf, n) ? 0 : tc_fail(d, TC_ERR_IO, "SHA-256 failed");
}

static int hex_of(EVP_MD_CTX *m, char hex[65], tc_diag *d)
{
    unsigned char md[32];
    unsigned len = 0;
    if (!C.EVP_DigestFinal_ex(m, md, &len))
        return tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int tc_elems_sha256(tc_elems *e, char hex[65], tc_diag *d)
{
    EVP_MD_CTX *m;
    uint8_t *buf = NULL;
    int rc;
    if ((rc = sha_begin(&m, d)))
        goto done;
    if (!(buf = malloc(HASH_CHUNK))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t got;;) {
        if ((rc = tc_elems_read(e, buf, HASH_CHUNK, &got, d)))
            goto done;
        if (!got)
            break;
        if ((rc = sha_sink(m, buf, got, d)))
            goto done;
    }
    rc = hex_of(m, hex, d);
done:
    sha_end(m);
    free(buf);
    return rc;
}

/* A tensor assembled from chunks (DCP) is pushed through the assembly, not pulled. */
static int assembled_sha256(const tc_ckpt *c, const tc_tensor *t, char hex[65], tc_diag *d)
{
    EVP_MD_CTX *m;
    int rc;
    if ((rc = sha_begin(&m, d)) || (rc = tc_tensor_elements(c, t, t->dtype, sha_sink, m, NULL, d)))
        goto done;
    rc = hex_of(m, hex, d);
done:
    sha_end(m);
    return rc;
}

int tc_tensor_sha256(const tc_ckpt *c, const tc_tensor *t, uint64_t max_expand, char hex[65], tc_diag *d)
{
    tc_elems *e = NULL;
    if (t->storage >= 0 && tc_assembled(c, (size_t)t->storage))
        return assembled_sha256(c, t, hex, d);
    int rc;
    if ((rc = tc_expand_check(c, t, t->dtype, max_expand, d)))
        return rc;
    if ((rc = tc_elems_open(&e, c, t, d)))
        goto done;
    rc = tc_elems_sha256(e, hex, d);
done:
    tc_elems_close(e);
    return rc;
}

int tc_dst_commit_hashed(tc_dst *o, char blob[65], tc_diag *d)
{
    blob[0] = 0;
    int rc = tc_dst_finish(o, d);
    if (rc || !tc_dst_blob(o))
        return rc ? rc : tc_dst_publish(o, d);
    /* a content-addressed store: the new blob is named by the SHA-256 of what was written */
    int fd = tc_dst_read_fd(o);
    EVP_MD_CTX *m;
    uint8_t *buf = NULL;
    if ((rc = sha_begin(&m, d))) {
        tc_diag_subject(d, o->path);
        goto done;
    }
    if (fd < 0 || !(buf = malloc(HASH_CHUNK))) {
        rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot take the SHA-256 of the new blob");
        goto done;
    }
    for (uint64_t off = 0;;) {
        ssize_t r = pread(fd, buf, HASH_CHUNK, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = tc_fail_at(d, TC_ERR_IO, o->path, TC_NO_OFFSET, "cannot read the new blob back: %s", strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        if ((rc = sha_sink(m, buf, (size_t)r, d)))
            goto done;
        off += (uint64_t)r;
    }
    if ((rc = hex_of(m, blob, d)))
        goto done;
    rc = tc_dst_set_blob_name(o, blob, d);
done:
    if (fd >= 0)
        close(fd);
    sha_end(m);
    free(buf);
    if (rc) {
        blob[0] = 0;
        tc_dst_abort(o);
        return rc;
    }
    return tc_dst_publish(o, d);
}

int tc_storage_sha256(const tc_ckpt *c, size_t i, char hex[65], tc_diag *d)
{
    tc_rd r;
    int rc = tc_storage_open(c, i, &r, d);
    if (rc)
        return rc;
    EVP_MD_CTX *m;
    uint8_t *buf = NULL;
    if ((rc = sha_begin(&m, d)))
        goto done;
    if (!(buf = malloc(HASH_CHUNK))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t got;;) {
        if ((rc = tc_rd_read(&r, buf, HASH_CHUNK, &got, d)))
            goto done;
        if (!got)
            break;
        if ((rc = sha_sink(m, buf, got, d)))
            goto done;
    }
    rc = hex_of(m, hex, d);
done:
    tc_rd_close(&r);
    sha_end(m);
    free(buf);
    return rc;
}
