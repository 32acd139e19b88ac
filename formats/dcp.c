/* torch.distributed.checkpoint (DCP) folders: a .metadata pickle beside
 * .distcp files.
 *
 * .metadata (written with pickle.dump, read back with pickle.load) is a
 * Metadata dataclass: state_dict_metadata maps every flattened name to a
 * TensorStorageMetadata (dtype, global shape, chunks: offsets and sizes) or
 * a BytesStorageMetadata (a pickled value); storage_data maps each
 * MetadataIndex (name, chunk offsets) to a _StorageInfo (file, offset,
 * length); planner_data maps names to their path of keys. It is read with
 * the inert pickle reader; its globals are allowed when they are DCP's own
 * dataclasses (dcp_allowed) or torch's weights_only allowlist accepts them.
 *
 * Every item of a .distcp file is a torch.save archive (DCP's default
 * serialization): a tensor chunk holds one dense tensor, a byte item one
 * value. Both are read with the torch zip driver over a window of the file.
 * A tensor becomes one storage assembled from its chunks (each chunk a
 * storage of its own: a plain range of its .distcp file); the chunks must
 * tile the global shape exactly. Byte items become objects of the model,
 * with their globals judged as torch.load(weights_only=False), which is how
 * DCP loads them.
 *
 * Longer than ~800 lines on purpose: a format is one file behind the driver
 * vtable (docs/architecture.md), and DCP's reading is four steps that share
 * this file's private state: the metadata, the chunk archives, the tiling
 * check and the byte items (one section each below). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "filepool.h"
#include "format.h"
#include "pickle.h"
#include "readings.h"
#include "strmap.h"
#include "torch_pickle.h"
#include "vec.h"
#include "verdict.h"

extern const tc_format tc_format_dcp;
extern const tc_format tc_format_torch_zip; /* DCP's torch_save serialization of an item */

#define CARRY_MAX (1u << 20)       /* a byte item larger than this is not carried into outputs */
#define CARRY_TOTAL (64u << 20)    /* nor once the carried ones reach this */

/* DCP's own classes, as its writers name them in .metadata (torch 2.x; the
 * TensorProperties of 2.0-2.2 lived with ShardedTensor's metadata), and the
 * path type DCP's FileSystemWriter records as StorageMeta.checkpoint_id. */
static const char *const dcp_classes[] = {
    "pathlib.PosixPath",
    "pathlib._local.PosixPath",
    "torch.distributed._shard.sharded_tensor.metadata.MEM_FORMAT_ENCODING",
    "torch.distributed._shard.sharded_tensor.metadata.TensorProperties",
    "torch.distributed.checkpoint.filesystem._StorageInfo",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.Metadata",
    "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta",
    "torch.distributed.checkpoint.metadata.TensorProperties",
    "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING",
};

static bool dcp_allowed(const char *name)
{
    for (size_t i = 0; i < sizeof dcp_classes / sizeof *dcp_classes; i++)
        if (!strcmp(name, dcp_classes[i]))
            return true;
    return false;
}

/* ---- private state ------------------------------------------------------------- */

/* The .distcp files (a bounded pool of them: formats/filepool.h), and where each chunk's storage lies. */
typedef struct dpriv {
    char *dir;
    tc_filepool files;
    size_t *file_of;       /* per storage: its file (chunk storages only) */
    size_t nfile_of;
} dpriv;

static void dpriv_free(void *p)
{
    dpriv *x = p;
    if (!x)
        return;
    tc_filepool_free(&x->files);
    free(x->file_of);
    free(x->dir);
    free(x);
}

static const tc_pfile *dfile_at(const dpriv *x, size_t i) { return tc_filepool_file(&x->files, i); }

static bool probe(const tc_probe *p)
{
    const char *slash = p->path ? strrchr(p->path, '/') : NULL, *base = slash ? slash + 1 : p->path;
    return base && !strcmp(base, ".metadata");
}

/* ---- reading the object graph ---------------------------------------------------- */

typedef struct rd {
    tc_ckpt *c;
    dpriv *x;
    tc_diag *d;
} rd;

static const pk_obj *dict_get(const pk_obj *o, const char *key)
{
    if (!o || o->kind != PK_DICT)
        return NULL;
    for (size_t i = 0; i + 1 < o->n; i += 2)
        if (pk_is_str(o->items[i], key))
            return o->items[i + 1];
    return NULL;
}

/* An instance of DCP class `cls` (NEWOBJ or REDUCE of it), or NULL. */
static bool is_instance(const pk_obj *o, const char *cls)
{
    const pk_obj *g = pk_call_global(o);
    if (!g)
        return false;
    char name[512];
    snprintf(name, sizeof name, "%s.%s", pk_module_py3(g->s), g->name);
    const char *dot = strrchr(name, '.');
    return dcp_allowed(name) && !strcmp(dot + 1, cls);
}

/* Its fields: the dict BUILD gave it (or the dict of a (dict, slots) state). */
static const pk_obj *fields(const pk_obj *o)
{
    if (!o || !o->state)
        return NULL;
    if (o->state->kind == PK_DICT)
        return o->state;
    if (o->state->kind == PK_TUPLE && o->state->n == 2 && o->state->items[0]->kind == PK_DICT)
        return o->state->items[0];
    return NULL;
}

static bool plain_str(const pk_obj *o) { return o && o->kind == PK_STR && strlen(o->s) == o->len; }

/* A torch.Size (or a plain tuple) of non-negative ints. */
static int size_of(const pk_obj *o, int64_t *out, int *nd)
{
    if (o && o->kind == PK_CALL && pk_is_global(o->func, "torch", "Size") && o->args && o->args->kind == PK_TUPLE &&
        o->args->n == 1)
        o = o->args->items[0];
    if (!o || (o->kind != PK_TUPLE && o->kind != PK_LIST) || o->n > TC_MAX_DIMS)
        return -1;
    for (size_t i = 0; i < o->n; i++) {
        if (o->items[i]->kind != PK_INT || o->items[i]->i < 0)
            return -1;
        out[i] = o->items[i]->i;
    }
    *nd = (int)o->n;
    return 0;
}

static void dims_text(const int64_t *v, int n, char *buf, size_t len)
{
    tc_buf b = tc_buf_fixed(buf, len);
    tc_buf_putc(&b, '[');
    for (int i = 0; i < n && tc_buf_len(&b) + 24 < len; i++)
        tc_buf_printf(&b, "%s%" PRId64, i ? ", " : "", v[i]);
    if (n && tc_buf_len(&b) + 24 >= len)
        tc_buf_puts(&b, ", ...");
    tc_buf_putc(&b, ']');
}

/* The key of a storage_data entry: name, then the chunk's offsets ("-" for a byte item). */
static char *item_key(const char *fqn, const int64_t *off, int nd)
{
    tc_buf k = TC_BUF_INIT(0);
    tc_buf_puts(&k, fqn);
    tc_buf_putc(&k, 1);
    if (nd < 0)
        tc_buf_putc(&k, '-');
    for (int i = 0; i < nd; i++)
        tc_buf_printf(&k, "%s%" PRId64, i ? "," : "", off[i]);
    return tc_buf_take(&k);
}

/* A storage_data value. */
typedef struct sitem {
    size_t file;
    uint64_t off, len;
    const char *fqn;       /* the item's name, for messages */
    char *key;
} sitem;

typedef struct tchunk {
    const int64_t *off, *size;   /* ndim each */
} tchunk;

typedef struct titem {
    const char *fqn;
    bool bytes;
    tc_dtype dtype;
    int ndim;
    int64_t shape[TC_MAX_DIMS];
    const pk_obj *chunks;  /* list of ChunkStorageMetadata */
    const pk_obj *path;    /* planner_data's path, or NULL */
    long tensor;           /* its tensor in c */
} titem;

/* Every item of state_dict_metadata. */
static int read_items(const pk_obj *sdm, const pk_obj *planner, titem *it, size_t *nit, tc_diag *d)
{
    tc_strmap seen = {0};
    int rc = 0;
    size_t n = 0;
    for (size_t i = 0; i + 1 < sdm->n && !rc; i += 2) {
        const pk_obj *k = sdm->items[i], *v = sdm->items[i + 1];
        if (!plain_str(k) || !k->len) {
            rc = tc_fail(d, TC_ERR_FORMAT, "state_dict_metadata has a key that is not a name");
            break;
        }
        int put = tc_strmap_put(&seen, k->s, n, NULL);
        if (put <= 0) {
            rc = put < 0 ? tc_fail(d, TC_ERR_NOMEM, "out of memory")
                         : tc_fail(d, TC_ERR_FORMAT, "state_dict_metadata names '%s' twice", k->s);
            break;
        }
        titem *t = &it[n];
        memset(t, 0, sizeof *t);
        t->fqn = k->s;
        t->tensor = -1;
        t->path = dict_get(planner, k->s);
        if (is_instance(v, "BytesStorageMetadata")) {
            t->bytes = true;
            n++;
            continue;
        }
        const pk_obj *f = fields(v);
        if (!is_instance(v, "TensorStorageMetadata") || !f) {
            rc = tc_fail(d, TC_ERR_FORMAT, "'%s': neither a TensorStorageMetadata nor a BytesStorageMetadata", k->s);
            break;
        }
        const pk_obj *props = dict_get(f, "properties"), *dt = NULL;
        if (is_instance(props, "TensorProperties") && props->state) {
            const pk_obj *ps = props->state;
            if (ps->kind == PK_TUPLE && ps->n >= 1)
                dt = ps->items[0];
            else
                dt = dict_get(fields(props), "dtype");
        }
        if (!dt || dt->kind != PK_GLOBAL || strcmp(dt->s, "torch") ||
            (t->dtype = tc_dtype_from_name(dt->name)) == TC_DT_INVALID) {
            rc = tc_fail(d, TC_ERR_UNSUPPORTED, "'%s': no dtype tensorctl knows in its properties%s%s", k->s,
                         dt && dt->kind == PK_GLOBAL ? ": " : "", dt && dt->kind == PK_GLOBAL ? dt->name : "");
            break;
        }
        if (size_of(dict_get(f, "size"), t->shape, &t->ndim)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "'%s': its size is not a torch.Size of non-negative integers", k->s);
            break;
        }
        t->chunks = dict_get(f, "chunks");
        if (!t->chunks || t->chunks->kind != PK_LIST) {
            rc = tc_fail(d, TC_ERR_FORMAT, "'%s': no list of chunks", k->s);
            break;
        }
        n++;
    }
    tc_strmap_free(&seen);
    *nit = n;
    return rc;
}

/* A relative_path names a plain file of the checkpoint's folder. */
static const char *bad_file_name(const pk_obj *p)
{
    if (!plain_str(p))
        return "is not a string of text";
    if (!p->len)
        return "is empty";
    if (strchr(p->s, '/') || strchr(p->s, '\\'))
        return "is not a plain file name in the checkpoint's folder";
    if (!strcmp(p->s, ".") || !strcmp(p->s, ".."))
        return "is not a file name";
    if (!strcmp(p->s, ".metadata"))
        return "is the .metadata file itself";
    return NULL;
}

static int add_file(rd *R, tc_strmap *files, const char *name, size_t *out, tc_diag *d)
{
    dpriv *x = R->x;
    if (tc_strmap_get(files, name, out))
        return 0;
    tc_buf path = TC_BUF_INIT(0);
    tc_buf_printf(&path, "%s/%s", x->dir, name);
    if (tc_buf_oom(&path)) {
        tc_buf_free(&path);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    struct stat st;
    int rc;
    if (lstat(tc_buf_str(&path), &st) < 0) {
        int e = errno;
        rc = tc_fail(d, e == ENOENT ? TC_ERR_FORMAT : TC_ERR_IO, "file %s, which .metadata names, cannot be read: %s%s",
                     name, strerror(e), e == ENOENT ? " (incomplete copy of the checkpoint?)" : "");
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "file %s, which .metadata names, is %s, not a regular file", name,
                     S_ISLNK(st.st_mode) ? "a symbolic link (not followed)" : S_ISDIR(st.st_mode) ? "a folder" : "special");
        goto done;
    }
    if ((rc = tc_filepool_add(&x->files, name, tc_buf_str(&path), (uint64_t)st.st_size, out, d)))
        goto done;
    if (tc_strmap_put(files, dfile_at(x, *out)->name, *out, NULL) < 0)
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
done:
    tc_buf_free(&path);
    return rc;
}

/* Every storage_data entry: key -> item. */
static int read_storage_data(rd *R, const pk_obj *sd, sitem *si, size_t *nsi, tc_strmap *keys, tc_diag *d)
{
    tc_strmap files = {0};
    int rc = 0;
    size_t n = 0;
    for (size_t i = 0; i + 1 < sd->n && !rc; i += 2) {
        const pk_obj *k = fields(sd->items[i]), *v = fields(sd->items[i + 1]);
        if (!is_instance(sd->items[i], "MetadataIndex") || !k) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data has a key that is not a MetadataIndex");
            break;
        }
        const pk_obj *fqn = dict_get(k, "fqn"), *off = dict_get(k, "offset");
        if (!plain_str(fqn)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data has a MetadataIndex without a name");
            break;
        }
        int64_t o[TC_MAX_DIMS];
        int nd = -1;
        if (off && off->kind != PK_NONE && size_of(off, o, &nd)) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data: '%s' has an offset that is not a torch.Size", fqn->s);
            break;
        }
        if (!is_instance(sd->items[i + 1], "_StorageInfo") || !v) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data: '%s' maps to something other than a _StorageInfo", fqn->s);
            break;
        }
        const pk_obj *rp = dict_get(v, "relative_path"), *fo = dict_get(v, "offset"), *fl = dict_get(v, "length"),
                     *td = dict_get(v, "transform_descriptors");
        const char *why = bad_file_name(rp);
        if (why) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data: '%s' lies in file '%.200s', which %s", fqn->s,
                         plain_str(rp) ? rp->s : "?", why);
            break;
        }
        if (!fo || fo->kind != PK_INT || fo->i < 0 || !fl || fl->kind != PK_INT || fl->i < 0) {
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data: '%s' has no offset and length in %s", fqn->s, rp->s);
            break;
        }
        if (td && td->kind != PK_NONE && !((td->kind == PK_LIST || td->kind == PK_TUPLE) && !td->n)) {
            const pk_obj *t0 = (td->kind == PK_LIST || td->kind == PK_TUPLE) && td->n ? td->items[0] : NULL;
            rc = tc_fail(d, TC_ERR_UNSUPPORTED, "'%s' is stored through a transform (%s), which tensorctl does not read",
                         fqn->s, plain_str(t0) ? t0->s : "transform_descriptors");
            break;
        }
        sitem *s = &si[n];
        memset(s, 0, sizeof *s);
        s->off = (uint64_t)fo->i;
        s->len = (uint64_t)fl->i;
        s->fqn = fqn->s;
        if ((rc = add_file(R, &files, rp->s, &s->file, d)))
            break;
        if (!(s->key = item_key(fqn->s, o, nd))) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        n++;
        int put = tc_strmap_put(keys, s->key, n - 1, NULL);
        if (put < 0)
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        else if (!put) {
            char dims[200] = "";
            if (nd >= 0)
                dims_text(o, nd, dims, sizeof dims);
            rc = tc_fail(d, TC_ERR_FORMAT, "storage_data names '%s'%s%s twice", fqn->s, nd >= 0 ? " chunk " : "",
                         dims);
        }
    }
    tc_strmap_free(&files);
    *nsi = n;
    return rc;
}

static int cmp_span(const void *a, const void *b, void *ctx)
{
    const sitem *v = ctx, *x = &v[*(const size_t *)a], *y = &v[*(const size_t *)b];
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Every item inside its file, and no two sharing a byte. */
static int check_spans(rd *R, const sitem *si, size_t n, tc_diag *d)
{
    size_t *ord = malloc((n + 1) * sizeof *ord);
    if (!ord)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        ord[i] = i;
    qsort_r(ord, n, sizeof *ord, cmp_span, (void *)si);
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        const sitem *s = &si[ord[k]];
        const tc_pfile *f = dfile_at(R->x, s->file);
        if (s->off > f->size || s->len > f->size - s->off)
            rc = tc_fail_at(d, TC_ERR_FORMAT, f->path, f->size,
                            "item '%s' at bytes [%" PRIu64 ", %" PRIu64 ") lies past the end of the file (%" PRIu64
                            " bytes; truncated?)",
                            s->fqn, s->off, s->off + s->len, f->size);
        else if (k && si[ord[k - 1]].file == s->file && si[ord[k - 1]].off + si[ord[k - 1]].len > s->off)
            rc = tc_fail_at(d, TC_ERR_FORMAT, f->path, s->off,
                            "items '%s' and '%s' overlap at byte %" PRIu64 " (each item has bytes of its own)",
                            si[ord[k - 1]].fqn, s->fqn, s->off);
    }
    free(ord);
    return rc;
}

/* ---- a chunk's or a byte item's torch.save archive --------------------------------- */

/* The archive at item s, opened with the torch zip driver; msg prefix names it. */
static int open_item(rd *R, const sitem *s, const char *what, tc_ckpt **out, tc_diag *d)
{
    const tc_pfile *f = dfile_at(R->x, s->file);
    const tc_src *src;
    tc_src win;
    tc_diag in = TC_DIAG_INIT;
    tc_ckpt *b = NULL;
    uint8_t head[4] = {0};
    int rc = tc_filepool_open(&R->x->files, s->file, &src, d);
    if (rc)
        return rc;
    if ((rc = tc_src_window(&win, src, s->off, s->len, &in)) ||
        (rc = tc_src_read(&win, 0, head, s->len < 4 ? (size_t)s->len : 4, what, &in)))
        return tc_fail_at(d, rc, f->path, s->off, "%s: %s", what, in.msg);
    if (s->len < 4 || memcmp(head, "PK\x03\x04", 4))
        return tc_fail_at(d, TC_ERR_UNSUPPORTED, f->path, s->off,
                          "%s at bytes [%" PRIu64 ", %" PRIu64 ") is not a torch.save archive (only DCP's torch_save "
                          "serialization is read)",
                          what, s->off, s->off + s->len);
    if ((rc = tc_ckpt_new_src(&b, f->path, &win, tc_ckpt_limits(R->c), &in)) ||
        (rc = tc_format_torch_zip.open(b, &in))) {
        tc_ckpt_close(b);
        return tc_fail_at(d, rc, f->path, s->off, "%s at bytes [%" PRIu64 ", %" PRIu64 "): %s", what, s->off,
                          s->off + s->len, in.msg);
    }
    /* what makes the archive unsafe to torch.load makes the checkpoint so (DCP loads it with torch.load) */
    for (size_t i = 0; i < tc_ckpt_nhazards(b) && !rc; i++) {
        tc_buf t = TC_BUF_INIT(2000);
        tc_buf_printf(&t, "%s in %s: %s", what, f->name, tc_ckpt_hazard(b, i));
        rc = tc_buf_oom(&t) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_hazard(R->c, tc_buf_str(&t), d);
        tc_buf_free(&t);
    }
    if (rc) {
        tc_ckpt_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* Its globals join c's (as torch.load would import them). */
static int take_globals(tc_ckpt *c, const tc_ckpt *b, tc_diag *d)
{
    int rc = 0;
    for (size_t g = 0; g < tc_ckpt_nglobals(b) && !rc; g++)
        for (uint32_t k = 0; k < tc_ckpt_global(b, g)->count && !rc; k++)
            rc = tc_ckpt_add_global(c, tc_ckpt_global(b, g)->name, d);
    return rc;
}

/* Strides that lay a tensor of this shape over exactly its numel elements. */
static bool dense(const int64_t *shape, const int64_t *stride, int nd)
{
    int ord[TC_MAX_DIMS], n = 0;
    for (int i = 0; i < nd; i++)
        if (shape[i] != 1)
            ord[n++] = i;
    for (int i = 1; i < n; i++) /* by stride, innermost first */
        for (int j = i; j > 0 && stride[ord[j]] < stride[ord[j - 1]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    int64_t want = 1;
    for (int i = 0; i < n; i++) {
        if (stride[ord[i]] != want)
            return false;
        want *= shape[ord[i]];
    }
    return true;
}

/* An item's archive with a byteorder record 'big'. */
static bool big_endian(const tc_ckpt *b)
{
    for (size_t i = 0; i < tc_ckpt_nfacts(b); i++)
        if (!strcmp(tc_ckpt_fact(b, i)->key, "byteorder") && !strcmp(tc_ckpt_fact(b, i)->value, "big"))
            return true;
    return false;
}

/* Chunk k of tensor t: its archive holds one dense tensor of the chunk's
 * sizes and t's dtype; its bytes become storage `key` of c. */
static int read_chunk(rd *R, const titem *t, const tchunk *ch, const sitem *s, tc_chunk *out, int64_t *strides,
                      tc_diag *d)
{
    char dims[200], what[400];
    dims_text(ch->off, t->ndim, dims, sizeof dims);
    snprintf(what, sizeof what, "tensor '%s' chunk at %s", t->fqn, dims);
    tc_ckpt *b = NULL;
    int rc = open_item(R, s, what, &b, d);
    if (rc)
        return rc;
    const tc_pfile *f = dfile_at(R->x, s->file);
    const tc_tensor *bt = tc_ckpt_ntensors(b) == 1 ? tc_ckpt_tensor(b, 0) : NULL;
    const tc_storage *bs = bt && bt->storage >= 0 ? tc_ckpt_storage(b, (size_t)bt->storage) : NULL;
    char want[200], got[200];
    dims_text(ch->size, t->ndim, want, sizeof want);
    if (!bt || bt->kind != TC_TENSOR_DENSE || !bs || tc_ckpt_nstorages(b) != 1)
        rc = tc_fail_at(d, TC_ERR_FORMAT, f->path, s->off, "%s: its archive holds %zu tensors, not one plain tensor",
                        what, tc_ckpt_ntensors(b));
    else if (big_endian(b))
        rc = tc_fail_at(d, TC_ERR_UNSUPPORTED, f->path, s->off, "%s: its archive is big-endian, which tensorctl "
                        "reads only in a file of its own", what);
    else if (bt->dtype != t->dtype)
        rc = tc_fail_at(d, TC_ERR_FORMAT, f->path, s->off, "%s: its archive holds %s, but the tensor is %s", what,
                        tc_dtype_name(bt->dtype), tc_dtype_name(t->dtype));
    else if (bt->ndim != t->ndim || memcmp(bt->shape, ch->size, (size_t)t->ndim * sizeof *ch->size)) {
        dims_text(bt->shape, bt->ndim, got, sizeof got);
        rc = tc_fail_at(d, TC_ERR_FORMAT, f->path, s->off, "%s: its archive holds shape %s, but the chunk is %s", what,
                        got, want);
    } else if (bt->offset || bs->nbytes != bt->nbytes || !dense(bt->shape, bt->stride, bt->ndim) || !bs->stored)
        rc = tc_fail_at(d, TC_ERR_UNSUPPORTED, f->path, s->off,
                        "%s: its archive holds a view or a compressed record, not a dense tensor over its own storage",
                        what);
    if (rc || (rc = take_globals(R->c, b, d)))
        goto done;
    char key[300];
    snprintf(key, sizeof key, "%s@%" PRIu64, f->name, s->off);
    long si = tc_ckpt_add_storage(R->c, key, d);
    if (si < 0) {
        rc = d->code;
        goto done;
    }
    if ((rc = tc_ckpt_set_location(R->c, (size_t)si, "-", d)))
        goto done;
    tc_storage *st = tc_ckpt_storage_mut(R->c, (size_t)si);
    st->dtype = bt->dtype;
    st->numel = bs->numel;
    st->nbytes = bs->nbytes;
    st->file_off = s->off + bs->file_off;
    st->crc_known = bs->crc_known;
    st->crc = bs->crc;
    dpriv *x = R->x;
    if (tc_grow(&x->file_of, &x->nfile_of, (size_t)si + 1, sizeof *x->file_of)) { /* its capacity */
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    x->file_of[si] = s->file;
    memcpy(strides, bt->stride, (size_t)t->ndim * sizeof *strides);
    *out = (tc_chunk){(size_t)si, 0, ch->off, ch->size, strides};
done:
    tc_ckpt_close(b);
    return rc;
}

/* ---- the chunks tile the tensor ----------------------------------------------------- */

typedef struct cov {
    const tchunk *ch;
    int ndim;
    const int64_t *shape;
    const char *fqn;
    int64_t at[TC_MAX_DIMS];
    tc_diag *d;
} cov;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_start(const void *a, const void *b, void *ctx)
{
    const int64_t *k = ctx;
    int64_t x = k[*(const size_t *)a], y = k[*(const size_t *)b];
    return x < y ? -1 : x > y;
}

/* The chunks ids[0..n), each covering the whole cell fixed so far in the
 * dimensions before k, cover that cell exactly once: sweep dimension k over
 * the boundaries of their intervals, and recurse into each piece with the
 * chunks covering it. Work is about n log n for a grid of chunks, and never
 * more than the elements they cover. */
static int cover(cov *cv, const size_t *ids, size_t n, int k)
{
    char where[300];
    if (k == cv->ndim) {
        if (n == 1)
            return 0;
        dims_text(cv->at, cv->ndim, where, sizeof where);
        char a[200], b[200];
        dims_text(cv->ch[ids[0]].off, cv->ndim, a, sizeof a);
        dims_text(cv->ch[ids[1]].off, cv->ndim, b, sizeof b);
        return tc_fail(cv->d, TC_ERR_FORMAT, "tensor '%s': chunks at %s and %s overlap at element %s", cv->fqn, a, b,
                       where);
    }
    size_t *by = malloc((n + 1) * sizeof *by), *act = malloc((n + 1) * sizeof *act),
           *sub = malloc((n + 1) * sizeof *sub);
    int64_t *start = malloc((n + 1) * sizeof *start), *bound = malloc((2 * n + 2) * sizeof *bound);
    int rc = 0;
    if (!by || !act || !sub || !start || !bound) {
        rc = tc_fail(cv->d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t nb = 0, nact = 0, p = 0;
    for (size_t i = 0; i < n; i++) {
        const tchunk *c = &cv->ch[ids[i]];
        by[i] = i;
        start[i] = c->off[k];
        bound[nb++] = c->off[k];
        bound[nb++] = c->off[k] + c->size[k];
    }
    bound[nb++] = 0;
    bound[nb++] = cv->shape[k];
    qsort_r(by, n, sizeof *by, cmp_start, start);
    qsort(bound, nb, sizeof *bound, cmp_i64);
    for (size_t j = 0; j + 1 < nb && !rc; j++) {
        int64_t lo = bound[j], hi = bound[j + 1];
        if (lo >= cv->shape[k])
            break;
        if (hi == lo)
            continue;
        size_t keep = 0;
        for (size_t m = 0; m < nact; m++) {
            const tchunk *c = &cv->ch[ids[act[m]]];
            if (c->off[k] + c->size[k] > lo)
                act[keep++] = act[m];
        }
        nact = keep;
        while (p < n && start[by[p]] <= lo)
            act[nact++] = by[p++];
        cv->at[k] = lo;
        if (!nact) {
            for (int r = k + 1; r < cv->ndim; r++)
                cv->at[r] = 0;
            dims_text(cv->at, k + 1, where, sizeof where);
            rc = tc_fail(cv->d, TC_ERR_FORMAT,
                         "tensor '%s': no chunk covers the elements at %s%s of its shape (a chunk is missing)",
                         cv->fqn, where, k + 1 < cv->ndim ? " and on" : "");
            break;
        }
        for (size_t m = 0; m < nact; m++)
            sub[m] = ids[act[m]];
        rc = cover(cv, sub, nact, k + 1);
    }
done:
    free(by);
    free(act);
    free(sub);
    free(start);
    free(bound);
    return rc;
}

/* Tensor t's chunks: in its shape, together its elements exactly once. */
static int check_chunks(const titem *t, const tchunk *ch, size_t n, tc_diag *d)
{
    uint64_t numel = 1, total = 0;
    bool ovf = false;
    for (int i = 0; i < t->ndim; i++)
        ovf |= __builtin_mul_overflow(numel, (uint64_t)t->shape[i], &numel);
    if (ovf)
        return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': its shape overflows 64 bits", t->fqn);
    size_t *ids = malloc((n + 1) * sizeof *ids), nz = 0;
    if (!ids)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t v = 1;
        for (int i = 0; i < t->ndim; i++) {
            int64_t end;
            if (__builtin_add_overflow(ch[k].off[i], ch[k].size[i], &end) || end > t->shape[i]) {
                char a[200], b[200], sh[200];
                dims_text(ch[k].off, t->ndim, a, sizeof a);
                dims_text(ch[k].size, t->ndim, b, sizeof b);
                dims_text(t->shape, t->ndim, sh, sizeof sh);
                rc = tc_fail(d, TC_ERR_FORMAT, "tensor '%s': chunk at %s of size %s reaches past its shape %s", t->fqn,
                             a, b, sh);
                goto done;
            }
            v *= (uint64_t)ch[k].size[i]; /* <= numel: no overflow */
        }
        if (v) {
            total += v;
            ids[nz++] = k;
        }
        if (total > numel)
            break;
    }
    if (total != numel) {
        char sh[200];
        dims_text(t->shape, t->ndim, sh, sizeof sh);
        rc = tc_fail(d, TC_ERR_FORMAT, "tensor '%s': its chunks hold %s%" PRIu64 " elements but its shape %s has %" PRIu64
                     " (%s)", t->fqn, total > numel ? "more than " : "", total, sh, numel,
                     total > numel ? "chunks overlap" : "a chunk is missing");
        goto done;
    }
    if (numel) {
        cov cv = {.ch = ch, .ndim = t->ndim, .shape = t->shape, .fqn = t->fqn, .d = d};
        rc = cover(&cv, ids, nz, 0);
    }
done:
    free(ids);
    return rc;
}

/* ---- contents --------------------------------------------------------------------- */

/* The first two components of an item's path (planner_data's, else its name
 * cut at dots) into a and b; returns how many it has (3: three or more);
 * *b_int when the second is a list index. */
static int path_parts(const titem *t, char *a, size_t an, char *b, size_t bn, bool *b_int)
{
    const pk_obj *p = t->path;
    *b_int = false;
    b[0] = 0;
    if (p && (p->kind == PK_TUPLE || p->kind == PK_LIST) && p->n >= 1) {
        for (size_t i = 0; i < 2 && i < p->n; i++) {
            const pk_obj *o = p->items[i];
            char *out = i ? b : a;
            size_t on = i ? bn : an;
            if (o->kind == PK_STR)
                snprintf(out, on, "%.*s", (int)(o->len < on ? o->len : on - 1), o->s);
            else if (o->kind == PK_INT)
                snprintf(out, on, "%" PRId64, o->i);
            else
                snprintf(out, on, "?");
            if (i)
                *b_int = o->kind == PK_INT;
        }
        return p->n > 3 ? 3 : (int)p->n;
    }
    const char *dot = strchr(t->fqn, '.'), *dot2 = dot ? strchr(dot + 1, '.') : NULL;
    snprintf(a, an, "%.*s", (int)(dot ? (size_t)(dot - t->fqn) : strlen(t->fqn)), t->fqn);
    if (dot)
        snprintf(b, bn, "%.*s", (int)(dot2 ? (size_t)(dot2 - dot - 1) : strlen(dot + 1)), dot + 1);
    return !dot ? 1 : !dot2 ? 2 : 3;
}

typedef struct group {
    char *name;            /* "a" or "a.b" */
    size_t first;          /* its first item */
    size_t nitems, ntensors;
    bool deeper;           /* some item lies below its next component */
    bool list;             /* its items are named by list indices */
    long next, last;       /* tops: their seconds as a list (first, last); seconds: the next one */
} group;

static int group_of(tc_strmap *m, group **v, size_t *n, size_t *cap, const char *name, size_t item, size_t *out,
                    tc_diag *d)
{
    if (tc_strmap_get(m, name, out))
        return 0;
    if (tc_grow(v, cap, *n + 1, sizeof **v))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    group *g = *v;
    g[*n] = (group){strdup(name), item, 0, 0, false, false, -1, -1};
    if (!g[*n].name || tc_strmap_put(m, g[*n].name, *n, NULL) < 0) {
        free(g[*n].name);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    *out = (*n)++;
    return 0;
}

/* Entries for inspect's contents and convert's list of what is left out: one
 * per first path component, then one per second component under it. */
static int add_entries(rd *R, const titem *it, size_t nit, char *const *text, char *const *kind, tc_diag *d)
{
    tc_ckpt *c = R->c;
    group *top = NULL, *sec = NULL;
    size_t ntop = 0, nsec = 0, topcap = 0, seccap = 0;
    tc_strmap tm = {0}, sm = {0};
    int rc = 0;
    for (size_t i = 0; i < nit && !rc; i++) {
        char a[256], b[256], full[520];
        bool b_int;
        int depth = path_parts(&it[i], a, sizeof a, b, sizeof b, &b_int);
        size_t k, s;
        if ((rc = group_of(&tm, &top, &ntop, &topcap, a, i, &k, d)))
            break;
        top[k].nitems++;
        top[k].ntensors += !it[i].bytes;
        top[k].deeper |= depth > 1;
        if (top[k].nitems == 1)
            top[k].list = b_int;
        if (depth < 2)
            continue;
        snprintf(full, sizeof full, "%s.%s", a, b);
        size_t before = nsec;
        if ((rc = group_of(&sm, &sec, &nsec, &seccap, full, i, &s, d)))
            break;
        if (nsec > before) { /* a new second component: at the end of its top's list */
            if (top[k].last >= 0)
                sec[top[k].last].next = (long)s;
            else
                top[k].next = (long)s;
            top[k].last = (long)s;
        }
        sec[s].nitems++;
        sec[s].ntensors += !it[i].bytes;
        sec[s].deeper |= depth > 2;
    }
    for (size_t k = 0; k < ntop && !rc; k++) {
        const group *g = &top[k];
        const titem *t = &it[g->first];
        bool leaf = !g->deeper && g->nitems == 1;
        char buf[160];
        tc_entry e = {g->name, buf, (char *)(g->list ? "list" : "dict"), 1, g->ntensors, false, !leaf, false};
        if (leaf) {
            e.is_tensor = !t->bytes;
            e.kind = t->bytes ? kind[g->first] : (char *)"Tensor";
            snprintf(buf, sizeof buf, "%s", t->bytes ? text[g->first] : "tensor");
        } else if (!g->ntensors) { /* a value of pickled items: shown as the dict they make */
            tc_buf tb = tc_buf_fixed(buf, sizeof buf);
            tc_buf_putc(&tb, '{');
            for (long s = g->next; s >= 0 && !tc_buf_cut(&tb); s = sec[s].next) {
                const group *h = &sec[s];
                bool l2 = !h->deeper && h->nitems == 1;
                tc_buf_puts(&tb, s == g->next ? "'" : ", '");
                tc_buf_escs(&tb, h->name + strlen(g->name) + 1);
                tc_buf_puts(&tb, "': ");
                tc_buf_escs(&tb, l2 ? text[h->first] : "{...}");
            }
            tc_buf_putc(&tb, '}');
        } else {
            snprintf(buf, sizeof buf, "%c%zu items%c", g->list ? '[' : '{', g->nitems, g->list ? ']' : '}');
        }
        rc = tc_ckpt_add_entry(c, &e, d);
        for (long s = g->next; s >= 0 && !rc; s = sec[s].next) {
            const group *h = &sec[s];
            const titem *u = &it[h->first];
            bool l2 = !h->deeper && h->nitems == 1;
            tc_entry e2 = {h->name, buf, (char *)"dict", 2, h->ntensors, false, !l2, false};
            if (l2) {
                e2.is_tensor = !u->bytes;
                e2.kind = u->bytes ? kind[h->first] : (char *)"Tensor";
                snprintf(buf, sizeof buf, "%s", u->bytes ? text[h->first] : "tensor");
            } else {
                snprintf(buf, sizeof buf, "{%zu items}", h->nitems);
            }
            rc = tc_ckpt_add_entry(c, &e2, d);
        }
    }
    for (size_t k = 0; k < ntop; k++)
        free(top[k].name);
    for (size_t k = 0; k < nsec; k++)
        free(sec[k].name);
    free(top);
    free(sec);
    tc_strmap_free(&tm);
    tc_strmap_free(&sm);
    return rc;
}

/* ---- byte items ----------------------------------------------------------------------- */

/* What keeps an object graph from loading with weights_only=True in every
 * torch from 1.13 on (its loader reads no floats, bytes or sets, and allows
 * fewer globals than 2.x), into why ("" when nothing does). */
typedef struct carry_scan {
    char *why;
    size_t n;
} carry_scan;

static void carry_node(void *ctx, pk_obj *o)
{
    carry_scan *cs = ctx;
    if (cs->why[0])
        return;
    static const char *const what[] = {[PK_FLOAT] = "a float", [PK_BYTES] = "bytes", [PK_BYTEARRAY] = "a bytearray",
                                       [PK_SET] = "a set", [PK_FROZENSET] = "a frozenset"};
    if (o->kind < sizeof what / sizeof *what && what[o->kind])
        snprintf(cs->why, cs->n, "holds %s, which torch 1.13's weights_only loader cannot read", what[o->kind]);
    else if (o->kind == PK_PERSID)
        snprintf(cs->why, cs->n, "holds tensors inside a pickled object");
    else if (o->kind == PK_GLOBAL) {
        char name[600];
        snprintf(name, sizeof name, "%s.%s", pk_module_py3(o->s), o->name);
        tc_verdict v = tc_verdict_of(name);
        if (!v.allowed)
            snprintf(cs->why, cs->n, "names %.300s, outside torch's weights_only allowlist", name);
        else if (!strstr(v.torch, "1.13"))
            snprintf(cs->why, cs->n, "names %.300s, which torch 1.13's weights_only loader refuses", name);
    }
}

/* Byte item t at s: described, its globals judged as torch.load(weights_only=False)
 * would import them, and kept as an object of c (with its value, pickled
 * again by tensorctl's writer, when it can be carried into another checkpoint). */
static int read_object(rd *R, const titem *t, const sitem *s, uint64_t *carried, char **text, char **kind,
                       tc_diag *d)
{
    char what[400], desc[160], why[300] = "", kbuf[64] = "object";
    snprintf(what, sizeof what, "item '%s'", t->fqn);
    const tc_pfile *f = dfile_at(R->x, s->file);
    tc_ckpt *b = NULL;
    uint8_t head[4] = {0}, *pkl = NULL;
    size_t plen = 0;
    const tc_src *src;
    tc_src win;
    int rc;
    if ((rc = tc_filepool_open(&R->x->files, s->file, &src, d)) || (rc = tc_src_window(&win, src, s->off, s->len, d)) ||
        (s->len >= 4 && (rc = tc_src_read(&win, 0, head, 4, what, d))))
        return rc;
    if (s->len < 4 || memcmp(head, "PK\x03\x04", 4)) {
        /* torch.load unpickles anything that is not a zip from byte 0 */
        char unsafe[1100];
        if ((rc = tc_pickle_at_zero(&win, tc_ckpt_limits(R->c), unsafe, sizeof unsafe, d)))
            return rc;
        if (unsafe[0]) {
            char hz[1400];
            snprintf(hz, sizeof hz,
                     "item '%.200s' in %.200s is not a torch.save archive: DCP's torch.load would unpickle it from byte "
                     "0, importing %.600s",
                     t->fqn, f->name, unsafe);
            if ((rc = tc_ckpt_add_hazard(R->c, hz, d)))
                return rc;
        }
        snprintf(desc, sizeof desc, "<%" PRIu64 " bytes, not a torch.save archive>", s->len);
        snprintf(why, sizeof why, "not a torch.save archive");
        snprintf(kbuf, sizeof kbuf, "bytes");
    } else {
        if ((rc = open_item(R, s, what, &b, d)) || (rc = take_globals(R->c, b, d))) {
            tc_ckpt_close(b);
            return rc;
        }
        tc_torch_graph *tg = tc_torch_graph_of(b);
        const char *gk;
        tc_torch_describe(tg, tg->root, desc, sizeof desc, &gk);
        snprintf(kbuf, sizeof kbuf, "%s", gk); /* gk lies in b's graph, closed below */
        carry_scan cs = {why, sizeof why};
        if (tc_ckpt_nstorages(b))
            snprintf(why, sizeof why, "holds tensors inside a pickled %s", kbuf);
        else
            pk_graph_foreach(tg->g, carry_node, &cs);
        if (!why[0] && (s->len > CARRY_MAX || *carried + s->len > CARRY_TOTAL))
            snprintf(why, sizeof why, "%" PRIu64 " bytes, too large to carry", s->len);
        if (!why[0] && (rc = pk_write(tg->g, tg->root, tc_ckpt_limits(R->c)->max_depth + 16, &pkl, &plen, d))) {
            tc_ckpt_close(b);
            return rc;
        }
        tc_ckpt_close(b);
        *carried += why[0] ? 0 : s->len;
    }
    if (!(*text = strdup(desc)) || !(*kind = strdup(kbuf))) {
        free(pkl);
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    rc = tc_ckpt_add_object(R->c, t->fqn, desc, kbuf, pkl, plen, why[0] ? why : NULL, d);
    free(pkl);
    return rc;
}

/* ---- opening ------------------------------------------------------------------------- */

typedef struct gscan {
    tc_ckpt *c;
    tc_diag *d;
    char first_bad[1100];
    tc_buf name;
} gscan;

static void one_global(void *ctx, pk_obj *o)
{
    gscan *g = ctx;
    if (o->kind != PK_GLOBAL || g->d->code)
        return;
    tc_buf_reset(&g->name);
    pk_global_qualname(o, false, &g->name);
    const char *name = tc_buf_str(&g->name);
    if (tc_buf_oom(&g->name))
        tc_fail(g->d, TC_ERR_NOMEM, "out of memory");
    else if (dcp_allowed(name))
        tc_ckpt_add_global_allowed(g->c, name, "DCP's .metadata classes", g->d);
    else
        tc_ckpt_add_global(g->c, name, g->d);
}

static void first_bad(void *ctx, pk_obj *o)
{
    gscan *g = ctx;
    if (o->kind != PK_GLOBAL || g->first_bad[0])
        return;
    char name[1100];
    snprintf(name, sizeof name, "%s.%s", pk_module_py3(o->s), o->name);
    if (!dcp_allowed(name) && !tc_verdict_of(name).allowed)
        snprintf(g->first_bad, sizeof g->first_bad, "%s", name);
}

/* Tensor item t: its storage (the whole tensor, assembled) and its chunks. */
static int read_tensor(rd *R, titem *t, const sitem *si, const tc_strmap *keys, tc_diag *d)
{
    tc_ckpt *c = R->c;
    size_t n = t->chunks->n, nd = (size_t)t->ndim;
    int64_t *pool = malloc((3 * n * nd + 1) * sizeof *pool);
    tchunk *ch = calloc(n + 1, sizeof *ch);
    tc_chunk *out = calloc(n + 1, sizeof *out);
    int rc = 0;
    if (!pool || !ch || !out) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n && !rc; k++) {
        const pk_obj *f = fields(t->chunks->items[k]);
        int64_t *off = pool + k * 2 * nd, *size = off + nd;
        int a = -1, b = -1;
        if (!is_instance(t->chunks->items[k], "ChunkStorageMetadata") || !f ||
            size_of(dict_get(f, "offsets"), off, &a) || size_of(dict_get(f, "sizes"), size, &b) || a != t->ndim ||
            b != t->ndim)
            rc = tc_fail(d, TC_ERR_FORMAT,
                         "tensor '%s': chunk %zu is not a ChunkStorageMetadata with %d offsets and sizes", t->fqn, k,
                         t->ndim);
        ch[k] = (tchunk){off, size};
    }
    if (rc || (rc = check_chunks(t, ch, n, d)))
        goto done;
    long whole = t->tensor >= 0 ? tc_ckpt_tensor(c, (size_t)t->tensor)->storage : -1;
    for (size_t k = 0; k < n && !rc; k++) {
        char *key = item_key(t->fqn, ch[k].off, t->ndim);
        size_t at;
        if (!key) {
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
            break;
        }
        bool found = tc_strmap_get(keys, key, &at);
        free(key);
        if (!found) {
            char dims[200];
            dims_text(ch[k].off, t->ndim, dims, sizeof dims);
            rc = tc_fail(d, TC_ERR_FORMAT, "tensor '%s': chunk at %s has no entry in storage_data (its bytes are missing)",
                         t->fqn, dims);
            break;
        }
        rc = read_chunk(R, t, &ch[k], &si[at], &out[k], pool + 2 * n * nd + k * nd, d);
    }
    if (rc)
        goto done;
    rc = tc_ckpt_set_chunks(c, (size_t)whole, t->ndim, t->shape, out, n, d);
done:
    free(pool);
    free(ch);
    free(out);
    return rc;
}

/* What open_dcp reads from .metadata and makes of it, phase by phase. */
typedef struct dmeta {
    uint8_t *buf;          /* .metadata's bytes, kept while the graph is */
    pk_graph *g;
    const pk_obj *sdm, *sd, *planner, *version; /* Metadata's fields */
    titem *it;             /* state_dict_metadata's items */
    size_t nit;
    sitem *si;             /* storage_data's entries */
    size_t nsi;
    tc_strmap keys;        /* storage_data key -> its entry */
    char **text, **kind;   /* per item: what inspect says of it */
    uint64_t nchunks;
} dmeta;

static void dmeta_free(dmeta *m)
{
    for (size_t i = 0; i < m->nsi; i++)
        free(m->si[i].key);
    for (size_t i = 0; m->text && m->kind && i < m->nit; i++) {
        free(m->text[i]);
        free(m->kind[i]);
    }
    free(m->text);
    free(m->kind);
    free(m->si);
    free(m->it);
    tc_strmap_free(&m->keys);
    pk_graph_free(m->g);
    free(m->buf);
}

/* .metadata read with the inert pickle reader, its globals judged: its Metadata's fields. */
static int read_metadata(rd *R, dmeta *m, tc_diag *d)
{
    tc_ckpt *c = R->c;
    const tc_src *src = tc_ckpt_src(c);
    const tc_limits *lim = tc_ckpt_limits(c);
    if (src->size > lim->max_pickle_bytes)
        return tc_fail(d, TC_ERR_LIMIT, ".metadata is %" PRIu64 " bytes, more than %" PRIu64 " (raise with --max-pickle-size)",
                       src->size, lim->max_pickle_bytes);
    if (!(m->buf = malloc(src->size ? (size_t)src->size : 1)) || !(m->g = pk_graph_new()))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_src_read(src, 0, m->buf, (size_t)src->size, ".metadata", d);
    if (rc)
        return rc;
    pk_read_opts o = {.limits = {lim->max_objects, lim->max_depth, lim->max_objects}, .what = ".metadata"};
    pk_obj *root = NULL;
    gscan gs = {c, d, "", TC_BUF_INIT(0)};
    if ((rc = pk_read(m->g, m->buf, (size_t)src->size, &o, &root, NULL, d))) {
        pk_graph_foreach(m->g, first_bad, &gs);
        if (gs.first_bad[0] && rc != TC_ERR_NOMEM) {
            char was[sizeof d->msg];
            snprintf(was, sizeof was, "%s", d->msg);
            tc_diag_clear(d);
            rc = tc_fail(d, TC_ERR_UNSAFE, ".metadata names %s before it fails (pickle.load would import and call it "
                         "first): %s", gs.first_bad, was);
        }
        return rc;
    }
    pk_graph_foreach(m->g, one_global, &gs);
    tc_buf_free(&gs.name);
    if ((rc = d->code))
        return rc;
    tc_ckpt_sort_globals(c);
    const pk_obj *f = fields(root);
    if (!is_instance(root, "Metadata") || !f)
        return tc_fail(d, TC_ERR_FORMAT, ".metadata holds %s, not a torch.distributed.checkpoint Metadata",
                       pk_call_global(root) ? pk_call_global(root)->name : "something else");
    m->sdm = dict_get(f, "state_dict_metadata");
    m->sd = dict_get(f, "storage_data");
    m->planner = dict_get(f, "planner_data");
    m->version = dict_get(f, "version");
    if (!m->sdm || m->sdm->kind != PK_DICT || !m->sd || m->sd->kind != PK_DICT)
        return tc_fail(d, TC_ERR_FORMAT, "Metadata has no %s dict (not written by DCP's FileSystemWriter?)",
                       !m->sdm || m->sdm->kind != PK_DICT ? "state_dict_metadata" : "storage_data");
    return 0;
}

/* Its items and where their pieces lie, within the limits; the pieces inside their files. */
static int read_tables(rd *R, dmeta *m, tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(R->c);
    size_t nitems = m->sdm->n / 2, npieces = m->sd->n / 2;
    if (nitems > lim->max_entries || npieces > lim->max_entries)
        return tc_fail(d, TC_ERR_LIMIT, "Metadata lists %zu items stored in %zu pieces, over the limit of %" PRIu64
                       " (raise with --max-entries)", nitems, npieces, lim->max_entries);
    if (!(m->it = calloc(nitems + 1, sizeof *m->it)) || !(m->si = calloc(npieces + 1, sizeof *m->si)) ||
        !(m->text = calloc(nitems + 1, sizeof *m->text)) || !(m->kind = calloc(nitems + 1, sizeof *m->kind)))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc;
    if ((rc = read_items(m->sdm, m->planner && m->planner->kind == PK_DICT ? m->planner : NULL, m->it, &m->nit, d)) ||
        (rc = read_storage_data(R, m->sd, m->si, &m->nsi, &m->keys, d)) || (rc = check_spans(R, m->si, m->nsi, d)))
        return rc;
    for (size_t i = 0; i < m->nit; i++)
        m->nchunks += m->it[i].bytes ? 0 : m->it[i].chunks->n;
    if (m->nchunks > lim->max_entries)
        return tc_fail(d, TC_ERR_LIMIT, "Metadata lists %" PRIu64 " chunks, over the limit of %" PRIu64
                       " (raise with --max-entries)", m->nchunks, lim->max_entries);
    return 0;
}

/* Each tensor of the checkpoint and its storage (assembled later from its chunks). */
static int add_tensors(rd *R, dmeta *m, tc_diag *d)
{
    tc_ckpt *c = R->c;
    int rc;
    for (size_t i = 0; i < m->nit; i++) {
        titem *t = &m->it[i];
        if (t->bytes)
            continue;
        long s = tc_ckpt_add_storage(c, t->fqn, d), k = s < 0 ? -1 : tc_ckpt_add_tensor(c, t->fqn, d);
        if (k < 0)
            return d->code;
        uint64_t numel = 1;
        for (int j = 0; j < t->ndim; j++)
            if (__builtin_mul_overflow(numel, (uint64_t)t->shape[j], &numel))
                return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': its shape overflows 64 bits", t->fqn);
        tc_storage *st = tc_ckpt_storage_mut(c, (size_t)s);
        if (__builtin_mul_overflow(numel, (uint64_t)tc_dtype_size(t->dtype), &st->nbytes))
            return tc_fail(d, TC_ERR_FORMAT, "tensor '%s': its size overflows 64 bits", t->fqn);
        if ((rc = tc_ckpt_set_location(c, (size_t)s, "-", d)))
            return rc;
        st->dtype = t->dtype;
        st->numel = numel;
        st->ntensors = 1;
        if ((rc = tc_ckpt_set_dims(c, (size_t)k, t->ndim, t->shape, NULL, d)))
            return rc;
        tc_tensor *tt = tc_ckpt_tensor_mut(c, (size_t)k);
        tt->kind = TC_TENSOR_DENSE;
        tt->dtype = t->dtype;
        tt->storage = s;
        tt->numel = numel;
        tt->nbytes = st->nbytes;
        tt->device = "-";
        t->tensor = k;
    }
    return 0;
}

/* Every tensor's chunks and every byte item, read from their archives. */
static int read_data(rd *R, dmeta *m, tc_diag *d)
{
    uint64_t carried = 0;
    int rc = 0;
    for (size_t i = 0; i < m->nit && !rc; i++) {
        titem *t = &m->it[i];
        if (!t->bytes) {
            rc = read_tensor(R, t, m->si, &m->keys, d);
            continue;
        }
        char *key = item_key(t->fqn, NULL, -1);
        size_t at;
        if (!key)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        bool found = tc_strmap_get(&m->keys, key, &at);
        free(key);
        if (!found)
            return tc_fail(d, TC_ERR_FORMAT, "item '%s' has no entry in storage_data (its bytes are missing)", t->fqn);
        rc = read_object(R, t, &m->si[at], &carried, &m->text[i], &m->kind[i], d);
    }
    return rc;
}

/* What inspect lists: the items, and the facts of the folder. */
static int describe(rd *R, dmeta *m, tc_diag *d)
{
    tc_ckpt *c = R->c;
    char v[64];
    int rc;
    if ((rc = add_entries(R, m->it, m->nit, m->text, m->kind, d)) ||
        (plain_str(m->version) && (rc = tc_ckpt_add_fact(c, "dcp_version", m->version->s, d))))
        goto done;
    snprintf(v, sizeof v, "%zu", tc_filepool_n(&R->x->files));
    if ((rc = tc_ckpt_add_fact(c, "files", v, d)))
        goto done;
    snprintf(v, sizeof v, "%" PRIu64, m->nchunks);
    if ((rc = tc_ckpt_add_fact(c, "chunks", v, d)))
        goto done;
    snprintf(v, sizeof v, "%zu", tc_ckpt_nobjects(c));
    rc = tc_ckpt_add_fact(c, "pickled_items", v, d);
done:
    tc_ckpt_sort_globals(c);
    return rc;
}

static int open_dcp(tc_ckpt *c, tc_diag *d)
{
    dpriv *x = calloc(1, sizeof *x);
    if (!x)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, &tc_format_dcp, x, dpriv_free);
    tc_ckpt_set_distributed(c, "a distributed checkpoint (torch.distributed.checkpoint)");
    const char *path = tc_ckpt_path(c), *slash = strrchr(path, '/');
    if (!(x->dir = slash ? strndup(path, (size_t)(slash == path ? 1 : slash - path)) : strdup(".")))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    rd R = {c, x, d};
    dmeta m = {0};
    /* the phases in order, each filling d where it fails */
    static int (*const phase[])(rd *, dmeta *, tc_diag *) = {read_metadata, read_tables, add_tensors, read_data,
                                                             describe};
    int rc = 0;
    for (size_t i = 0; i < sizeof phase / sizeof *phase && !rc; i++)
        rc = phase[i](&R, &m, d);
    tc_filepool_close_idle(&x->files); /* opened as the archives were read; none has a reader yet */
    dmeta_free(&m);
    return rc;
}

/* ---- reading a chunk's bytes ------------------------------------------------------ */

static int open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    dpriv *x = tc_ckpt_priv(c);
    const tc_storage *s = tc_ckpt_storage(c, i);
    size_t n;
    if (tc_ckpt_chunks(c, i, &n) || i >= x->nfile_of || tc_ckpt_chunk_of(c, i) < 0)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "storage '%s' is assembled from %zu chunks; it is read through them",
                       s->key, n);
    return tc_filepool_reader(&x->files, x->file_of[i], s->file_off, s->nbytes, r, d);
}

const tc_format tc_format_dcp = {.name = "dcp", .probe = probe, .open = open_dcp, .open_storage = open_storage,
                                 .caps = TC_CAP_ASSEMBLED | TC_CAP_FOLDER | TC_CAP_OWN_READER};
