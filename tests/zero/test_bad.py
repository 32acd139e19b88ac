#!/usr/bin/env python3
"""Broken DeepSpeed ZeRO checkpoints: consolidate (and inspect) must refuse each with one clear
line naming the file and saying what is wrong, exit non-zero, and write nothing.

    test_bad.py TENSORCTL OUTDIR SAMPLES_ZERO_DIR

The broken cases are made from sample_models/zero by deleting, swapping or editing files; an
edited model-states file is rewritten with torch (it loads with weights_only=True: no DeepSpeed
class in it). One line per check, then `N passed, M failed`; exit 77 when torch cannot be imported.
"""
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
warnings.filterwarnings("ignore")


def copy(samples, name, work, as_name):
    dst = os.path.join(work, as_name)
    shutil.copytree(os.path.join(samples, name), dst)
    return dst


def edit_model(folder, fn, name="mp_rank_00_model_states.pt"):
    p = os.path.join(folder, "global_step3", name)
    m = torch.load(p, map_location="cpu", weights_only=True)
    fn(m)
    torch.save(m, p)


def grow(m):  # a parameter larger than the flat groups hold
    g = m["param_shapes"][0]
    k = list(g)[-1]
    g[k] = torch.Size([g[k][0] + 50] + list(g[k][1:]))


def shrink(m):  # fewer elements than the flat groups hold: the padding no longer adds up
    g = m["param_shapes"][0]
    k = list(g)[0]
    g[k] = torch.Size([g[k][0] - 2] + list(g[k][1:]))


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    tool, base, samples = sys.argv[1:]
    work = out_dir(base, torch)
    rep = Report()
    cases = []

    d = copy(samples, "z2_w3_fp32", work, "missing_rank")
    os.remove(os.path.join(d, "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"))
    cases.append(("missing rank file", d, d + "/global_step3", "no zero_pp_rank_1_*_optim_states.pt"))

    d = copy(samples, "z3_w4_fp32", work, "missing_rank3")
    os.remove(os.path.join(d, "global_step3", "zero_pp_rank_3_mp_rank_00_optim_states.pt"))
    cases.append(("stage 3: missing rank file", d, d + "/global_step3", "partition_count says 4 ranks"))

    d = copy(samples, "z3_w4_fp32", work, "missing_model3")
    os.remove(os.path.join(d, "global_step3", "zero_pp_rank_3_mp_rank_00_model_states.pt"))
    cases.append(("stage 3: missing model-states file", d, d + "/global_step3", "model-states file missing?"))

    d = copy(samples, "z2_w2_fp16", work, "mixed_runs")
    shutil.copy(os.path.join(samples, "z2_w3_fp32", "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
                os.path.join(d, "global_step3"))
    cases.append(("ranks of different runs", d, d + "/global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                  "ranks of different runs?"))

    d = copy(samples, "z3_w4_fp32", work, "mixed_runs3")
    shutil.copy(os.path.join(samples, "z3_w2_fp16", "global_step3", "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
                os.path.join(d, "global_step3"))
    cases.append(("stage 3: ranks of different runs", d,
                  d + "/global_step3/zero_pp_rank_1_mp_rank_00_optim_states.pt", "ranks of different runs?"))

    d = copy(samples, "z2_w3_fp32", work, "short_groups")
    edit_model(d, grow)
    cases.append(("flat groups shorter than param_shapes need", d, d + "/global_step3",
                  "flat groups shorter than param_shapes need"))

    d = copy(samples, "z3_w2_fp16", work, "short_groups3")
    edit_model(d, grow, "zero_pp_rank_0_mp_rank_00_model_states.pt")
    cases.append(("stage 3: flat groups shorter than param_shapes need", d, d + "/global_step3",
                  "flat groups shorter than param_shapes need"))

    d = copy(samples, "z1_w3_fp16", work, "bad_padding")
    edit_model(d, shrink)
    cases.append(("padding that does not add up", d, d + "/global_step3", "padding that does not add up"))

    d = copy(samples, "z3_w4_fp32", work, "bad_padding3")
    edit_model(d, shrink, "zero_pp_rank_0_mp_rank_00_model_states.pt")
    cases.append(("stage 3: padding that does not add up", d, d + "/global_step3", "padding that does not add up"))

    d = copy(samples, "z1_w1_fp32", work, "latest_nowhere")
    with open(os.path.join(d, "latest"), "w") as f:
        f.write("global_step9")
    cases.append(("'latest' naming no folder", d, d + "/latest", "names step folder 'global_step9', which is not a"))

    d = copy(samples, "z1_w1_fp32", work, "latest_escapes")
    with open(os.path.join(d, "latest"), "w") as f:
        f.write("../z1_w1_fp32\n")
    cases.append(("'latest' naming a path", d, d + "/latest", "not the name of a step folder"))

    d = copy(samples, "z2_w2_fp32_tags", work, "no_latest")
    os.remove(os.path.join(d, "latest"))
    cases.append(("no 'latest' but step folders", d, d, "give --tag, one of: global_step"))

    d = copy(samples, "z1_w2_bf16_fp32accum", work, "bf16_optimizer")
    cases.append(("BF16_Optimizer (DeepSpeed's converter refuses it)", d,
                  d + "/global_step3/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "a BF16_Optimizer checkpoint"))

    d = copy(samples, "z2_w3_fp32", work, "symlinked_rank")
    r = os.path.join(d, "global_step3", "zero_pp_rank_2_mp_rank_00_optim_states.pt")
    os.rename(r, r + ".real")
    os.symlink(os.path.basename(r) + ".real", r)
    cases.append(("a rank file that is a symbolic link", d, r, "is a symbolic link"))

    d = copy(samples, "z2_w3_fp32", work, "model_not_zip")
    with open(os.path.join(d, "global_step3", "mp_rank_00_model_states.pt"), "wb") as f:
        f.write(b"not a zip at all, just some bytes")
    cases.append(("a model-states file that is no zip", d, d + "/global_step3/mp_rank_00_model_states.pt",
                  "not a torch.save zip archive"))

    for what, folder, subject, frag in cases:
        before = {os.path.join(p, f): os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(folder) for f in fs}
        problems = []
        for cmd in (["consolidate", "-q", folder, "-o", os.path.join(work, "out.pt")], ["inspect", folder]):
            rc, _, err = run(tool, *cmd)
            lines = err.strip().splitlines()
            if rc == 0:
                problems.append("%s accepted it" % cmd[0])
            elif len(lines) != 1:
                problems.append("%s: %d stderr lines, expected 1: %s" % (cmd[0], len(lines), lines))
            elif not lines[0].startswith("tensorctl: %s: " % subject):
                problems.append("%s: the line does not name %s: %s" % (cmd[0], subject, lines[0]))
            elif frag not in lines[0]:
                problems.append("%s: the line lacks %r: %s" % (cmd[0], frag, lines[0]))
            left = [f for f in os.listdir(work) if f == "out.pt" or f.startswith(".out.pt.")]
            if left:
                problems.append("%s left %s behind" % (cmd[0], left))
        after = {os.path.join(p, f): os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(folder) for f in fs}
        if after != before:
            problems.append("the input changed")
        rep.check("refused with one line, nothing written: %s" % what, problems)
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main())
