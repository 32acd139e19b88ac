#include "hash.h"

#include "assemble.h"
#include "format.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HASH_CHUNK ((size_t)1 << 20)

static int sha_sink(void *ctx, const void *buf, size_t n, tc_diag *d)
{
    return EVP_DigestUpdate(ctx, buf, n) ? 0 : tc_fail(d, TC_ERR_IO, "SHA-256 failed");
}

static int hex_of(EVP_MD_CTX *m, char hex[65], tc_diag *d)
{
    unsigned char md[32];
    unsigned len = 0;
    if (!EVP_DigestFinal_ex(m, md, &len))
        return tc_fail(d, TC_ERR_IO, "SHA-256 failed");
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return 0;
}

int tc_elems_sha256(tc_elems *e, char hex[65], tc_diag *d)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    uint8_t *buf = malloc(HASH_CHUNK);
    int rc;
    if (!m || !buf || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
        goto done;
    }
    for (size_t got;;) {
        if ((rc = tc_elems_read(e, buf, HASH_CHUNK, &got, d)))
            goto done;
        if (!got)
            break;
        if (!EVP_DigestUpdate(m, buf, got)) {
            rc = tc_fail(d, TC_ERR_IO, "SHA-256 failed");
            goto done;
        }
    }
    rc = hex_of(m, hex, d);
done:
    EVP_MD_CTX_free(m);
    free(buf);
    return rc;
}

/* A tensor assembled from chunks (DCP) is pushed through the assembly, not pulled. */
static int assembled_sha256(const tc_ckpt *c, const tc_tensor *t, char hex[65], tc_diag *d)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int rc;
    if (!m || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
        goto done;
    }
    if ((rc = tc_tensor_elements(c, t, t->dtype, sha_sink, m, NULL, d)))
        goto done;
    rc = hex_of(m, hex, d);
done:
    EVP_MD_CTX_free(m);
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
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    uint8_t *buf = malloc(HASH_CHUNK);
    if (fd < 0 || !m || !buf || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
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
        if (!EVP_DigestUpdate(m, buf, (size_t)r)) {
            rc = tc_fail(d, TC_ERR_IO, "SHA-256 failed");
            goto done;
        }
        off += (uint64_t)r;
    }
    if ((rc = hex_of(m, blob, d)))
        goto done;
    rc = tc_dst_set_blob_name(o, blob, d);
done:
    if (fd >= 0)
        close(fd);
    EVP_MD_CTX_free(m);
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
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    uint8_t *buf = malloc(HASH_CHUNK);
    if (!m || !buf || !EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        rc = tc_fail(d, TC_ERR_NOMEM, "SHA-256 unavailable");
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
    EVP_MD_CTX_free(m);
    free(buf);
    return rc;
}
