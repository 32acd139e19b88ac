#!/usr/bin/env python3
"""tensorctl diff against files made by real torch, its report checked line for line.

usage: check_diff.py [--only FEATURE[,FEATURE...]] TENSORCTL OUTDIR CORPUS_DIR
       (run under a python with torch; CORPUS_DIR: sample_models/corpus, whose
       torch-1.13/malicious.pt is compared as an unsafe file)
       check_diff.py --features     the features (FEATURES below), one a line

Every input is written here with torch.save (zip and legacy), the safetensors library when this
Python has it (else tensorctl convert), torch.save'd shards with a transformers-style index, and
tensorctl inspect --json --hash for manifests. For every case the exit status, the whole text
report and the JSON report are checked; the numbers they must hold (elements that differ, largest
absolute and relative difference and where, first difference and its values, NaN and inf counts,
cosine similarity) are computed here from the tensors with torch and numpy in float64, by the rule
the man page states, independently of tensorctl. Prints 'ok'/'FAIL' per check, then a count.
"""
import collections
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from judge import features  # noqa: E402

# One meson test per feature (diff-torch/FEATURE), each running the cases listed. --features is
# answered before torch is imported: meson asks at configure time, with a Python that may lack it.
FEATURES = {
    "values": ["identical", "one_element", "many", "nan"],
    "dtypes": ["dtypes", "ints_complex", "new_dtypes", "special"],
    "names-and-shapes": ["keys", "shapes", "tied"],
    "formats-and-usage": ["formats", "manifest", "unsafe", "usage"],
}
ONLY, ARGV = features(sys.argv[1:], list(FEATURES))

import numpy as np  # noqa: E402
import torch  # noqa: E402

warnings.filterwarnings("ignore")

TC = None
FAILS = []
PASSES = [0]


def check(ok, what):
    if ok:
        PASSES[0] += 1
        print("ok   %s" % what)
    else:
        FAILS.append(what)
        print("FAIL %s" % what)


def run(*args):
    r = subprocess.run([TC, "diff"] + [str(a) for a in args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def save(obj, path, **kw):
    torch.save(obj, path, **kw)
    return path


# ---- the reference: what diff must report, computed here --------------------------------------

def g(x, fmt):
    """A float as diff prints it: fmt, or nan/inf/-inf."""
    if isinstance(x, str):
        return x
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return fmt % x


def jnum(x):
    """A float as diff's JSON holds it."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def elem_bytes(t):
    t = t.contiguous().flatten()
    n = t.numel()
    return t.view(torch.uint8).numpy().reshape(n, -1) if n else np.zeros((0, 1), np.uint8)


def parts(t):
    """float64 real and imaginary parts of the elements in C order."""
    t = t.contiguous().flatten()
    if t.is_complex():
        return t.real.double().numpy(), t.imag.double().numpy()
    return t.double().numpy(), np.zeros(t.numel())


INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)


def unravel(flat, shape):
    return [int(i) for i in np.unravel_index(flat, shape)] if shape else []


def ref(a, b, atol=0.0, rtol=0.0, equal_nan=False):
    """Statistics diff reports for a and b (equal shapes), by the man page's rule."""
    shape = list(a.shape)
    n = a.numel()
    identical = (elem_bytes(a) == elem_bytes(b)).all(axis=1) if a.dtype == b.dtype else np.zeros(n, bool)
    r = {"elements": n, "nan": [0, 0], "inf": [0, 0]}
    if a.dtype in INT_DTYPES and b.dtype in INT_DTYPES:
        x = [int(v) for v in a.flatten().tolist()]
        y = [int(v) for v in b.flatten().tolist()]
        d = [abs(p - q) for p, q in zip(x, y)]
        rel = [0.0 if e == 0 else (math.inf if q == 0 else float(e) / abs(q)) for e, q in zip(d, y)]
        match = [e == 0 or float(e) <= atol + rtol * abs(float(q)) for e, q in zip(d, y)]
        changed = [e != 0 for e in d]
        absd = [float(e) for e in d]
        vals = (x, y)
    else:
        xr, xi = parts(a)
        yr, yi = parts(b)
        with np.errstate(invalid="ignore", over="ignore"):
            na, nb = np.isnan(xr) | np.isnan(xi), np.isnan(yr) | np.isnan(yi)
            r["nan"] = [int(na.sum()), int(nb.sum())]
            r["inf"] = [int((~na & (np.isinf(xr) | np.isinf(xi))).sum()), int((~nb & (np.isinf(yr) | np.isinf(yi))).sum())]

            def close(p, q):
                e = np.abs(p - q)
                return (p == q) | (np.isfinite(e) & (e <= atol + rtol * np.abs(q)))

            def dr(p, q):
                e = np.where(p == q, 0.0, np.abs(p - q))
                return e, np.where(e == 0, 0.0, np.where((q == 0) | np.isinf(q), np.inf, e / np.abs(q)))

            valid = ~na & ~nb & ~identical
            er, rr = dr(xr, yr)
            ei, ri = dr(xi, yi)
            absd = np.where(valid, np.maximum(er, ei), 0.0)
            rel = np.where(valid, np.maximum(rr, ri), 0.0)
            match = identical | (~na & ~nb & close(xr, yr) & close(xi, yi)) | (equal_nan & na & nb)
            exact = ~na & ~nb & (xr == yr) & (xi == yi)
            changed = ~identical & ~exact
        if a.is_complex():
            vals = ([complex(p, q) for p, q in zip(xr, xi)], [complex(p, q) for p, q in zip(yr, yi)])
        else:
            vals = (list(xr), list(yr))
    absd, rel, match, changed = np.array(absd, float), np.array(rel, float), np.array(match, bool), np.array(changed, bool)
    r["changed"] = int(changed.sum())
    r["mismatched"] = int((~match).sum())
    r["max_abs_diff"] = float(absd.max()) if n else 0.0
    r["max_abs_diff_at"] = unravel(int(np.argmax(absd)), shape) if n and absd.max() > 0 else None
    r["max_rel_diff"] = float(rel.max()) if n else 0.0
    r["max_rel_diff_at"] = unravel(int(np.argmax(rel)), shape) if n and rel.max() > 0 else None
    if r["mismatched"]:
        f = int(np.argmax(~match))
        r["first_mismatch"] = {"index": unravel(f, shape), "a": vals[0][f], "b": vals[1][f]}
    else:
        r["first_mismatch"] = None
    r["bit_for_bit"] = a.dtype == b.dtype and bool(identical.all())
    xr, xi = parts(a)
    yr, yi = parts(b)
    dot, aa, bb = float(xr @ yr + xi @ yi), float(xr @ xr + xi @ xi), float(yr @ yr + yi @ yi)
    r["cosine"] = dot / (math.sqrt(aa) * math.sqrt(bb)) if aa > 0 and bb > 0 and math.isfinite(dot) else None
    return r


def value_text(v, dtype):
    fmt = "%.17g" if dtype in (torch.float64, torch.complex128) else "%.9g"
    if isinstance(v, complex):
        im = g(v.imag, fmt)
        return "(%s%s%sj)" % (g(v.real, fmt), "" if im.startswith("-") else "+", im)
    if isinstance(v, int):
        return str(v)
    return g(float(v), fmt)


def values_text(r, da, db, stats=False, numeric=True):
    """The value part of a report line for reference r."""
    if r["mismatched"]:
        s = "%d of %d elements differ" % (r["mismatched"], r["elements"])
    elif r["bit_for_bit"]:
        s = "equal, bit for bit"
    elif not r["changed"]:
        s = "equal values"
    else:
        s = "equal within tolerance, %d of %d elements not identical" % (r["changed"], r["elements"])
    if numeric and r["changed"]:
        s += "; max abs diff %s" % g(r["max_abs_diff"], "%.6g")
        if r["max_abs_diff_at"] is not None:
            s += " at %s" % r["max_abs_diff_at"]
        s += "; max rel diff %s" % g(r["max_rel_diff"], "%.6g")
        if r["max_rel_diff_at"] is not None:
            s += " at %s" % r["max_rel_diff_at"]
    f = r["first_mismatch"]
    if f:
        s += "; first at %s: %s vs %s" % (f["index"], value_text(f["a"], da), value_text(f["b"], db))
    if any(r["nan"]):
        s += "; NaN %d vs %d" % tuple(r["nan"])
    if any(r["inf"]):
        s += "; inf %d vs %d" % tuple(r["inf"])
    if stats:
        s += "; cosine %s" % ("undefined" if r["cosine"] is None else "%.9f" % r["cosine"])
    return s


def check_json_values(label, ent, r, stats=False):
    want = dict(r)
    want.pop("cosine")
    f = want["first_mismatch"]
    if f:
        conv = (lambda v: [jnum(v.real), jnum(v.imag)]) if isinstance(f["a"], complex) else \
            (lambda v: v if isinstance(v, int) else jnum(float(v)))
        want["first_mismatch"] = {"index": f["index"], "a": conv(f["a"]), "b": conv(f["b"])}
    want["max_abs_diff"] = jnum(want["max_abs_diff"])
    want["max_rel_diff"] = jnum(want["max_rel_diff"])
    bad = ["%s: %r, expected %r" % (k, ent.get(k), v) for k, v in want.items() if ent.get(k) != v]
    if stats:
        c = ent.get("cosine")
        if (c is None) != (r["cosine"] is None) or (c is not None and abs(c - r["cosine"]) > 1e-12):
            bad.append("cosine %r, expected %r" % (c, r["cosine"]))
    check(not bad, "%s: JSON values as torch/numpy compute them%s" % (label, (": " + "; ".join(bad)) if bad else ""))


def header(a, b, na, nb, fa="torch-zip", fb="torch-zip", pa="", pb=""):
    ha = "--- %s (%s, %d tensors%s)" % (a, fa, na, ", prefix '%s' stripped" % pa if pa else "")
    hb = "+++ %s (%s, %d tensors%s)" % (b, fb, nb, ", prefix '%s' stripped" % pb if pb else "")
    return [ha, hb]


def expect(label, args, status, lines=None, stderr_has=None, quiet_too=True):
    """Run diff ARGS: exit status, exact stdout lines, then the same with --json; returns the JSON."""
    rc, out, err = run(*args)
    check(rc == status, "%s: exit %d (wanted %d)%s" % (label, rc, status, (": " + err.strip()) if rc != status else ""))
    if lines is not None:
        got = out.splitlines()
        check(got == lines, "%s: text report%s" % (label, "" if got == lines else
                                                     "\n  got:\n    %s\n  wanted:\n    %s" % ("\n    ".join(got), "\n    ".join(lines))))
    if stderr_has is not None:
        check(stderr_has in err, "%s: stderr says %r (%s)" % (label, stderr_has, err.strip()))
    if status > 1:
        return None
    rc2, out2, err2 = run("--json", *args)
    check(rc2 == status, "%s: --json exit %d" % (label, rc2))
    try:
        j = json.loads(out2)
    except ValueError:
        check(False, "%s: --json output is JSON: %s" % (label, out2[:200]))
        return None
    check(j["equal"] == (status == 0), "%s: JSON equal is %s" % (label, j["equal"]))
    if quiet_too and "--stats" not in args and "-v" not in args:
        rc3, out3, err3 = run("-q", *args)
        check(rc3 == status and not out3 and not err3.strip(),
              "%s: -q prints nothing, exit %d (%d, %r)" % (label, status, rc3, out3[:80] + err3[:200]))
    return j


def tensor(j, name):
    for t in j["tensors"]:
        if t["name"] == name:
            return t
    return {}


# ---- cases ---------------------------------------------------------------------------------------

def model(seed=7):
    gen = torch.Generator().manual_seed(seed)
    sd = collections.OrderedDict()
    sd["w"] = torch.randn(30, 40, generator=gen)
    sd["b"] = torch.randn(40, generator=gen)
    sd["idx"] = torch.arange(12).reshape(3, 4)
    sd["big"] = torch.randn(300000, generator=gen)  # 1.2 MB: three 512 KiB chunks
    return sd


def changed(sd, **edits):
    out = collections.OrderedDict((k, v.clone()) for k, v in sd.items())
    for k, fn in edits.items():
        fn(out[k])
    return out


def file_a(d, sd):
    """The model saved as a.pt, the A of most cases."""
    return save(sd, os.path.join(d, "a.pt"))


def file_one(d, sd):
    """The model with one element of big changed, saved as one.pt."""
    sd2 = changed(sd, big=lambda t: t.__setitem__(200000, t[200000] + 0.5))
    return sd2, save(sd2, os.path.join(d, "one.pt"))


def case_identical(d, sd):
    a = file_a(d, sd)
    b = os.path.join(d, "b.pt")
    shutil.copy(a, b)
    j = expect("identical copy", [a, b], 0, header(a, b, 4, 4) + ["equal: 4 tensors, 4 bit for bit"])
    if j:
        check(j["summary"] == {"compared": 4, "equal": 4, "bit_for_bit": 4, "different": 0, "only_in_a": 0,
                               "only_in_b": 0}, "identical copy: JSON summary %s" % j["summary"])
        for name in sd:
            check_json_values("identical copy %s" % name, tensor(j, name), ref(sd[name], sd[name]))
        check(j["same_file"] is False and tensor(j, "w")["compared"] == "values", "identical copy: compared by value")
    j = expect("same path twice", [a, a], 0, header(a, a, 4, 4) + ["same file: every tensor equal, unread",
                                                                   "equal: 4 tensors, 4 bit for bit"])
    if j:
        check(j["same_file"] and tensor(j, "w")["compared"] == "same_file", "same path twice: JSON says same_file")
    lines = header(a, b, 4, 4) + ["= %s: equal, bit for bit" % n for n in sd] + ["equal: 4 tensors, 4 bit for bit"]
    expect("identical copy -v", ["-v", a, b], 0, lines)
    return a


def case_one_element(d, sd, a):
    sd2, b = file_one(d, sd)
    r = ref(sd["big"], sd2["big"])
    check(r["mismatched"] == 1 and r["first_mismatch"]["index"] == [200000], "one element: reference finds it")
    lines = header(a, b, 4, 4) + ["! big: " + values_text(r, torch.float32, torch.float32),
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    j = expect("one element changed", [a, b], 1, lines)
    if j:
        check_json_values("one element changed", tensor(j, "big"), r)
        check(tensor(j, "big")["status"] == "different" and tensor(j, "w")["status"] == "equal",
              "one element changed: statuses")
    # the same answer on any number of threads
    outs = set()
    for n in ("1", "2", "3", "8"):
        outs.add(run("--json", "--threads", n, a, b)[1])
    check(len(outs) == 1, "one element changed: the JSON is the same on 1, 2, 3 and 8 threads")
    return b


def case_many(d, sd, a):
    gen = torch.Generator().manual_seed(3)
    where = torch.randint(0, 300000, (1000,), generator=gen)
    noise = torch.randn(1000, generator=gen) * 1e-3

    def edit(t):
        t[where] += noise
    sd2 = changed(sd, big=edit)
    b = save(sd2, os.path.join(d, "many.pt"))
    r = ref(sd["big"], sd2["big"])
    lines = header(a, b, 4, 4) + ["! big: " + values_text(r, torch.float32, torch.float32),
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    expect("a thousand elements changed", [a, b], 1, lines)
    outs = set()
    for n in ("1", "2", "5", "8"):
        rc, out, err = run("--json", "--stats", "--threads", n, a, b)
        outs.add(out)
    check(len(outs) == 1, "a thousand elements, --stats: the JSON is the same on 1, 2, 5 and 8 threads")
    j = json.loads(outs.pop())
    check_json_values("a thousand elements, --stats", tensor(j, "big"), r, stats=True)
    lines = header(a, b, 4, 4)
    for name in sd:
        lines.append("%s %s: %s" % ("!" if name == "big" else "=", name,
                                    values_text(ref(sd[name], sd2[name]), sd[name].dtype, sd2[name].dtype, stats=True)))
    lines.append("different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit")
    expect("a thousand elements, --stats text", ["--stats", a, b], 1, lines)
    # within a tolerance that covers the noise
    tol = ["--atol", "0.01"]
    r = ref(sd["big"], sd2["big"], atol=0.01)
    check(r["mismatched"] == 0, "reference: --atol 0.01 covers the noise")
    lines = header(a, b, 4, 4) + ["= big: " + values_text(r, torch.float32, torch.float32),
                                  "equal: 4 tensors, 3 bit for bit"]
    expect("a thousand elements, --atol 0.01", tol + [a, b], 0, lines)


def case_nan(d, sd, a):
    sd2 = changed(sd, w=lambda t: t.__setitem__((3, 5), float("nan")))
    b = save(sd2, os.path.join(d, "nan.pt"))
    r = ref(sd["w"], sd2["w"])
    check(r["nan"] == [0, 1] and r["mismatched"] == 1, "NaN in one: reference")
    lines = header(a, b, 4, 4) + ["! w: " + values_text(r, torch.float32, torch.float32),
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    j = expect("NaN in one", [a, b], 1, lines)
    if j:
        check_json_values("NaN in one", tensor(j, "w"), r)
    # NaN on both sides: identical bytes are equal; another payload needs --equal-nan
    c = save(sd2, os.path.join(d, "nan2.pt"))
    j = expect("the same NaN on both sides", [b, c], 0, header(b, c, 4, 4) + [
        "= w: equal, bit for bit; NaN 1 vs 1", "equal: 4 tensors, 4 bit for bit"])

    def payload(t):
        t.view(torch.int32)[3, 5] = 0x7fc00001
    sd3 = changed(sd2, w=payload)
    e = save(sd3, os.path.join(d, "nan3.pt"))
    r = ref(sd2["w"], sd3["w"])
    expect("NaNs with other payloads", [b, e], 1, header(b, e, 4, 4) + [
        "! w: " + values_text(r, torch.float32, torch.float32),
        "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"])
    r = ref(sd2["w"], sd3["w"], equal_nan=True)
    expect("NaNs with other payloads, --equal-nan", ["--equal-nan", b, e], 0, header(b, e, 4, 4) + [
        "= w: " + values_text(r, torch.float32, torch.float32), "equal: 4 tensors, 3 bit for bit"])


def case_dtypes(d, sd, a):
    sd2 = collections.OrderedDict((k, v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in sd.items())
    b = save(sd2, os.path.join(d, "bf16.pt"))
    floats = [k for k in sd if sd[k].is_floating_point()]
    lines = header(a, b, 4, 4)
    refs = {}
    for k in sd:
        if k in floats:
            refs[k] = ref(sd[k], sd2[k])
            lines.append("! %s: dtype float32 vs bfloat16; %s" % (k, values_text(refs[k], torch.float32, torch.bfloat16)))
    lines.append("different: 3 differ, 0 only in A, 0 only in B; 1 equal, 1 bit for bit")
    j = expect("float32 vs its bfloat16 cast, exact", [a, b], 1, lines)
    if j:
        for k in floats:
            check_json_values("float32 vs bfloat16 %s" % k, tensor(j, k), refs[k])
        check(tensor(j, "w")["differs"] == ["dtype"], "float32 vs bfloat16: JSON differs lists the dtype")
    lines = header(a, b, 4, 4)
    for k in sd:
        if k in floats:
            rr = ref(sd[k], sd2[k], rtol=0.004)
            check(rr["mismatched"] == 0, "reference: --rtol 0.004 covers bfloat16 rounding of %s" % k)
            lines.append("= %s: dtype float32 vs bfloat16; %s" % (k, values_text(rr, torch.float32, torch.bfloat16)))
    lines.append("equal: 4 tensors, 1 bit for bit")
    expect("float32 vs its bfloat16 cast, --rtol 0.004", ["--rtol", "0.004", a, b], 0, lines)
    rc, out, err = run("--rtol", "0.004", "--strict", a, b)
    check(rc == 1 and "different: 3 differ" in out, "--strict: a dtype difference counts (exit %d)" % rc)
    # float64 holding the same values: equal values, a dtype note
    sd3 = collections.OrderedDict((k, v.double() if v.is_floating_point() else v) for k, v in sd.items())
    c = save(sd3, os.path.join(d, "f64.pt"))
    lines = header(a, c, 4, 4) + ["= %s: dtype float32 vs float64; equal values" % k for k in floats[:2]] + \
        ["= big: dtype float32 vs float64; equal values", "equal: 4 tensors, 1 bit for bit"]
    expect("float32 vs float64 of the same values", [a, c], 0, lines)


def case_keys(d, sd):
    a = save(collections.OrderedDict([("module.w", sd["w"]), ("module.b", sd["b"]), ("module.extra", sd["idx"])]),
             os.path.join(d, "ddp.pt"))
    b = save(collections.OrderedDict([("w", sd["w"]), ("b", sd["b"]), ("bias2", sd["b"])]), os.path.join(d, "plain.pt"))
    lines = header(a, b, 3, 3) + ["- module.w: float32 [30, 40]", "- module.b: float32 [40]",
                                  "- module.extra: int64 [3, 4]", "+ w: float32 [30, 40]", "+ b: float32 [40]",
                                  "+ bias2: float32 [40]",
                                  "different: 0 differ, 3 only in A, 3 only in B; 0 equal, 0 bit for bit"]
    j = expect("DataParallel names against plain ones", [a, b], 1, lines)
    if j:
        check(tensor(j, "module.w")["status"] == "only_in_a" and tensor(j, "bias2")["status"] == "only_in_b",
              "names only on one side: JSON statuses")
    lines = header(a, b, 3, 3, pa="module.") + ["- extra: int64 [3, 4]", "+ bias2: float32 [40]",
                                                "different: 0 differ, 1 only in A, 1 only in B; 2 equal, 2 bit for bit"]
    j = expect("--strip-prefix", ["--strip-prefix", a, b], 1, lines)
    if j:
        check(j["a"]["prefix_stripped"] == "module." and j["b"]["prefix_stripped"] == ""
              and tensor(j, "w")["names"] == ["module.w", "w"], "--strip-prefix: JSON names and prefixes")
    expect("--strip-prefix=module.", ["--strip-prefix=module.", a, b], 1, lines)
    c = save(collections.OrderedDict([("module.w", sd["w"]), ("module.b", sd["b"])]), os.path.join(d, "ddp2.pt"))
    e = save(collections.OrderedDict([("w", sd["w"]), ("b", sd["b"])]), os.path.join(d, "plain2.pt"))
    expect("--strip-prefix, all names matched", ["--strip-prefix", c, e], 0,
           header(c, e, 2, 2, pa="module.") + ["equal: 2 tensors, 2 bit for bit"])
    f = save(collections.OrderedDict([("module.w", sd["w"]), ("w", sd["w"])]), os.path.join(d, "clash.pt"))
    expect("--strip-prefix making two names one", ["--strip-prefix=module.", f, e], 2,
           stderr_has="--strip-prefix: 'module.w' and 'w' would both be named 'w'")


def case_shapes(d, sd, a):
    sd2 = changed(sd)
    sd2["w"] = sd["w"].t().contiguous()
    b = save(sd2, os.path.join(d, "shape.pt"))
    lines = header(a, b, 4, 4) + ["! w: shape [30, 40] vs [40, 30]",
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    j = expect("shape mismatch", [a, b], 1, lines)
    if j:
        t = tensor(j, "w")
        check(t["why_not"] == "shapes differ" and t["compared"] is None and t["shape"] == [[30, 40], [40, 30]],
              "shape mismatch: JSON %s" % {k: t.get(k) for k in ("why_not", "compared", "shape")})
    # the same values through a transposed view: a stride note, values streamed from the view
    sd3 = changed(sd)
    sd3["w"] = sd["w"].t().contiguous().t()
    c = save(sd3, os.path.join(d, "view.pt"))
    lines = header(a, c, 4, 4) + ["= w: stride [40, 1] vs [1, 30]; equal, bit for bit", "equal: 4 tensors, 4 bit for bit"]
    expect("a transposed view with equal values", [a, c], 0, lines)
    lines = header(a, c, 4, 4) + ["! w: stride [40, 1] vs [1, 30]; equal, bit for bit",
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    expect("a transposed view, --strict", ["--strict", a, c], 1, lines)
    sd4 = changed(sd3)
    sd4["w"] = sd3["w"].clone().t().contiguous().t()
    sd4["w"][29, 1] = 7.0
    e = save(sd4, os.path.join(d, "view2.pt"))
    r = ref(sd["w"], sd4["w"])
    lines = header(a, e, 4, 4) + ["! w: stride [40, 1] vs [1, 30]; " + values_text(r, torch.float32, torch.float32),
                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]
    expect("a transposed view with one element changed", [a, e], 1, lines)


def case_formats(d, sd, a, tool):
    st = os.path.join(d, "m.safetensors")
    flat = collections.OrderedDict((k, v.contiguous()) for k, v in sd.items())
    try:
        from safetensors.torch import save_file
        save_file(flat, st)
        how = "safetensors library"
    except ImportError:
        subprocess.run([tool, "convert", "-q", a, st], check=True)
        how = "tensorctl convert"
    j = expect(".pt vs its .safetensors (%s)" % how, [a, st], 0,
               header(a, st, 4, 4, fb="safetensors") + ["equal: 4 tensors, 4 bit for bit"])
    if j:
        check(tensor(j, "w")["device"] == ["cpu", None], ".pt vs .safetensors: JSON devices %s" % tensor(j, "w")["device"])
    # the same zip with deflated records: read in order, not as plain ranges
    z = os.path.join(d, "deflated.pt")
    import zipfile
    with zipfile.ZipFile(a) as zin, zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename))
    expect("a zip with deflated records vs the stored one", [z, a], 0,
           header(z, a, 4, 4) + ["equal: 4 tensors, 4 bit for bit"])
    one = save(changed(sd, big=lambda t: t.__setitem__(299999, 1e30)), os.path.join(d, "one_last.pt"))
    r = ref(sd["big"], torch.load(one)["big"])
    outs = set()
    for n in ("1", "2", "8"):
        rc, out, err = run("--threads", n, z, one)
        outs.add((rc, out))
    check(outs == {(1, "\n".join(header(z, one, 4, 4) + ["! big: " + values_text(r, torch.float32, torch.float32),
                                    "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"]) + "\n")},
          "deflated records vs a changed file, on 1, 2 and 8 threads: %s" % outs)
    legacy = save(sd, os.path.join(d, "legacy.pt"), _use_new_zipfile_serialization=False)
    expect("legacy .pt vs zip .pt", [legacy, a], 0,
           header(legacy, a, 4, 4, fa="torch-legacy") + ["equal: 4 tensors, 4 bit for bit"])
    # a sharded set, as transformers writes one: torch.save'd shards and an index
    sdir = os.path.join(d, "sharded")
    os.makedirs(sdir, exist_ok=True)
    groups = [["w", "b"], ["idx", "big"]]
    wm = collections.OrderedDict()
    for i, names in enumerate(groups):
        fn = "pytorch_model-%05d-of-%05d.bin" % (i + 1, len(groups))
        save(collections.OrderedDict((k, sd[k]) for k in names), os.path.join(sdir, fn))
        for k in names:
            wm[k] = fn
    ix = os.path.join(sdir, "pytorch_model.bin.index.json")
    with open(ix, "w") as f:
        json.dump({"metadata": {"total_size": sum(v.numel() * v.element_size() for v in sd.values())},
                   "weight_map": wm}, f, indent=2)
    expect("a sharded set vs its single file", [ix, a], 0,
           header(ix, a, 4, 4, fa="torch-index") + ["equal: 4 tensors, 4 bit for bit"])
    expect("a single file vs its sharded set", [a, ix], 0,
           header(a, ix, 4, 4, fb="torch-index") + ["equal: 4 tensors, 4 bit for bit"])
    expect("a sharded set vs the safetensors file", [ix, st], 0,
           header(ix, st, 4, 4, fa="torch-index", fb="safetensors") + ["equal: 4 tensors, 4 bit for bit"])
    # a shard damaged in transfer
    sd2 = changed(sd, idx=lambda t: t.__setitem__((2, 3), 99))
    save(collections.OrderedDict((k, sd2[k]) for k in groups[1]), os.path.join(sdir, "pytorch_model-00002-of-00002.bin"))
    r = ref(sd["idx"], sd2["idx"])
    expect("a set with a changed shard vs the single file", [a, ix], 1,
           header(a, ix, 4, 4, fb="torch-index") + ["! idx: " + values_text(r, torch.int64, torch.int64),
                                                     "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"])


def case_manifest(d, sd, a, one, tool):
    m = os.path.join(d, "a.manifest.json")
    with open(m, "w") as f:
        subprocess.run([tool, "inspect", "--json", "--hash", a], stdout=f, check=True)
    j = expect("a file against its manifest", [a, m], 0,
               header(a, m, 4, 4, fb="manifest") + ["equal: 4 tensors, 4 bit for bit"])
    if j:
        t = tensor(j, "big")
        check(t["compared"] == "sha256" and t["sha256"][0] == t["sha256"][1], "manifest: JSON compares SHA-256s")
    expect("a changed file against the manifest", [one, m], 1,
           header(one, m, 4, 4, fb="manifest") + ["! big: sha256 differs",
                                                  "different: 1 differ, 0 only in A, 0 only in B; 3 equal, 3 bit for bit"])
    expect("the manifest against the file (manifest as A)", [m, a], 0,
           header(m, a, 4, 4, fa="manifest") + ["equal: 4 tensors, 4 bit for bit"])
    m2 = os.path.join(d, "nohash.json")
    with open(m2, "w") as f:
        subprocess.run([tool, "inspect", "--json", a], stdout=f, check=True)
    lines = header(a, m2, 4, 4, fb="manifest") + \
        ["= %s: no sha256 to compare (manifest made without --hash): metadata only" % k for k in sd] + \
        ["equal: 4 tensors, 0 bit for bit"]
    expect("a manifest without --hash", [a, m2], 0, lines)
    # a manifest that lists a tensor the file lacks, and a dtype that differs
    doc = json.load(open(m))
    doc["tensors"].append(dict(doc["tensors"][0], name="gone"))
    for t in doc["tensors"]:
        if t["name"] == "b":
            t["dtype"] = "float16"
    m3 = os.path.join(d, "edited.json")
    json.dump(doc, open(m3, "w"))
    expect("a manifest with an extra tensor and another dtype", [a, m3], 1,
           header(a, m3, 4, 5, fb="manifest") + [
               "! b: dtype float32 vs float16; not compared: dtypes differ, so their SHA-256s cannot agree",
               "+ gone: float32 [30, 40]",
               "different: 1 differ, 0 only in A, 1 only in B; 3 equal, 3 bit for bit"])


def case_tied(d, sd, tool):
    """Tied weights (one tensor under two names) are read once; the result holds for both names."""
    a = save(collections.OrderedDict([("emb", sd["w"]), ("head", sd["w"]), ("b", sd["b"])]), os.path.join(d, "tied_a.pt"))
    w2 = sd["w"].clone()
    w2[1, 2] += 1.0
    b = save(collections.OrderedDict([("emb", w2), ("head", w2), ("b", sd["b"])]), os.path.join(d, "tied_b.pt"))
    c = save(collections.OrderedDict([("emb", w2), ("head", w2.clone()), ("b", sd["b"])]), os.path.join(d, "untied.pt"))
    r = ref(sd["w"], w2)
    line = values_text(r, torch.float32, torch.float32)
    want = ["! emb: " + line, "! head: " + line, "different: 2 differ, 0 only in A, 0 only in B; 1 equal, 1 bit for bit"]
    j = expect("tied weights, both tied", [a, b], 1, header(a, b, 3, 3) + want)
    if j:
        check_json_values("tied weights head", tensor(j, "head"), r)
    expect("tied weights against an untied copy", [a, c], 1, header(a, c, 3, 3) + want)
    m = os.path.join(d, "tied_b.json")
    with open(m, "w") as f:
        subprocess.run([tool, "inspect", "--json", "--hash", b], stdout=f, check=True)
    expect("tied weights against a manifest", [a, m], 1, header(a, m, 3, 3, fb="manifest") + [
        "! emb: sha256 differs", "! head: sha256 differs",
        "different: 2 differ, 0 only in A, 0 only in B; 1 equal, 1 bit for bit"])
    expect("tied weights against their own manifest", [b, m], 0,
           header(b, m, 3, 3, fb="manifest") + ["equal: 3 tensors, 3 bit for bit"])
    expect("a manifest against tied weights", [m, b], 0,
           header(m, b, 3, 3, fa="manifest") + ["equal: 3 tensors, 3 bit for bit"])
    outs = set(run("--json", "--threads", n, c, m)[1] for n in ("1", "2", "8"))
    check(len(outs) == 1, "hashing against a manifest: the same JSON on 1, 2 and 8 threads")


def case_special(d, tool):
    """A quantized tensor compares byte for byte (its int_repr); a meta tensor has no data."""
    q = torch.quantize_per_tensor(torch.linspace(-1, 1, 8), 0.1, 3, torch.qint8)
    a = save(collections.OrderedDict([("q", q), ("meta", torch.empty(3, 4, device="meta")), ("x", torch.ones(4))]),
             os.path.join(d, "special_a.pt"))
    q2 = torch.quantize_per_tensor(torch.linspace(-1, 1, 8) + torch.tensor([0, 0, 0, 0, 0, 0.5, 0, 0]), 0.1, 3,
                                   torch.qint8)
    b = save(collections.OrderedDict([("q", q2), ("meta", torch.empty(3, 4, device="meta")), ("x", torch.ones(4))]),
             os.path.join(d, "special_b.pt"))
    ra, rb = q.int_repr().flatten().tolist(), q2.int_repr().flatten().tolist()
    diff = [i for i in range(8) if ra[i] != rb[i]]
    check(diff == [5], "reference: the quantized tensors differ at [5] (%s)" % diff)
    line = "! q: 1 of 8 elements differ; first at [5]: 0x%02x vs 0x%02x" % (ra[5] & 0xff, rb[5] & 0xff)
    j = expect("a quantized tensor changed, a meta tensor", [a, b], 1, header(a, b, 3, 3) + [
        line, "different: 1 differ, 0 only in A, 0 only in B; 2 equal, 1 bit for bit"])
    if j:
        t = tensor(j, "q")
        check(t["mismatched"] == 1 and t["max_abs_diff"] is None and t["first_mismatch"]["a"] == "0x%02x" % (ra[5] & 0xff),
              "quantized: JSON compares bytes, no statistics: %s" % {k: t.get(k) for k in ("mismatched", "max_abs_diff", "first_mismatch")})
        check(tensor(j, "meta")["compared"] == "no_data", "meta tensor: compared no_data")
    m = os.path.join(d, "special_a.json")
    with open(m, "w") as f:
        subprocess.run([tool, "inspect", "--json", "--hash", a], stdout=f, check=True)
    expect("quantized and meta tensors against their manifest", [a, m], 0,
           header(a, m, 3, 3, fb="manifest") + ["equal: 3 tensors, 2 bit for bit"])
    c = save(collections.OrderedDict([("q", torch.linspace(-1, 1, 8)), ("meta", torch.zeros(3, 4)), ("x", torch.ones(4))]),
             os.path.join(d, "special_c.pt"))
    expect("quantized vs float, meta vs data", [a, c], 1, header(a, c, 3, 3) + [
        "! q: dtype qint8 vs float32; not compared: dtypes that cannot be compared by value",
        "! meta: device meta vs cpu; not compared: no data in A",
        "different: 2 differ, 0 only in A, 0 only in B; 1 equal, 1 bit for bit"])


def case_ints_complex(d):
    big = 1 << 62
    a = save({"n": torch.tensor([1, big + 1, -5]), "u": torch.tensor([0, 200, 255], dtype=torch.uint8),
              "c": torch.complex(torch.arange(4.0), torch.ones(4)), "flag": torch.tensor([True, False])},
             os.path.join(d, "ints_a.pt"))
    ta = torch.load(a)
    tb = {"n": torch.tensor([1, big, -5]), "u": torch.tensor([0, 200, 255], dtype=torch.int64),
          "c": ta["c"].clone(), "flag": torch.tensor([True, True])}
    tb["c"][2] = complex(2.0, 1.5)
    b = save(tb, os.path.join(d, "ints_b.pt"))
    lines = header(a, b, 4, 4)
    for k in ("n", "u", "c", "flag"):
        r = ref(ta[k], tb[k])
        mark = "!" if r["mismatched"] else "="
        dt = "dtype %s vs %s; " % (str(ta[k].dtype)[6:], str(tb[k].dtype)[6:]) if ta[k].dtype != tb[k].dtype else ""
        lines.append("%s %s: %s%s" % (mark, k, dt, values_text(r, ta[k].dtype, tb[k].dtype)))
    lines.append("different: 3 differ, 0 only in A, 0 only in B; 1 equal, 0 bit for bit")
    j = expect("int64 past 2^53, uint8 vs int64, complex64, bool", [a, b], 1, lines)
    if j:
        for k in ("n", "u", "c", "flag"):
            check_json_values("ints/complex %s" % k, tensor(j, k), ref(ta[k], tb[k]))
        check(tensor(j, "n")["first_mismatch"]["a"] == big + 1, "int64 past 2^53: exact in the JSON")


def case_new_dtypes(d):
    names = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
    have = [n for n in names if hasattr(torch, n)]
    if not have:
        print("note: torch %s has no float8 dtypes; their case skipped" % torch.__version__)
        return
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(64, generator=gen) * 4
    x[0], x[1] = 0.0, 1e-3
    a = save({"x": x}, os.path.join(d, "f8_a.pt"))
    for n in have:
        dt = getattr(torch, n)
        try:
            y = (x.abs() + 1e-2 if n == "float8_e8m0fnu" else x).to(dt)
        except (RuntimeError, TypeError) as e:
            print("note: torch cannot cast to %s here (%s)" % (n, e))
            continue
        b = save({"x": y}, os.path.join(d, "f8_%s.pt" % n))
        r = ref(x, y)
        rc, out, err = run("--json", a, b)
        j = json.loads(out) if out else {}
        check(rc == (1 if r["mismatched"] else 0), "float32 vs %s: exit %d" % (n, rc))
        check_json_values("float32 vs %s" % n, tensor(j, "x"), r)


def case_unsafe(d, corpus):
    src = os.path.join(corpus, "torch-1.13", "malicious.pt")
    if not os.path.exists(src):
        check(False, "an unsafe file is compared: %s is missing" % src)
        return
    b = os.path.join(d, "malicious_copy.pt")
    shutil.copy(src, b)
    rc, out, err = run(src, b)
    check(rc == 0 and "not safe to load" in err and "nothing was run" in err,
          "an unsafe file is compared, with a note (exit %d: %s)" % (rc, err.strip()))


def case_usage(d, a):
    txt = os.path.join(d, "notes.txt")
    with open(txt, "w") as f:
        f.write("hello, not a model\n")
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write("{ nope")
    for label, args, st, msg in [
            ("no arguments", [], 2, "expected A and B"),
            ("one argument", [a], 2, "expected A and B"),
            ("three arguments", [a, a, a], 2, "expected A and B"),
            ("a negative --atol", ["--atol", "-1", a, a], 2, "--atol"),
            ("--rtol not a number", ["--rtol", "x", a, a], 2, "--rtol"),
            ("--threads 0", ["--threads", "0", a, a], 2, "--threads"),
            ("-q with --json", ["-q", "--json", a, a], 2, "-q"),
            ("an unknown option", ["--frob", a, a], 2, "unknown option"),
            ("a missing file", [a, os.path.join(d, "nope.pt")], 5, "nope.pt"),
            ("not a checkpoint", [a, txt], 3, "not a checkpoint"),
            ("a broken manifest", [a, bad], 3, "not a valid JSON manifest")]:
        rc, out, err = run(*args)
        check(rc == st and msg in err and len(err.strip().splitlines()) == 1 and not out,
              "usage: %s: exit %d (wanted %d), one line: %s" % (label, rc, st, err.strip()))


def main():
    global TC
    TC, outdir, corpus = ARGV[0], ARGV[1], ARGV[2]
    os.makedirs(outdir, exist_ok=True)
    d = tempfile.mkdtemp(prefix="torch%s-" % torch.__version__.split("+")[0], dir=outdir)
    print("torch %s, files in %s" % (torch.__version__, d))
    sd = model()
    a = file_a(d, sd)
    cases = {
        "identical": lambda: case_identical(d, sd),
        "one_element": lambda: case_one_element(d, sd, a),
        "many": lambda: case_many(d, sd, a),
        "nan": lambda: case_nan(d, sd, a),
        "dtypes": lambda: case_dtypes(d, sd, a),
        "keys": lambda: case_keys(d, sd),
        "shapes": lambda: case_shapes(d, sd, a),
        "formats": lambda: case_formats(d, sd, a, TC),
        "manifest": lambda: case_manifest(d, sd, a, file_one(d, sd)[1], TC),
        "tied": lambda: case_tied(d, sd, TC),
        "special": lambda: case_special(d, TC),
        "ints_complex": lambda: case_ints_complex(d),
        "new_dtypes": lambda: case_new_dtypes(d),
        "unsafe": lambda: case_unsafe(d, corpus),
        "usage": lambda: case_usage(d, a),
    }
    for feature in ONLY:
        print("# %s" % feature)
        for case in FEATURES[feature]:
            cases[case]()
    print("%d passed, %d failed" % (PASSES[0], len(FAILS)))
    if not FAILS:
        shutil.rmtree(d, ignore_errors=True)
    if not PASSES[0] and not FAILS:
        print("FAIL: no check ran")
        return 1
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
