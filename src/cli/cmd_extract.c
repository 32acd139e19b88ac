/* extract: a checkpoint's weights as a plain state_dict (.pt or .safetensors, or a sharded set). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "extract.h"
#include "move.h"
#include "safety.h"
#include "shard_index.h"

static const tc_opt o_output = {.id = OPT_OUTPUT, .shrt = 'o', .lng = "output", .arg = "OUT",
                                .text = &tc_text_extract_output, .kind = TC_KIND_PATH};
static const tc_opt o_format = {.id = OPT_FORMAT, .lng = "format", .arg = "pt|safetensors",
                                .text = &tc_text_extract_format, .kind = TC_KIND_WORDS};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_extract_verbose};
static const tc_opt *const opts[] = {&tc_opt_help, &o_output, &o_format, &tc_opt_from, &tc_opt_key, &tc_opt_ema,
                                     &tc_opt_dtype, &tc_opt_keep, &tc_opt_only, TC_KEY_OPTS, &tc_opt_max_expand,
                                     &tc_opt_max_shard, &tc_opt_force, &tc_opt_no_sync, &tc_opt_allow_unsafe,
                                     &tc_opt_safe_globals, &tc_opt_json_wrote, &tc_opt_quiet, &o_verbose, TC_LIMIT_OPTS,
                                     NULL};



static void cand_line(const tc_wcand *w)
{
    char b[32];
    tc_human_bytes(w->bytes, b, sizeof b);
    fprintf(stderr, "  --from %-16s %zu tensors, %s: %s%s%s%s\n", w->prefix[0] ? TC_ESC(w->prefix) : ".", w->ntensors, b,
            TC_ESC(w->reason), w->shared[0] ? " (every key starts with '" : "", TC_ESC(w->shared), w->shared[0] ? "')" : "");
}

int tc_pick_weights(const tc_ckpt *c, const char *in, const char *from, bool ema, const tc_weights *ws, tc_wcand *w)
{
    tc_diag d = TC_DIAG_INIT;
    int rc = tc_weights_pick(ws, c, from, ema, w, &d);
    if (rc) {
        tc_diag_subject(&d, in);
        int ex = tc_err_diag(&d);
        if (rc == TC_ERR_USAGE)
            for (size_t i = 0; i < ws->n; i++)
                cand_line(&ws->v[i]);
        return ex;
    }
    if (tc_verbosity > 1 && ws->n > 1)
        for (size_t i = 0; i < ws->n; i++)
            cand_line(&ws->v[i]);
    return 0;
}

void tc_print_left(const tc_extract_report *r)
{
    if (!r->nleft || tc_verbosity < 1)
        return;
    char line[1200], b[32];
    tc_buf lb = tc_buf_fixed(line, sizeof line);
    size_t i = 0;
    for (; i < r->nleft && tc_buf_len(&lb) < sizeof line - 120; i++) {
        const tc_left *x = &r->left[i];
        tc_buf_sep(&lb, ", ");
        tc_buf_escs(&lb, x->name);
        tc_buf_puts(&lb, " (");
        tc_buf_escs(&lb, x->kind);
        if (x->ntensors) {
            tc_human_bytes(x->bytes, b, sizeof b);
            tc_buf_printf(&lb, ", %zu tensor%s, %s", x->ntensors, tc_s(x->ntensors), b);
        }
        tc_buf_putc(&lb, ')');
    }
    fprintf(stderr, "tensorctl: left behind: %s", line);
    if (i < r->nleft || tc_buf_cut(&lb))
        fprintf(stderr, ", ... (%zu in all)", r->nleft);
    fputc('\n', stderr);
}

static void summary(const char *out, const tc_wcand *w, const tc_extract_report *r, const tc_convert_report *conv,
                    bool st, bool stripped)
{
    char b[32];
    if (conv->ndropped)
        tc_warn_list(out, "left out", conv->dropped, conv->ndropped);
    if (conv->ncopies)
        tc_warn(out, "%zu tensors shared storages that no saved tensor covers whole; written as separate copies",
                conv->ncopies);
    if (conv->overflow)
        tc_warn(out, "%" PRIu64 " values became inf/NaN in the cast", conv->overflow);
    if (conv->underflow)
        tc_warn(out, "%" PRIu64 " nonzero values became zero in the cast", conv->underflow);
    if (tc_wrote_line()) {
        tc_human_bytes(conv->data_bytes, b, sizeof b);
        fprintf(stderr, "tensorctl: wrote %s: %zu tensor%s", TC_ESC(out), conv->ntensors + conv->ncopies,
                tc_s(conv->ntensors + conv->ncopies));
        if (conv->naliases)
            fprintf(stderr, st ? " + %zu alias%s of shared storage" : " + %zu shared view%s", conv->naliases,
                    conv->naliases == 1 ? "" : st ? "es" : "s");
        if (conv->nleft_out)
            fprintf(stderr, " (%zu left out by --drop/--only-keys)", conv->nleft_out);
        fprintf(stderr, ", %s, from %s%s%s (%s)\n", b, w->prefix[0] ? "'" : "",
                w->prefix[0] ? TC_ESC(w->prefix) : "the whole file", w->prefix[0] ? "'" : "", TC_ESC(w->reason));
    }
    tc_print_left(r);
    if (w->shared[0] && !stripped && tc_verbosity > 0)
        fprintf(stderr, "tensorctl: note: every key starts with '%s'; --strip-prefix takes it off\n", TC_ESC(w->shared));
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    char *in_path = NULL, *out_path = NULL;
    tc_ckpt *c = NULL;
    tc_weights ws = {0};
    tc_wcand w = {0};
    tc_extract_report rep = {0};
    tc_set_report srep = {0};
    tc_dst dst = TC_DST_INIT;
    tc_diag d = TC_DIAG_INIT;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    tc_wrote_begin(cmd->name, a.npos ? a.pos[0] : NULL, a.set[OPT_JSON]);
    const char *from = tc_from_arg(&a, NULL);
    if (a.npos != 1 || !a.set[OPT_OUTPUT]) {
        tc_err(NULL, "extract: expected IN and -o OUT (see 'tensorctl extract --help')");
        tc_hint_bare_value(&a);
        goto done;
    }
    if (tc_move_parse_common(&a, &r))
        goto done;
    if ((ex = tc_input_path(a.pos[0], &in_path)) != 0)
        goto done;
    ex = TC_EXIT_USAGE;
    const char *in = in_path, *out = a.val[OPT_OUTPUT];
    tc_extract_opts o = {.co = {.ro = r.o}};
    tc_max_expand_from_args(&a, &o.co.max_expand);
    if (tc_keyops_from_args(&a, &o.co.keys))
        goto done;
    uint64_t max_shard = 0;
    bool set;
    if (tc_sharded_output(&a, out, &set, &max_shard))
        goto done;
    if (!set) { /* -o DIR: the file in it, under IN's name */
        if ((ex = tc_output_file(&a, out, in, &out_path)) != 0)
            goto done;
        ex = TC_EXIT_USAGE;
        out = out_path;
    }
    tc_wrote_target(out);
    int fmt = set && !tc_index_path(out) && !a.set[OPT_FORMAT] ? tc_outname_format(in) : tc_output_format(&a, out);
    if (fmt == TC_OUTNAME_NONE) {
        tc_err(out, "a sharded set is written into this folder: give --format (pt or safetensors) for its shards");
        goto done;
    }
    if (fmt < 0)
        goto done;
    o.safetensors = fmt == TC_OUTNAME_ST;
    if (tc_index_path(in)) {
        tc_err(in, "a sharded set's shards are state_dicts already; 'tensorctl convert' rewrites them (with the "
               "same key surgery)");
        goto done;
    }
    if (from && a.set[OPT_EMA]) {
        tc_err(NULL, "--from and --ema exclude each other");
        goto done;
    }
    if (!strcmp(in, out) || tc_same_file(in, out)) {
        tc_err(in, "OUT is the input file; write elsewhere");
        goto done;
    }
    tc_dst_cleanup_on_signals();
    int rc = tc_open(&c, in, &r.lim, &d);
    if (rc) {
        ex = tc_err_diag(&d);
        goto done;
    }
    tc_ckpt_admit(c, r.safe_globals, r.nsafe);
    /* only tensors go out: a file that tries to run code is refused, one that merely names classes is read inertly */
    if ((rc = tc_safety_gate(c, TC_KEEPS_TENSORS, "extract", r.allow_unsafe, &d))) {
        ex = tc_err_diag(&d);
        goto done;
    }
    if ((rc = tc_weights_find(c, &ws, &d))) {
        tc_diag_subject(&d, in);
        ex = tc_err_diag(&d);
        goto done;
    }
    if ((ex = tc_pick_weights(c, in, from, a.set[OPT_EMA], &ws, &w)) != 0)
        goto done;
    ex = TC_EXIT_USAGE;
    if ((rc = tc_extract_left(c, &w, &rep, &d))) {
        ex = tc_err_diag(&d);
        goto done;
    }
    tc_progress prog;
    tc_progress_init(&prog, "extracting", true);
    o.co.ro.progress = tc_progress_cb;
    o.co.ro.progress_ctx = &prog;
    uint64_t file_bytes = 0;
    if (set) {
        tc_set_opts so = {.max_shard = max_shard, .dst_flags = tc_dst_flags_from_args(&a), .allow_unsafe = r.allow_unsafe,
                          .safe_globals = r.safe_globals, .nsafe = r.nsafe, .lim = r.lim};
        rc = tc_extract_set(c, &w, &o, &so, out, &srep, &d);
    } else if (!(rc = tc_dst_open(&dst, out, tc_dst_flags_from_args(&a), &d)) &&
               !(rc = tc_extract(c, &w, &o, &dst, &rep, &d))) {
        file_bytes = dst.pos;
        rc = tc_dst_commit(&dst, &d);
    }
    tc_progress_end(&prog);
    if (rc) {
        tc_dst_abort(&dst);
        if (rc != TC_ERR_USAGE)
            tc_diag_subject(&d, in);
        ex = tc_err_diag(&d);
        goto done;
    }
    if (!tc_ckpt_is_safe(c) && !r.allow_unsafe) /* said once the output is written (a failure is one line) */
        tc_unsafe_note(c, in);
    bool stripped = o.co.keys.strip;
    if (set) {
        char wrote[4200];
        snprintf(wrote, sizeof wrote, "%s and %zu shard%s", srep.index_path, srep.nshards, tc_s(srep.nshards));
        tc_wrote_set(srep.index_path, srep.nshards + 1, srep.sum.ntensors + srep.sum.ncopies, srep.file_bytes,
                     srep.sum.data_bytes);
        summary(wrote, &w, &rep, &srep.sum, o.safetensors, stripped);
        tc_print_removed(srep.index_path, srep.removed, srep.nremoved);
    } else {
        tc_wrote_set(out, 1, rep.conv.ntensors + rep.conv.ncopies, file_bytes, rep.conv.data_bytes);
        summary(out, &w, &rep, &rep.conv, o.safetensors, stripped);
    }
    ex = TC_EXIT_OK;
done:
    tc_set_report_free(&srep);
    tc_extract_report_free(&rep);
    tc_wcand_clear(&w);
    tc_weights_free(&ws);
    tc_ckpt_close(c);
    free(in_path);
    free(out_path);
    free(a.pos);
    return tc_wrote_end(ex);
}

const tc_cmd tc_cmd_extract = {
    "extract", "extract [options] IN -o OUT",
    "Write a checkpoint's weights as a plain state_dict: a .pt that loads with torch.load(weights_only=True), or a\n"
    ".safetensors file (or a sharded set), tensors bit for bit, shared storages kept. The weights are found in a\n"
    "state_dict, a training checkpoint (state_dict, model, ema, ...), an nn.Module pickled whole (named as its\n"
    "state_dict() names them, its classes never needed) or a TorchScript archive; everything else (optimizer\n"
    "state, schedulers, RNG state, hyper-parameters) is left behind and listed. Several candidates: exit 2, listed.",
    opts, run};
