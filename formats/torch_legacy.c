/* torch.save's legacy stream (torch < 1.6, or _use_new_zipfile_serialization
 * =False): five pickles back to back (magic number, protocol version,
 * sys_info, the object, the storage keys), then each storage as an int64
 * element count and its raw bytes, in key-list order. torch.load compares
 * the first pickle's value with the magic number, however it is pickled
 * (torch.save writes it as LONG1; Python 2's protocol 0 as LONG text): the
 * probe takes the usual bytes, and the registry gives any other file whose
 * first pickle is the number (tc_legacy_at_zero) to this driver. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "readings.h"
#include "torch_pickle.h"

extern const tc_format tc_format_torch_legacy;

static const uint8_t magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static bool probe(const tc_probe *p)
{
    const uint8_t *h = p->head;
    return p->n >= 14 && h[0] == 0x80 && h[2] == 0x8a && h[3] == 10 && !memcmp(h + 4, magic, 10);
}

static void lpriv_free(void *p)
{
    tc_torch_graph_free(p);
    free(p);
}

static bool is_magic(const pk_obj *o) { return o && o->kind == PK_BIGINT && o->len == 10 && !memcmp(o->s, magic, 10); }

int tc_legacy_at_zero(const tc_src *src, const tc_limits *lim, bool *is, tc_diag *d)
{
    pk_graph *g;
    pk_obj *root;
    int rc = tc_first_pickle(src, lim, &g, &root, d);
    if (rc)
        return rc;
    *is = is_magic(root);
    pk_graph_free(g);
    return 0;
}

/* Parse the five pickles from buf; *end is where the storages start. Each
 * value torch checks is checked right after its pickle, as torch does, so
 * that a failure leaves in the graph only what torch read before it raised.
 * Storages are only registered by the object pickle, which comes once per
 * attempt: a retry with a longer buffer starts from a fresh checkpoint (see
 * open_legacy). */
static int parse(tc_torch_graph *tg, const uint8_t *buf, size_t n, bool *hit_end, pk_obj **keys, size_t *end,
                 tc_diag *d)
{
    static const char *const what[] = {"magic number", "protocol version", "sys_info", "object pickle",
                                       "storage key list"};
    size_t pos = 0, used;
    pk_obj *obj[5];
    for (int i = 0; i < 5; i++) {
        pk_read_opts o = tc_torch_read_opts(tg, what[i]);
        o.hit_end = hit_end;
        o.base_offset = pos;
        if (i != 3)
            o.on_persid = NULL;
        int rc = pk_read(tg->g, buf + pos, n - pos, &o, &obj[i], &used, d);
        if (rc)
            return rc;
        pos += used;
        if (i == 0 && !is_magic(obj[0]))
            return tc_fail(d, TC_ERR_FORMAT, "invalid legacy magic number (corrupt file?)");
        if (i == 1 && (obj[1]->kind != PK_INT || obj[1]->i != 1001))
            return tc_fail(d, TC_ERR_UNSUPPORTED, "legacy protocol version %" PRId64 " (expected 1001)",
                           obj[1]->kind == PK_INT ? obj[1]->i : -1);
    }
    pk_obj *si = obj[2];
    for (size_t i = 0; si->kind == PK_DICT && i + 1 < si->n; i += 2)
        if (pk_is_str(si->items[i], "little_endian") && si->items[i + 1]->kind == PK_BOOL &&
            !si->items[i + 1]->i)
            return tc_fail(d, TC_ERR_UNSUPPORTED, "a big-endian legacy file; only little-endian is supported");
    if (obj[4]->kind != PK_LIST)
        return tc_fail(d, TC_ERR_FORMAT, "storage key list is not a list");
    tg->root = obj[3];
    tg->pickle_bytes = pos;
    *keys = obj[4];
    *end = pos;
    return 0;
}

static int open_legacy(tc_ckpt *c, tc_diag *d)
{
    tc_torch_graph *tg = calloc(1, sizeof *tg);
    if (!tg)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, &tc_format_torch_legacy, tg, lpriv_free);
    const tc_limits *lim = tc_ckpt_limits(c);
    const tc_src *src = tc_ckpt_src(c);
    /* the pickles come first and say nothing of their length: read a growing prefix (8 KiB holds
     * most: a file of a few tensors reads no more) */
    uint64_t cap = lim->max_pickle_bytes < (8u << 10) ? lim->max_pickle_bytes : 8u << 10;
    uint8_t *buf = NULL;
    pk_obj *keys = NULL;
    size_t end = 0;
    int rc;
    for (;;) {
        tc_torch_graph_free(tg);
        tc_ckpt_clear_storages(c);
        if ((rc = tc_torch_graph_init(tg, c, d)))
            break;
        uint64_t n = src->size < cap ? src->size : cap;
        free(buf); /* read anew, and exactly n bytes long: a read past them is a sanitizer's to catch */
        if (!(buf = malloc(n ? n : 1))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        if ((rc = tc_src_read(src, 0, buf, n, "legacy header", d)))
            break;
        bool hit_end = false;
        tc_diag tmp = {0};
        if (!(rc = parse(tg, buf, n, &hit_end, &keys, &end, &tmp)))
            break; /* parsed */
        if (hit_end && n < src->size && cap < lim->max_pickle_bytes) {
            cap *= 4;
            if (cap > lim->max_pickle_bytes)
                cap = lim->max_pickle_bytes;
            continue;
        }
        if (hit_end && n < src->size)
            rc = tc_fail(d, TC_ERR_LIMIT, "pickles longer than %" PRIu64 " bytes (raise with --max-pickle-size)",
                         lim->max_pickle_bytes);
        else
            rc = tc_torch_read_failed(tg, tc_diag_copy(d, &tmp), "the legacy pickles", d);
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
        long si = tc_ckpt_find_storage(c, k->s);
        if (si < 0)
            return tc_fail(d, TC_ERR_FORMAT, "storage key '%s' is listed but no tensor uses it", k->s);
        tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
        uint8_t nb[8];
        if ((rc = tc_src_read(src, off, nb, 8, k->s, d)))
            return rc;
        uint64_t numel = tc_le64(nb);
        if (numel != s->numel)
            return tc_fail(d, TC_ERR_FORMAT,
                           "storage '%s' at offset %" PRIu64 ": %" PRIu64 " elements, but the pickle says %" PRIu64,
                           k->s, off, numel, s->numel);
        s->file_off = off + 8;
        s->stored = true;
        if (s->file_off > src->size || s->nbytes > src->size - s->file_off)
            return tc_fail(d, TC_ERR_FORMAT,
                           "storage '%s' at offset %" PRIu64 " needs %" PRIu64
                           " bytes past the end of the file (truncated?)",
                           k->s, s->file_off, s->nbytes);
        off = s->file_off + s->nbytes;
    }
    for (size_t i = 0; i < tc_ckpt_nstorages(c); i++)
        if (!tc_ckpt_storage(c, i)->stored)
            return tc_fail(d, TC_ERR_FORMAT, "storage '%s' is used but missing from the key list",
                           tc_ckpt_storage(c, i)->key);
    char sz[32];
    snprintf(sz, sizeof sz, "%zu", keys->n);
    if ((rc = tc_ckpt_add_fact(c, "protocol_version", "1001", d)) || (rc = tc_ckpt_add_fact(c, "storages", sz, d)) ||
        (rc = tc_torch_index(tg, d)))
        return rc;
    return tc_weights_only(tg, NULL, d);
}

static int open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    (void)d;
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
    return 0;
}

/* read only: a rewrite of a legacy file is written as a torch zip */
const tc_format tc_format_torch_legacy = {.name = "torch-legacy", .probe = probe, .open = open_legacy,
                                          .open_storage = open_storage,
                                          .caps = TC_CAP_TORCH_GRAPH | TC_CAP_LEGACY_STREAM};
