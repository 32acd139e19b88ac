/* torch.save's legacy stream (torch < 1.6, or _use_new_zipfile_serialization
 * =False): five pickles back to back (magic number, protocol version,
 * sys_info, the object, the storage keys), then each storage as an int64
 * element count and its raw bytes, in key-list order. */
#include "format.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static bool probe(const uint8_t *h, size_t n, const char *path)
{
    (void)path;
    return n >= 14 && h[0] == 0x80 && h[2] == 0x8a && h[3] == 10 && !memcmp(h + 4, magic, 10);
}

static void reset(tc_ckpt *c)
{
    for (size_t i = 0; i < c->ns; i++) {
        free(c->s[i].key);
        free(c->s[i].location);
        free(c->s[i].pids);
    }
    c->ns = 0;
    free(c->hash);
    c->hash = NULL;
    c->hcap = 0;
    pk_graph_free(c->g);
    c->g = pk_graph_new();
}

/* Parse the five pickles from buf; *end is where the storages start. */
static int parse(tc_ckpt *c, const uint8_t *buf, size_t n, bool *hit_end, pk_obj **keys, size_t *end,
                 tc_diag *d)
{
    pk_read_opts o = {.limits = {c->lim.max_objects, c->lim.max_depth, c->lim.max_objects},
                      .hit_end = hit_end};
    static const char *const what[] = {"magic number", "protocol version", "sys_info", "object pickle",
                                       "storage key list"};
    size_t pos = 0, used;
    pk_obj *obj[5];
    for (int i = 0; i < 5; i++) {
        o.what = what[i];
        o.base_offset = pos;
        o.on_persid = i == 3 ? tc_ckpt_on_persid : NULL;
        o.ctx = c;
        int rc = pk_read(c->g, buf + pos, n - pos, &o, &obj[i], &used, d);
        if (rc)
            return rc;
        pos += used;
    }
    if (obj[0]->kind != PK_BIGINT || obj[0]->len != 10 || memcmp(obj[0]->s, magic, 10))
        return tc_fail(d, TC_ERR_FORMAT, "invalid legacy magic number (corrupt file?)");
    if (obj[1]->kind != PK_INT || obj[1]->i != 1001)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "legacy protocol version %" PRId64 " (expected 1001)",
                       obj[1]->kind == PK_INT ? obj[1]->i : -1);
    pk_obj *si = obj[2];
    for (size_t i = 0; si->kind == PK_DICT && i + 1 < si->n; i += 2)
        if (pk_is_str(si->items[i], "little_endian") && si->items[i + 1]->kind == PK_BOOL &&
            !si->items[i + 1]->i)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "a big-endian legacy file; only little-endian is supported");
    if (obj[4]->kind != PK_LIST)
        return tc_fail(d, TC_ERR_FORMAT, "storage key list is not a list");
    c->root = obj[3];
    *keys = obj[4];
    *end = pos;
    return 0;
}

static int open_legacy(tc_ckpt *c, tc_diag *d)
{
    uint64_t cap = c->lim.max_pickle_bytes < (1u << 20) ? c->lim.max_pickle_bytes : 1u << 20;
    uint8_t *buf = NULL;
    pk_obj *keys = NULL;
    size_t end = 0;
    int rc;
    for (;;) {
        uint64_t n = c->src.size < cap ? c->src.size : cap;
        uint8_t *nb = realloc(buf, n ? n : 1);
        if (!nb) {
            free(buf);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        buf = nb;
        if ((rc = tc_src_read(&c->src, 0, buf, n, "legacy header", d)))
            break;
        bool hit_end = false;
        tc_diag tmp = {0};
        rc = parse(c, buf, n, &hit_end, &keys, &end, &tmp);
        if (!rc)
            break;
        if (hit_end && n < c->src.size && cap < c->lim.max_pickle_bytes) {
            cap *= 4;
            if (cap > c->lim.max_pickle_bytes)
                cap = c->lim.max_pickle_bytes;
            reset(c);
            if (!c->g) {
                rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
                break;
            }
            continue;
        }
        if (hit_end && n < c->src.size)
            rc = tc_fail(d, TC_ERR_LIMIT, "pickles longer than %" PRIu64 " bytes (raise with --max-pickle-size)",
                         c->lim.max_pickle_bytes);
        else
            rc = tc_fail(d, tmp.code, "%s", tmp.msg);
        break;
    }
    free(buf);
    if (rc)
        return rc;
    uint64_t off = end;
    for (size_t i = 0; i < keys->n; i++) {
        const pk_obj *k = keys->items[i];
        if (k->kind != PK_STR)
            return tc_fail(d, TC_ERR_FORMAT, "storage key list entry %zu is not a string", i);
        tc_storage *s = tc_ckpt_storage(c, k->s);
        if (!s)
            return tc_fail(d, TC_ERR_FORMAT, "storage key '%s' is listed but no tensor uses it", k->s);
        uint8_t nb[8];
        if ((rc = tc_src_read(&c->src, off, nb, 8, k->s, d)))
            return rc;
        uint64_t numel = tc_le64(nb);
        if (numel != s->numel)
            return tc_fail(d, TC_ERR_FORMAT,
                           "storage '%s' at offset %" PRIu64 ": %" PRIu64 " elements, but the pickle says %" PRIu64,
                           k->s, off, numel, s->numel);
        s->file_off = off + 8;
        s->raw = true;
        if (s->file_off > c->src.size || s->nbytes > c->src.size - s->file_off)
            return tc_fail(d, TC_ERR_FORMAT,
                           "storage '%s' at offset %" PRIu64 " needs %" PRIu64
                           " bytes past the end of the file (truncated?)",
                           k->s, s->file_off, s->nbytes);
        off = s->file_off + s->nbytes;
    }
    for (size_t i = 0; i < c->ns; i++)
        if (!c->s[i].raw)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s' is used but missing from the key list", c->s[i].key);
    char sz[32];
    snprintf(sz, sizeof sz, "%zu", keys->n);
    if ((rc = tc_ckpt_add_fact(c, "protocol_version", "1001", d)) || (rc = tc_ckpt_add_fact(c, "storages", sz, d)))
        return rc;
    return tc_ckpt_index_graph(c, d);
}

const tc_format tc_format_torch_legacy = {"torch-legacy", probe, open_legacy};
