/* convert: .pt/.bin <-> .safetensors, single files and sharded sets. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert.h"
#include "format.h"
#include "move.h"
#include "safety.h"
#include "set.h"
#include "shard_index.h"

static const tc_opt o_format = {OPT_FORMAT, 0, "format", "pt|safetensors", "output format (default: from OUT's extension)",
                                0, NULL, "The output format, when the extension does not say."};
static const tc_opt o_device = {OPT_DEVICE, 'd', "device", "DEV", ".pt output: device tag of every storage", 0,
                                "cpu", "The device tag of the storages of a .pt output."};
static const tc_opt o_key = {
    OPT_KEY, 0, "key", "K", "to safetensors: only the tensors under entry K (e.g. model, state_dict), named relative to it",
    0, NULL,
    "Take the tensors under this top-level entry of a training checkpoint (for\nexample\n.B model\nor\n"
    ".BR state_dict ),\nnamed relative to it."};
/* extract's and consolidate's name for the same choice */
static const tc_opt o_from = {OPT_FROM, 0, "from", "K", "the same as --key (extract's and consolidate's name)", 0, NULL,
                              "The same as \\-\\-key, as extract and consolidate name it."};
static const tc_opt o_max_shard = {
    OPT_MAX_SHARD, 0, "max-shard-size", "SIZE", "index output: at most SIZE bytes of tensor data per shard", 0,
    "5GB",
    "For a sharded output: the most tensor data one shard holds (as\ntransformers). The set is planned from the input's "
    "metadata, sizes taken after\n\\fB\\-\\-dtype\\fR, and written as\n.BI model\\- NNNNN \\-of\\- NNNNN .safetensors\n"
    "or\n.BI pytorch_model\\- NNNNN \\-of\\- NNNNN .bin\n"
    "shards, merging small input shards or splitting large ones; a tensor larger\n"
    "than SIZE gets a shard of its own, and tensors that share a storage stay in\none shard."};
static const tc_opt o_verbose = {OPT_VERBOSE, 'v', "verbose", NULL, "say more (bytes shared/copied/written)", 0,
                                 NULL,
                                 "Say more: how many bytes of the output share the input's blocks (as many as the\n"
                                 "file system accepted as clones; XFS and btrfs clone, ext4 does not), were copied\n"
                                 "unchanged, and were written (casts, the pickle, headers and padding)."};
static const tc_opt *const opts[] = {&tc_opt_help, &o_format, &tc_opt_dtype, &tc_opt_keep, &tc_opt_only, &o_device,
                                     &o_key, &o_from, TC_KEY_OPTS, &tc_opt_max_expand, &o_max_shard, &tc_opt_part, &tc_opt_force, &tc_opt_no_sync,
                                     &tc_opt_allow_unsafe,
                                     &tc_opt_safe_globals, &tc_opt_quiet,
                                     &o_verbose, TC_LIMIT_OPTS, NULL};





/* Warnings, then (verbosity 1+) what was written: out, or `wrote` when given. */
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
    if (tc_verbosity < 1)
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

/* One file to one file. */
static int convert_file(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                        tc_convert_opts *o)
{
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    tc_dst dst = TC_DST_INIT;
    tc_convert_report rep = {0};
    tc_progress prog;
    int rc = tc_open(&c, in, &r->lim, &d);
    if (rc)
        return tc_err_diag(&d);
    if (tc_ckpt_distributed(c)) {
        tc_err(in, "%s: 'tensorctl consolidate' writes it as one file or a set", tc_ckpt_distributed(c));
        tc_ckpt_close(c);
        return TC_EXIT_USAGE;
    }
    tc_ckpt_admit(c, (const char *const *)r->safe_globals, r->nsafe);
    /* a .pt output of a .pt input keeps its object graph; anything else keeps only tensors */
    tc_keeps keeps = fmt == TC_OUTNAME_PT && tc_ckpt_has_objects(c) ? TC_KEEPS_GRAPH : TC_KEEPS_TENSORS;
    if (tc_safety_gate(c, keeps, "convert", r->allow_unsafe, &d)) {
        tc_ckpt_close(c);
        return tc_err_diag(&d);
    }
    /* said once the output is written (a failure is one line) */
    bool stay_behind = keeps == TC_KEEPS_TENSORS && !tc_ckpt_is_safe(c) && !r->allow_unsafe;
    const char *key_hint = NULL;
    size_t nt = tc_ckpt_ntensors(c);
    if (fmt == TC_OUTNAME_ST && !o->key && tc_ckpt_has_objects(c) && tc_verbosity > 0) {
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
        fprintf(stderr, "tensorctl: note: tensors keep their full names; --key %s writes only that entry\n",
                TC_ESC(key_hint));
    summary(out, NULL, &rep, fmt == TC_OUTNAME_ST, o, file_bytes);
    tc_convert_report_free(&rep);
    tc_ckpt_close(c);
    return TC_EXIT_OK;
fail:
    tc_dst_abort(&dst);
    if (rc != TC_ERR_USAGE)
        tc_diag_subject(&d, in);
    tc_convert_report_free(&rep);
    tc_ckpt_close(c);
    return tc_err_diag(&d);
}

static int convert_index(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                         const tc_convert_opts *o, uint64_t max_shard, const tc_args *a);

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    char device_tag[32];
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    if (a.npos != 2) {
        tc_err(NULL, "convert: expected IN and OUT, got %d argument%s (see 'tensorctl convert --help')", a.npos,
               tc_s((size_t)a.npos));
        tc_hint_bare_value(&a);
        goto done;
    }
    memset(&r, 0, sizeof r);
    if (tc_move_parse_common(&a, &r))
        goto done;
    const char *in = a.pos[0], *out = a.pos[1];
    int fmt = tc_output_format(&a, out);
    if (fmt < 0)
        goto done;
    tc_convert_opts o = {.ro = r.o, .key = a.set[OPT_KEY] ? a.val[OPT_KEY] : NULL, .device = "cpu"};
    if (a.set[OPT_FROM]) {
        o.key = a.val[OPT_FROM];
        o.key_opt = "--from";
    }
    if (tc_keyops_from_args(&a, &o.keys))
        goto done;
    if (tc_max_expand_from_args(&a, &o.max_expand))
        goto done;
    if (a.set[OPT_DEVICE]) {
        const char *dv = a.val[OPT_DEVICE];
        if (fmt != TC_OUTNAME_PT) {
            tc_err(NULL, "--device '%s': safetensors files carry no device tags; it applies to .pt output", dv);
            goto done;
        }
        if (tc_device_arg("--device", dv, device_tag, sizeof device_tag))
            goto done;
        o.device = device_tag;
    }
    if (o.key && fmt != TC_OUTNAME_ST) {
        tc_err(NULL, "--key '%s' selects what goes into a safetensors file; it does not apply to .pt output", o.key);
        goto done;
    }
    uint64_t max_shard = 0;
    if (a.set[OPT_MAX_SHARD] && (tc_parse_size(a.val[OPT_MAX_SHARD], &max_shard) || !max_shard)) {
        tc_err(NULL, "--max-shard-size: '%s' is not a positive size", a.val[OPT_MAX_SHARD]);
        goto done;
    }
    if (!strcmp(in, out) || tc_same_file(in, out)) {
        tc_err(in, "OUT is the input file; write elsewhere");
        goto done;
    }
    tc_dst_cleanup_on_signals();
    if (tc_index_path(in)) {
        ex = convert_index(in, out, fmt, tc_dst_flags_from_args(&a), &r, &o, max_shard, &a);
        goto done;
    }
    if (a.set[OPT_PART]) {
        tc_err(NULL, "--part splits the writing of a sharded set among processes; '%s' is not an index", in);
        goto done;
    }
    if (tc_index_path(out)) {
        tc_err(out, "an index output needs an index input (IN.index.json)");
        goto done;
    }
    if (max_shard) {
        tc_err(in, "not an index: --max-shard-size applies to sharded sets (to shard one file: tensorctl extract "
               "IN -o OUT.index.json --max-shard-size SIZE)");
        goto done;
    }
    ex = convert_file(in, out, fmt, tc_dst_flags_from_args(&a), &r, &o);
done:
    tc_move_req_free(&r);
    free(a.pos);
    return ex;
}

/* ---- sharded sets ------------------------------------------------------------ */

/* A shard set through its index: planned and written by tc_set_run; this prints. */
static int convert_index(const char *in, const char *out, int fmt, unsigned dst_flags, const tc_move_req *r,
                         const tc_convert_opts *o, uint64_t max_shard, const tc_args *a)
{
    tc_set_opts so = {.mode = fmt == TC_OUTNAME_ST ? TC_SET_SAFETENSORS : TC_SET_TORCH, .co = *o, .max_shard = max_shard,
                      .dst_flags = dst_flags, .allow_unsafe = r->allow_unsafe,
                      .safe_globals = (const char *const *)r->safe_globals, .nsafe = r->nsafe, .lim = r->lim};
    if (tc_part_from_args(a, &so.part, &so.nparts, &so.index_only))
        return TC_EXIT_USAGE;
    /* OUT named as a file (not an index, not a folder): the set joined into it */
    so.one_file = tc_names_one_file(out);
    if (so.one_file && (a->set[OPT_MAX_SHARD] || a->set[OPT_PART])) {
        tc_err(out, "%s writes a sharded set: give OUT as a folder or an .index.json name",
               a->set[OPT_MAX_SHARD] ? "--max-shard-size" : "--part");
        return TC_EXIT_USAGE;
    }
    tc_set_report rep = {0};
    tc_diag d = TC_DIAG_INIT;
    int rc = tc_set_run(in, out, &so, &rep, &d);
    if (rc) {
        if (rc != TC_ERR_USAGE)
            tc_diag_subject(&d, in);
        tc_err_diag(&d);
    } else if (so.one_file) {
        char wrote[4200];
        snprintf(wrote, sizeof wrote, "%s (the %zu shard%s of the set joined)", rep.index_path, rep.ninputs,
                 tc_s(rep.ninputs));
        summary(rep.index_path, wrote, &rep.sum, fmt == TC_OUTNAME_ST, o, rep.file_bytes);
    } else {
        char lim_text[32], wrote[4200];
        tc_human_bytes(max_shard ? max_shard : TC_DEFAULT_MAX_SHARD, lim_text, sizeof lim_text);
        snprintf(wrote, sizeof wrote, "%s and %zu shard%s of at most %s (from %zu)", rep.index_path, rep.nshards,
                 tc_s(rep.nshards), lim_text, rep.ninputs);
        summary(rep.index_path, wrote, &rep.sum, fmt == TC_OUTNAME_ST, o, rep.file_bytes);
    }
    if (!rc)
        tc_print_removed(rep.index_path, rep.removed, rep.nremoved);
    tc_set_report_free(&rep);
    return tc_exit_for(rc);
}

const tc_cmd tc_cmd_convert = {
    "convert", "convert [options] IN OUT",
    "Convert a checkpoint between torch's format (.pt/.bin/.pth/.ckpt) and safetensors, or a sharded set\n"
    "through its index (*.index.json): into a new set (OUT a folder or an .index.json) or joined into one\n"
    "file (OUT a file's name). Tensors are copied bit for bit (or cast with --dtype); shared storages\n"
    "are written once (other names go to __metadata__ \"" TC_ST_ALIASES_KEY "\" and come back as views);\n"
    "objects that are not tensors cannot go into safetensors and are listed as dropped.",
    opts, run};
