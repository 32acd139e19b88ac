/* consolidate: a distributed checkpoint (DCP) or a DeepSpeed ZeRO save
 * folder as one .pt or .safetensors file, or a sharded set. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "consolidate.h"
#include "move.h"
#include "shard_index.h"

static const tc_opt o_output = {.id = OPT_OUTPUT, .shrt = 'o', .lng = "output", .arg = "OUT",
                                .text = &tc_text_consolidate_output, .kind = TC_KIND_PATH};
static const tc_opt o_format = {.id = OPT_FORMAT, .lng = "format", .arg = "pt|safetensors",
                                .text = &tc_text_consolidate_format, .kind = TC_KIND_WORDS};
static const tc_opt o_from = {.id = OPT_FROM, .lng = "from", .arg = "KEY", .text = &tc_text_consolidate_from,
                              .kind = TC_KIND_KEY};
static const tc_opt o_device = {.id = OPT_DEVICE, .shrt = 'd', .lng = "device", .arg = "DEV", .def = "cpu",
                                .text = &tc_text_consolidate_device, .kind = TC_KIND_DEVICE};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose",
                                 .text = &tc_text_consolidate_verbose};
static const tc_opt o_tag = {.id = OPT_TAG, .lng = "tag", .arg = "TAG", .text = &tc_text_consolidate_tag,
                             .kind = TC_KIND_TAG};
static const tc_opt o_exclude_frozen = {.id = OPT_EXCLUDE_FROZEN, .lng = "exclude-frozen",
                                        .text = &tc_text_consolidate_exclude_frozen};
static const tc_opt *const opts[] = {&tc_opt_help, &o_output, &o_format, &o_from, &o_tag, &o_exclude_frozen,
                                     &tc_opt_dtype, &tc_opt_keep,
                                     &tc_opt_only, &o_device, TC_KEY_OPTS, &tc_opt_max_shard, &tc_opt_part,
                                     &tc_opt_force, &tc_opt_no_sync, &tc_opt_allow_unsafe, &tc_opt_safe_globals,
                                     &tc_opt_json_wrote, &tc_opt_quiet, &o_verbose, TC_LIMIT_OPTS, NULL};



static void summary(const char *out, const tc_consolidate_report *r, const tc_consolidate_opts *o)
{
    const tc_convert_report *s = &r->set.sum;
    if (s->ndropped && !o->set.nparts) { /* said once: by a whole run, or by the index step of one in parts */
        tc_warn_list(out, "not carried, dropped", s->dropped, s->ndropped);
    }
    if (s->overflow)
        tc_warn(out, "%" PRIu64 " values too large for %s became inf/NaN", s->overflow,
                tc_dtype_name(o->set.co.ro.dtype));
    if (s->underflow)
        tc_warn(out, "%" PRIu64 " nonzero values too small for %s became zero", s->underflow,
                tc_dtype_name(o->set.co.ro.dtype));
    tc_wrote_set(o->sharded ? r->set.index_path : out, o->sharded ? r->set.nshards + !o->set.nparts : 1,
                 o->set.index_only || o->set.nparts ? 0 : s->ntensors, r->set.file_bytes, s->data_bytes);
    if (!tc_wrote_line())
        return;
    if (o->set.nparts)
        fprintf(stderr, "tensorctl: wrote part %u of %u of %s: %zu shard%s", o->set.part, o->set.nparts,
                TC_ESC(r->set.index_path), r->set.nshards, tc_s(r->set.nshards));
    else if (o->sharded)
        fprintf(stderr, "tensorctl: wrote %s%s and %zu shard%s", TC_ESC(r->set.index_path),
                o->set.index_only ? " (the shards checked)" : "", r->set.nshards, tc_s(r->set.nshards));
    else
        fprintf(stderr, "tensorctl: wrote %s", TC_ESC(out));
    if (!o->set.index_only && !o->set.nparts)
        fprintf(stderr, ": %zu tensor%s", s->ntensors, tc_s(s->ntensors));
    if (!o->set.index_only && !o->set.nparts && s->naliases && !o->sharded)
        fprintf(stderr, " (and %zu tied name%s of them)", s->naliases, tc_s(s->naliases));
    if (r->ncarried)
        fprintf(stderr, " and %zu other item%s", r->ncarried, tc_s(r->ncarried));
    if (o->set.co.ro.dtype != TC_DT_INVALID)
        fprintf(stderr, "; cast %zu to %s, kept %zu floating-point", s->ncast, tc_dtype_name(o->set.co.ro.dtype),
                s->nkept);
    if (s->nleft_out && !o->set.index_only && !o->set.nparts)
        fprintf(stderr, "; %zu left out by --drop/--only-keys", s->nleft_out);
    if (!o->set.index_only) {
        char h[32];
        tc_human_bytes(s->data_bytes, h, sizeof h);
        fprintf(stderr, "; %s of tensor data", h);
    }
    fprintf(stderr, "\n");
    if (!o->set.index_only && !o->set.nparts)
        tc_print_sharing(o->sharded ? r->set.index_path : out, r->set.file_bytes, s->shared_bytes, s->copied_bytes);
}

/* A tensor split over thousands of ranks is read from as many files at once. */
static void more_files(void)
{
    struct rlimit r;
    if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &r);
    }
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    char *out_path = NULL;
    tc_wrote_begin(cmd->name, a.npos ? a.pos[0] : NULL, a.set[OPT_JSON]);
    if (a.npos != 1) {
        tc_err(NULL, "consolidate: expected one DIR (a distributed checkpoint's folder, a DeepSpeed ZeRO save "
               "folder), got %d (see 'tensorctl consolidate --help')", a.npos);
        tc_hint_bare_value(&a);
        goto done;
    }
    if (!a.set[OPT_OUTPUT]) {
        tc_err(NULL, "consolidate: give -o OUT (a .pt or .safetensors file, or a folder for a sharded set)");
        goto done;
    }
    if (tc_move_parse_common(&a, &r))
        goto done;
    const char *in = a.pos[0], *out = a.val[OPT_OUTPUT];
    /* --tag and --from: checked by tc_parse (TC_KIND_TAG, TC_KIND_KEY) */
    tc_consolidate_opts o = {.format = TC_OUT_PT, .tag = a.name[OPT_TAG], .exclude_frozen = a.set[OPT_EXCLUDE_FROZEN]};
    tc_set_opts *so = &o.set;
    so->co = (tc_convert_opts){.ro = r.o, .key = a.name[OPT_FROM], .key_opt = "--from", .device = "cpu"};
    tc_part_from_args(&a, &so->part, &so->nparts, &so->index_only);
    if (tc_keyops_from_args(&a, &so->co.keys))
        goto done;
    /* a set with --max-shard-size, --part or an index name; else one file: OUT, or DIR/NAME.EXT in a folder OUT */
    if (tc_sharded_output(&a, out, &o.sharded, &so->max_shard))
        goto done;
    if (!o.sharded) {
        if ((ex = tc_output_file(&a, out, in, &out_path)) != 0)
            goto done;
        ex = TC_EXIT_USAGE;
        out = out_path;
    }
    tc_wrote_target(out);
    int fmt = tc_output_format(&a, out);
    if (fmt < 0)
        goto done;
    o.format = fmt == TC_OUTNAME_ST ? TC_OUT_ST : TC_OUT_PT;
    if (a.set[OPT_DEVICE]) {
        const char *dv = a.val[OPT_DEVICE];
        if (o.format != TC_OUT_PT) {
            tc_err(NULL, "--device '%s': safetensors files carry no device tags; it applies to .pt output", dv);
            goto done;
        }
        so->co.device = a.dev[OPT_DEVICE];
    }
    so->mode = o.format == TC_OUT_ST ? TC_SET_SAFETENSORS : TC_SET_TORCH;
    so->dst_flags = tc_dst_flags_from_args(&a);
    so->allow_unsafe = r.allow_unsafe;
    so->safe_globals = r.safe_globals;
    so->nsafe = r.nsafe;
    so->lim = r.lim;
    tc_dst_cleanup_on_signals();
    more_files();
    tc_progress prog;
    tc_progress_init(&prog, "consolidating", true);
    so->co.ro.progress = tc_progress_cb;
    so->co.ro.progress_ctx = &prog;
    tc_consolidate_report rep = {0};
    tc_diag d = TC_DIAG_INIT;
    int rc = tc_consolidate(in, out, &o, &rep, &d);
    tc_progress_end(&prog);
    if (rc) {
        if (rc != TC_ERR_USAGE)
            tc_diag_subject(&d, in);
        ex = tc_err_diag(&d);
    } else {
        summary(o.sharded ? rep.set.index_path : out, &rep, &o);
        if (o.sharded)
            tc_print_removed(rep.set.index_path, rep.set.removed, rep.set.nremoved);
        ex = TC_EXIT_OK;
    }
    tc_consolidate_report_free(&rep);
done:
    free(out_path);
    free(a.pos);
    return tc_wrote_end(ex);
}

const tc_cmd tc_cmd_consolidate = {
    "consolidate", "consolidate [options] DIR -o OUT",
    "Write a distributed checkpoint (torch.distributed.checkpoint: FSDP, DTensor, torchtitan; a folder of\n"
    ".distcp files and .metadata) as one .pt or .safetensors file, or a sharded set, without torch. Each\n"
    "tensor is assembled from its chunks as it is written, bit for bit (or cast with --dtype); the names\n"
    "are DCP's flattened ones. Pickled items (step counters, hyper-parameters) go into a .pt output when\n"
    "they load with weights_only=True; the rest are listed as dropped. A DeepSpeed ZeRO save folder\n"
    "(stages 1-3; the folder holding 'latest', a step folder, or a file of one) becomes the fp32\n"
    "state_dict DeepSpeed's get_fp32_state_dict_from_zero_checkpoint returns, without DeepSpeed, each\n"
    "parameter gathered from the ranks' partitions as it is written.",
    opts, run};
