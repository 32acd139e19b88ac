#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "format.h"
#include "gguf.h"
#include "hash.h"
#include "inspect_weights.h"
#include "safety.h"

static const tc_opt o_json = {.id = OPT_JSON, .lng = "json", .text = &tc_text_inspect_json};
static const tc_opt o_hash = {.id = OPT_HASH, .lng = "hash", .text = &tc_text_inspect_hash};
static const tc_opt o_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_inspect_quiet};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_inspect_verbose};
static const tc_opt o_verify_crc = {.id = OPT_VERIFY_CRC, .lng = "verify-crc", .text = &tc_text_inspect_verify_crc};
static const tc_opt *const opts[] = {&tc_opt_help,         &o_json,  &o_hash, &o_verify_crc, &tc_opt_max_expand,  &o_quiet,
                                     &tc_opt_safe_globals, &o_verbose, &tc_opt_names, TC_LIMIT_OPTS, NULL};


/* One line per top-level entry that is not all tensors; for an entry holding
 * many tensors (a state_dict, an optimizer), its count and then its entries
 * without tensors (param_groups, hyper-parameters), one level down. */
static void contents(const tc_ckpt *c, cJSON *json)
{
    bool header = false;
    size_t n = tc_ckpt_nentries(c);
    for (size_t i = 0; i < n; i++) {
        const tc_entry *e = tc_ckpt_entry(c, i);
        if (e->depth != 1 || e->is_tensor)
            continue;
        char text[64];
        bool many = e->ntensors > 8 || (e->ntensors && e->has_items);
        if (many)
            snprintf(text, sizeof text, "<%zu tensors>", e->ntensors);
        if (json) {
            cJSON_AddStringToObject(json, e->name, many ? text : e->text);
        } else {
            if (!header)
                printf("\ncontents:\n");
            header = true;
            char x[512], y[512];
            printf("  %-24s %s\n", tc_esc(e->name, x, sizeof x), many ? text : tc_esc(e->text, y, sizeof y));
        }
        for (size_t j = i + 1; many && j < n && tc_ckpt_entry(c, j)->depth == 2; j++) {
            const tc_entry *s2 = tc_ckpt_entry(c, j);
            if (s2->is_tensor || s2->ntensors)
                continue;
            if (json) {
                cJSON_AddStringToObject(json, s2->name, s2->text);
            } else {
                char x[512], y[512];
                printf("  %-24s %s\n", tc_esc(s2->name, x, sizeof x), tc_esc(s2->text, y, sizeof y));
            }
        }
    }
}

/* ---- tables ---------------------------------------------------------------- */

static const char *device_of(const tc_ckpt *c, const tc_tensor *t) { return tc_tensor_device(c, t); }

/* The shard holding a tensor of a sharded set, or NULL. */
static const char *shard_of(const tc_ckpt *c, const tc_tensor *t)
{
    long sh = t->storage >= 0 ? tc_ckpt_storage(c, (size_t)t->storage)->shard : -1;
    return sh >= 0 ? tc_ckpt_shard(c, (size_t)sh) : NULL;
}

typedef struct agg {
    char key[64];
    uint64_t bytes;
    size_t count;
} agg;

static void agg_add(agg *a, size_t *n, size_t cap, const char *key, uint64_t bytes)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(a[i].key, key)) {
            a[i].bytes += bytes;
            a[i].count++;
            return;
        }
    if (*n < cap) {
        snprintf(a[*n].key, sizeof a[*n].key, "%s", key);
        a[*n].bytes = bytes;
        a[*n].count = 1;
        (*n)++;
    }
}


/* The first tensor on each storage, to name what a tensor shares its storage with. */
static long *first_on_storage(const tc_ckpt *c)
{
    size_t ns = tc_ckpt_nstorages(c);
    long *f = malloc((ns + 1) * sizeof *f);
    for (size_t i = 0; f && i < ns; i++)
        f[i] = -1;
    for (size_t k = 0; f && k < tc_ckpt_ntensors(c); k++) {
        long s = tc_ckpt_tensor(c, k)->storage;
        if (s >= 0 && f[s] < 0)
            f[s] = (long)k;
    }
    return f;
}

static bool want_hash;
static uint64_t max_expand; /* for --hash: 0, the default */
static int hash_failed; /* exit status of the first failed hash, 0 when none */

/* SHA-256 of tensor i, or NULL after printing why not. */
static const char *tensor_hash(const tc_ckpt *c, size_t i, char hex[65])
{
    tc_diag d = TC_DIAG_INIT;
    if (tc_ckpt_tensor(c, i)->storage < 0)
        return NULL;
    if (tc_tensor_sha256(c, tc_ckpt_tensor(c, i), max_expand, hex, &d)) {
        tc_diag_subject(&d, tc_ckpt_path(c));
        int ex = tc_err_diag(&d);
        if (!hash_failed)
            hash_failed = ex;
        return NULL;
    }
    return hex;
}

/* A GGUF tensor is shown with its ggml type and the bytes its file holds. */
static const char *type_shown(const tc_ckpt *c, size_t i, uint64_t *bytes)
{
    tc_gguf_tensor g;
    const tc_tensor *t = tc_ckpt_tensor(c, i);
    *bytes = t->nbytes;
    if (!tc_gguf_tensor_info(c, i, &g))
        return tc_dtype_name(t->dtype);
    *bytes = g.n_bytes;
    return tc_qtype_name(g.type);
}

/* The metadata of a GGUF file, one line each. */
static void gguf_meta_text(const tc_ckpt *c)
{
    size_t n = tc_gguf_nkv(c, 0);
    if (n)
        printf("\nmetadata:\n");
    for (size_t i = 0; i < n; i++) {
        tc_buf b = TC_BUF_INIT(600);
        tc_diag d = TC_DIAG_INIT;
        char e1[512];
        const char *key = tc_gguf_kv_key(c, 0, i, NULL, NULL, NULL);
        if (tc_gguf_kv_text(c, 0, i, &b, &d)) {
            tc_buf_free(&b);
            tc_diag_subject(&d, tc_ckpt_path(c));
            tc_err_diag(&d);
            continue;
        }
        printf("  %-40s %s\n", tc_esc(key, e1, sizeof e1), tc_buf_str(&b));
        tc_buf_free(&b);
    }
}

/* Terminal columns of UTF-8 text (one per code point; control bytes are escaped before this). */
static size_t columns(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* s, then spaces to w columns. */
static void put_padded(const char *s, size_t w)
{
    size_t n = columns(s);
    fputs(s, stdout);
    printf("%*s", (int)(n < w ? w - n : 0), "");
}

/* The one sentence on weights_only=True of each torch, " (...)", or nothing
 * when the format is not torch.load's: which torch loads the file so, and
 * what the other refuses. admitted: it loads only once add_safe_globals
 * admits the --safe-globals (torch 2.x has it, 1.13 does not). */
static void weights_only_text(const tc_ckpt *c, bool admitted, tc_buf *b)
{
    bool loads[TC_NTORCH], known = false;
    const char *why[TC_NTORCH] = {NULL, NULL};
    for (int t = 0; t < TC_NTORCH; t++)
        known |= tc_ckpt_weights_only(c, t, &loads[t], &why[t]);
    if (!known)
        return;
    const char *cond = admitted ? " once add_safe_globals admits the --safe-globals" : "";
    if (loads[TC_TORCH_1_13] && loads[TC_TORCH_2])
        tc_buf_printf(b, " (loads with weights_only=True in torch 1.13 and 2.x%s)", cond);
    else if (loads[TC_TORCH_1_13] || loads[TC_TORCH_2]) {
        int y = loads[TC_TORCH_1_13] ? TC_TORCH_1_13 : TC_TORCH_2, n = 1 - y;
        tc_buf_printf(b, " (loads with weights_only=True in torch %s%s; torch %s's weights_only loader refuses it: %s)",
                      tc_torch_names[y], y == TC_TORCH_2 ? cond : "", tc_torch_names[n], why[n]);
    } else if (!strcmp(why[0], why[1]))
        tc_buf_printf(b, " (weights_only=True refuses it in torch 1.13 and 2.x: %s)", why[0]);
    else
        tc_buf_printf(b, " (weights_only=True refuses it: torch 1.13: %s; torch 2.x: %s)", why[0], why[1]);
}

/* Red for UNSAFE and DANGEROUS, on a terminal only and never under NO_COLOR (no-color.org). */
static bool colour(void)
{
    const char *nc = getenv("NO_COLOR");
    return isatty(1) && !(nc && *nc);
}
#define RED(s) (colour() ? "\033[1;31m" s "\033[0m" : s)

static void print_text(const tc_ckpt *c)
{
    char e1[1024], e2[1024];
    size_t nt = tc_ckpt_ntensors(c), ns = tc_ckpt_nstorages(c), ngl = tc_ckpt_nglobals(c);
    long *first = first_on_storage(c);
    printf("%s: %s", tc_esc(tc_ckpt_path(c), e1, sizeof e1), tc_ckpt_format(c));
    for (size_t i = 0; i < tc_ckpt_nfacts(c); i++)
        printf(", %s %s", tc_esc(tc_ckpt_fact(c, i)->key, e1, sizeof e1), tc_esc(tc_ckpt_fact(c, i)->value, e2, sizeof e2));
    printf("\n\n");
    size_t w = 4;
    for (size_t i = 0; i < nt && w < 60; i++)
        if (columns(tc_esc(tc_ckpt_tensor(c, i)->name, e1, sizeof e1)) > w)
            w = columns(e1);
    if (w > 60)
        w = 60;
    put_padded("name", w);
    printf("  %-9s %-18s %-8s %10s  notes\n", "dtype", "shape", "device", "bytes");
    agg dev[64], dt[64];
    size_t ndev = 0, ndt = 0, nparam = 0;
    uint64_t pnumel = 0;
    for (size_t i = 0; i < nt; i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        char shape[64], notes[512];
        tc_buf sb = tc_buf_fixed(shape, sizeof shape), nb = tc_buf_fixed(notes, sizeof notes);
        tc_buf_putc(&sb, '[');
        for (int k = 0; k < t->ndim; k++)
            tc_buf_printf(&sb, "%s%" PRId64, k ? ", " : "", t->shape[k]);
        tc_buf_putc(&sb, ']');
        if (t->parameter)
            tc_buf_puts(&nb, "param ");
        if (t->frozen)
            tc_buf_puts(&nb, "frozen ");
        long sw = first && t->storage >= 0 && tc_ckpt_storage(c, (size_t)t->storage)->ntensors > 1
                      ? first[t->storage] : -1;
        if (t->alias_of >= 0 || (sw >= 0 && sw < (long)i)) {
            tc_buf_puts(&nb, t->alias_of >= 0 ? "same tensor as " : "shares storage with ");
            tc_buf_escs(&nb, tc_ckpt_tensor(c, (size_t)(t->alias_of >= 0 ? t->alias_of : sw))->name);
            tc_buf_putc(&nb, ' ');
        }
        if (t->kind == TC_TENSOR_QUANT)
            tc_buf_puts(&nb, "quantized ");
        if (t->kind == TC_TENSOR_META)
            tc_buf_puts(&nb, "no data ");
        if (t->kind == TC_TENSOR_OTHER)
            tc_buf_puts(&nb, "tensor subclass (not rewritten) ");
        if (shard_of(c, t)) {
            tc_buf_puts(&nb, "in ");
            tc_buf_escs(&nb, shard_of(c, t));
            tc_buf_putc(&nb, ' ');
        }
        size_t nch = 0;
        if (t->storage >= 0 && tc_ckpt_chunks(c, (size_t)t->storage, &nch))
            tc_buf_printf(&nb, "%zu chunk%s ", nch, nch == 1 ? "" : "s");
        char hex[65];
        const char *h = want_hash ? tensor_hash(c, i, hex) : NULL;
        if (h)
            tc_buf_puts(&nb, h);
        size_t nl = strlen(notes); /* no trailing spaces on a row */
        while (nl && notes[nl - 1] == ' ')
            notes[--nl] = 0;
        put_padded(tc_esc(t->name, e1, sizeof e1), w);
        uint64_t bytes;
        const char *type = type_shown(c, i, &bytes);
        printf("  %-9s %-18s %-8s %10" PRIu64 "%s%s\n", type, shape, tc_esc(device_of(c, t), e2, sizeof e2), bytes,
               nl ? "  " : "", notes);
        if (t->alias_of < 0) {
            if (t->parameter) {
                nparam++;
                pnumel += t->numel;
            }
        }
    }
    free(first);
    uint64_t total = 0;
    size_t nparts = 0;
    for (size_t i = 0; i < ns; i++) {
        const tc_storage *s = tc_ckpt_storage(c, i);
        if (tc_ckpt_chunk_of(c, i) >= 0) { /* a chunk's bytes: counted in the tensor it builds */
            nparts++;
            continue;
        }
        uint64_t bytes = s->nbytes;
        const char *type = tc_dtype_name(s->untyped ? TC_DT_U8 : s->dtype);
        if (tc_gguf_nfiles(c)) /* one tensor per storage */
            type = type_shown(c, i, &bytes);
        agg_add(dev, &ndev, 64, s->location, bytes);
        agg_add(dt, &ndt, 64, type, bytes);
        total += bytes;
    }
    char h[32];
    tc_human_bytes(total, h, sizeof h);
    printf("\n%zu tensor%s on %zu storage%s, %s of tensor data", nt, nt == 1 ? "" : "s", ns - nparts,
           ns - nparts == 1 ? "" : "s", h);
    if (nparts)
        printf(" in %zu chunk%s", nparts, nparts == 1 ? "" : "s");
    if (nparam)
        printf("; %zu nn.Parameter object%s with %" PRIu64 " element%s", nparam, nparam == 1 ? "" : "s", pnumel,
               pnumel == 1 ? "" : "s");
    printf("\nbytes per device:");
    for (size_t i = 0; i < ndev; i++) {
        tc_human_bytes(dev[i].bytes, h, sizeof h);
        printf("  %s %s (%zu storage%s)", tc_esc(dev[i].key, e1, sizeof e1), h, dev[i].count,
               dev[i].count == 1 ? "" : "s");
    }
    printf("\nbytes per dtype:");
    for (size_t i = 0; i < ndt; i++) {
        tc_human_bytes(dt[i].bytes, h, sizeof h);
        printf("  %s %s", dt[i].key, h);
    }
    printf("\n");
    gguf_meta_text(c);
    if (tc_ckpt_nmeta(c)) {
        printf("\nmetadata:\n");
        for (size_t i = 0; i < tc_ckpt_nmeta(c); i++)
            printf("  %-24s %s\n", tc_esc(tc_ckpt_meta(c, i)->key, e1, sizeof e1),
                   tc_esc(tc_ckpt_meta(c, i)->value, e2, sizeof e2));
    }
    if (tc_ckpt_has_objects(c) || tc_ckpt_nobjects(c) || tc_ckpt_nentries(c))
        contents(c, NULL);
    tc_inspect_weights_text(c);
    bool cuda = false;
    for (size_t i = 0; i < ndev; i++)
        cuda |= !strncmp(dev[i].key, "cuda", 4);
    if (ndev > 1)
        printf("\nwarning: storages are on %zu different devices; loading gives tensors on mixed devices "
               "(device-mismatch errors in the model). 'tensorctl to-cpu' or 'to-cuda' puts them on one.\n",
               ndev);
    if (cuda)
        printf("\nnote: CUDA-tagged storages: torch.load fails on a machine without CUDA (or with fewer GPUs) "
               "unless given map_location; 'tensorctl to-cpu' writes a file that loads anywhere.\n");
    size_t nunreached = 0;
    uint64_t unreached_bytes = 0;
    for (size_t i = 0; i < tc_ckpt_nstorages(c); i++)
        if (tc_ckpt_storage(c, i)->unreached) {
            nunreached++;
            unreached_bytes += tc_ckpt_storage(c, i)->nbytes;
        }
    if (nunreached) {
        char h[32];
        tc_human_bytes(unreached_bytes, h, sizeof h);
        printf("\nnote: %zu storage%s (%s) that nothing in the file's object reaches: %s persistent id%s only in "
               "objects the pickle discards, so torch.load reads %s and drops %s; a rewrite leaves %s out.\n",
               nunreached, nunreached == 1 ? "" : "s", h, nunreached == 1 ? "its" : "their", nunreached == 1 ? " lies" : "s lie",
               nunreached == 1 ? "it" : "them", nunreached == 1 ? "it" : "them", nunreached == 1 ? "it" : "them");
    }
    for (size_t i = 0; i < tc_ckpt_nfacts(c); i++)
        if (!strcmp(tc_ckpt_fact(c, i)->key, "byteorder") && !strcmp(tc_ckpt_fact(c, i)->value, "big"))
            printf("\nnote: big-endian (byteorder record 'big'): recent torch (2.15 checked) swaps the numbers' "
                   "bytes as it loads, torch 1.13 does not and reads wrong values without an error; 'tensorctl "
                   "to-cpu' or 'convert' writes the file little-endian.\n");
    size_t nunsafe = 0, nreader = 0;
    const char *reader = NULL;
    for (size_t i = 0; i < ngl; i++) {
        nunsafe += !tc_ckpt_global(c, i)->allowed || tc_ckpt_global(c, i)->reader;
        if (tc_ckpt_global(c, i)->allowed && tc_ckpt_global(c, i)->reader) {
            nreader++;
            reader = tc_ckpt_global(c, i)->reader;
        }
    }
    if (tc_gguf_nfiles(c)) {
        printf(tc_ckpt_nhazards(c) ? "\nsafety:\n" : "\n");
    } else {
        printf("\nsafety: %zu global%s, %zu outside torch's weights_only allowlist", ngl, ngl == 1 ? "" : "s",
               nunsafe);
        if (nreader)
            printf(" (%zu of them %s, which the format's own reader imports)", nreader, reader);
        printf("\n");
    }
    for (size_t i = 0; i < ngl; i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        if (!g->allowed && g->dangerous)
            printf("  %s  %s: %s\n", RED("DANGEROUS"), tc_esc(g->name, e1, sizeof e1), g->why);
        else if (!g->allowed)
            printf("  %-10s %s\n", "unsafe", tc_esc(g->name, e1, sizeof e1));
        else if (g->admitted)
            printf("  %-10s %s (--safe-globals)\n", "admitted", tc_esc(g->name, e1, sizeof e1));
        else if (g->reader)
            printf("  %-10s %s (%s; torch's weights_only refuses it)\n", "reader", tc_esc(g->name, e1, sizeof e1),
                   g->reader);
        else if (tc_verbosity > 1)
            printf("  %-10s %s (weights_only of torch %s)\n", "ok", tc_esc(g->name, e1, sizeof e1), g->torch);
    }
    for (size_t i = 0; i < tc_ckpt_nhazards(c); i++)
        printf("  %-10s %s\n", "HAZARD", tc_esc(tc_ckpt_hazard(c, i), e1, sizeof e1));
    /* "verdict: FILE: ...", so that grep verdict over many files says which */
    printf("verdict: %s: ", tc_esc(tc_ckpt_path(c), e1, sizeof e1));
    if (tc_gguf_nfiles(c) && tc_ckpt_is_safe(c))
        printf("safe: GGUF holds no code, and ggml and gguf-py read this file alike\n");
    else if (tc_gguf_nfiles(c))
        printf("%s: ggml and gguf-py read it differently (above)\n", RED("UNSAFE"));
    else if (tc_ckpt_is_safe(c) && nreader)
        printf("safe for the format's own loader: it imports and calls nothing outside torch's weights_only "
               "allowlist but %s; torch.load(weights_only=True) refuses the files that name them\n", reader);
    else if (tc_ckpt_is_safe(c)) {
        tc_buf wo = TC_BUF_INIT(0);
        weights_only_text(c, nunsafe > 0, &wo);
        printf("safe: torch.load imports and calls nothing outside torch's weights_only allowlist%s\n",
               tc_esc(tc_buf_str(&wo), e1, sizeof e1));
        tc_buf_free(&wo);
    } else
        printf("%s: torch.load needs weights_only=False, which imports and calls what is listed above; "
               "tensorctl never runs it\n", RED("UNSAFE"));
}

static cJSON *int_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, tc_json_int(v[i]));
    return a;
}

/* The JSON document is written as it is made, one member (one tensor, one
 * storage) at a time: its memory is that of one member, not of the document. */

/* Print v unformatted and free it: into one kept buffer when it fits (a member per tensor), else
 * into one of its own. */
static void jput(cJSON *v)
{
    static char room[64 << 10];
    if (v && cJSON_PrintPreallocated(v, room, (int)sizeof room, false)) {
        tc_put_json(room);
    } else {
        char *s = v ? cJSON_PrintUnformatted(v) : NULL;
        tc_put_json(s ? s : "null");
        free(s);
    }
    cJSON_Delete(v);
}

/* Start the next member of an object (key) or item of an array (key NULL); *first: none
 * written yet. A document is one line: several files give JSON Lines. */
static void jnext(bool *first, const char *key)
{
    if (!*first)
        fputc(',', stdout);
    *first = false;
    if (key) {
        jput(cJSON_CreateString(key));
        fputc(':', stdout);
    }
}

/* A member whose key and text outlive the object (constant keys, the checkpoint's own text): neither is
 * copied, for a file of many tensors makes this object once per tensor. */
static void add_ref(cJSON *o, const char *key, const char *text)
{
    cJSON_AddItemToObjectCS(o, key, text ? cJSON_CreateStringReference(text) : cJSON_CreateNull());
}

static cJSON *tensor_json(const tc_ckpt *c, size_t i)
{
    const tc_tensor *t = tc_ckpt_tensor(c, i);
    cJSON *o = cJSON_CreateObject();
    add_ref(o, "name", t->name);
    add_ref(o, "dtype", tc_dtype_name(t->dtype));
    cJSON_AddItemToObjectCS(o, "shape", int_array(t->shape, t->ndim));
    cJSON_AddItemToObjectCS(o, "stride", int_array(t->stride, t->ndim));
    cJSON_AddItemToObjectCS(o, "storage_offset", tc_json_int(t->offset));
    add_ref(o, "device", device_of(c, t));
    add_ref(o, "storage", t->storage >= 0 ? tc_ckpt_storage(c, (size_t)t->storage)->key : NULL);
    cJSON_AddItemToObjectCS(o, "nbytes", tc_json_uint(t->nbytes));
    cJSON_AddItemToObjectCS(o, "parameter", cJSON_CreateBool(t->parameter));
    cJSON_AddItemToObjectCS(o, "requires_grad", cJSON_CreateBool(t->requires_grad));
    if (t->frozen)
        cJSON_AddItemToObjectCS(o, "frozen", cJSON_CreateTrue());
    static const char *const kinds[] = {"dense", "quantized", "meta", "other"};
    add_ref(o, "kind", kinds[t->kind]);
    if (t->alias_of >= 0)
        add_ref(o, "same_as", tc_ckpt_tensor(c, (size_t)t->alias_of)->name);
    if (shard_of(c, t))
        add_ref(o, "shard", shard_of(c, t));
    size_t nch = 0;
    if (t->storage >= 0 && tc_ckpt_chunks(c, (size_t)t->storage, &nch))
        cJSON_AddNumberToObject(o, "chunks", (double)nch);
    char hex[65];
    bool hashed = want_hash && tensor_hash(c, i, hex);
    if (hashed)
        cJSON_AddStringToObject(o, "sha256", hex);
    tc_gguf_tensor g;
    if (tc_gguf_tensor_info(c, i, &g)) { /* as the GGUF file lists it */
        cJSON *q = cJSON_AddObjectToObject(o, "gguf");
        cJSON_AddStringToObject(q, "ggml_type", tc_qtype_name(g.type));
        cJSON_AddNumberToObject(q, "ggml_type_id", tc_qtype_get(g.type)->ggml);
        cJSON_AddItemToObject(q, "ne", int_array(g.ne, (int)g.n_dims));
        cJSON_AddNumberToObject(q, "n_bytes", (double)g.n_bytes);
        cJSON_AddNumberToObject(q, "offset", (double)g.offset);
        cJSON_AddNumberToObject(q, "file_offset", (double)g.file_offset);
        if (tc_gguf_nfiles(c) > 1)
            cJSON_AddNumberToObject(q, "file", (double)g.file);
        /* with --hash: of the bytes as stored (little-endian); the values' hash above when they are the same bytes */
        const tc_storage *s = t->storage >= 0 ? tc_ckpt_storage(c, (size_t)t->storage) : NULL;
        tc_diag d = TC_DIAG_INIT;
        if (hashed && s && s->enc == TC_Q_NONE)
            cJSON_AddStringToObject(q, "sha256", hex);
        else if (want_hash && s && !tc_storage_sha256(c, (size_t)t->storage, hex, &d))
            cJSON_AddStringToObject(q, "sha256", hex);
        else if (want_hash && s) {
            tc_diag_subject(&d, tc_ckpt_path(c));
            int ex = tc_err_diag(&d);
            if (!hash_failed)
                hash_failed = ex;
        }
    }
    return o;
}

/* tc_gguf_kv_json's flush: what it made so far, to stdout. */
static void flush_stdout(void *ctx, tc_buf *b)
{
    (void)ctx;
    fwrite(tc_buf_str(b), 1, tc_buf_len(b), stdout);
    tc_buf_reset(b);
}

/* A GGUF file's header; with_path: which file it is. */
static cJSON *gguf_file_json(const tc_gguf_file *g, bool with_path)
{
    cJSON *o = cJSON_CreateObject();
    if (with_path)
        cJSON_AddStringToObject(o, "file", g->path);
    cJSON_AddNumberToObject(o, "version", g->version);
    cJSON_AddStringToObject(o, "endianness", g->big_endian ? "big" : "little");
    cJSON_AddNumberToObject(o, "alignment", g->alignment);
    cJSON_AddNumberToObject(o, "data_offset", (double)g->data_offset);
    cJSON_AddNumberToObject(o, "tensor_count", (double)g->ntensors);
    cJSON_AddNumberToObject(o, "kv_count", (double)g->nkv);
    return o;
}

/* The headers and metadata of a GGUF checkpoint (each KV typed, read from the file). */
static void gguf_json(const tc_ckpt *c, bool *first)
{
    size_t nf = tc_gguf_nfiles(c);
    if (!nf)
        return;
    jnext(first, "gguf");
    fputs("{", stdout);
    bool f2 = true;
    tc_gguf_file g;
    tc_gguf_file_info(c, 0, &g);
    cJSON *h = gguf_file_json(&g, false);
    for (cJSON *x = h ? h->child : NULL; x; x = x->next) {
        jnext(&f2, x->string);
        char *v = cJSON_PrintUnformatted(x);
        fputs(v ? v : "null", stdout);
        free(v);
    }
    cJSON_Delete(h);
    if (nf > 1) {
        cJSON *files = cJSON_CreateArray();
        for (size_t k = 0; k < nf && tc_gguf_file_info(c, k, &g); k++)
            cJSON_AddItemToArray(files, gguf_file_json(&g, true));
        jnext(&f2, "files");
        jput(files);
    }
    jnext(&f2, "kv");
    fputs("[", stdout);
    bool f3 = true;
    for (size_t i = 0; i < tc_gguf_nkv(c, 0); i++) {
        tc_buf b = TC_BUF_INIT(0);
        tc_diag d = TC_DIAG_INIT;
        jnext(&f3, NULL);
        /* the values were walked when the file opened, so a failure here is a read error; what a long
         * value already flushed stays written, cut where it failed, and the exit status says so */
        if (tc_gguf_kv_json(c, 0, i, &b, flush_stdout, NULL, &d)) {
            fputs("null", stdout);
            tc_diag_subject(&d, tc_ckpt_path(c));
            int ex = tc_err_diag(&d);
            if (!hash_failed)
                hash_failed = ex;
        } else {
            fputs(tc_buf_str(&b), stdout);
        }
        tc_buf_free(&b);
    }
    fputs("]}", stdout);
}

/* The tensors of each storage, in order: storage s has by[at[s] .. at[s + 1]). NULL when out of memory. */
static size_t *tensors_by_storage(const tc_ckpt *c, size_t **at_out)
{
    size_t nt = tc_ckpt_ntensors(c), ns = tc_ckpt_nstorages(c);
    size_t *at = calloc(ns + 2, sizeof *at), *by = malloc((nt + 1) * sizeof *by);
    if (!at || !by) {
        free(at);
        free(by);
        return NULL;
    }
    for (size_t k = 0; k < nt; k++)
        if (tc_ckpt_tensor(c, k)->storage >= 0)
            at[tc_ckpt_tensor(c, k)->storage + 2]++;
    for (size_t s = 0; s < ns; s++)
        at[s + 2] += at[s + 1];
    for (size_t k = 0; k < nt; k++)
        if (tc_ckpt_tensor(c, k)->storage >= 0)
            by[at[tc_ckpt_tensor(c, k)->storage + 1]++] = k;
    *at_out = at;
    return by;
}

static void print_json(const tc_ckpt *c)
{
    bool first = true;
    fputs("{", stdout);
    jnext(&first, "file");
    jput(cJSON_CreateString(tc_ckpt_path(c)));
    jnext(&first, "format");
    jput(cJSON_CreateString(tc_ckpt_format(c)));
    cJSON *facts = cJSON_CreateObject();
    for (size_t i = 0; i < tc_ckpt_nfacts(c); i++)
        cJSON_AddStringToObject(facts, tc_ckpt_fact(c, i)->key, tc_ckpt_fact(c, i)->value);
    jnext(&first, "records");
    jput(facts);

    size_t nt = tc_ckpt_ntensors(c), ns = tc_ckpt_nstorages(c);
    jnext(&first, "tensors");
    fputs("[", stdout);
    bool f2 = true;
    for (size_t i = 0; i < nt; i++) {
        jnext(&f2, NULL);
        jput(tensor_json(c, i));
    }
    fputs("]", stdout);

    size_t *at = NULL, *by = tensors_by_storage(c, &at);
    jnext(&first, "storages");
    fputs("[", stdout);
    f2 = true;
    for (size_t i = 0; i < ns; i++) {
        const tc_storage *s = tc_ckpt_storage(c, i);
        cJSON *o = cJSON_CreateObject();
        add_ref(o, "key", s->key);
        add_ref(o, "device", s->location);
        add_ref(o, "dtype", s->untyped ? "untyped" : tc_dtype_name(s->dtype));
        cJSON_AddItemToObjectCS(o, "nbytes", tc_json_uint(s->nbytes));
        if (s->unreached) /* nothing in the file's object reaches it (a rewrite leaves it out) */
            cJSON_AddItemToObjectCS(o, "unreached", cJSON_CreateTrue());
        cJSON *names = cJSON_CreateArray();
        cJSON_AddItemToObjectCS(o, "tensors", names);
        for (size_t k = by ? at[i] : 0; by && k < at[i + 1]; k++)
            cJSON_AddItemToArray(names, cJSON_CreateStringReference(tc_ckpt_tensor(c, by[k])->name));
        jnext(&f2, NULL);
        jput(o);
    }
    fputs("]", stdout);
    free(at);
    free(by);

    jnext(&first, "verdict");
    jput(cJSON_CreateString(tc_ckpt_is_safe(c) ? "safe" : "unsafe"));
    cJSON *wo = cJSON_CreateObject();
    bool known = false;
    for (int t = 0; t < TC_NTORCH; t++) {
        bool loads;
        const char *why;
        if (!tc_ckpt_weights_only(c, t, &loads, &why))
            continue;
        known = true;
        cJSON *v = cJSON_AddObjectToObject(wo, tc_torch_names[t]);
        cJSON_AddBoolToObject(v, "loads", loads);
        if (!loads)
            cJSON_AddStringToObject(v, "refuses", why);
    }
    if (known) {
        jnext(&first, "weights_only");
        jput(wo);
    } else {
        cJSON_Delete(wo);
    }
    cJSON *gl = cJSON_CreateArray(), *ug = cJSON_CreateArray(), *dg = cJSON_CreateArray(),
          *ag = cJSON_CreateArray(), *hz = cJSON_CreateArray(), *gv = cJSON_CreateArray();
    for (size_t i = 0; i < tc_ckpt_nglobals(c); i++) {
        const tc_global *g = tc_ckpt_global(c, i);
        cJSON_AddItemToArray(gl, cJSON_CreateStringReference(g->name));
        if (!g->allowed)
            cJSON_AddItemToArray(ug, cJSON_CreateStringReference(g->name));
        if (g->dangerous)
            cJSON_AddItemToArray(dg, cJSON_CreateStringReference(g->name));
        if (g->admitted)
            cJSON_AddItemToArray(ag, cJSON_CreateStringReference(g->name));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", g->name);
        cJSON_AddNumberToObject(o, "count", g->count);
        cJSON_AddStringToObject(o, "verdict", g->admitted ? "admitted" : g->allowed ? "allowed" : "unsafe");
        if (g->torch)
            cJSON_AddStringToObject(o, "weights_only_of", g->torch);
        if (g->reader)
            cJSON_AddStringToObject(o, "allowed_by", g->reader);
        if (g->why)
            cJSON_AddStringToObject(o, "dangerous", g->why);
        cJSON_AddItemToArray(gv, o);
    }
    for (size_t i = 0; i < tc_ckpt_nhazards(c); i++)
        cJSON_AddItemToArray(hz, cJSON_CreateStringReference(tc_ckpt_hazard(c, i)));
    static const char *const gnames[] = {"globals", "unsafe_globals", "dangerous_globals", "admitted_globals",
                                         "hazards", "global_verdicts"};
    cJSON *garr[] = {gl, ug, dg, ag, hz, gv};
    for (size_t i = 0; i < 6; i++) {
        jnext(&first, gnames[i]);
        jput(garr[i]);
    }
    if (tc_ckpt_nmeta(c) || !tc_ckpt_has_objects(c)) {
        cJSON *m = cJSON_CreateObject();
        for (size_t i = 0; i < tc_ckpt_nmeta(c); i++)
            cJSON_AddStringToObject(m, tc_ckpt_meta(c, i)->key, tc_ckpt_meta(c, i)->value);
        jnext(&first, "metadata");
        jput(m);
    }
    if (tc_ckpt_has_objects(c) || tc_ckpt_nobjects(c) || tc_ckpt_nentries(c)) {
        cJSON *m = cJSON_CreateObject();
        contents(c, m);
        jnext(&first, "contents");
        jput(m);
    }
    gguf_json(c, &first);
    jnext(&first, "weights");
    jput(tc_inspect_weights_json(c));
    fputs("}\n", stdout);
}

/* A file that could not be read, as one JSON line of its own. */
static void put_json_failure(const char *path, const tc_diag *d, int exit_status)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddStringToObject(o, "error", d->msg);
    cJSON_AddNumberToObject(o, "exit_status", exit_status);
    jput(o);
    fputc('\n', stdout);
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    int ex = TC_EXIT_OK;
    tc_limits lim;
    if (a.npos < 1) {
        tc_err(NULL, "inspect: no FILE given (see 'tensorctl inspect --help')");
        ex = TC_EXIT_USAGE;
        goto out;
    }
    tc_limits_from_args(&a, &lim);
    max_expand = 0; /* the default, whatever an earlier run in this process gave */
    tc_max_expand_from_args(&a, &max_expand);
    want_hash = a.set[OPT_HASH];
    bool json = a.set[OPT_JSON], text = !json && tc_verbosity > 0;
    size_t nsafe_files = 0, nunsafe_files = 0, nfailed = 0;
    for (int i = 0; i < a.npos; i++) {
        tc_ckpt *c;
        tc_diag d = TC_DIAG_INIT;
        hash_failed = 0;
        if (text && i)
            printf("\n"); /* each report starts with its file's line */
        char *in = NULL;
        int rc = tc_input_path(a.pos[i], &in);
        if (rc) {
            nfailed++;
            if (rc > ex)
                ex = rc;
            continue;
        }
        rc = tc_open(&c, in, &lim, &d);
        free(in);
        if (rc) {
            int e = tc_err_diag(&d);
            if (json)
                put_json_failure(a.pos[i], &d, e);
            nfailed++;
            if (e > ex)
                ex = e;
            continue;
        }
        tc_ckpt_admit(c, a.globals, a.nglobals); /* checked by tc_parse (TC_KIND_GLOBALS) */
        if (json)
            print_json(c);
        else if (text)
            print_text(c);
        if (hash_failed > ex)
            ex = hash_failed;
        if (a.set[OPT_VERIFY_CRC]) {
            int e = tc_test_ckpt(a.pos[i], c, &lim, !a.set[OPT_JSON]);
            if (e > ex)
                ex = e;
        }
        if (!tc_ckpt_is_safe(c)) {
            /* on stderr as well, whatever the mode: one line naming the file and what would run,
             * which scripts and the other commands' refusals give alike (the text report's
             * verdict says it too, for a reader of the report) */
            {
                char why[1024];
                tc_safety_why(c, why, sizeof why);
                tc_err(a.pos[i], "UNSAFE: %s", why);
            }
            nunsafe_files++;
            ex = TC_EXIT_UNSAFE;
        } else {
            nsafe_files++;
        }
        tc_ckpt_close(c);
    }
    if (text && a.npos > 1) {
        printf("\n%d files: %zu safe, %zu UNSAFE, %zu not read (exit status %d, the highest of the files')\n", a.npos,
               nsafe_files, nunsafe_files, nfailed, ex);
    }
out:
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_inspect = {
    "inspect", "inspect [options] FILE...",
    "List every tensor of a checkpoint (name, dtype, shape, saved device, bytes), the sharing between\n"
    "them, a summary per device and dtype, the non-tensor contents, and every Python global the file\n"
    "names with a safety verdict. Reads metadata only; never executes anything in the file. Of several\n"
    "files, each gets its report and its verdict line (verdict: FILE: ...), then a line counts them;\n"
    "the exit status is the highest of the files' (4 unsafe over 3 bad file over 1 failure).",
    opts, run};
