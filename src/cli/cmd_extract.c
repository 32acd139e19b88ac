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

static const tc_opt o_output = {OPT_OUTPUT, 'o', "output", "OUT",
                                "write here: .pt/.bin/.pth (torch) or .safetensors, or a set's *.index.json", 0, NULL,
                                "Write the weights to \\fIOUT\\fR: a torch file\n.RB ( .pt ,\n.BR .bin ,\n.BR .pth ,\n"
                                ".BR .ckpt )\nor a\n.B .safetensors\nfile, as its extension (or \\-\\-format) says; "
                                "an\n.B .index.json\nname writes a sharded set (its shards beside it)."};
static const tc_opt o_format = {OPT_FORMAT, 0, "format", "pt|safetensors", "output format (default: from OUT's extension)",
                                0, NULL, "The output format, when the extension does not say."};
static const tc_opt o_from = {
    OPT_FROM, 0, "from", "KEY", "take the weights under this entry (dotted: model.module; '.' for the whole file)", 0,
    NULL,
    "Take the tensors under this entry (a top-level key such as\n.BR state_dict ,\nor a dotted path such as\n"
    ".BR trainer.model ;\n.B .\nfor the whole file), named relative to it, instead of the one found."};
static const tc_opt o_ema = {OPT_EMA, 0, "ema", NULL, "take the EMA copy of the weights (ema, model_ema, ema_model, ...)",
                             0, NULL,
                             "Take the EMA copy of the weights: the entry named\n.BR ema ,\n.BR model_ema ,\n"
                             ".B ema_model\nor the like."};
static const tc_opt o_max_shard = {
    OPT_MAX_SHARD, 0, "max-shard-size", "SIZE", "index output: at most SIZE bytes of tensor data per shard", 0, "5GB",
    "With an\n.B .index.json\noutput: the most tensor data one shard holds, as for convert."};
static const tc_opt o_verbose = {OPT_VERBOSE, 'v', "verbose", NULL, "say more", 0, NULL,
                                 "Also list every candidate set of weights."};
/* convert's name for the same choice */
static const tc_opt o_key = {OPT_KEY, 0, "key", "KEY", "the same as --from (convert's name)", 0, NULL,
                             "The same as \\-\\-from, as convert names it."};
static const tc_opt *const opts[] = {&tc_opt_help, &o_output, &o_format, &o_from, &o_key, &o_ema, &tc_opt_dtype,
                                     &tc_opt_keep, &tc_opt_only, TC_KEY_OPTS, &tc_opt_max_expand, &o_max_shard,
                                     &tc_opt_force, &tc_opt_no_sync, &tc_opt_allow_unsafe, &tc_opt_safe_globals, &tc_opt_quiet,
                                     &o_verbose, TC_LIMIT_OPTS, NULL};



static void cand_line(const tc_wcand *w)
{
    char b[32];
    tc_human_bytes(w->bytes, b, sizeof b);
    fprintf(stderr, "  --from %-16s %zu tensors, %s: %s%s%s%s\n", w->prefix[0] ? TC_ESC(w->prefix) : ".", w->ntensors, b,
            TC_ESC(w->reason), w->shared[0] ? " (every key starts with '" : "", TC_ESC(w->shared), w->shared[0] ? "')" : "");
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
    if (tc_verbosity < 1)
        return;
    tc_human_bytes(conv->data_bytes, b, sizeof b);
    fprintf(stderr, "tensorctl: wrote %s: %zu tensor%s", TC_ESC(out), conv->ntensors + conv->ncopies,
            tc_s(conv->ntensors + conv->ncopies));
    if (conv->naliases)
        fprintf(stderr, st ? " + %zu alias%s of shared storage" : " + %zu shared view%s", conv->naliases,
                conv->naliases == 1 ? "" : st ? "es" : "s");
    if (conv->nleft_out)
        fprintf(stderr, " (%zu left out by --drop/--only-keys)", conv->nleft_out);
    fprintf(stderr, ", %s, from %s%s%s (%s)\n", b, w->prefix[0] ? "'" : "", w->prefix[0] ? TC_ESC(w->prefix) : "the whole file",
            w->prefix[0] ? "'" : "", TC_ESC(w->reason));
    if (r->nleft) {
        char line[1200];
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
                tc_buf_printf(&lb, ", %zu tensors, %s", x->ntensors, b);
            }
            tc_buf_putc(&lb, ')');
        }
        fprintf(stderr, "tensorctl: left behind: %s", line);
        if (i < r->nleft || tc_buf_cut(&lb))
            fprintf(stderr, ", ... (%zu in all)", r->nleft);
        fputc('\n', stderr);
    }
    if (w->shared[0] && !stripped)
        fprintf(stderr, "tensorctl: note: every key starts with '%s'; --strip-prefix takes it off\n", TC_ESC(w->shared));
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    char *in_path = NULL;
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
    if (a.set[OPT_KEY] && !a.set[OPT_FROM]) { /* --key is --from */
        a.set[OPT_FROM] = true;
        a.val[OPT_FROM] = a.val[OPT_KEY];
    }
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
    if (tc_keyops_from_args(&a, &o.co.keys) || tc_max_expand_from_args(&a, &o.co.max_expand))
        goto done;
    int fmt = tc_output_format(&a, out);
    if (fmt < 0)
        goto done;
    o.safetensors = fmt == TC_OUTNAME_ST;
    uint64_t max_shard = 0;
    if (a.set[OPT_MAX_SHARD] && (tc_parse_size(a.val[OPT_MAX_SHARD], &max_shard) || !max_shard)) {
        tc_err(NULL, "--max-shard-size: '%s' is not a positive size", a.val[OPT_MAX_SHARD]);
        goto done;
    }
    bool set = tc_index_path(out);
    if (max_shard && !set)
        tc_warn(NULL, "--max-shard-size applies to an .index.json output; writing one file");
    if (tc_index_path(in)) {
        tc_err(in, "a sharded set's shards are state_dicts already; 'tensorctl convert' rewrites them (with the "
               "same key surgery)");
        goto done;
    }
    if (a.set[OPT_FROM] && a.set[OPT_EMA]) {
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
    tc_ckpt_admit(c, (const char *const *)r.safe_globals, r.nsafe);
    /* only tensors go out: a file that tries to run code is refused, one that merely names classes is read inertly */
    if ((rc = tc_safety_gate(c, TC_KEEPS_TENSORS, "extract", r.allow_unsafe, &d))) {
        ex = tc_err_diag(&d);
        goto done;
    }
    if ((rc = tc_weights_find(c, &ws, &d)) ||
        (rc = tc_weights_pick(&ws, c, a.set[OPT_FROM] ? a.val[OPT_FROM] : NULL, a.set[OPT_EMA], &w, &d))) {
        tc_diag_subject(&d, in);
        ex = tc_err_diag(&d);
        if (rc == TC_ERR_USAGE)
            for (size_t i = 0; i < ws.n; i++)
                cand_line(&ws.v[i]);
        goto done;
    }
    if (tc_verbosity > 1 && ws.n > 1)
        for (size_t i = 0; i < ws.n; i++)
            cand_line(&ws.v[i]);
    if ((rc = tc_extract_left(c, &w, &rep, &d))) {
        ex = tc_err_diag(&d);
        goto done;
    }
    tc_progress prog;
    tc_progress_init(&prog, "extracting", true);
    o.co.ro.progress = tc_progress_cb;
    o.co.ro.progress_ctx = &prog;
    if (set) {
        tc_set_opts so = {.max_shard = max_shard, .dst_flags = tc_dst_flags_from_args(&a), .allow_unsafe = r.allow_unsafe,
                          .safe_globals = (const char *const *)r.safe_globals, .nsafe = r.nsafe, .lim = r.lim};
        rc = tc_extract_set(c, &w, &o, &so, out, &srep, &d);
    } else if (!(rc = tc_dst_open(&dst, out, tc_dst_flags_from_args(&a), &d)) &&
               !(rc = tc_extract(c, &w, &o, &dst, &rep, &d))) {
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
        summary(wrote, &w, &rep, &srep.sum, o.safetensors, stripped);
        tc_print_removed(srep.index_path, srep.removed, srep.nremoved);
    } else {
        summary(out, &w, &rep, &rep.conv, o.safetensors, stripped);
    }
    ex = TC_EXIT_OK;
done:
    tc_set_report_free(&srep);
    tc_extract_report_free(&rep);
    tc_wcand_clear(&w);
    tc_weights_free(&ws);
    tc_ckpt_close(c);
    tc_move_req_free(&r);
    free(in_path);
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_extract = {
    "extract", "extract [options] IN -o OUT",
    "Write a checkpoint's weights as a plain state_dict: a .pt that loads with torch.load(weights_only=True), or a\n"
    ".safetensors file (or a sharded set), tensors bit for bit, shared storages kept. The weights are found in a\n"
    "state_dict, a training checkpoint (state_dict, model, ema, ...), an nn.Module pickled whole (named as its\n"
    "state_dict() names them, its classes never needed) or a TorchScript archive; everything else (optimizer\n"
    "state, schedulers, RNG state, hyper-parameters) is left behind and listed. Several candidates: exit 2, listed.",
    opts, run};
