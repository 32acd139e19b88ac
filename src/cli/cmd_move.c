/* to-cpu and to-cuda: rewrite a checkpoint with its storages on another
 * device, optionally casting floating-point tensors. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast.h"
#include "cast_cuda.h"
#include "cli.h"
#include "format.h"
#include "hash.h"
#include "move.h"
#include "rekey.h"
#include "rewrite.h"
#include "safety.h"
#include "set.h"
#include "shard_index.h"

static const tc_opt o_output = {.id = OPT_OUTPUT, .shrt = 'o', .lng = "output", .arg = "OUT",
                                .text = &tc_text_move_output, .kind = TC_KIND_PATH};
static const tc_opt o_in_place = {.id = OPT_IN_PLACE, .lng = "in-place", .text = &tc_text_move_in_place};
static const tc_opt o_map = {.id = OPT_MAP, .lng = "map", .arg = "FROM=TO", .flags = TC_OPT_REPEAT,
                             .text = &tc_text_move_map, .kind = TC_KIND_DEVMAP};
static const tc_opt o_engine = {.id = OPT_ENGINE, .lng = "engine", .arg = "auto|cpu|cuda", .def = "auto",
                                .text = &tc_text_move_engine, .kind = TC_KIND_WORDS};
static const tc_opt o_verify_crc = {.id = OPT_VERIFY_CRC, .lng = "verify-crc", .text = &tc_text_move_verify_crc};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_move_verbose};
static const tc_opt o_device = {.id = OPT_DEVICE, .shrt = 'd', .lng = "device", .arg = "cuda:N", .def = "cuda:0",
                                .text = &tc_text_move_device, .kind = TC_KIND_DEVICE};

#define MOVE_OPTS                                                                                         \
    &tc_opt_help, &o_output, &tc_opt_force, &tc_opt_no_sync, &o_in_place, &o_map, &tc_opt_dtype, &tc_opt_keep, &tc_opt_only, \
        TC_KEY_OPTS, &o_engine, &tc_opt_part, &tc_opt_allow_unsafe, &tc_opt_safe_globals, &o_verify_crc,          \
        &tc_opt_json_wrote, &tc_opt_quiet, &o_verbose, TC_LIMIT_OPTS

static const tc_opt *const cpu_opts[] = {MOVE_OPTS, NULL};
static const tc_opt *const cuda_opts[] = {&o_device, MOVE_OPTS, NULL};

/* FILE with .TAG inserted before its extension: model.pt -> model.cpu.pt */
static char *default_out(const char *in, const char *tag)
{
    const char *slash = strrchr(in, '/'), *base = slash ? slash + 1 : in, *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - in) : strlen(in);
    size_t n = strlen(in) + strlen(tag) + 3;
    char *o = malloc(n);
    if (o)
        snprintf(o, n, "%.*s.%s%s", (int)stem, in, tag, in + stem);
    return o;
}

static void summary(const char *out, const tc_ckpt *c, const tc_plan *p, const tc_rekey *rk, const tc_move_req *r,
                    uint64_t file_bytes)
{
    /* what was written: the tensors and storages key surgery left */
    size_t moved = 0, ns = tc_ckpt_nstorages(c), nt = tc_ckpt_ntensors(c);
    for (size_t i = 0; i < ns; i++)
        moved += (!p->gone || !p->gone[i]) && strcmp(p->out[i].location, tc_ckpt_storage(c, i)->location) != 0;
    /* the first few storages that lost values, by their tensors' names, then the rest counted */
    enum { SHOWN = 8 };
    long *first = calloc(ns + 1, sizeof *first), *more = calloc(ns + 1, sizeof *more);
    for (size_t k = 0; first && more && k < nt; k++) {
        const tc_tensor *t = tc_ckpt_tensor(c, k);
        if (t->storage >= 0 && t->alias_of < 0)
            (first[t->storage] ? more : first)[t->storage] = (long)k + 1;
    }
    size_t nlost = 0;
    uint64_t rest_over = 0, rest_under = 0;
    for (size_t i = 0; i < ns; i++) {
        const tc_plan_stat *st = &p->stat[i];
        if (!st->overflow && !st->underflow)
            continue;
        if (nlost++ >= SHOWN) {
            rest_over += st->overflow;
            rest_under += st->underflow;
            continue;
        }
        char names[512];
        snprintf(names, sizeof names, "%s%s", first && first[i] ? tc_ckpt_tensor(c, (size_t)first[i] - 1)->name : "?",
                 more && more[i] ? " (and the other tensors on its storage)" : "");
        if (st->overflow)
            tc_warn(out, "%s: %" PRIu64 " values too large for %s became inf/NaN", names, st->overflow,
                    tc_dtype_name(r->o.dtype));
        if (st->underflow)
            tc_warn(out, "%s: %" PRIu64 " nonzero values too small for %s became zero", names, st->underflow,
                    tc_dtype_name(r->o.dtype));
    }
    if (nlost > SHOWN)
        tc_warn(out, "%zu more storages: %" PRIu64 " values became inf/NaN, %" PRIu64 " became zero", nlost - SHOWN,
                rest_over, rest_under);
    free(first);
    free(more);
    tc_wrote_set(out, 1, nt - rk->ndropped, file_bytes, p->out_bytes);
    if (!tc_wrote_line())
        return;
    fprintf(stderr, "tensorctl: wrote %s: %zu tensors", TC_ESC(out), nt - rk->ndropped);
    if (rk->ndropped)
        fprintf(stderr, " (%zu left out by --drop/--only-keys)", rk->ndropped);
    fprintf(stderr, ", %zu of %zu storages moved", moved, ns - p->ngone);
    if (p->nunreached)
        fprintf(stderr, " (%zu that nothing in the file reaches left out)", p->nunreached);
    if (r->o.dtype != TC_DT_INVALID) {
        fprintf(stderr, "; cast %zu tensors to %s, kept %zu floating-point tensors", p->ncast,
                tc_dtype_name(r->o.dtype), p->nkept);
        if (p->engine[0] && tc_verbosity > 1)
            fprintf(stderr, " (cast on %s)", p->engine);
    }
    char a[32], b[32];
    tc_human_bytes(p->in_bytes, a, sizeof a);
    tc_human_bytes(p->out_bytes, b, sizeof b);
    fprintf(stderr, "; tensor data %s -> %s\n", a, b);
    tc_print_sharing(out, file_bytes, p->shared, p->copied);
    if (tc_dtype_is_v3(r->o.dtype) && p->ncast)
        fprintf(stderr, "tensorctl: note: %s tensors need torch >= 2.1 to load\n", tc_dtype_name(r->o.dtype));
}

/* Open input, check safety, plan, write OUT atomically. */
int tc_move_run(const char *in, const char *out, unsigned dst_flags, tc_move_req *r)
{
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    tc_plan p = {0};
    tc_rekey rk = {0};
    tc_dst dst = TC_DST_INIT;
    tc_progress prog;
    int rc = tc_open(&c, in, &r->lim, &d);
    if (rc)
        return tc_err_diag(&d);
    tc_ckpt_admit(c, r->safe_globals, r->nsafe);
    if (tc_safety_gate(c, TC_KEEPS_GRAPH, "rewrite", r->allow_unsafe, &d)) {
        tc_ckpt_close(c);
        return tc_err_diag(&d);
    }
    if (!tc_ckpt_has_objects(c)) {
        tc_err(in, "%s files hold no device tags; use 'tensorctl %s' to turn them into .pt files", tc_ckpt_format(c),
               tc_ckpt_distributed(c) ? "consolidate" : "convert");
        tc_ckpt_close(c);
        return TC_EXIT_USAGE;
    }
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++)
        if (tc_ckpt_tensor(c, i)->kind == TC_TENSOR_OTHER)
            tc_warn(in, "tensor '%s' is a tensor subclass without storage; its device is left as saved",
                    tc_ckpt_tensor(c, i)->name);
    r->o.progress = NULL;
    if (r->o.keys && (rc = tc_rekey_make(c, r->o.keys, &rk, &d)))
        goto fail;
    if ((rc = tc_plan_make_less(&p, c, &r->o, r->o.keys ? rk.names : NULL, &d)))
        goto fail;
    if (r->check_cuda)
        r->check_cuda(r, c, &p);
    if ((rc = tc_dst_open(&dst, out, dst_flags, &d)))
        goto fail;
    tc_progress_init(&prog, "writing", true);
    r->o.progress = tc_progress_cb;
    r->o.progress_ctx = &prog;
    rc = tc_rewrite_keyed(c, &p, &rk, &dst, &d);
    tc_progress_end(&prog);
    uint64_t file_bytes = dst.pos;
    char *old_blob = tc_dst_blob(&dst) ? strdup(tc_dst_blob(&dst)) : NULL, blob[65];
    if (rc || (rc = tc_dst_commit_hashed(&dst, blob, &d))) {
        free(old_blob);
        goto fail;
    }
    summary(out, c, &p, &rk, r, file_bytes);
    if (blob[0] && tc_verbosity > 0) {
        const char *old_name = old_blob ? strrchr(old_blob, '/') + 1 : "";
        if (strcmp(old_name, blob))
            fprintf(stderr,
                    "tensorctl: %s links into a content-addressed store: the new content is a new blob %s, this "
                    "link now points to it, and the old blob %s is left as it was for whatever else links to it\n",
                    out, blob, old_name);
        else
            fprintf(stderr, "tensorctl: %s links into a content-addressed store: its content is unchanged (blob %s)\n",
                    out, blob);
    }
    free(old_blob);
    tc_plan_free(&p);
    tc_rekey_free(&rk);
    tc_ckpt_close(c);
    return TC_EXIT_OK;
fail:
    tc_dst_abort(&dst);
    tc_diag_subject(&d, in);
    tc_plan_free(&p);
    tc_rekey_free(&rk);
    tc_ckpt_close(c);
    return tc_err_diag(&d);
}

/* With a GPU present, check the target device exists and the tensors fit. */
static void check_cuda(tc_move_req *r, const tc_ckpt *c, const tc_plan *p)
{
    tc_cuda_info ci;
    tc_cuda_query(&ci);
    if (!ci.available) {
        if (tc_verbosity > 1)
            fprintf(stderr, "tensorctl: no usable GPU here (%s); writing the file for another machine\n", ci.why);
        return;
    }
    int idx = 0;
    const char *colon = strchr(r->o.all_to ? r->o.all_to : "cuda:0", ':');
    if (colon)
        idx = atoi(colon + 1);
    tc_cuda_device dev;
    if (tc_cuda_device_get(&dev, idx)) {
        tc_warn(NULL, "this machine has %d CUDA device(s); cuda:%d is not one of them (the file is written anyway)",
                ci.count, idx);
        return;
    }
    uint64_t need = 0;
    for (size_t i = 0; i < tc_ckpt_nstorages(c); i++)
        if (!strcmp(p->out[i].location, r->o.all_to ? r->o.all_to : "cuda:0"))
            need += p->out[i].nbytes;
    if (need > dev.free_mem)
        tc_warn(NULL, "the tensors need %.1f GB on cuda:%d (%s) but only %.1f GB is free", need / 1e9, idx, dev.name,
                dev.free_mem / 1e9);
    else if (tc_verbosity > 1)
        fprintf(stderr, "tensorctl: cuda:%d (%s): tensors need %.2f GB, %.2f GB free\n", idx, dev.name, need / 1e9,
                dev.free_mem / 1e9);
}

/* A sharded set: each shard rewritten under its own name, the index copied;
 * all of it or nothing. */
static int move_index(const char *in, const char *out, unsigned dst_flags, tc_move_req *r, const tc_args *a)
{
    tc_set_opts so = {.mode = TC_SET_REWRITE, .co = {.ro = r->o, .keys = r->keys}, .dst_flags = dst_flags, .allow_unsafe = r->allow_unsafe,
                      .safe_globals = r->safe_globals, .nsafe = r->nsafe, .lim = r->lim};
    tc_part_from_args(a, &so.part, &so.nparts, &so.index_only);
    tc_set_report rep = {0};
    tc_diag d = TC_DIAG_INIT;
    int rc = tc_set_run(in, out, &so, &rep, &d);
    if (rc) {
        tc_diag_subject(&d, in);
        tc_set_report_free(&rep);
        return tc_err_diag(&d);
    }
    if (rep.sum.overflow)
        tc_warn(rep.index_path, "%" PRIu64 " values too large for %s became inf/NaN", rep.sum.overflow,
                tc_dtype_name(r->o.dtype));
    if (rep.sum.underflow)
        tc_warn(rep.index_path, "%" PRIu64 " nonzero values too small for %s became zero", rep.sum.underflow,
                tc_dtype_name(r->o.dtype));
    tc_wrote_set(rep.index_path, rep.nshards + 1, rep.sum.ntensors, rep.file_bytes, rep.sum.data_bytes);
    if (tc_wrote_line()) {
        char b[32];
        tc_human_bytes(rep.sum.data_bytes, b, sizeof b);
        fprintf(stderr, "tensorctl: wrote %s and %zu shard%s: %zu tensor%s", TC_ESC(rep.index_path), rep.nshards,
                tc_s(rep.nshards), rep.sum.ntensors, tc_s(rep.sum.ntensors));
        if (rep.sum.nleft_out)
            fprintf(stderr, " (%zu left out by --drop/--only-keys)", rep.sum.nleft_out);
        if (r->o.dtype != TC_DT_INVALID)
            fprintf(stderr, "; cast %zu tensors to %s, kept %zu floating-point tensors", rep.ncast,
                    tc_dtype_name(r->o.dtype), rep.nkept);
        fprintf(stderr, "; tensor data %s\n", b);
        tc_print_sharing(rep.index_path, rep.file_bytes, rep.sum.shared_bytes, rep.sum.copied_bytes);
    }
    tc_print_removed(rep.index_path, rep.removed, rep.nremoved);
    tc_set_report_free(&rep);
    return TC_EXIT_OK;
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    tc_move_req r = {0};
    int ex = TC_EXIT_USAGE;
    char *out = NULL, *in_path = NULL;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    tc_wrote_begin(cmd->name, a.npos ? a.pos[0] : NULL, a.set[OPT_JSON]);
    if (a.npos != 1) {
        tc_err(NULL, "%s: expected one FILE, got %d (see 'tensorctl %s --help')", cmd->name, a.npos, cmd->name);
        tc_hint_bare_value(&a);
        goto done;
    }
    memset(&r, 0, sizeof r);
    if (tc_move_parse_common(&a, &r) || tc_keyops_from_args(&a, &r.keys))
        goto done;
    r.o.keys = tc_keyops_any(&r.keys) ? &r.keys : NULL;
    bool cuda = !strcmp(cmd->name, "to-cuda");
    char dev[32] = "cpu";
    if (cuda) {
        const char *d = a.set[OPT_DEVICE] ? a.val[OPT_DEVICE] : "cuda:0";
        snprintf(dev, sizeof dev, "%s", a.dev[OPT_DEVICE]); /* the default's when not given */
        if (strncmp(dev, "cuda:", 5)) {
            tc_err(NULL, "--device '%s': to-cuda moves storages to cuda or cuda:N (to-cpu --map moves them elsewhere)",
                   d);
            goto done;
        }
        r.check_cuda = check_cuda;
    }
    r.o.all_to = dev;
    r.o.cuda_device = 0;
    if ((ex = tc_input_path(a.pos[0], &in_path)) != 0)
        goto done;
    ex = TC_EXIT_USAGE;
    const char *in = in_path;
    if (a.set[OPT_IN_PLACE] && a.set[OPT_OUTPUT]) {
        tc_err(NULL, "--in-place and --output exclude each other");
        goto done;
    }
    if (tc_index_path(in)) {
        if (!a.set[OPT_OUTPUT] || a.set[OPT_IN_PLACE]) {
            tc_err(in, "a sharded set needs -o OUTDIR (or -o OUTDIR/NAME.index.json) for the new shards");
            goto done;
        }
        const char *o = a.val[OPT_OUTPUT];
        if (tc_names_one_file(o)) {
            tc_err(o, "a sharded set is rewritten shard by shard: -o names the new set's folder or its .index.json "
                   "(to join the shards into one file: tensorctl convert IN OUT)");
            goto done;
        }
        tc_wrote_target(o);
        tc_dst_cleanup_on_signals();
        ex = move_index(in, o, tc_dst_flags_from_args(&a), &r, &a);
        goto done;
    }
    if (a.set[OPT_PART]) {
        tc_err(NULL, "--part splits the writing of a sharded set among processes; '%s' is not an index", in);
        goto done;
    }
    if (a.set[OPT_IN_PLACE])
        out = strdup(in);
    else if (a.set[OPT_OUTPUT]) {
        if ((ex = tc_output_path(a.val[OPT_OUTPUT], in, NULL, &out)) != 0)
            goto done;
        ex = TC_EXIT_USAGE;
    } else {
        /* named after where the storages go; --map moves only some (the others keep their device) */
        char tag[40];
        snprintf(tag, sizeof tag, "%s", r.nmaps ? "mapped" : dev);
        char *colon = strchr(tag, ':');
        if (colon)
            memmove(colon, colon + 1, strlen(colon));
        out = default_out(in, tag);
    }
    if (!out) {
        tc_err(NULL, "out of memory");
        ex = TC_EXIT_FAIL;
        goto done;
    }
    if (!a.set[OPT_IN_PLACE] && (!strcmp(in, out) || tc_same_file(in, out))) {
        tc_err(in, "OUT is the input file; use --in-place to replace it");
        goto done;
    }
    tc_wrote_target(out);
    tc_dst_cleanup_on_signals();
    ex = tc_move_run(in, out, a.set[OPT_IN_PLACE] ? TC_DST_IN_PLACE : tc_dst_flags_from_args(&a), &r);
done:
    free(out);
    free(in_path);
    free(a.pos);
    return tc_wrote_end(ex);
}

const tc_cmd tc_cmd_to_cpu = {
    "to-cpu", "to-cpu [options] FILE [-o OUT]",
    "Rewrite a checkpoint with every storage on the CPU, so plain torch.load(OUT) works on any machine.\n"
    "Tensors are copied bit for bit (or cast with --dtype); names, sharing and all other objects are kept.\n"
    "Legacy (pre-1.6) files come out in the zip format.",
    cpu_opts, run};

const tc_cmd tc_cmd_to_cuda = {
    "to-cuda", "to-cuda [options] FILE [-o OUT] [--device cuda:N]",
    "Rewrite a checkpoint with every storage on one CUDA device, so torch.load(OUT) puts it there.\n"
    "Works without a GPU (to prepare files for another machine); with one, checks the device and its memory.",
    cuda_opts, run};
