/* torch.save's first format (torch < 0.4), which torch.load of every version
 * still reads (serialization.py, _legacy_load's legacy_load) when a file's
 * first 512 bytes are a tar header: a tar archive of members
 *
 *   storages  pickle(n); n times pickle((key, location, storage_type)), an
 *             int64 element count and the raw elements; pickle(list of
 *             (view key, root key, offset, numel)) for storage views
 *   tensors   pickle(n); n times pickle((key, storage key, tensor_type)), int32
 *             ndim, 4 bytes, ndim int64 sizes, ndim int64 strides, int64
 *             storage offset
 *   pickle    the object, its persistent ids keys of storages or tensors
 *   sys_info  (not read)
 *
 * torch unpickles them in that order with plain pickle.load (the object with
 * its UnpicklerWrapper): each pickle is judged as far as torch gets, and a
 * check torch makes between pickles (a count that is no int, an unknown
 * storage type, a key no storage has) ends the reading there, as torch's
 * load ends. The tensors are those torch 1.13 builds (tensor.set_(storage,
 * offset, sizes, strides)), named as the object holds them: each persistent
 * id naming a tensor becomes, in the graph, the _rebuild_tensor_v2 call that
 * builds the same tensor, so that the walk of the other torch formats names
 * it (the calls are made in a graph of their own: the file's globals are
 * only those it names).
 *
 * The archive is read as Python's tarfile reads it (3.11, what torch runs
 * on): its headers one after another from byte 0, the last member of a name
 * taken. Extended headers (GNU long names, PAX, sparse files) and members
 * that are not plain files are beyond what tensorctl reads exactly: such an
 * archive is never safe. Read only: a rewrite of it is refused (no object
 * graph of its own to write).
 *
 * Longer than ~800 lines on purpose: a format is one file behind the driver
 * vtable (docs/architecture.md), and this one is three steps sharing its
 * private state: Python's tarfile, the members' pickles in torch's order,
 * and the tensors torch builds from them (one section each). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "map.h"
#include "readings.h"
#include "torch_pickle.h"
#include "vec.h"

extern const tc_format tc_format_torch_tar;

/* ---- Python's tarfile ------------------------------------------------------------- */

/* nti(): a number field, base-256 (first byte 0x80 or 0xff) or octal text
 * read by int(text.strip() or "0", 8) after cutting it at a NUL. 0, or 1
 * where Python raises (InvalidHeaderError); *big when it passes int64. */
static int nti(const uint8_t *f, size_t n, int64_t *out, bool *big)
{
    *big = false;
    if (f[0] == 0x80 || f[0] == 0xff) {
        uint64_t v = 0;
        for (size_t i = 1; i < n; i++) {
            if (v >> 55)
                *big = true;
            v = v << 8 | f[i];
        }
        if (f[0] == 0xff) { /* -(256^(n-1) - v) */
            *out = n - 1 >= 8 ? (int64_t)v : (int64_t)v - (int64_t)(1ull << (8 * (n - 1)));
            *big = *big || n - 1 >= 8;
        } else {
            *big = *big || v > INT64_MAX;
            *out = (int64_t)v;
        }
        return 0;
    }
    size_t e = 0;
    while (e < n && f[e])
        e++;
    for (size_t i = 0; i < e; i++)
        if (f[i] >= 0x80)
            return 1; /* not ASCII */
    /* str.strip() of ASCII text: the six C spaces and \x1c to \x1f */
#define PYSPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r') || ((c) >= 0x1c && (c) <= 0x1f))
    size_t a = 0;
    while (a < e && PYSPACE(f[a]))
        a++;
    while (e > a && PYSPACE(f[e - 1]))
        e--;
#undef PYSPACE
    if (a == e) {
        *out = 0;
        return 0;
    }
    bool neg = false;
    if (f[a] == '+' || f[a] == '-')
        neg = f[a++] == '-';
    if (e - a >= 2 && f[a] == '0' && (f[a + 1] == 'o' || f[a + 1] == 'O')) {
        a += 2;
        if (a < e && f[a] == '_')
            a++;
    }
    if (a == e)
        return 1;
    uint64_t v = 0;
    for (size_t i = a; i < e; i++) {
        if (f[i] == '_') {
            if (i + 1 == e || f[i + 1] == '_' || i == a)
                return 1;
            continue;
        }
        if (f[i] < '0' || f[i] > '7')
            return 1;
        if (v >> 60)
            *big = true;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    *big = *big || v > INT64_MAX;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

enum { H_OK, H_SHORT, H_ZEROS, H_INVALID };

typedef struct thdr {
    char name[258]; /* prefix "/" name, each cut at a NUL */
    size_t nlen;
    uint8_t type;
    int64_t size;
    bool big;       /* a size past int64 */
} thdr;

/* TarInfo.frombuf */
static int frombuf(const uint8_t *b, size_t n, thdr *h)
{
    if (n < 512)
        return H_SHORT;
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
        zero = !b[i];
    if (zero)
        return H_ZEROS;
    int64_t want, v;
    bool big;
    if (nti(b + 148, 8, &want, &big))
        return H_INVALID;
    int64_t us = 256, ss = 256;
    for (size_t i = 0; i < 512; i++) {
        if (i >= 148 && i < 156)
            continue;
        us += b[i];
        ss += (signed char)b[i];
    }
    if (big || (want != us && want != ss))
        return H_INVALID;
    static const size_t nums[][2] = {{100, 8}, {108, 8}, {116, 8}, {136, 12}, {329, 8}, {337, 8}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (nti(b + nums[i][0], nums[i][1], &v, &big))
            return H_INVALID;
    if (nti(b + 124, 12, &h->size, &h->big))
        return H_INVALID;
    h->type = b[156];
    size_t nl = strnlen((const char *)b, 100), pl = strnlen((const char *)b + 345, 155);
    if (h->type == 0 && nl && b[nl - 1] == '/')
        h->type = '5'; /* a V7 directory */
    if (h->type == '5')
        while (nl && b[nl - 1] == '/')
            nl--;
    h->nlen = 0;
    if (pl && h->type != 'L' && h->type != 'K' && h->type != 'S') {
        memcpy(h->name, b + 345, pl);
        h->name[pl] = '/';
        h->nlen = pl + 1;
    }
    memcpy(h->name + h->nlen, b, nl);
    h->nlen += nl;
    h->name[h->nlen] = 0;
    return H_OK;
}

bool tc_tar_header(const uint8_t *b, size_t n)
{
    thdr h;
    return frombuf(b, n, &h) == H_OK;
}

static bool regular(uint8_t t) { return t == '0' || t == 0 || t == '7' || t == 'S'; }
static bool supported(uint8_t t) { return regular(t) || (t >= '1' && t <= '6') || t == 'L' || t == 'K'; }

typedef struct member {
    thdr h;
    uint64_t data_off;
} member;

/* A key of legacy_load's deserialized_objects dict: an int (True is 1, 2.0
 * is 2) or a str; other keys are beyond tensorctl's tables. */
typedef struct tkey {
    int kind; /* 0: another kind of key, 1: int, 2: str */
    int64_t i;
    const char *s;
    size_t len;
} tkey;

typedef struct tstorage {
    uint64_t off;     /* its bytes in the file (a root) */
    int64_t numel;
    tc_dtype dtype;
    const pk_obj *type, *loc;
    size_t root;      /* a view: the root it slices, view numel elements from view */
    int64_t view, vnumel;
    long si;          /* a root registered as a storage of the checkpoint, or -1 */
} tstorage;

typedef struct ttensor {
    size_t storage;   /* index into st */
    int ndim;
    int64_t *dims;    /* sizes then strides */
    int64_t offset;
} ttensor;

/* deserialized_objects: one dict for storages, views and tensors (a later
 * entry of a key replaces the earlier), values index + 1 into st (tensors:
 * tt, with bit 63 set) */
typedef struct objs {
    tc_map ints, strs;
} objs;

typedef struct tar {
    tc_torch_graph tg;    /* first: a graph like the other torch drivers' */
    pk_graph *synth;      /* the calls that build the tensors */
    TC_VEC(member) m;
    bool exotic;          /* extended headers, or a member torch reads that is no plain file */
    bool fallback;        /* tarfile raises a TarError somewhere: torch.load then reads the file as a legacy stream */
    const char *why_exotic;
    const char *partial;  /* why the tensors are not listed (keys beyond the tables), or NULL */
    TC_VEC(tstorage) st;
    TC_VEC(ttensor) tt;
    objs obj;
    TC_VEC(pk_obj *) refs; /* persistent ids of the object pickle naming a tensor */
    char *missing;        /* the first persistent id that names nothing, as torch's KeyError would say */
} tar;

static void tar_free(void *p)
{
    tar *T = p;
    if (!T)
        return;
    tc_torch_graph_free(&T->tg);
    pk_graph_free(T->synth);
    tc_vec_free(&T->m);
    tc_vec_free(&T->st);
    for (size_t i = 0; i < T->tt.n; i++)
        free(T->tt.v[i].dims);
    tc_vec_free(&T->tt);
    tc_map_free(&T->obj.ints);
    tc_map_free(&T->obj.strs);
    tc_vec_free(&T->refs);
    free(T->missing);
    free(T);
}

static tkey key_of(const pk_obj *o)
{
    tkey k = {0, 0, NULL, 0};
    if (o->kind == PK_INT || o->kind == PK_BOOL)
        k = (tkey){1, o->i, NULL, 0};
    else if (o->kind == PK_FLOAT && o->f == (double)(int64_t)o->f && o->f > -9e18 && o->f < 9e18)
        k = (tkey){1, (int64_t)o->f, NULL, 0};
    else if (o->kind == PK_STR && !(o->flags & PK_F_SURROGATE))
        k = (tkey){2, 0, o->s, o->len};
    return k;
}

/* The value of key in deserialized_objects, or 0. */
static uint64_t obj_get(const objs *m, tkey k)
{
    const uint64_t *v = k.kind == 1 ? tc_map_find2(&m->ints, (uint64_t)k.i, 0)
                        : k.kind == 2 ? tc_map_find(&m->strs, k.s, k.len) : NULL;
    return v ? *v : 0;
}

static int obj_set(objs *m, tkey k, uint64_t val, tc_diag *d)
{
    uint64_t *v = k.kind == 1 ? tc_map_find2(&m->ints, (uint64_t)k.i, 0) : tc_map_find(&m->strs, k.s, k.len);
    if (v) {
        *v = val;
        return 0;
    }
    int rc = k.kind == 1 ? tc_map_put2(&m->ints, (uint64_t)k.i, 0, val, NULL) : tc_map_put(&m->strs, k.s, k.len, val, NULL);
    return rc < 0 ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : 0;
}

#define TENSOR_BIT (1ull << 63)

/* TarFile's reading of every header (_load: next() until it returns None),
 * as far as tensorctl follows it. 1 when the first block is no header
 * (tarfile.open raises ReadError: no tar). */
static int scan(tar *T, const tc_src *src, tc_diag *d)
{
    uint64_t off = 0;
    uint8_t b[512];
    char longname[258];
    bool have_long = false;
    for (;;) {
        size_t n = src->size - off < 512 ? (size_t)(src->size - off) : 512;
        int rc = n ? tc_src_read(src, off, b, n, "a tar header", d) : 0;
        if (rc)
            return rc;
        thdr h;
        int k = frombuf(b, n, &h);
        if (k != H_OK) {
            if (have_long) /* a GNU long name's header must follow it: SubsequentHeaderError */
                T->fallback = true;
            return off == 0 && k != H_ZEROS ? 1 : 0;
        }
        uint64_t data = off + 512, next = data;
        uint64_t blocks = h.size > 0 ? ((uint64_t)h.size + 511) / 512 * 512 : 0;
        if (h.big || h.size < 0) {
            T->exotic = true;
            T->why_exotic = "a member whose size is negative or past 2^63";
            T->fallback = true;
            return 0;
        }
        if (h.type == 'L' || h.type == 'K' || h.type == 'x' || h.type == 'g' || h.type == 'X' || h.type == 'S') {
            T->exotic = true;
            T->why_exotic = "extended headers (GNU long names, PAX records or sparse files)";
        }
        if (h.type == 'L' || h.type == 'K' || h.type == 'x' || h.type == 'g' || h.type == 'X') {
            /* its data is what it says of the next header (read only for a GNU long name) */
            if (h.type == 'L') {
                size_t l = h.size < 257 ? (size_t)h.size : 257;
                if (data > src->size || l > src->size - data) {
                    T->fallback = true;
                    return 0;
                }
                if ((rc = tc_src_read(src, data, longname, l, "a GNU long name", d)))
                    return rc;
                longname[l] = 0;
                have_long = true;
            }
            off = data + blocks;
            continue;
        }
        if (have_long) {
            size_t l = strlen(longname);
            memcpy(h.name, longname, l + 1);
            h.nlen = l;
            have_long = false;
        }
        if (regular(h.type) || !supported(h.type))
            next = data + blocks;
        if (!tc_vec_extend(&T->m, 1))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        T->m.v[T->m.n - 1] = (member){h, data};
        /* next() first looks at the byte before the next header: none there is "unexpected end of data" */
        if (next != data && next > src->size) {
            T->fallback = true;
            return 0;
        }
        off = next;
        if (T->m.n > tc_ckpt_limits(T->tg.c)->max_entries)
            return tc_fail(d, TC_ERR_LIMIT, "tar: more than %" PRIu64 " members (raise with --max-entries)",
                           tc_ckpt_limits(T->tg.c)->max_entries);
    }
}

/* getmember(name): the last member of that name, or NULL. */
static const member *getmember(const tar *T, const char *name)
{
    for (size_t i = T->m.n; i-- > 0;)
        if (!strcmp(T->m.v[i].h.name, name))
            return &T->m.v[i];
    return NULL;
}

/* ---- the members' pickles ----------------------------------------------------------- */

typedef struct mreader {
    tar *T;
    tc_src win;      /* the member's bytes */
    uint64_t pos;
    const char *what;
    pk_persid_fn on_persid;
} mreader;

/* One pickle at r->pos, as pickle.load reads it from the member: into the
 * graph, r->pos after its STOP. */
static int next_pickle(mreader *r, pk_obj **out, tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(r->T->tg.c);
    uint64_t cap = 1u << 16;
    for (;;) {
        uint64_t left = r->win.size - r->pos, len = left < cap ? left : cap;
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        int rc = tc_src_read(&r->win, r->pos, buf, (size_t)len, r->what, d);
        if (rc) {
            free(buf);
            return rc;
        }
        bool hit_end = false;
        size_t used = 0;
        pk_read_opts o = tc_torch_read_opts(&r->T->tg, r->what);
        o.on_persid = r->on_persid;
        o.ctx = r->T;
        o.hit_end = &hit_end;
        o.base_offset = r->win.base + r->pos;
        tc_diag tmp = TC_DIAG_INIT;
        rc = pk_read(r->T->tg.g, buf, (size_t)len, &o, out, &used, &tmp);
        free(buf);
        if (rc && hit_end && len < left && cap < lim->max_pickle_bytes) {
            cap = cap * 8 < lim->max_pickle_bytes ? cap * 8 : lim->max_pickle_bytes;
            continue; /* read again from a longer prefix (the graph keeps what the short one named) */
        }
        if (rc && hit_end && len < left)
            return tc_fail(d, TC_ERR_LIMIT, "%s: a pickle longer than %" PRIu64 " bytes (raise with --max-pickle-size)",
                           r->what, lim->max_pickle_bytes);
        if (rc) {
            tc_diag_copy(d, &tmp);
            return rc;
        }
        r->pos += used;
        return 0;
    }
}

static int mreader_open(mreader *r, tar *T, const member *m, const char *what, tc_diag *d)
{
    memset(r, 0, sizeof *r);
    r->T = T;
    r->what = what;
    if (!regular(m->h.type) && supported(m->h.type)) {
        T->exotic = true;
        T->why_exotic = "a member torch reads that is a link, a folder or a device, not a plain file";
        return tc_fail(d, TC_ERR_UNSUPPORTED, "tar: member %s is not a plain file", m->h.name);
    }
    if (m->data_off > tc_ckpt_src(T->tg.c)->size || (uint64_t)m->h.size > tc_ckpt_src(T->tg.c)->size - m->data_off) {
        T->fallback = true;
        return tc_fail(d, TC_ERR_FORMAT, "tar: member %s runs past the end of the file (truncated?)", m->h.name);
    }
    return tc_src_window(&r->win, tc_ckpt_src(T->tg.c), m->data_off, (uint64_t)m->h.size, d);
}

/* An int the way range() and struct want one: an int or a bool. */
static bool int_of(const pk_obj *o, int64_t *v)
{
    if (o->kind != PK_INT && o->kind != PK_BOOL)
        return false;
    *v = o->i;
    return true;
}

static int stop(const char *what, const char *why, tc_diag *d)
{
    return tc_fail(d, TC_ERR_FORMAT, "%s: %s (torch.load stops there)", what, why);
}

/* A storage type torch reads an element size from (storage_type.dtype):
 * torch's storage classes, and its legacy tensor type classes. */
static tc_dtype storage_dtype(const pk_obj *type)
{
    if (type->kind != PK_GLOBAL || (strcmp(type->s, "torch") && strcmp(type->s, "torch.cuda") &&
                                    strcmp(type->s, "torch.sparse") && strcmp(type->s, "torch.cuda.sparse")))
        return TC_DT_INVALID;
    size_t l = strlen(type->name);
    if (l > 6 && !strcmp(type->name + l - 6, "Tensor")) {
        char name[80];
        if (l > 60)
            return TC_DT_INVALID;
        snprintf(name, sizeof name, "%.*sStorage", (int)(l - 6), type->name);
        return tc_dtype_from_storage(name);
    }
    return strcmp(type->s, "torch") && strcmp(type->s, "torch.cuda") ? TC_DT_INVALID : tc_dtype_from_storage(type->name);
}

/* storages and tensors both start as torch's loops over them do: a pickled
 * count, then per entry a pickle that `a, b, c = ...` unpacks. */
static int open_counted(mreader *r, tar *T, const member *m, const char *what, const char *bad_count,
                        int64_t *n, tc_diag *d)
{
    pk_obj *o;
    int rc = mreader_open(r, T, m, what, d);
    if (rc || (rc = next_pickle(r, &o, d)))
        return rc;
    return int_of(o, n) ? 0 : stop(r->what, bad_count, d);
}

static int next_three(mreader *r, pk_obj *const **out, const char *not_three, tc_diag *d)
{
    pk_obj *o;
    int rc = next_pickle(r, &o, d);
    if (rc)
        return rc;
    if ((o->kind != PK_TUPLE && o->kind != PK_LIST) || o->n != 3)
        return stop(r->what, not_three, d);
    *out = o->items;
    return 0;
}

static int read_storages(tar *T, const member *m, tc_diag *d)
{
    mreader r;
    pk_obj *o, *const *a = NULL; /* open_counted and next_three set these on success; stop's */
    int64_t n = 0;               /* status is nonzero where the compiler cannot see it */
    int rc = open_counted(&r, T, m, "tar member storages", "the storage count is not an int", &n, d);
    if (rc)
        return rc;
    for (int64_t i = 0; i < n; i++) {
        if ((rc = next_three(&r, &a, "a storage's (key, location, type) are not three", d)))
            return rc;
        tc_dtype dt = storage_dtype(a[2]);
        if (dt == TC_DT_INVALID)
            return stop(r.what, "a storage's type is not one of torch's storage or tensor type classes", d);
        uint8_t nb[8];
        if ((rc = tc_src_read(&r.win, r.pos, nb, 8, r.what, d)))
            return rc;
        int64_t numel = (int64_t)tc_le64(nb);
        uint64_t bytes;
        if (numel < 0 || __builtin_mul_overflow((uint64_t)numel, tc_dtype_size(dt), &bytes) ||
            bytes > r.win.size - r.pos - 8)
            return stop(r.what, "a storage's elements run past the member's end", d);
        tkey k = key_of(a[0]);
        if (a[1]->kind != PK_STR)
            T->partial = T->partial ? T->partial : "a storage's location is not a str";
        if (!k.kind)
            T->partial = T->partial ? T->partial : "a storage's key is neither an int nor a str";
        else if (tc_vec_push(&T->st, ((tstorage){r.win.base + r.pos + 8, numel, dt, a[2], a[1], 0, -1, 0, -1})) ||
                 (rc = obj_set(&T->obj, k, T->st.n, d)))
            return rc ? rc : tc_fail(d, TC_ERR_NOMEM, "out of memory");
        r.pos += 8 + bytes;
    }
    if ((rc = next_pickle(&r, &o, d)))
        return rc;
    if (o->kind != PK_LIST && o->kind != PK_TUPLE)
        return stop(r.what, "the storage views are not a list", d);
    for (size_t i = 0; i < o->n && !T->partial; i++) {
        const pk_obj *v = o->items[i];
        int64_t off, num;
        if (v->kind != PK_TUPLE || v->n != 4 || !int_of(v->items[2], &off) || !int_of(v->items[3], &num)) {
            T->partial = "a storage view that is not (key, root key, offset, numel)";
            break;
        }
        tkey tk = key_of(v->items[0]);
        uint64_t at = obj_get(&T->obj, key_of(v->items[1]));
        if (!tk.kind || !at || (at & TENSOR_BIT))
            return stop(r.what, "a storage view's root is no storage of the archive", d);
        tstorage s = T->st.v[at - 1];
        size_t root = s.view >= 0 ? s.root : at - 1;
        int64_t have = s.view >= 0 ? s.vnumel : s.numel;
        if (off < 0 || num < 0 || off > have || num > have - off)
            return stop(r.what, "a storage view lies outside its root", d);
        s.view = (s.view >= 0 ? s.view : 0) + off;
        s.vnumel = num;
        s.root = root;
        if (tc_vec_push(&T->st, s) || (rc = obj_set(&T->obj, tk, T->st.n, d)))
            return rc ? rc : tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

static int read_tensors(tar *T, const member *m, tc_diag *d)
{
    mreader r;
    pk_obj *const *a = NULL; /* set on success, as in read_storages */
    int64_t n = 0;
    int rc = open_counted(&r, T, m, "tar member tensors", "the tensor count is not an int", &n, d);
    if (rc)
        return rc;
    for (int64_t i = 0; i < n; i++) {
        if ((rc = next_three(&r, &a, "a tensor's (key, storage key, type) are not three", d)))
            return rc;
        tkey k = key_of(a[0]), sk = key_of(a[1]);
        uint64_t at = sk.kind ? obj_get(&T->obj, sk) : 0;
        if (!T->partial && (!at || (at & TENSOR_BIT)))
            return stop(r.what, "a tensor's storage key names no storage of the archive", d);
        uint8_t h[8];
        if ((rc = tc_src_read(&r.win, r.pos, h, 8, r.what, d)))
            return rc;
        int32_t ndim = (int32_t)tc_le32(h);
        if (ndim < 0 || r.win.size - r.pos - 8 < 16 * (uint64_t)ndim + 8)
            return stop(r.what, "a tensor's dimensions are negative or run past the member's end", d);
        if (ndim > TC_MAX_DIMS || !k.kind)
            T->partial = T->partial ? T->partial : ndim > TC_MAX_DIMS ? "a tensor of more than 64 dimensions"
                                                                      : "a tensor's key is neither an int nor a str";
        if (!T->partial) {
            int64_t *dims = malloc((2 * (size_t)ndim + 1) * sizeof *dims);
            uint8_t *raw = malloc(16 * (size_t)ndim + 8);
            if (!dims || !raw || (rc = tc_src_read(&r.win, r.pos + 8, raw, 16 * (size_t)ndim + 8, r.what, d))) {
                free(dims);
                free(raw);
                return rc ? rc : tc_fail(d, TC_ERR_NOMEM, "out of memory");
            }
            for (int j = 0; j < 2 * ndim + 1; j++)
                dims[j] = (int64_t)tc_le64(raw + 8 * j);
            free(raw);
            if (tc_vec_push(&T->tt, ((ttensor){at - 1, ndim, dims, dims[2 * ndim]}))) {
                free(dims);
                return tc_fail(d, TC_ERR_NOMEM, "out of memory");
            }
            if ((rc = obj_set(&T->obj, k, T->tt.n | TENSOR_BIT, d)))
                return rc;
        }
        r.pos += 8 + 16 * (uint64_t)ndim + 8;
    }
    return 0;
}

/* int(saved_id) of a persistent id: an int, a bool, or a str or bytes of
 * decimal digits (with Python's spaces, sign and underscores). */
static bool pid_key(const pk_obj *o, int64_t *v)
{
    if (int_of(o, v))
        return true;
    if (o->kind != PK_STR && o->kind != PK_BYTES)
        return false;
    const char *s = o->s, *e = o->s + o->len;
    while (s < e && (*s == ' ' || (*s >= '\t' && *s <= '\r')))
        s++;
    while (e > s && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
        e--;
    bool neg = s < e && *s == '-';
    if (s < e && (*s == '+' || *s == '-'))
        s++;
    if (s == e || *s == '_')
        return false;
    uint64_t x = 0;
    for (const char *p = s; p < e; p++) {
        if (*p == '_' && p + 1 < e && p[1] != '_')
            continue;
        if (*p < '0' || *p > '9' || x > (UINT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return false;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return true;
}

/* legacy_load's persistent_load, as the object pickle is read: a tuple is an
 * old module record (its first item is returned; inert), anything else is
 * int(saved_id) looked up among the storages and tensors. Where torch's
 * lookup fails (ValueError, KeyError), its unpickling stops: the first such
 * id is kept, and the pickle is still read to its end, so that the verdict
 * takes the longer reading. */
static int on_persid(void *ctx, pk_obj *persid, tc_diag *d)
{
    tar *T = ctx;
    const pk_obj *pid = persid->args;
    int64_t key;
    if (pid->kind == PK_TUPLE || T->partial)
        return 0;
    uint64_t at = pid_key(pid, &key) ? obj_get(&T->obj, (tkey){1, key, NULL, 0}) : 0;
    if (at & TENSOR_BIT)
        return tc_vec_push(&T->refs, persid) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : 0;
    if (!at && !T->missing) {
        tc_buf b = TC_BUF_INIT(200);
        if (pid_key(pid, &key))
            tc_buf_printf(&b, "persistent id %" PRId64 " names no storage or tensor of the archive (KeyError)", key);
        else
            tc_buf_puts(&b, "a persistent id that int() does not read (ValueError)");
        if (!(T->missing = tc_buf_take(&b)))
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
    return 0; /* a storage itself stays an object */
}

/* ---- the tensors, as the walk of the torch formats sees them ---------------------------- */

/* Root storage st[i] registered as a storage of the checkpoint, through the
 * persistent id the zip format would name it with. */
static pk_obj *storage_pid(tar *T, size_t i, tc_diag *d)
{
    tstorage *s = &T->st.v[i];
    pk_graph *g = T->synth;
    char key[32], type[80];
    snprintf(key, sizeof key, "%zu", i);
    size_t l = strlen(s->type->name);
    if (l > 6 && !strcmp(s->type->name + l - 6, "Tensor")) /* a tensor type class: its storage's name */
        snprintf(type, sizeof type, "%.*sStorage", (int)(l - 6), s->type->name);
    else
        snprintf(type, sizeof type, "%s", s->type->name);
    pk_obj *items[5] = {pk_new_str(g, "storage", 7), pk_new_global(g, "torch", type),
                        pk_new_str(g, key, strlen(key)), pk_new_str(g, s->loc->s, s->loc->len),
                        pk_new_int(g, s->numel)};
    pk_obj *t = pk_new_tuple(g, 5, items), *p = pk_new(g, PK_PERSID);
    if (!items[0] || !items[1] || !items[2] || !items[3] || !items[4] || !t || !p) {
        tc_fail(d, TC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->args = t;
    if (tc_torch_persid(&T->tg, p, d))
        return NULL;
    if (s->si < 0) {
        s->si = tc_ckpt_find_storage(T->tg.c, key);
        tc_storage *cs = tc_ckpt_storage_mut(T->tg.c, (size_t)s->si);
        cs->stored = true;
        cs->file_off = s->off;
    }
    return p;
}

static pk_obj *ints(pk_graph *g, const int64_t *v, int n)
{
    pk_obj *t = pk_new(g, PK_TUPLE);
    for (int i = 0; t && i < n; i++) {
        pk_obj *x = pk_new_int(g, v[i]);
        if (!x || pk_push(g, t, x) < 0)
            return NULL;
    }
    return t;
}

/* Each persistent id of the object that names a tensor becomes the call
 * that builds it: _rebuild_tensor_v2(storage, offset, sizes, strides, False,
 * OrderedDict()), its offset counted from the root storage of a view. The
 * storages are named by their place in the storages member. */
static int build_tensors(tar *T, tc_diag *d)
{
    pk_graph *g = T->synth;
    for (size_t k = 0; k < T->refs.n; k++) {
        pk_obj *ref = T->refs.v[k];
        int64_t key = 0;
        pid_key(ref->args, &key);
        const ttensor *t = &T->tt.v[(obj_get(&T->obj, (tkey){1, key, NULL, 0}) & ~TENSOR_BIT) - 1];
        const tstorage *s = &T->st.v[t->storage];
        size_t root = s->view >= 0 ? s->root : t->storage;
        int64_t base = s->view >= 0 ? s->view : 0, room = s->view >= 0 ? s->vnumel : s->numel;
        /* tensor.set_ refuses a tensor that does not lie inside its (view's) storage */
        int64_t last = t->offset;
        bool empty = false, bad = t->offset < 0;
        for (int i = 0; i < t->ndim && !bad; i++) {
            int64_t m;
            if (t->dims[i] < 0 || t->dims[t->ndim + i] < 0)
                bad = true;
            else if (!t->dims[i])
                empty = true;
            else if (__builtin_mul_overflow(t->dims[i] - 1, t->dims[t->ndim + i], &m) ||
                     __builtin_add_overflow(last, m, &last))
                bad = true;
        }
        if (bad || (!empty && last >= room))
            return tc_fail(d, TC_ERR_FORMAT,
                           "tar member tensors: tensor %" PRId64 " lies outside its storage (torch's set_ refuses it)",
                           key);
        pk_obj *sp = storage_pid(T, root, d);
        if (!sp)
            return d->code;
        pk_obj *hooks = pk_new(g, PK_CALL), *args[6] = {sp, pk_new_int(g, base + t->offset), ints(g, t->dims, t->ndim),
                                                        ints(g, t->dims + t->ndim, t->ndim), pk_new(g, PK_BOOL), hooks};
        if (hooks) {
            hooks->func = pk_new_global(g, "collections", "OrderedDict");
            hooks->args = pk_new_tuple(g, 0, NULL);
        }
        pk_obj *targs = pk_new_tuple(g, 6, args), *fn = pk_new_global(g, "torch._utils", "_rebuild_tensor_v2");
        if (!hooks || !hooks->func || !hooks->args || !args[1] || !args[2] || !args[3] || !args[4] || !targs || !fn)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        ref->kind = PK_CALL;
        ref->func = fn;
        ref->args = targs;
    }
    return 0;
}

/* ---- the driver --------------------------------------------------------------------------- */

/* Whether the file is a tar archive as torch.load's tarfile.open sees it: a
 * first block that is a tar header (its checksum right). torch tries the tar
 * reading first for any file that is no zip; any other file goes on to the
 * next driver, as torch goes on to its legacy reading. */
static bool probe(const tc_probe *p)
{
    return p->size >= 512 && p->n >= 512 && memcmp(p->head, "PK\x03\x04", 4) && tc_tar_header(p->head, 512);
}

/* What is named before a reading stops, as tc_torch_read_failed says it. */
static int failed(tar *T, int rc, const char *what, tc_diag *d) { return tc_torch_read_failed(&T->tg, rc, what, d); }

static int open_tar(tc_ckpt *c, tc_diag *d)
{
    uint8_t b[512];
    const tc_src *src = tc_ckpt_src(c);
    int rc = tc_src_read(src, 0, b, 512, "a tar header", d);
    if (rc)
        return rc;
    if (!tc_tar_header(b, 512))
        return TC_FORMAT_DECLINE; /* Python's tarfile raises ReadError: torch.load goes on to the legacy stream */
    tar *T = calloc(1, sizeof *T);
    if (!T)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, &tc_format_torch_tar, T, tar_free);
    if ((rc = tc_torch_graph_init(&T->tg, c, d)) || !(T->synth = pk_graph_new()))
        return rc ? rc : tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if ((rc = scan(T, src, d)) < 0)
        return rc;
    if (T->exotic) {
        tc_buf t = TC_BUF_INIT(600);
        tc_buf_printf(&t, "an old-format torch archive (tar) with %s, which tensorctl does not read as Python's "
                      "tarfile does: what torch.load unpickles from it may not be what tensorctl judged",
                      T->why_exotic);
        rc = tc_ckpt_add_hazard(c, tc_buf_str(&t), d);
        tc_buf_free(&t);
        if (rc)
            return rc;
    }
    const member *ms = getmember(T, "storages"), *mt = getmember(T, "tensors"), *mp = getmember(T, "pickle");
    if (!ms) {
        /* a legacy stream whose first block is also a tar header: that is the reading to take (the tar's is a
         * hazard of it, readings.c) */
        bool legacy = false;
        if ((rc = tc_legacy_at_zero(src, tc_ckpt_limits(c), &legacy, d)))
            return rc;
        if (legacy && !T->exotic)
            return TC_FORMAT_DECLINE;
        if (T->exotic)
            return tc_fail(d, TC_ERR_UNSAFE, "%s; tensorctl found no 'storages' member", tc_ckpt_hazard(c, 0));
        /* the other reading, as a stream: torch.load of a file object that is no file, or after a tar error */
        char unsafe[1100];
        if ((rc = tc_pickle_at_zero(src, tc_ckpt_limits(c), unsafe, sizeof unsafe, d)))
            return rc;
        if (unsafe[0])
            return tc_fail(d, TC_ERR_UNSAFE,
                           "a tar archive torch.load cannot read as its old format (no 'storages' member), but read "
                           "as a stream (not a file) it is unpickled from byte 0, importing %s",
                           unsafe);
        return tc_fail(d, TC_ERR_FORMAT,
                       "not a checkpoint: a tar archive without a 'storages' member, which torch.load's old-format "
                       "reader fails on (KeyError) before it unpickles anything");
    }
    if ((rc = read_storages(T, ms, d)))
        return failed(T, rc, "the tar member storages", d);
    if (!mt)
        return tc_fail(d, TC_ERR_FORMAT, "an old-format torch archive (tar) without a 'tensors' member "
                       "(torch.load stops there, KeyError)");
    if ((rc = read_tensors(T, mt, d)))
        return failed(T, rc, "the tar member tensors", d);
    if (!mp)
        return tc_fail(d, TC_ERR_FORMAT, "an old-format torch archive (tar) without a 'pickle' member "
                       "(torch.load stops there, KeyError)");
    mreader r;
    if ((rc = mreader_open(&r, T, mp, "tar member pickle", d)))
        return failed(T, rc, "the tar member pickle", d);
    r.on_persid = on_persid;
    if ((rc = next_pickle(&r, &T->tg.root, d)))
        return failed(T, rc, "the tar member pickle", d);
    T->tg.pickle_bytes = r.pos;
    if (T->missing)
        return failed(T, tc_fail(d, TC_ERR_FORMAT, "tar member pickle: %s (torch.load stops there)", T->missing),
                      "the tar member pickle", d);
    if (T->partial) {
        /* every pickle was judged; the tensors torch builds are beyond tensorctl's tables */
        tc_buf t = TC_BUF_INIT(300);
        tc_buf_printf(&t, "not listed: %s", T->partial);
        rc = tc_ckpt_add_fact(c, "tar_tensors", tc_buf_str(&t), d);
        tc_buf_free(&t);
    } else {
        rc = build_tensors(T, d);
    }
    if (rc ||
        (rc = tc_ckpt_add_fact(c, "legacy_format",
                               "tar (torch < 0.4): members storages, tensors and pickle, each unpickled", d)) ||
        (rc = tc_torch_index(&T->tg, d)))
        return rc;
    static const char *const refused[TC_NTORCH] = {
        NULL, "the old tar format (\"Cannot use weights_only=True with files saved in the legacy .tar format\")"};
    return tc_weights_only(&T->tg, refused, d);
}

static int open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    (void)d;
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
    return 0;
}

bool tc_tar_fallback(const tc_ckpt *c)
{
    const tar *T = tc_ckpt_driver(c) == &tc_format_torch_tar ? tc_ckpt_priv(c) : NULL;
    return T && T->fallback;
}

/* read only: a rewrite would need an object graph of the file's own */
const tc_format tc_format_torch_tar = {.name = "torch-tar", .probe = probe, .open = open_tar,
                                       .open_storage = open_storage, .caps = TC_CAP_LEGACY_TAR};
