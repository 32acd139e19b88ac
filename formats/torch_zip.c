/* torch.save's zip format (torch >= 1.6): <archive>/data.pkl, data/<key>
 * records, version, byteorder and friends. */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool probe(const uint8_t *h, size_t n, const char *path)
{
    (void)path;
    return n >= 4 && !memcmp(h, "PK\x03\x04", 4);
}

static const tc_zip_entry *record(const tc_ckpt *c, const char *name)
{
    char full[512];
    snprintf(full, sizeof full, "%s/%s", c->archive, name);
    return tc_zip_find(&c->zip, full);
}

static int small_record(tc_ckpt *c, const char *name, tc_diag *d)
{
    const tc_zip_entry *e = record(c, name);
    if (!e)
        return 0;
    uint8_t *buf;
    size_t len;
    int rc = tc_zip_read_all(&c->zip, e, 64, &buf, &len, d);
    if (rc)
        return rc;
    char v[65];
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] >= 0x20 && buf[i] < 0x7f)
            v[k++] = (char)buf[i];
    v[k] = 0;
    free(buf);
    return tc_ckpt_add_fact(c, name, v, d);
}

static int open_zip(tc_ckpt *c, tc_diag *d)
{
    tc_zip_limits zl = {.max_entries = c->lim.max_entries};
    int rc = tc_zip_open(&c->zip, &c->src, &zl, d);
    if (rc)
        return rc;
    if (c->zip.n == 0)
        return tc_fail(d, TC_ERR_FORMAT, "zip archive has no entries");
    const char *first = c->zip.e[0].name, *slash = strchr(first, '/');
    if (!slash || slash == first)
        return tc_fail(d, TC_ERR_FORMAT, "zip entry '%s' is not inside a top folder (not a torch checkpoint)",
                       first);
    if (!(c->archive = strndup(first, (size_t)(slash - first))))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    size_t al = strlen(c->archive);
    for (size_t i = 0; i < c->zip.n; i++)
        if (strncmp(c->zip.e[i].name, c->archive, al) || c->zip.e[i].name[al] != '/')
            return tc_fail(d, TC_ERR_FORMAT, "zip entry '%s' is outside the top folder '%s/' (torch refuses this)",
                           c->zip.e[i].name, c->archive);
    if (record(c, "constants.pkl"))
        return tc_fail(d, TC_ERR_UNSUPPORTED,
                       "a TorchScript archive (torch.jit.save), not a torch.save checkpoint");
    if ((rc = tc_ckpt_add_fact(c, "archive", c->archive, d)) || (rc = small_record(c, "version", d)) ||
        (rc = small_record(c, ".data/version", d)) || (rc = small_record(c, "byteorder", d)) ||
        (rc = small_record(c, ".format_version", d)) || (rc = small_record(c, ".storage_alignment", d)))
        return rc;
    for (size_t i = 0; i < c->nfacts; i++)
        if (!strcmp(c->facts[i].key, "byteorder") && strcmp(c->facts[i].value, "little"))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "byteorder record says '%s'; only little-endian files are supported",
                           c->facts[i].value);
    if (!record(c, "version") && !record(c, ".data/version"))
        return tc_fail(d, TC_ERR_FORMAT, "no %s/version record (torch refuses such files)", c->archive);

    const tc_zip_entry *pe = record(c, "data.pkl");
    if (!pe)
        return tc_fail(d, TC_ERR_FORMAT, "no %s/data.pkl record", c->archive);
    uint8_t *pkl;
    size_t plen;
    if (pe->usize > c->lim.max_pickle_bytes)
        return tc_fail(d, TC_ERR_LIMIT, "%s is %llu bytes, more than %llu (raise with --max-pickle-size)", pe->name,
                       (unsigned long long)pe->usize, (unsigned long long)c->lim.max_pickle_bytes);
    if ((rc = tc_zip_read_all(&c->zip, pe, c->lim.max_pickle_bytes, &pkl, &plen, d)))
        return rc;
    pk_read_opts o = {.limits = {c->lim.max_objects, c->lim.max_depth, c->lim.max_objects},
                      .what = "data.pkl",
                      .on_persid = tc_ckpt_on_persid,
                      .ctx = c};
    size_t used;
    rc = pk_read(c->g, pkl, plen, &o, &c->root, &used, d);
    free(pkl);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->ns; i++) {
        tc_storage *s = &c->s[i];
        char name[256];
        snprintf(name, sizeof name, "data/%s", s->key);
        const tc_zip_entry *e = record(c, name);
        if (!e)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s': no record %s/%s (file incomplete?)", s->key,
                           c->archive, name);
        if (e->usize != s->nbytes)
            return tc_fail(d, TC_ERR_FORMAT,
                           "record %s is %llu bytes but storage '%s' needs %llu (%llu x %s)", e->name,
                           (unsigned long long)e->usize, s->key, (unsigned long long)s->nbytes,
                           (unsigned long long)s->numel, tc_dtype_name(s->dtype));
        s->rec = e;
        s->raw = e->method == 0;
        s->file_off = e->data_off;
        s->crc_known = true;
        s->crc = e->crc;
    }
    return tc_ckpt_index_graph(c, d);
}

const tc_format tc_format_torch_zip = {"torch-zip", probe, open_zip};
