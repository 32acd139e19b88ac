/* diff: two checkpoints (or a checkpoint and a manifest) compared by name; the report as text or JSON. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "diff.h"
#include "xfer.h"

static const tc_opt o_atol = {.id = OPT_ATOL, .lng = "atol", .arg = "X", .def = "0", .text = &tc_text_diff_atol,
                              .kind = TC_KIND_REAL};
static const tc_opt o_rtol = {.id = OPT_RTOL, .lng = "rtol", .arg = "Y", .def = "0", .text = &tc_text_diff_rtol,
                              .kind = TC_KIND_REAL};
static const tc_opt o_equal_nan = {.id = OPT_EQUAL_NAN, .lng = "equal-nan", .text = &tc_text_diff_equal_nan};
static const tc_opt o_stats = {.id = OPT_STATS, .lng = "stats", .text = &tc_text_diff_stats};
static const tc_opt o_strict = {.id = OPT_STRICT, .lng = "strict", .text = &tc_text_diff_strict};
static const tc_opt o_strip = {.id = OPT_STRIP_PREFIX, .lng = "strip-prefix", .arg = "P",
                               .flags = TC_OPT_VALUE_OPTIONAL, .text = &tc_text_diff_strip_prefix};
static const tc_opt o_json = {.id = OPT_JSON, .lng = "json", .text = &tc_text_diff_json};
static const tc_opt o_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_diff_quiet};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_diff_verbose};
static const tc_opt o_threads = {.id = OPT_THREADS, .lng = "threads", .arg = "N", .text = &tc_text_diff_threads,
                                 .kind = TC_KIND_COUNT, .min = 1, .max = TC_POOL_MAX};
static const tc_opt *const opts[] = {&tc_opt_help, &o_atol, &o_rtol, &o_equal_nan, &o_strict, &o_strip,
                                     &o_stats, &o_json, &o_quiet, &o_verbose, &o_threads, &tc_opt_max_expand, &tc_opt_safe_globals,
                                     &tc_opt_names, TC_LIMIT_OPTS, NULL};


/* ---- pieces of the report ---------------------------------------------------------------- */

/* A line of details: at most 4095 bytes, cut with "..." (a tc_buf over s; set up by buf_init, never copied). */
typedef struct buf {
    char s[4096];
    tc_buf t;
} buf;

static void buf_init(buf *b)
{
    b->t = tc_buf_fixed(b->s, sizeof b->s);
}

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_buf_vprintf(&b->t, fmt, ap);
    va_end(ap);
}

/* "; " between details */
static void sep(buf *b)
{
    tc_buf_sep(&b->t, "; ");
}

static void dims(buf *b, const int64_t *v, int n)
{
    put(b, "[");
    for (int i = 0; i < n; i++)
        put(b, "%s%" PRId64, i ? ", " : "", v[i]);
    put(b, "]");
}

/* The multi-dimensional index of element flat of a tensor of this shape, into idx. */
static void unravel(const tc_diff_meta *m, uint64_t flat, int64_t *idx)
{
    for (int k = m->ndim - 1; k >= 0; k--) {
        uint64_t n = m->shape[k] ? (uint64_t)m->shape[k] : 1;
        idx[k] = (int64_t)(flat % n);
        flat /= n;
    }
}

static void index_text(buf *b, const tc_diff_meta *m, uint64_t flat)
{
    int64_t idx[TC_MAX_DIMS];
    unravel(m, flat, idx);
    dims(b, idx, m->ndim);
}

/* A float as %g does, with inf/nan spelled as Python spells them. */
static void num(buf *b, const char *fmt, double x)
{
    if (isnan(x))
        put(b, "nan");
    else if (isinf(x))
        put(b, x < 0 ? "-inf" : "inf");
    else
        put(b, fmt, x);
}

static void value(buf *b, const tc_cmp_val *v, tc_dtype t)
{
    const char *fmt = t == TC_DT_F64 || t == TC_DT_C128 ? "%.17g" : "%.9g";
    switch (v->kind) {
    case 'i': put(b, "%" PRId64, v->i); break;
    case 'u': put(b, "%" PRIu64, v->u); break;
    case 'x': put(b, "0x%0*" PRIx64, (int)(2 * (tc_dtype_size(t) < 8 ? tc_dtype_size(t) : 8)), v->u); break;
    case 'c':
        put(b, "(");
        num(b, fmt, v->re);
        put(b, v->im < 0 || (v->im == 0 && signbit(v->im)) ? "" : "+");
        num(b, fmt, v->im);
        put(b, "j)");
        break;
    default: num(b, fmt, v->re);
    }
}

static const char *dev(const char *d) { return d ? d : "none"; }

/* The details of an entry present on both sides, "; "-separated. */
static void details(buf *b, const tc_diff_entry *e, const tc_diff_meta *ma, const tc_diff_meta *mb, bool stats)
{
    if (e->shape_differs) {
        put(b, "shape ");
        dims(b, ma->shape, ma->ndim);
        put(b, " vs ");
        dims(b, mb->shape, mb->ndim);
    }
    if (e->dtype_differs) {
        sep(b);
        put(b, "dtype %s vs %s", tc_dtype_name(ma->dtype), tc_dtype_name(mb->dtype));
    }
    if (e->stride_differs) {
        sep(b);
        put(b, "stride ");
        dims(b, ma->stride, ma->ndim);
        put(b, " vs ");
        dims(b, mb->stride, mb->ndim);
    }
    if (e->offset_differs) {
        sep(b);
        put(b, "storage offset %" PRId64 " vs %" PRId64, ma->offset, mb->offset);
    }
    if (e->device_differs) {
        sep(b);
        put(b, "device %s vs %s", dev(ma->device), dev(mb->device));
    }
    if (e->how == TC_DIFF_NOT_COMPARED && e->why_not && !e->shape_differs) {
        sep(b);
        put(b, "not compared: %s", e->why_not);
    }
    tc_cmp_res tmp;
    const tc_cmp_res *r = tc_diff_res(e, &tmp);
    switch (e->how) {
    case TC_DIFF_VALUES: {
        bool numeric = tc_cmp_class_of(ma->dtype) != TC_CMP_RAW;
        sep(b);
        if (r->mismatched)
            put(b, "%" PRIu64 " of %" PRIu64 " elements differ", r->mismatched, r->n);
        else if (e->bitwise)
            put(b, "equal, bit for bit");
        else if (!r->changed)
            put(b, "equal values");
        else
            put(b, "equal within tolerance, %" PRIu64 " of %" PRIu64 " elements not identical", r->changed, r->n);
        if (numeric && r->changed) {
            put(b, "; max abs diff ");
            num(b, "%.6g", r->max_abs);
            if (r->max_abs_at != TC_CMP_NONE) {
                put(b, " at ");
                index_text(b, ma, r->max_abs_at);
            }
            put(b, "; max rel diff ");
            num(b, "%.6g", r->max_rel);
            if (r->max_rel_at != TC_CMP_NONE) {
                put(b, " at ");
                index_text(b, ma, r->max_rel_at);
            }
        }
        if (r->first != TC_CMP_NONE) {
            put(b, "; first at ");
            index_text(b, ma, r->first);
            put(b, ": ");
            value(b, &r->first_a, ma->dtype);
            put(b, " vs ");
            value(b, &r->first_b, mb->dtype);
        }
        if (r->nan_a || r->nan_b)
            put(b, "; NaN %" PRIu64 " vs %" PRIu64, r->nan_a, r->nan_b);
        if (r->inf_a || r->inf_b)
            put(b, "; inf %" PRIu64 " vs %" PRIu64, r->inf_a, r->inf_b);
        if (stats) {
            put(b, "; cosine ");
            if (isnan(e->cosine))
                put(b, "undefined");
            else
                put(b, "%.9f", e->cosine);
        }
        break;
    }
    case TC_DIFF_SHA256: sep(b); put(b, e->equal ? "sha256 matches" : "sha256 differs"); break;
    case TC_DIFF_METADATA: sep(b); put(b, "no sha256 to compare (manifest made without --hash): metadata only"); break;
    case TC_DIFF_SAME_FILE: sep(b); put(b, "same file"); break;
    case TC_DIFF_NO_DATA: sep(b); put(b, "no data on either side"); break;
    default: break;
    }
}

/* An equal entry is listed when something about it is worth saying, or when asked. */
static bool noteworthy(const tc_diff_entry *e, bool all)
{
    if (all || !e->equal)
        return true;
    tc_cmp_res tmp;
    const tc_cmp_res *r = tc_diff_res(e, &tmp);
    return e->dtype_differs || e->stride_differs || e->offset_differs || e->device_differs ||
           e->how == TC_DIFF_METADATA ||
           (e->how == TC_DIFF_VALUES && (!e->bitwise || r->nan_a || r->nan_b || r->inf_a || r->inf_b));
}

/* An equal entry worth a line only for its saved device (to-cpu's output against its input). */
static bool device_only(const tc_diff_entry *e)
{
    tc_diff_entry t = *e;
    t.device_differs = false;
    return e->equal && e->device_differs && !noteworthy(&t, false);
}

/* The first dotted component ("module.") every name of a side shares, into out; false when none. */
static bool shared_first(const tc_diff_report *r, int side, char *out, size_t n)
{
    size_t len = 0;
    bool any = false;
    for (size_t i = 0; i < r->n; i++) {
        const tc_diff_entry *e = &r->e[i];
        if ((side ? e->ib : e->ia) < 0)
            continue;
        if (!any) {
            const char *dot = strchr(e->name, '.');
            if (!dot || (size_t)(dot - e->name) + 1 >= n)
                return false;
            len = (size_t)(dot - e->name) + 1;
            memcpy(out, e->name, len);
            out[len] = 0;
            any = true;
        } else if (strncmp(e->name, out, len) || !e->name[len]) {
            return false;
        }
    }
    return any;
}

/* No name on both sides, but one side's names all start with a component the other's lack:
 * say how to match them, as extract does for a --from that names nothing. */
static void prefix_hint(const tc_diff_report *r, bool stripped)
{
    if (stripped || tc_verbosity < 1 || !r->nonly_a || !r->nonly_b || r->ncompared)
        return;
    char pa[256], pb[256];
    bool ha = shared_first(r, 0, pa, sizeof pa), hb = shared_first(r, 1, pb, sizeof pb);
    if (ha && hb && !strcmp(pa, pb))
        return;
    if (ha || hb)
        fprintf(stderr, "tensorctl: note: no name is in both; every name of %s starts with '%s': --strip-prefix "
                "matches them without it\n", ha ? "A" : "B", TC_ESC(ha ? pa : pb));
}

/* ---- text ------------------------------------------------------------------------------------- */

static void side_line(const char *mark, const tc_diff_side *s)
{
    char x[1024];
    printf("%s %s (%s, %zu tensors", mark, tc_esc(s->path, x, sizeof x), tc_diff_format(s), s->ntensors);
    if (s->prefix && *s->prefix)
        printf(", prefix '%s' stripped", tc_esc(s->prefix, x, sizeof x));
    printf(")\n");
}

static void print_text(const tc_diff_report *r, bool all, bool stats)
{
    char x[1024];
    size_t ndev = 0;
    char dev_a[64] = "", dev_b[64] = "";
    side_line("---", &r->a);
    side_line("+++", &r->b);
    if (r->same_file)
        printf("same file: every tensor equal, unread\n");
    for (size_t i = 0; i < r->n; i++) {
        const tc_diff_entry *e = &r->e[i];
        tc_diff_meta ma, mb;
        bool in_a = tc_diff_meta_of(r, e, 0, &ma), in_b = tc_diff_meta_of(r, e, 1, &mb);
        if (!in_a || !in_b) {
            const tc_diff_meta *m = in_a ? &ma : &mb;
            buf b;
            buf_init(&b);
            put(&b, "%s ", tc_dtype_name(m->dtype));
            dims(&b, m->shape, m->ndim);
            printf("%s %s: %s\n", in_a ? "-" : "+", tc_esc(e->name, x, sizeof x), b.s);
            continue;
        }
        if (!e->done || !noteworthy(e, all || stats))
            continue;
        if (!all && !stats && device_only(e)) { /* one line for them all, below */
            if (!ndev) {
                snprintf(dev_a, sizeof dev_a, "%s", dev(ma.device));
                snprintf(dev_b, sizeof dev_b, "%s", dev(mb.device));
            }
            if (!strcmp(dev_a, dev(ma.device)) && !strcmp(dev_b, dev(mb.device))) {
                ndev++;
                continue;
            }
        }
        buf b;
        buf_init(&b);
        details(&b, e, &ma, &mb, stats);
        char y[8192];
        printf("%s %s: %s\n", e->equal ? "=" : "!", tc_esc(e->name, x, sizeof x), tc_esc(b.s, y, sizeof y));
    }
    if (ndev)
        printf("= %zu tensor%s equal in value, saved on %s in A and %s in B (-v lists them)\n", ndev, tc_s(ndev),
               TC_ESC(dev_a), TC_ESC(dev_b));
    if (r->equal)
        printf("equal: %zu tensors, %zu bit for bit\n", r->nequal, r->nbitwise);
    else
        printf("different: %zu differ, %zu only in A, %zu only in B; %zu equal, %zu bit for bit%s\n", r->ndiffer,
               r->nonly_a, r->nonly_b, r->nequal, r->nbitwise, r->partial ? " (stopped at the first difference)" : "");
}

/* ---- JSON ------------------------------------------------------------------------------------- */

/* A float as a JSON number with the fewest digits that read back exactly (cJSON may round
 * the last digit), or "inf", "-inf", "nan" (JSON has no such numbers). */
static cJSON *jnum(double x)
{
    if (isnan(x))
        return cJSON_CreateString("nan");
    if (isinf(x))
        return cJSON_CreateString(x < 0 ? "-inf" : "inf");
    char t[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(t, sizeof t, "%.*g", digits, x);
        if (strtod(t, NULL) == x)
            break;
    }
    return cJSON_CreateRaw(t);
}


static cJSON *jdims(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, tc_json_int(v[i]));
    return a;
}

static cJSON *jindex(const tc_diff_meta *m, uint64_t flat)
{
    if (flat == TC_CMP_NONE)
        return cJSON_CreateNull();
    int64_t idx[TC_MAX_DIMS];
    unravel(m, flat, idx);
    return jdims(idx, m->ndim);
}

static cJSON *jvalue(const tc_cmp_val *v, tc_dtype t)
{
    switch (v->kind) {
    case 'i': return tc_json_int(v->i);
    case 'u': return tc_json_uint(v->u);
    case 'x': {
        char h[24];
        snprintf(h, sizeof h, "0x%0*" PRIx64, (int)(2 * (tc_dtype_size(t) < 8 ? tc_dtype_size(t) : 8)), v->u);
        return cJSON_CreateString(h);
    }
    case 'c': {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, jnum(v->re));
        cJSON_AddItemToArray(a, jnum(v->im));
        return a;
    }
    default: return jnum(v->re);
    }
}

/* [a, b] of the two sides' views, null where a side lacks one. */
typedef cJSON *(*jpart_fn)(const tc_diff_meta *m);
static cJSON *jpair(const tc_diff_meta *ma, bool in_a, const tc_diff_meta *mb, bool in_b, jpart_fn f)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, in_a ? f(ma) : cJSON_CreateNull());
    cJSON_AddItemToArray(a, in_b ? f(mb) : cJSON_CreateNull());
    return a;
}
static cJSON *j_name(const tc_diff_meta *m) { return cJSON_CreateString(m->name); }
static cJSON *j_dtype(const tc_diff_meta *m) { return cJSON_CreateString(tc_dtype_name(m->dtype)); }
static cJSON *j_shape(const tc_diff_meta *m) { return jdims(m->shape, m->ndim); }
static cJSON *j_stride(const tc_diff_meta *m) { return m->has_layout ? jdims(m->stride, m->ndim) : cJSON_CreateNull(); }
static cJSON *j_offset(const tc_diff_meta *m) { return m->has_layout ? tc_json_int(m->offset) : cJSON_CreateNull(); }
static cJSON *j_device(const tc_diff_meta *m) { return m->device ? cJSON_CreateString(m->device) : cJSON_CreateNull(); }

static const char *how_name(tc_diff_how h)
{
    static const char *const names[] = {NULL, "values", "sha256", "metadata", "same_file", "no_data"};
    return names[h];
}

static cJSON *jentry(const tc_diff_report *r, const tc_diff_entry *e, bool stats)
{
    tc_diff_meta ma, mb;
    bool in_a = tc_diff_meta_of(r, e, 0, &ma), in_b = tc_diff_meta_of(r, e, 1, &mb);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", e->name);
    cJSON_AddStringToObject(o, "status", !in_b ? "only_in_a" : !in_a ? "only_in_b" : !e->done ? "not_compared"
                                         : e->equal ? "equal" : "different");
    cJSON_AddItemToObject(o, "names", jpair(&ma, in_a, &mb, in_b, j_name));
    cJSON_AddItemToObject(o, "dtype", jpair(&ma, in_a, &mb, in_b, j_dtype));
    cJSON_AddItemToObject(o, "shape", jpair(&ma, in_a, &mb, in_b, j_shape));
    cJSON_AddItemToObject(o, "stride", jpair(&ma, in_a, &mb, in_b, j_stride));
    cJSON_AddItemToObject(o, "storage_offset", jpair(&ma, in_a, &mb, in_b, j_offset));
    cJSON_AddItemToObject(o, "device", jpair(&ma, in_a, &mb, in_b, j_device));
    if (!in_a || !in_b)
        return o;
    cJSON *df = cJSON_AddArrayToObject(o, "differs");
    static const char *const what[] = {"dtype", "shape", "stride", "storage_offset", "device"};
    bool flag[] = {e->dtype_differs, e->shape_differs, e->stride_differs, e->offset_differs, e->device_differs};
    for (size_t k = 0; k < sizeof what / sizeof what[0]; k++)
        if (flag[k])
            cJSON_AddItemToArray(df, cJSON_CreateString(what[k]));
    if (e->how == TC_DIFF_NOT_COMPARED) {
        cJSON_AddNullToObject(o, "compared");
        if (e->why_not)
            cJSON_AddStringToObject(o, "why_not", e->why_not);
        return o;
    }
    cJSON_AddStringToObject(o, "compared", how_name(e->how));
    cJSON_AddBoolToObject(o, "bit_for_bit", e->bitwise);
    if (e->how == TC_DIFF_SHA256) {
        cJSON *h = cJSON_AddArrayToObject(o, "sha256");
        cJSON_AddItemToArray(h, cJSON_CreateString(e->sha->a));
        cJSON_AddItemToArray(h, cJSON_CreateString(e->sha->b));
    }
    if (e->how != TC_DIFF_VALUES)
        return o;
    tc_cmp_res tmp;
    const tc_cmp_res *v = tc_diff_res(e, &tmp);
    bool numeric = tc_cmp_class_of(ma.dtype) != TC_CMP_RAW;
    cJSON_AddItemToObject(o, "elements", tc_json_uint(v->n));
    cJSON_AddItemToObject(o, "changed", tc_json_uint(v->changed));
    cJSON_AddItemToObject(o, "mismatched", tc_json_uint(v->mismatched));
    cJSON_AddItemToObject(o, "max_abs_diff", numeric ? jnum(v->max_abs) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "max_abs_diff_at", jindex(&ma, v->max_abs_at));
    cJSON_AddItemToObject(o, "max_rel_diff", numeric ? jnum(v->max_rel) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "max_rel_diff_at", jindex(&ma, v->max_rel_at));
    if (v->first != TC_CMP_NONE) {
        cJSON *f = cJSON_AddObjectToObject(o, "first_mismatch");
        cJSON_AddItemToObject(f, "index", jindex(&ma, v->first));
        cJSON_AddItemToObject(f, "a", jvalue(&v->first_a, ma.dtype));
        cJSON_AddItemToObject(f, "b", jvalue(&v->first_b, mb.dtype));
    } else {
        cJSON_AddNullToObject(o, "first_mismatch");
    }
    cJSON *nan = cJSON_AddArrayToObject(o, "nan"), *inf = cJSON_AddArrayToObject(o, "inf");
    cJSON_AddItemToArray(nan, tc_json_uint(v->nan_a));
    cJSON_AddItemToArray(nan, tc_json_uint(v->nan_b));
    cJSON_AddItemToArray(inf, tc_json_uint(v->inf_a));
    cJSON_AddItemToArray(inf, tc_json_uint(v->inf_b));
    if (stats)
        cJSON_AddItemToObject(o, "cosine", isnan(e->cosine) ? cJSON_CreateNull() : jnum(e->cosine));
    return o;
}

static cJSON *jside(const tc_diff_side *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", s->path);
    cJSON_AddStringToObject(o, "format", tc_diff_format(s));
    cJSON_AddItemToObject(o, "tensors", tc_json_uint(s->ntensors));
    cJSON_AddStringToObject(o, "prefix_stripped", s->prefix ? s->prefix : "");
    cJSON_AddBoolToObject(o, "unsafe", s->unsafe);
    return o;
}

static void print_json(const tc_diff_report *r, const tc_diff_opts *o)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "a", jside(&r->a));
    cJSON_AddItemToObject(j, "b", jside(&r->b));
    cJSON_AddBoolToObject(j, "same_file", r->same_file);
    cJSON *rule = cJSON_AddObjectToObject(j, "rule");
    cJSON_AddItemToObject(rule, "atol", jnum(o->rule.atol));
    cJSON_AddItemToObject(rule, "rtol", jnum(o->rule.rtol));
    cJSON_AddBoolToObject(rule, "equal_nan", o->rule.equal_nan);
    cJSON_AddBoolToObject(rule, "strict", o->strict);
    cJSON_AddBoolToObject(j, "equal", r->equal);
    cJSON *sm = cJSON_AddObjectToObject(j, "summary");
    cJSON_AddItemToObject(sm, "compared", tc_json_uint(r->ncompared));
    cJSON_AddItemToObject(sm, "equal", tc_json_uint(r->nequal));
    cJSON_AddItemToObject(sm, "bit_for_bit", tc_json_uint(r->nbitwise));
    cJSON_AddItemToObject(sm, "different", tc_json_uint(r->ndiffer));
    cJSON_AddItemToObject(sm, "only_in_a", tc_json_uint(r->nonly_a));
    cJSON_AddItemToObject(sm, "only_in_b", tc_json_uint(r->nonly_b));
    cJSON *ts = cJSON_AddArrayToObject(j, "tensors");
    for (size_t i = 0; i < r->n; i++)
        cJSON_AddItemToArray(ts, jentry(r, &r->e[i], o->rule.sums));
    cJSON_AddNumberToObject(j, "exit_status", r->equal ? TC_EXIT_OK : TC_EXIT_FAIL);
    tc_put_json_line(j);
}

/* A diff that could not be made, as one JSON line: both sides as given, the error line's message. */
static void print_json_failure(const tc_args *a, int exit_status)
{
    cJSON *j = cJSON_CreateObject();
    for (int s = 0; s < 2; s++) { /* {"path": ...} as a report's sides, so .a.path reads both */
        cJSON *side = cJSON_AddObjectToObject(j, s ? "b" : "a");
        if (s < a->npos)
            cJSON_AddStringToObject(side, "path", a->pos[s]);
        else
            cJSON_AddNullToObject(side, "path");
    }
    cJSON_AddStringToObject(j, "error", tc_last_error()[0] ? tc_last_error() : "failed");
    cJSON_AddNumberToObject(j, "exit_status", exit_status);
    tc_put_json_line(j);
}

/* ---- the command ------------------------------------------------------------------------------ */

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    tc_last_error_clear();
    int ex = TC_EXIT_USAGE;
    char *in[2] = {NULL, NULL};
    tc_diff_report rep = {0};
    tc_diff_opts o = {.rule = {.equal_nan = a.set[OPT_EQUAL_NAN], .sums = a.set[OPT_STATS]},
                      .strict = a.set[OPT_STRICT], .strip = a.set[OPT_STRIP_PREFIX],
                      .strip_prefix = a.val[OPT_STRIP_PREFIX], .quick = a.set[OPT_QUIET]};
    if (a.npos != 2) {
        tc_err(NULL, "diff: expected A and B, got %d argument%s (see 'tensorctl diff --help')", a.npos,
               tc_s((size_t)a.npos));
        tc_hint_bare_value(&a);
        goto done;
    }
    if (a.set[OPT_QUIET] && (a.set[OPT_JSON] || a.set[OPT_VERBOSE] || a.set[OPT_STATS])) {
        tc_err(NULL, "diff: -q prints nothing; it cannot go with --json, -v or --stats");
        goto done;
    }
    if (o.strip && o.strip_prefix && !*o.strip_prefix) {
        tc_err(NULL, "diff: --strip-prefix= needs a prefix (or no '=': each side's common prefix)");
        goto done;
    }
    o.rule.atol = a.real[OPT_ATOL];
    o.rule.rtol = a.real[OPT_RTOL];
    tc_max_expand_from_args(&a, &o.max_expand);
    o.threads = a.set[OPT_THREADS] ? (unsigned)a.num[OPT_THREADS] : 0;
    tc_limits_from_args(&a, &o.lim);
    o.safe_globals = a.globals; /* checked by tc_parse (TC_KIND_GLOBALS) */
    o.nsafe = a.nglobals;
    tc_progress prog;
    tc_progress_init(&prog, "comparing", true);
    o.progress = tc_progress_cb;
    o.progress_ctx = &prog;
    for (int s = 0; s < 2; s++)
        if ((ex = tc_input_path(a.pos[s], &in[s])) != 0) {
            if (ex == TC_EXIT_FAIL)
                ex = TC_EXIT_DIFF_FAIL;
            goto done;
        }
    ex = TC_EXIT_USAGE;
    tc_diag d = TC_DIAG_INIT;
    int rc = tc_diff_files(&rep, in[0], in[1], &o, &d);
    tc_progress_end(&prog);
    if (rc) {
        tc_err_diag(&d);
        ex = tc_exit_for(rc);
        if (ex == TC_EXIT_FAIL)
            ex = TC_EXIT_DIFF_FAIL;
        goto done;
    }
    for (int s = 0; s < 2; s++) {
        const tc_diff_side *sd = s ? &rep.b : &rep.a;
        if (sd->unsafe && tc_verbosity > 0)
            fprintf(stderr, "tensorctl: note: %s: not safe to load: %s; diff only read it, nothing was run\n",
                    TC_ESC(sd->path), TC_ESC(sd->why_unsafe));
    }
    if (a.set[OPT_JSON])
        print_json(&rep, &o);
    else if (tc_verbosity > 0)
        print_text(&rep, a.set[OPT_VERBOSE], o.rule.sums);
    prefix_hint(&rep, a.set[OPT_STRIP_PREFIX]);
    if (fflush(stdout) || ferror(stdout)) {
        tc_err(NULL, "diff: cannot write the report: %s", strerror(errno));
        ex = TC_EXIT_DIFF_FAIL;
        goto done;
    }
    ex = rep.equal ? TC_EXIT_OK : TC_EXIT_FAIL;
done:
    if (ex > TC_EXIT_FAIL && a.set[OPT_JSON] && !a.set[OPT_QUIET])
        print_json_failure(&a, ex);
    tc_diff_report_free(&rep);
    free(in[0]);
    free(in[1]);
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_diff = {
    "diff", "diff [options] A B",
    "Compare two checkpoints tensor by tensor, by name: any two files tensorctl reads (.pt/.bin/.pth/.ckpt,\n"
    ".safetensors, sharded *.index.json sets, in any mix), or a checkpoint and a manifest written by\n"
    "'tensorctl inspect --json --hash'. Reports names on one side only, dtype/shape/stride/device\n"
    "differences and, for equal shapes, how many elements differ and by how much. Exit status: 0 equal,\n"
    "1 different, 2 usage, 3 bad input, 4 a file that is not a checkpoint and would run code, 5 failure.",
    opts, run};
