/* numpy's .npy files and .npz archives of them (numpy/lib/format.py), read
 * as numpy.load reads them.
 *
 * An .npy file is the magic \x93NUMPY, a version (1.0, 2.0 or 3.0), a header
 * length (2 bytes in 1.0, 4 after), and a header: the repr of a dict
 * {'descr': dtype, 'fortran_order': bool, 'shape': tuple}, which numpy reads
 * with ast.literal_eval; then the data. An array of numbers is the bytes of
 * its elements: here one tensor (in C or Fortran order) on a storage lying in
 * the file. An array whose dtype holds Python objects is a pickle instead,
 * which numpy.load(allow_pickle=True) unpickles (the default, allow_pickle=
 * False, refuses it): such a file is never safe, and the globals its pickle
 * names say what loading it runs. A dtype this reader does not know is
 * treated the same way, since numpy may read it as objects.
 *
 * An .npz file is a zip of .npy members (numpy.savez); numpy.load reads a
 * member when its key (the name without .npy) is asked for, so every member
 * is judged. A zip holding anything else is left to the other drivers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "format.h"
#include "pickle_file.h"
#include "pylit.h"
#include "vec.h"
#include "zip.h"

extern const tc_format tc_format_npy, tc_format_npz;

static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- the header's meaning --------------------------------------------------------- */

typedef enum { NPY_TENSOR, NPY_PLAIN, NPY_OBJECT, NPY_UNKNOWN } npy_kind;

typedef struct npy_info {
    uint64_t hdr;          /* bytes before the data */
    npy_kind kind;
    tc_dtype dtype;        /* NPY_TENSOR */
    bool fortran;
    int ndim;
    int64_t shape[TC_MAX_DIMS];
    char descr[96];        /* the dtype as the header gives it, quoted, or "structured": for messages */
    const char *why;       /* NPY_PLAIN: why it is no tensor */
} npy_info;

/* One dtype code: a type character with its size or without ("f4", "f",
 * "L", "?", "b1"), a type's name ("float32", "object"), bytes, text or raw
 * bytes of a size ("S3", "U2", "V8"), a datetime ("M8[ns]"). l and L are
 * read as 8 bytes, as numpy reads them on Linux. */
static npy_kind code_kind(const char *s, tc_dtype *dt)
{
    static const struct {
        const char *code;
        tc_dtype dt;
    } nums[] = {
        {"b1", TC_DT_BOOL},  {"?", TC_DT_BOOL},   {"i1", TC_DT_I8},    {"i2", TC_DT_I16},   {"i4", TC_DT_I32},
        {"i8", TC_DT_I64},   {"u1", TC_DT_U8},    {"u2", TC_DT_U16},   {"u4", TC_DT_U32},   {"u8", TC_DT_U64},
        {"f2", TC_DT_F16},   {"f4", TC_DT_F32},   {"f8", TC_DT_F64},   {"c8", TC_DT_C64},   {"c16", TC_DT_C128},
        {"b", TC_DT_I8},     {"B", TC_DT_U8},     {"h", TC_DT_I16},    {"H", TC_DT_U16},    {"i", TC_DT_I32},
        {"I", TC_DT_U32},    {"l", TC_DT_I64},    {"L", TC_DT_U64},    {"q", TC_DT_I64},    {"Q", TC_DT_U64},
        {"p", TC_DT_I64},    {"P", TC_DT_U64},    {"e", TC_DT_F16},    {"f", TC_DT_F32},    {"d", TC_DT_F64},
        {"F", TC_DT_C64},    {"D", TC_DT_C128},   {"bool", TC_DT_BOOL}, {"bool_", TC_DT_BOOL}, {"int8", TC_DT_I8},
        {"int16", TC_DT_I16}, {"int32", TC_DT_I32}, {"int64", TC_DT_I64}, {"uint8", TC_DT_U8}, {"uint16", TC_DT_U16},
        {"uint32", TC_DT_U32}, {"uint64", TC_DT_U64}, {"float16", TC_DT_F16}, {"half", TC_DT_F16},
        {"float32", TC_DT_F32}, {"single", TC_DT_F32}, {"float64", TC_DT_F64}, {"double", TC_DT_F64},
        {"float", TC_DT_F64}, {"int", TC_DT_I64}, {"complex64", TC_DT_C64}, {"complex128", TC_DT_C128},
        {"complex", TC_DT_C128},
        /* numbers torch has no type for */
        {"f16", TC_DT_INVALID}, {"f12", TC_DT_INVALID}, {"c32", TC_DT_INVALID}, {"c24", TC_DT_INVALID},
        {"g", TC_DT_INVALID}, {"G", TC_DT_INVALID}, {"longdouble", TC_DT_INVALID}, {"clongdouble", TC_DT_INVALID},
        {"float128", TC_DT_INVALID}, {"complex256", TC_DT_INVALID},
    };
    static const char *const plain[] = {"str", "str_", "unicode", "bytes", "bytes_", "void", "datetime64",
                                        "timedelta64"};
    static const char *const objects[] = {"O", "O8", "O4", "object", "object_"};
    *dt = TC_DT_INVALID;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!strcmp(s, nums[i].code)) {
            *dt = nums[i].dt;
            return *dt ? NPY_TENSOR : NPY_PLAIN;
        }
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++)
        if (!strcmp(s, objects[i]))
            return NPY_OBJECT;
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(s, plain[i]))
            return NPY_PLAIN;
    if (*s == 'S' || *s == 'a' || *s == 'U' || *s == 'V') { /* bytes, text, raw bytes of a size */
        const char *p = s + 1;
        while (*p >= '0' && *p <= '9')
            p++;
        return *p ? NPY_UNKNOWN : NPY_PLAIN;
    }
    if ((*s == 'M' || *s == 'm') && (!s[1] || s[1] == '8' || s[1] == '[')) { /* datetime64, timedelta64 */
        const char *p = s + 1 + (s[1] == '8');
        if (!*p)
            return NPY_PLAIN;
        if (*p++ != '[')
            return NPY_UNKNOWN;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))
            p++;
        return p[0] == ']' && !p[1] ? NPY_PLAIN : NPY_UNKNOWN;
    }
    return NPY_UNKNOWN;
}

/* A dtype string, as numpy.dtype reads one: a byte order (<, >, |, =), a
 * sub-array shape before the code ("(2,3)f4", "3f4": no tensor; "()",
 * "(1,)", "1f4": one element, so none),
 * and fields separated by commas ("i4,f8": a record, no tensor). Anything
 * else is unknown, which the caller takes for a dtype that may hold objects. */
static npy_kind leaf_kind(const char *s, size_t len, tc_dtype *dt, bool *big)
{
    *dt = TC_DT_INVALID;
    *big = false;
    if (strlen(s) != len || len > 200)
        return NPY_UNKNOWN;
    if (strchr(s, ',') && !strchr(s, '(')) { /* fields: the worst of them, and no tensor */
        char part[201];
        npy_kind k = NPY_PLAIN;
        const char *p = s;
        for (;;) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            while (n && *p == ' ')
                p++, n--;
            while (n && p[n - 1] == ' ')
                n--;
            if (!n && !e)
                break; /* a trailing comma ("i4, f8,", "i4,f8, "): numpy reads the fields before it */
            memcpy(part, p, n);
            part[n] = 0;
            tc_dtype d;
            bool b;
            npy_kind pk = n ? leaf_kind(part, n, &d, &b) : NPY_UNKNOWN;
            k = k > (pk == NPY_TENSOR ? NPY_PLAIN : pk) ? k : (pk == NPY_TENSOR ? NPY_PLAIN : pk);
            if (!e)
                break;
            p = e + 1;
        }
        return k;
    }
    bool sub = false;
    for (int pass = 0; pass < 2; pass++) {
        if (*s == '<' || *s == '>' || *s == '|' || *s == '=') {
            *big = *s == '>';
            s++;
        }
        if (pass)
            break;
        /* a sub-array's shape: numpy.load then reshapes the array to the header's shape, which
         * works only when the sub-array holds one element: it is then no sub-array at all */
        if (*s == '(') {
            const char *p = s + 1;
            while (*p && *p != ')') {
                if (!strchr("0123456789, ", *p))
                    return NPY_UNKNOWN;
                if (*p >= '1' && *p <= '9' && (*p != '1' || (p[1] >= '0' && p[1] <= '9')))
                    sub = true;
                if (*p == '0' && (p == s + 1 || !(p[-1] >= '0' && p[-1] <= '9')))
                    sub = true;
                p++;
            }
            if (*p != ')')
                return NPY_UNKNOWN;
            s = p + 1;
        } else if (*s >= '0' && *s <= '9') {
            sub = !(s[0] == '1' && !(s[1] >= '0' && s[1] <= '9'));
            while (*s >= '0' && *s <= '9')
                s++;
        }
    }
    npy_kind k = code_kind(s, dt);
    if (k == NPY_TENSOR && sub) {
        *dt = TC_DT_INVALID;
        k = NPY_PLAIN;
    }
    return k;
}

static npy_kind worse(npy_kind a, npy_kind b) { return a > b ? a : b; }

/* The kind of a descr that is not a plain string: (descr, shape) or a list of
 * fields (name, descr[, shape]); numbers inside it make no tensor. */
static npy_kind descr_kind(const lv *d, int depth)
{
    tc_dtype dt;
    bool big;
    if (depth > TC_PYLIT_MAX_DEPTH)
        return NPY_UNKNOWN;
    if (d->k == LV_STR) {
        npy_kind k = leaf_kind(d->s, d->len, &dt, &big);
        return k == NPY_TENSOR ? NPY_PLAIN : k;
    }
    if (d->k == LV_TUPLE && d->v.n >= 1) /* (base, shape): numpy.dtype((base, shape)) */
        return d->v.n == 2 ? descr_kind(d->v.v[0], depth + 1) : NPY_UNKNOWN;
    if (d->k != LV_LIST)
        return NPY_UNKNOWN;
    npy_kind k = NPY_PLAIN;
    for (size_t i = 0; i < d->v.n; i++) {
        const lv *f = d->v.v[i];
        if (f->k != LV_TUPLE || f->v.n < 2 || f->v.n > 3)
            return NPY_UNKNOWN;
        k = worse(k, descr_kind(f->v.v[1], depth + 1));
    }
    return k;
}

static const lv *dict_get(const lv *d, const char *key)
{
    const lv *v = NULL;
    for (size_t i = 0; i + 1 < d->v.n; i += 2) /* a key given twice: the last value wins, as in a Python dict */
        if (d->v.v[i]->k == LV_STR && !strcmp(d->v.v[i]->s, key) && d->v.v[i]->len == strlen(key))
            v = d->v.v[i + 1];
    return v;
}

/* Whether every key of d is one of the three numpy requires, and all three are there. */
static bool keys_exact(const lv *d)
{
    static const char *const want[] = {"descr", "fortran_order", "shape"};
    for (size_t i = 0; i + 1 < d->v.n; i += 2) {
        const lv *k = d->v.v[i];
        bool ok = false;
        for (size_t j = 0; j < 3 && k->k == LV_STR; j++)
            ok |= !strcmp(k->s, want[j]) && k->len == strlen(want[j]);
        if (!ok)
            return false;
    }
    for (size_t j = 0; j < 3; j++)
        if (!dict_get(d, want[j]))
            return false;
    return true;
}

/* The header after the magic: *need > n when more bytes are needed (call again with them). */
static int parse_header(const uint8_t *b, size_t n, const tc_limits *lim, npy_info *out, uint64_t *need, tc_diag *d)
{
    memset(out, 0, sizeof *out);
    *need = 12;
    if (n < 10 || memcmp(b, magic, 6))
        return n < 10 ? 0 : tc_fail(d, TC_ERR_FORMAT, "not an .npy file (no \\x93NUMPY magic)");
    int major = b[6], minor = b[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0)
        return tc_fail(d, TC_ERR_FORMAT, "npy format version %d.%d: numpy reads only 1.0, 2.0 and 3.0", major, minor);
    uint64_t hl = major == 1 ? tc_le16(b + 8) : (n < 12 ? 0 : tc_le32(b + 8));
    uint64_t start = major == 1 ? 10 : 12;
    if (n < start)
        return 0;
    if (hl > lim->max_header)
        return tc_fail(d, TC_ERR_LIMIT, "npy header of %llu bytes, more than %llu (raise with --max-header-size)",
                       (unsigned long long)hl, (unsigned long long)lim->max_header);
    *need = start + hl;
    if (n < *need)
        return 0;
    const char *h = (const char *)b + start, *end = h + hl;
    /* Text is latin-1 in 1.0 and 2.0, UTF-8 in 3.0; bytes past ASCII can only
     * matter inside strings (field names), which are kept as they are. */
    while (h < end && (*h == ' ' || *h == '\t')) /* literal_eval strips these first */
        h++;
    for (const char *p = h; p < end; p++)
        if (!*p)
            return tc_fail(d, TC_ERR_FORMAT, "npy header has a NUL byte at offset %zu", (size_t)(p - (const char *)b));
    const char *err = NULL, *at = h;
    lv *v = tc_pylit_parse(h, end, major < 3, &err, &at);
    int rc = 0;
    const lv *descr, *fo, *shape;
    if (!v) {
        rc = tc_fail(d, TC_ERR_FORMAT, "npy header is not a Python literal numpy reads: %s at offset %zu", err,
                     (size_t)(at - (const char *)b));
    } else if (v->k != LV_DICT) {
        rc = tc_fail(d, TC_ERR_FORMAT, "npy header is not a dictionary");
    } else if (!keys_exact(v)) {
        rc = tc_fail(d, TC_ERR_FORMAT, "npy header does not have exactly the keys descr, fortran_order and shape");
    } else if ((shape = dict_get(v, "shape"))->k != LV_TUPLE) {
        rc = tc_fail(d, TC_ERR_FORMAT, "npy header's shape is not a tuple");
    } else if ((fo = dict_get(v, "fortran_order"))->k != LV_BOOL) {
        rc = tc_fail(d, TC_ERR_FORMAT, "npy header's fortran_order is not True or False");
    } else if (shape->v.n > TC_MAX_DIMS) {
        rc = tc_fail(d, TC_ERR_UNSUPPORTED, "npy array of %zu dimensions (at most %d)", shape->v.n, TC_MAX_DIMS);
    } else {
        out->hdr = *need;
        out->fortran = fo->i;
        out->ndim = (int)shape->v.n;
        for (size_t i = 0; i < shape->v.n && !rc; i++) {
            const lv *x = shape->v.v[i];
            if ((x->k != LV_INT && x->k != LV_BOOL) || x->huge || x->i < 0)
                rc = tc_fail(d, TC_ERR_FORMAT, "npy header's shape has an entry that is not a size");
            else
                out->shape[i] = x->i;
        }
        descr = dict_get(v, "descr");
        bool big = false;
        if (descr->k == LV_STR) {
            tc_esc(descr->s, out->descr, sizeof out->descr - 2);
            memmove(out->descr + 1, out->descr, strlen(out->descr) + 1);
            out->descr[0] = '\'';
            strcat(out->descr, "'");
            out->kind = leaf_kind(descr->s, descr->len, &out->dtype, &big);
        } else {
            snprintf(out->descr, sizeof out->descr, "%s", "structured");
            out->kind = descr_kind(descr, 0);
        }
        out->why = out->kind != NPY_PLAIN ? NULL
                   : descr->k != LV_STR ? "a structured or sub-array dtype"
                                         : "a dtype torch has no tensor type for";
        if (out->kind == NPY_TENSOR && big) {
            out->kind = NPY_PLAIN;
            out->why = "big-endian";
        }
    }
    tc_pylit_free(v);
    return rc;
}

/* ---- the checkpoint ---------------------------------------------------------------------- */

/* Elements of the array, or -1 past 2^63. */
static int64_t elements(const npy_info *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] && n > INT64_MAX / a->shape[i])
            return -1;
        n *= a->shape[i];
    }
    return n;
}

static void shape_text(const npy_info *a, tc_buf *b)
{
    tc_buf_putc(b, '(');
    for (int i = 0; i < a->ndim; i++)
        tc_buf_printf(b, "%s%" PRId64, i ? ", " : "", a->shape[i]);
    tc_buf_puts(b, a->ndim == 1 ? ",)" : ")");
}

/* The array named name whose header is a and whose data is [data_off, data_off + data_len) of the
 * member or file: a tensor, a description, or its pickle judged (pickle: a source of the data's
 * bytes from its first; NULL when they are not read). */
static int add_array(tc_ckpt *c, const char *name, const npy_info *a, bool stored, uint64_t file_off, uint64_t data_len,
                     const tc_src *pickle, tc_diag *d)
{
    tc_buf t = TC_BUF_INIT(2000);
    int rc = 0;
    if (a->kind == NPY_OBJECT || a->kind == NPY_UNKNOWN) {
        tc_pickle_seen seen;
        if ((rc = tc_pickle_judge(c, pickle, 0, pickle->size, false, &seen, d)))
            return rc; /* t holds nothing yet */
        if (a->kind == NPY_OBJECT)
            tc_buf_printf(&t, "array '%s' (dtype %s) holds Python objects: numpy.load(allow_pickle=True) unpickles "
                              "its data, which imports and calls what is listed; numpy.load refuses it by default",
                          name, a->descr);
        else
            tc_buf_printf(&t, "array '%s' has dtype %s, which tensorctl does not know: numpy.load(allow_pickle=True) "
                              "may read its data as pickled Python objects",
                          name, a->descr);
        if (!seen.parsed && seen.why.msg[0])
            tc_buf_printf(&t, " (the unpickler stops there: %s)", seen.why.msg);
        rc = tc_ckpt_add_hazard(c, tc_buf_str(&t), d);
        tc_buf_free(&t);
        return rc;
    }
    int64_t n = elements(a);
    if (n < 0) {
        tc_buf_free(&t);
        return tc_fail(d, TC_ERR_FORMAT, "array '%s': its shape has more than 2^63 elements", name);
    }
    if (a->kind == NPY_PLAIN) {
        tc_buf_printf(&t, "dtype %s, shape ", a->descr);
        shape_text(a, &t);
        tc_buf_printf(&t, " (%s: not read as a tensor)", a->why);
        rc = tc_buf_oom(&t) ? tc_fail(d, TC_ERR_NOMEM, "out of memory") : tc_ckpt_add_fact(c, name, tc_buf_str(&t), d);
        tc_buf_free(&t);
        return rc;
    }
    tc_buf_free(&t);
    uint64_t esz = tc_dtype_size(a->dtype);
    if ((uint64_t)n > UINT64_MAX / esz || (uint64_t)n * esz > data_len)
        return tc_fail(d, TC_ERR_FORMAT, "array '%s': %" PRId64 " elements of %s need %llu bytes, only %llu follow the header",
                       name, n, a->descr, (unsigned long long)((uint64_t)n > UINT64_MAX / esz ? UINT64_MAX : (uint64_t)n * esz),
                       (unsigned long long)data_len);
    long si = tc_ckpt_add_storage(c, name, d);
    long ti = si < 0 ? -1 : tc_ckpt_add_tensor(c, name, d);
    if (ti < 0)
        return d->code;
    tc_storage *s = tc_ckpt_storage_mut(c, (size_t)si);
    free(s->location);
    if (!(s->location = strdup("-")))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    s->dtype = a->dtype;
    s->numel = (uint64_t)n;
    s->nbytes = (uint64_t)n * esz;
    s->stored = stored;
    s->file_off = file_off;
    s->ntensors = 1;
    tc_tensor *x = tc_ckpt_tensor_mut(c, (size_t)ti);
    x->kind = TC_TENSOR_DENSE;
    x->dtype = a->dtype;
    x->ndim = a->ndim;
    x->storage = si;
    x->numel = (uint64_t)n;
    x->nbytes = s->nbytes;
    int64_t stride[TC_MAX_DIMS], st = 1;
    for (int k = 0; k < a->ndim; k++) { /* C order: the last dimension is contiguous; Fortran order: the first */
        int i = a->fortran ? k : a->ndim - 1 - k;
        stride[i] = st;
        st *= a->shape[i] ? a->shape[i] : 1;
    }
    return tc_ckpt_set_dims(c, (size_t)ti, a->ndim, a->shape, stride, d);
}

/* ---- .npy -------------------------------------------------------------------------------- */

static bool probe_npy(const tc_probe *p) { return p->n >= 6 && !memcmp(p->head, magic, 6); }

/* Read the header of the bytes rd gives (whose first n are in buf, of cap): grows buf as needed. */
static int read_info(const tc_src *src, const tc_limits *lim, npy_info *a, tc_diag *d)
{
    uint8_t small[12];
    uint64_t need;
    size_t n = src->size < sizeof small ? (size_t)src->size : sizeof small;
    int rc;
    if ((rc = tc_src_read(src, 0, small, n, "npy header", d)) || (rc = parse_header(small, n, lim, a, &need, d)))
        return rc;
    if (need <= n)
        return 0;
    if (need > src->size)
        return tc_fail(d, TC_ERR_FORMAT, "npy header needs %llu bytes, the file has %llu", (unsigned long long)need,
                       (unsigned long long)src->size);
    uint8_t *buf = malloc((size_t)need);
    if (!buf)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    if ((rc = tc_src_read(src, 0, buf, (size_t)need, "npy header", d)))
        goto done;
    rc = parse_header(buf, (size_t)need, lim, a, &need, d);
done:
    free(buf);
    return rc;
}

static int open_npy(tc_ckpt *c, tc_diag *d)
{
    tc_ckpt_set_driver(c, &tc_format_npy, NULL, NULL);
    const tc_src *src = tc_ckpt_src(c);
    npy_info a;
    tc_src data;
    int rc;
    if ((rc = read_info(src, tc_ckpt_limits(c), &a, d)) ||
        (rc = tc_src_window(&data, src, a.hdr, src->size - a.hdr, d)) ||
        (rc = add_array(c, "array", &a, true, a.hdr, src->size - a.hdr, &data, d)))
        return rc;
    tc_ckpt_sort_globals(c);
    return 0;
}

static int open_storage_npy(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    (void)d;
    const tc_storage *s = tc_ckpt_storage(c, i);
    tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
    return 0;
}

const tc_format tc_format_npy = {.name = "npy", .probe = probe_npy, .open = open_npy,
                                 .open_storage = open_storage_npy};

/* ---- .npz -------------------------------------------------------------------------------- */

typedef struct npz {
    tc_zip zip;
    TC_VEC(const tc_zip_entry *) rec; /* per storage: its member */
    TC_VEC(uint64_t) skip;            /* per storage: its member's header bytes */
} npz;

static void npz_free(void *p)
{
    npz *z = p;
    if (!z)
        return;
    tc_zip_free(&z->zip);
    tc_vec_free(&z->rec);
    tc_vec_free(&z->skip);
    free(z);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool probe_npz(const tc_probe *p)
{
    if (p->n < 30 || memcmp(p->head, "PK\x03\x04", 4))
        return false;
    if (p->path && ends_with(p->path, ".npz"))
        return true;
    size_t nl = tc_le16(p->head + 26);
    return 30 + nl <= p->n && nl >= 4 && !memcmp(p->head + 30 + nl - 4, ".npy", 4);
}

static int npz_member(tc_ckpt *c, npz *z, const tc_zip_entry *e, tc_diag *d)
{
    const tc_limits *lim = tc_ckpt_limits(c);
    tc_buf key = TC_BUF_INIT(0);
    tc_buf_add(&key, e->name, strlen(e->name) - 4);
    if (tc_buf_oom(&key))
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    uint8_t *buf = NULL;
    size_t n = 0;
    uint64_t need = 12;
    npy_info a;
    int rc;
    if ((rc = tc_zip_read_head(&z->zip, e, 12, &buf, &n, d)))
        goto done;
    if (n < 6 || memcmp(buf, magic, 6)) {
        /* numpy.load hands such a member back as its bytes: nothing is unpickled */
        rc = tc_ckpt_add_fact(c, tc_buf_str(&key), "bytes, not an .npy array (numpy.load returns them as bytes)", d);
        free(buf);
        tc_buf_free(&key);
        return rc;
    }
    if ((rc = parse_header(buf, n, lim, &a, &need, d)))
        goto done;
    if (need > n) {
        free(buf);
        buf = NULL;
        if (need > e->usize) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: npy header needs %llu bytes, the member has %llu", e->name,
                         (unsigned long long)need, (unsigned long long)e->usize);
            goto done;
        }
        if ((rc = tc_zip_read_head(&z->zip, e, need, &buf, &n, d)) || (rc = parse_header(buf, n, lim, &a, &need, d)))
            goto done;
    }
    free(buf);
    buf = NULL;
    if (need > e->usize) {
        rc = tc_fail(d, TC_ERR_FORMAT, "%s: npy header needs %llu bytes, the member has %llu", e->name,
                     (unsigned long long)need, (unsigned long long)e->usize);
        goto done;
    }
    if (a.kind == NPY_OBJECT || a.kind == NPY_UNKNOWN) {
        /* the pickle: the member's bytes after the header, as far as the limit lets them be read */
        uint64_t max = lim->max_pickle_bytes > UINT64_MAX - a.hdr ? UINT64_MAX : a.hdr + lim->max_pickle_bytes;
        if ((rc = tc_zip_read_head(&z->zip, e, max, &buf, &n, d)))
            goto done;
        tc_src ps;
        tc_src_init_mem(&ps, buf + a.hdr, n - (size_t)a.hdr, e->name);
        rc = add_array(c, tc_buf_str(&key), &a, false, 0, 0, &ps, d);
    } else {
        long before = (long)tc_ckpt_nstorages(c);
        if ((rc = add_array(c, tc_buf_str(&key), &a, e->method == 0, e->data_off + a.hdr, e->usize - a.hdr, NULL, d)))
            goto done;
        if ((long)tc_ckpt_nstorages(c) > before && (tc_vec_push(&z->rec, e) || tc_vec_push(&z->skip, a.hdr)))
            rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    }
done:
    free(buf);
    tc_buf_free(&key);
    if (rc)
        tc_diag_subject(d, tc_ckpt_path(c));
    return rc;
}

static int open_npz(tc_ckpt *c, tc_diag *d)
{
    npz *z = calloc(1, sizeof *z);
    if (!z)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    tc_ckpt_set_driver(c, &tc_format_npz, z, npz_free);
    tc_zip_limits zl = {.max_entries = tc_ckpt_limits(c)->max_entries};
    int rc = tc_zip_open(&z->zip, tc_ckpt_src(c), &zl, d);
    if (rc)
        return rc;
    if (!z->zip.n)
        return TC_FORMAT_DECLINE;
    for (size_t i = 0; i < z->zip.n; i++)
        if (!ends_with(z->zip.e[i].name, ".npy"))
            return TC_FORMAT_DECLINE; /* not what numpy.savez writes: another driver's, or an archive */
    for (size_t i = 0; i < z->zip.n && !rc; i++)
        rc = npz_member(c, z, &z->zip.e[i], d);
    if (rc)
        return rc;
    tc_ckpt_sort_globals(c);
    return 0;
}

typedef struct npz_rd {
    tc_zip_rd zr;
} npz_rd;

static int npz_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d)
{
    return tc_zip_rd_read(&((npz_rd *)r->state)->zr, buf, n, got, false, d);
}

static void npz_close(tc_rd *r)
{
    npz_rd *x = r->state;
    tc_zip_rd_close(&x->zr);
    free(x);
}

static int open_storage_npz(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d)
{
    const npz *z = tc_ckpt_priv(c);
    const tc_storage *s = tc_ckpt_storage(c, i);
    if (s->stored) {
        tc_rd_range(r, tc_ckpt_src(c), s->file_off, s->nbytes);
        return 0;
    }
    npz_rd *x = malloc(sizeof *x);
    if (!x)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    int rc = tc_zip_rd_open(&x->zr, &z->zip, z->rec.v[i], d);
    if (rc) {
        free(x);
        return rc;
    }
    /* past the member's npy header, to the array's first byte */
    uint8_t skip[4096];
    for (uint64_t left = z->skip.v[i]; left;) {
        size_t got = 0;
        if ((rc = tc_zip_rd_read(&x->zr, skip, left < sizeof skip ? (size_t)left : sizeof skip, &got, false, d)))
            goto fail;
        if (!got) {
            rc = tc_fail(d, TC_ERR_FORMAT, "%s: ends inside its npy header", z->rec.v[i]->name);
            goto fail;
        }
        left -= got;
    }
    r->size = s->nbytes;
    r->read = npz_read;
    r->close = npz_close;
    r->state = x;
    return 0;
fail:
    tc_zip_rd_close(&x->zr);
    free(x);
    return rc;
}

const tc_format tc_format_npz = {.name = "npz", .probe = probe_npz, .open = open_npz,
                                 .open_storage = open_storage_npz};
