/* convert: .pt/.bin <-> .safetensors, single files and sharded sets. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert.h"
#include "format.h"
#include "gguf.h"
#include "gguf_out.h"
#include "move.h"
#include "safety.h"
#include "set.h"
#include "shard_index.h"

static const tc_opt o_format = {.id = OPT_FORMAT, .lng = "format", .arg = "pt|safetensors|gguf",
                                .text = &tc_text_convert_format, .kind = TC_KIND_WORDS};
static const tc_opt o_kv = {.id = OPT_KV, .lng = "kv", .arg = "KEY=[TYPE:]VALUE", .flags = TC_OPT_REPEAT,
                            .text = &tc_text_convert_kv, .kind = TC_KIND_KV};
static const tc_opt o_device = {.id = OPT_DEVICE, .shrt = 'd', .lng = "device", .arg = "DEV", .def = "cpu",
                                .text = &tc_text_convert_device, .kind = TC_KIND_DEVICE};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_convert_verbose};
static const tc_opt *const opts[] = {&tc_opt_help, &o_format, &tc_opt_dtype_gguf, &tc_opt_keep, &tc_opt_only, &o_device,
                                     &tc_opt_from, &tc_opt_key, &tc_opt_ema, TC_KEY_OPTS, &tc_opt_names, &o_kv,
                                     &tc_opt_max_expand, &tc_opt_max_shard, &tc_opt_part, &tc_opt_force,
                                     &tc_opt_no_sync, &tc_opt_allow_unsafe, &tc_opt_safe_globals, &tc_opt_json_wrote,
                                     &tc_opt_quiet, &o_verbose, TC_LIMIT_OPTS, NULL};

/* Warnings, then (verbosity 1+, not under --json) what was written: out, or `wrote` when given. */
static void summary(const char *out, const char *wrote, const tc_convert_report *r, bool st, const tc_convert_opts *o,
                    uint64_t file_bytes)
{
    if (r->ndropped)
        tc_warn_list(out, "not representable, dropped", r->dropped, r->ndropped);
    if (r->ncopies)
        tc_warn(out, "%zu tensors shared storages that no saved tensor covers whole; written as separate copies",
                r->ncopies);
    if (r->overflow)
        tc_warn(out, "%" PRIu64 " values too large for %s became inf/NaN", r->overflow, tc_dtype_name(o->ro.dtype));
    if (r->underflow)
        tc_warn(out, "%" PRIu64 " nonzero values too small for %s became zero", r->underflow,
                tc_dtype_name(o->ro.dtype));
    if (!tc_wrote_line())
        return;
    size_t nt = r->ntensors + r->ncopies;
    fprintf(stderr, "tensorctl: wrote %s: %zu tensor%s", TC_ESC(wrote ? wrote : out), nt, nt == 1 ? "" : "s");
    if (r->naliases)
        fprintf(stderr, st ? " + %zu alias%s of shared storage (in __metadata__ \"%s\")" : " + %zu shared view%s",
                r->naliases, st ? (r->naliases == 1 ? "" : "es") : (r->naliases == 1 ? "" : "s"), TC_ST_ALIASES_KEY);
    if (o->ro.dtype != TC_DT_INVALID)
        fprintf(stderr, "; cast %zu to %s, kept %zu floating-point", r->ncast, tc_dtype_name(o->ro.dtype), r->nkept);
    if (r->nleft_out)
        fprintf(stderr, "; %zu left out by --drop/--only-keys", r->nleft_out);
    char h[32];
    tc_human_bytes(r->data_bytes, h, sizeof h);
    fprintf(stderr, "; %s of tensor data\n", h);
    tc_print_sharing(out, file_bytes, r->shared_bytes, r->copied_bytes);
}

/* ---- which tensors: extract's choice ------------------------------------------------------ */

/* A safetensors file (or a set) holds weights. Of a torch checkpoint, convert writes what extract
 * would (one code path, tc_pick_weights): the entry --from (or --key) names, or, of a training
 * checkpoint (its weights beside an optimizer's tensors), the one set of weights found there, named
 * relative to its entry, the rest left behind and listed once written; several sets to choose from
 * is exit 2, as for extract. Any other file (a state_dict, a module pickled whole, a dict of models
 * or tensors) is written whole, as before: nothing in it is training state. */
typedef struct picked {
    tc_weights ws;
    tc_wcand w;
    tc_extract_report left;
    bool on;      /* an entry was chosen: o->key is its prefix */
    bool found;   /* ... by the candidate rule, not by --from */
} picked;

static void picked_free(picked *pk)
{
    tc_extract_report_free(&pk->left);
    tc_wcand_clear(&pk->w);
    tc_weights_free(&pk->ws);
}

static int pick(tc_ckpt *c, const char *in, const tc_args *a, tc_convert_opts *o, picked *pk)
{
    const char *opt, *from = tc_from_arg(a, &opt);
    bool ema = a->set[OPT_EMA];
    if (!tc_ckpt_has_objects(c)) {
        if (ema) {
            tc_err(in, "--ema: a %s file is one state_dict", tc_ckpt_format(c));
            return TC_EXIT_USAGE;
        }
        return 0; /* a --from of a safetensors input: the ops say it has no entries */
    }
    tc_diag d = TC_DIAG_INIT;
    if (tc_weights_find(c, &pk->ws, &d)) {
        tc_diag_subject(&d, in);
        return tc_err_diag(&d);
    }
    if (!from && !ema && !pk->ws.optimizer_bytes) /* no training checkpoint: every tensor, as before */
        return 0;
    int ex = tc_pick_weights(c, in, from, ema, &pk->ws, &pk->w);
    if (ex) {
        if (!from && !ema && tc_verbosity > 0)
            fprintf(stderr, "tensorctl: note: a training checkpoint: convert writes its weights, as extract does; "
                    "--from . writes every tensor of the file\n");
        return ex;
    }
    if (!from && !ema && !pk->w.prefix[0])
        return 0; /* the whole file all the same */
    if (tc_extract_left(c, &pk->w, &pk->left, &d))
        return tc_err_diag(&d);
    o->key = pk->w.prefix[0] ? pk->w.prefix : NULL;
    o->key_opt = from ? opt : "--from";
    o->no_entries = true;
    o->plain = true; /* a state_dict as extract writes it */
    pk->on = true;
    pk->found = !from && !ema;
    return 0;
}

/* Once written: which entry was taken, and what stayed behind. */
static void picked_note(const picked *pk)
{
    if (!pk->on || tc_verbosity < 1)
        return;
    if (pk->found)
        fprintf(stderr, "tensorctl: note: a training checkpoint: wrote the weights under '%s' (%s), named "
                "relative to it; --from . writes every tensor of the file\n", TC_ESC(pk->w.prefix),
                TC_ESC(pk->w.reason));
    tc_print_left(&pk->left);
}

/* One file to one file. */
static int convert_file(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                        tc_convert_opts *o, const tc_args *a)
{
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    tc_dst dst = TC_DST_INIT;
    tc_convert_report rep = {0};
    tc_progress prog;
    picked pk = {0};
    int rc = tc_open(&c, in, &r->lim, &d);
    if (rc)
        return tc_err_diag(&d);
    if (tc_ckpt_distributed(c)) {
        tc_err(in, "%s: 'tensorctl consolidate' writes it as one file or a set", tc_ckpt_distributed(c));
        tc_ckpt_close(c);
        return TC_EXIT_USAGE;
    }
    tc_ckpt_admit(c, r->safe_globals, r->nsafe);
    /* a .pt output of a .pt input keeps its object graph; anything else keeps only tensors */
    tc_keeps keeps = fmt == TC_OUTNAME_PT && tc_ckpt_has_objects(c) ? TC_KEEPS_GRAPH : TC_KEEPS_TENSORS;
    if (tc_safety_gate(c, keeps, "convert", r->allow_unsafe, &d)) {
        tc_ckpt_close(c);
        return tc_err_diag(&d);
    }
    int ex = fmt == TC_OUTNAME_ST ? pick(c, in, a, o, &pk) : 0;
    if (ex) {
        picked_free(&pk);
        tc_ckpt_close(c);
        return ex;
    }
    /* said once the output is written (a failure is one line) */
    bool stay_behind = keeps == TC_KEEPS_TENSORS && !tc_ckpt_is_safe(c) && !r->allow_unsafe;
    const char *key_hint = NULL;
    size_t nt = tc_ckpt_ntensors(c);
    if (fmt == TC_OUTNAME_ST && !o->key && !pk.on && tc_ckpt_has_objects(c) && tc_verbosity > 0) {
        static const char *const common[] = {"state_dict", "model", "module", "model_state_dict", NULL};
        for (const char *const *k = common; *k && !key_hint; k++) {
            size_t l = strlen(*k), n = 0;
            for (size_t i = 0; i < nt; i++)
                n += !strncmp(tc_ckpt_tensor(c, i)->name, *k, l) && tc_ckpt_tensor(c, i)->name[l] == '.';
            if (n && n < nt)
                key_hint = *k;
        }
    }
    if ((rc = tc_dst_open(&dst, out, dst_flags, &d)))
        goto fail;
    tc_progress_init(&prog, "converting", true);
    o->ro.progress = tc_progress_cb;
    o->ro.progress_ctx = &prog;
    if (fmt == TC_OUTNAME_ST) {
        /* a safetensors input's own __metadata__ carries over */
        size_t nm = tc_ckpt_has_objects(c) ? 0 : tc_ckpt_nmeta(c);
        tc_kv *meta = calloc(nm + 1, sizeof *meta);
        for (size_t i = 0; meta && i < nm; i++)
            meta[i] = *tc_ckpt_meta(c, i);
        rc = meta ? tc_convert_to_safetensors(c, o, meta, nm, &dst, &rep, &d) : tc_fail(&d, TC_ERR_NOMEM, "out of memory");
        free(meta);
    } else {
        rc = tc_convert_to_torch(c, o, &dst, &rep, &d);
    }
    tc_progress_end(&prog);
    uint64_t file_bytes = dst.pos;
    if (rc || (rc = tc_dst_commit(&dst, &d)))
        goto fail;
    if (stay_behind)
        tc_unsafe_note(c, in);
    if (key_hint)
        fprintf(stderr, "tensorctl: note: tensors keep their full names; --from %s writes only that entry\n",
                TC_ESC(key_hint));
    tc_wrote_set(out, 1, rep.ntensors + rep.ncopies, file_bytes, rep.data_bytes);
    summary(out, NULL, &rep, fmt == TC_OUTNAME_ST, o, file_bytes);
    picked_note(&pk);
    picked_free(&pk);
    tc_convert_report_free(&rep);
    tc_ckpt_close(c);
    return TC_EXIT_OK;
fail:
    tc_dst_abort(&dst);
    if (rc != TC_ERR_USAGE)
        tc_diag_subject(&d, in);
    picked_free(&pk);
    tc_convert_report_free(&rep);
    tc_ckpt_close(c);
    return tc_err_diag(&d);
}

static int convert_index(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                         tc_convert_opts *o, uint64_t max_shard, const tc_args *a, bool one_input);

/* ---- GGUF output -------------------------------------------------------------- */

/* --dtype for a GGUF output: a type gguf-py's quantisers write (or torch's name of F32, F16, BF16). */
static int gguf_dtype(const tc_args *a, tc_qtype *q)
{
    *q = TC_Q_NONE;
    if (!a->set[OPT_DTYPE])
        return 0;
    const char *v = a->val[OPT_DTYPE];
    tc_qtype t = a->qtype[OPT_DTYPE];
    if (t == TC_Q_NONE) {
        tc_err(NULL, "--dtype '%s': a GGUF output takes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 (the types gguf-py "
               "quantises; K-quants and IQ types come from llama-quantize)", v);
        return -1;
    }
    *q = t;
    return 0;
}

static int convert_gguf(const char *in, const char *out, const tc_move_req *r, const tc_args *a, tc_qtype q,
                        uint64_t max_shard, unsigned dst_flags)
{
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    tc_gguf_report rep = {0};
    tc_progress prog;
    int ex = TC_EXIT_USAGE;
    /* --kv: parsed by tc_parse (TC_KIND_KV) */
    tc_gguf_opts o = {.to = q, .keep = a->rep[OPT_KEEP], .nkeep = a->nrep[OPT_KEEP], .only = a->rep[OPT_ONLY],
                      .nonly = a->nrep[OPT_ONLY], .kv = a->kv, .nkv = a->nkv, .max_shard = max_shard,
                      .dst_flags = dst_flags};
    tc_max_expand_from_args(a, &o.max_expand);
    if (tc_keyops_from_args(a, &o.keys))
        goto done;
    if (tc_open(&c, in, &r->lim, &d)) {
        ex = tc_err_diag(&d);
        goto done;
    }
    if (tc_ckpt_distributed(c)) {
        tc_err(in, "a distributed checkpoint: 'tensorctl consolidate' writes it as one file first");
        goto done;
    }
    tc_ckpt_admit(c, r->safe_globals, r->nsafe);
    if (tc_safety_gate(c, TC_KEEPS_TENSORS, "convert", r->allow_unsafe, &d)) {
        ex = tc_err_diag(&d);
        goto done;
    }
    tc_progress_init(&prog, "converting", true);
    o.progress = tc_progress_cb;
    o.progress_ctx = &prog;
    int rc = tc_gguf_convert(c, &o, out, &rep, &d);
    tc_progress_end(&prog);
    if (rc) {
        if (rc != TC_ERR_USAGE)
            tc_diag_subject(&d, in);
        ex = tc_err_diag(&d);
        goto done;
    }
    if (rep.r.ndropped)
        tc_warn_list(out, "not representable, dropped", rep.r.dropped, rep.r.ndropped);
    if (rep.no_arch)
        tc_warn(out, "no general.architecture: llama.cpp and transformers need it, with the model's hyperparameters "
                "and tokenizer (--kv KEY=TYPE:VALUE, or convert from a GGUF that has them)");
    if (rep.low_align)
        tc_warn(out, "alignment below 32: llama.cpp aborts on such a file when it mmaps it (-lm none loads it)");
    if (rep.nfallback)
        tc_warn(out, "%zu tensors have rows that are not whole %s blocks: written F16, as llama.cpp's converter does",
                rep.nfallback, tc_qtype_name(q));
    tc_wrote_set(rep.first, rep.nfiles, rep.r.ntensors, rep.file_bytes, rep.r.data_bytes);
    if (tc_wrote_line()) {
        fprintf(stderr, "tensorctl: wrote %s", rep.first);
        if (rep.nfiles > 1)
            fprintf(stderr, " and %zu more split files", rep.nfiles - 1);
        fprintf(stderr, ": %zu tensors", rep.r.ntensors);
        if (q != TC_Q_NONE)
            fprintf(stderr, "; %zu to %s, %zu 1-D in F32, %zu kept as they were", rep.nquant, tc_qtype_name(q),
                    rep.n1d, rep.nkept);
        if (rep.nfallback)
            fprintf(stderr, ", %zu in F16 (rows not whole blocks)", rep.nfallback);
        if (rep.r.nleft_out)
            fprintf(stderr, "; %zu left out by --drop/--only-keys", rep.r.nleft_out);
        fprintf(stderr, "; %.1f MB of tensor data\n", rep.r.data_bytes / 1e6);
    }
    ex = TC_EXIT_OK;
done:
    tc_gguf_report_free(&rep);
    tc_ckpt_close(c);
    return ex;
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    char *in_path = NULL, *out_path = NULL;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    tc_wrote_begin(cmd->name, a.npos ? a.pos[0] : NULL, a.set[OPT_JSON]);
    if (a.npos != 2) {
        tc_err(NULL, "convert: expected IN and OUT, got %d argument%s (see 'tensorctl convert --help')", a.npos,
               tc_s((size_t)a.npos));
        tc_hint_bare_value(&a);
        goto done;
    }
    memset(&r, 0, sizeof r);
    if ((ex = tc_input_path(a.pos[0], &in_path)) != 0)
        goto done;
    ex = TC_EXIT_USAGE;
    const char *in = in_path, *out = a.pos[1], *from_opt, *from = tc_from_arg(&a, &from_opt);
    /* GGUF out: split files of at most --max-shard-size, named after OUT. A set in: OUT a folder is the new set's.
     * One checkpoint in (a split GGUF is one): a set out only when asked (tc_sharded_output), else one file */
    bool gguf = a.set[OPT_FORMAT] ? a.word[OPT_FORMAT] == TC_FORMAT_GGUF : tc_ends_with(out, ".gguf");
    bool set_in = !gguf && tc_index_path(in);
    uint64_t max_shard = 0;
    bool set_out = false;
    if (gguf || set_in)
        max_shard = tc_max_shard_from_args(&a);
    else if (tc_sharded_output(&a, out, &set_out, &max_shard))
        goto done;
    if (!set_in && !set_out) { /* OUT a folder: the file in it, under IN's name */
        if ((ex = tc_output_file(&a, out, in, &out_path)) != 0)
            goto done;
        ex = TC_EXIT_USAGE;
        out = out_path;
    }
    tc_wrote_target(out);
    tc_qtype gq = TC_Q_NONE;
    /* --dtype, --keep and --only of a GGUF output take ggml's types: not parsed as casts */
    static tc_args m;
    m = a;
    if (gguf) {
        if (gguf_dtype(&a, &gq))
            goto done;
        m.set[OPT_DTYPE] = false;
        m.nrep[OPT_KEEP] = m.nrep[OPT_ONLY] = 0;
        if ((a.nrep[OPT_KEEP] || a.nrep[OPT_ONLY]) && !a.set[OPT_DTYPE]) {
            tc_err(NULL, "--keep and --only choose what --dtype converts; give --dtype too");
            goto done;
        }
    }
    if (tc_move_parse_common(&m, &r))
        goto done;
    if (a.nkv && !gguf) {
        tc_err(NULL, "--kv sets GGUF metadata; it applies to a .gguf output");
        goto done;
    }
    int fmt = gguf ? TC_OUTNAME_NONE
              : set_out && !tc_index_path(out) && !a.set[OPT_FORMAT] ? tc_outname_format(in) : tc_output_format(&a, out);
    if (fmt == TC_OUTNAME_NONE && !gguf) {
        tc_err(out, "a sharded set is written into this folder: give --format (pt or safetensors) for its shards");
        goto done;
    }
    if (fmt < 0)
        goto done;
    tc_convert_opts o = {.ro = r.o, .key = from, .key_opt = from_opt, .device = "cpu"};
    if (tc_keyops_from_args(&a, &o.keys))
        goto done;
    tc_max_expand_from_args(&a, &o.max_expand);
    if (a.set[OPT_DEVICE]) {
        const char *dv = a.val[OPT_DEVICE];
        if (gguf) {
            tc_err(NULL, "--device '%s': GGUF files carry no device tags; it applies to .pt output", dv);
            goto done;
        }
        if (fmt != TC_OUTNAME_PT) {
            tc_err(NULL, "--device '%s': safetensors files carry no device tags; it applies to .pt output", dv);
            goto done;
        }
        o.device = a.dev[OPT_DEVICE];
    }
    /* a .pt file out keeps the whole object graph; a set or a safetensors file holds weights */
    if ((from || a.set[OPT_EMA]) && (gguf || (fmt != TC_OUTNAME_ST && !set_out))) {
        tc_err(NULL, "%s selects the weights a safetensors file or a set holds; a .pt output keeps the whole file "
               "('tensorctl extract %s' writes one entry as a .pt state_dict)",
               from ? from_opt : "--ema", from ? from_opt : "--ema");
        goto done;
    }
    if (a.set[OPT_EMA] && set_in) {
        tc_err(NULL, "--ema chooses among a checkpoint's entries; a set's shards are state_dicts");
        goto done;
    }
    if (!strcmp(in, out) || tc_same_file(in, out)) {
        tc_err(in, "OUT is the input file; write elsewhere");
        goto done;
    }
    tc_dst_cleanup_on_signals();
    if (gguf) {
        if (a.set[OPT_PART])
            tc_err(NULL, "--part splits the writing of a sharded set of safetensors or .bin shards; not of GGUF");
        else
            ex = convert_gguf(in, out, &r, &a, gq, max_shard, tc_dst_flags_from_args(&a));
        goto done;
    }
    if (set_in || set_out) {
        ex = convert_index(in, out, fmt, tc_dst_flags_from_args(&a), &r, &o, max_shard, &a, !set_in);
        goto done;
    }
    ex = convert_file(in, out, fmt, tc_dst_flags_from_args(&a), &r, &o, &a);
done:
    free(in_path);
    free(out_path);
    free(a.pos);
    return tc_wrote_end(ex);
}

/* ---- sharded sets ------------------------------------------------------------ */

/* A shard set through its index, or one checkpoint written as a set (one_input): planned and written by the set
 * driver; this prints. */
static int convert_index(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                         tc_convert_opts *o, uint64_t max_shard, const tc_args *a, bool one_input)
{
    tc_set_opts so = {.mode = fmt == TC_OUTNAME_ST ? TC_SET_SAFETENSORS : TC_SET_TORCH, .max_shard = max_shard,
                      .dst_flags = dst_flags, .allow_unsafe = r->allow_unsafe,
                      .safe_globals = r->safe_globals, .nsafe = r->nsafe, .lim = r->lim};
    tc_part_from_args(a, &so.part, &so.nparts, &so.index_only);
    /* OUT named as a file (not an index, not a folder): the set joined into it */
    so.one_file = !one_input && tc_names_one_file(out);
    if (so.one_file && (a->set[OPT_MAX_SHARD] || a->set[OPT_PART])) {
        tc_err(out, "%s writes a sharded set: give OUT as a folder or an .index.json name",
               a->set[OPT_MAX_SHARD] ? "--max-shard-size" : "--part");
        return TC_EXIT_USAGE;
    }
    tc_set_report rep = {0};
    tc_diag d = TC_DIAG_INIT;
    tc_ckpt *c = NULL;
    picked pk = {0};
    int rc = 0, ex = 0;
    if (one_input) { /* opened here, to choose its weights as a file out would */
        if ((rc = tc_open(&c, in, &r->lim, &d)))
            return tc_err_diag(&d);
        tc_ckpt_admit(c, r->safe_globals, r->nsafe);
        if (tc_ckpt_distributed(c)) {
            tc_err(in, "%s: 'tensorctl consolidate' writes it as one file or a set", tc_ckpt_distributed(c));
            ex = TC_EXIT_USAGE;
        } else if ((rc = tc_safety_gate(c, TC_KEEPS_TENSORS, "convert", r->allow_unsafe, &d))) {
            ex = tc_err_diag(&d);
        } else {
            ex = pick(c, in, a, o, &pk);
        }
        if (ex) {
            picked_free(&pk);
            tc_ckpt_close(c);
            return ex;
        }
    }
    so.co = *o;
    rc = one_input ? tc_set_run_ckpt(c, out, &so, &rep, &d) : tc_set_run(in, out, &so, &rep, &d);
    if (rc) {
        if (rc != TC_ERR_USAGE)
            tc_diag_subject(&d, in);
        tc_err_diag(&d);
    } else {
        size_t files = so.one_file ? 1 : rep.nshards + !so.nparts; /* a part writes no index */
        tc_wrote_set(rep.index_path, files, rep.sum.ntensors + rep.sum.ncopies, rep.file_bytes, rep.sum.data_bytes);
        char wrote[4200];
        if (so.one_file) {
            snprintf(wrote, sizeof wrote, "%s (the %zu shard%s of the set joined)", rep.index_path, rep.ninputs,
                     tc_s(rep.ninputs));
        } else {
            char lim_text[32];
            tc_human_bytes(max_shard ? max_shard : TC_DEFAULT_MAX_SHARD, lim_text, sizeof lim_text);
            tc_buf wb = tc_buf_fixed(wrote, sizeof wrote);
            tc_buf_printf(&wb, "%s and %zu shard%s of at most %s", rep.index_path, rep.nshards, tc_s(rep.nshards),
                          lim_text);
            if (!one_input) /* the input set's shards */
                tc_buf_printf(&wb, " (from %zu)", rep.ninputs);
        }
        if (one_input && !tc_ckpt_is_safe(c) && !r->allow_unsafe)
            tc_unsafe_note(c, in);
        summary(rep.index_path, wrote, &rep.sum, fmt == TC_OUTNAME_ST, o, rep.file_bytes);
        picked_note(&pk);
        tc_print_removed(rep.index_path, rep.removed, rep.nremoved);
    }
    picked_free(&pk);
    tc_ckpt_close(c);
    tc_set_report_free(&rep);
    return tc_exit_for(rc);
}

const tc_cmd tc_cmd_convert = {
    "convert", "convert [options] IN OUT",
    "Convert a checkpoint between torch's format (.pt/.bin/.pth/.ckpt), safetensors and GGUF, or a sharded set\n"
    "through its index (*.index.json): into a new set (OUT a folder or an .index.json) or joined into one\n"
    "file (OUT a file's name). Tensors are copied bit for bit (or cast with --dtype); shared storages\n"
    "are written once (other names go to __metadata__ \"" TC_ST_ALIASES_KEY "\" and come back as views);\n"
    "objects that are not tensors cannot go into safetensors and are listed as dropped. To GGUF, --dtype takes\n"
    "ggml's types (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1), quantised bit for bit as gguf-py.",
    opts, run};
