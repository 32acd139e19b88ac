#!/usr/bin/env python3
"""Outputs that never replace what is not theirs, judged by the torch running this script.

    check_dest.py TENSORCTL SAMPLES_DIR OUTDIR

  - -o naming a named pipe, a character device (a node made here, as root), a socket, a symbolic link, or "-"
    (standard output, not written to): exit 2, one line saying what it is, the thing left
    as it was (still a pipe, a device, a link), --force or not; nothing else written. -o FOLDER writes
    FOLDER/NAME, as cp does (to-cpu: the input's name; convert, extract: with the format's extension).
  - --in-place through a link into a Hugging Face cache (snapshots/<rev>/model.pt ->
    ../../blobs/<sha256>, two revisions sharing the blob): a new blob named by the SHA-256 of its
    content, only that link pointed at it (relative, as before), the old blob and the other
    revision's link untouched, the summary saying so; the output loads in torch with every storage
    on the CPU and every tensor as the input's. --in-place on the blob itself is refused.
  - a set written into a folder over an earlier set (9 shards, then 1): without --force refused,
    nothing changed; with --force the 9 shards its index named are removed (listed on stderr), a
    file of the folder no index names stays, so does one the old index names in a subfolder; an
    index naming a file outside its folder gets nothing removed; the new set loads and equals the
    input.

One line per check, then a count; exit 1 on any failure, 77 when torch is missing.
"""

import hashlib
import json
import os
import socket
import stat
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from judge import Report, out_dir, run, torch_or_skip  # noqa: E402

torch = torch_or_skip()
import torch_verify  # noqa: E402
from st_read import read_tensors  # noqa: E402


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def kind(path):
    try:
        m = os.lstat(path).st_mode
    except OSError:
        return "absent"
    return ("link" if stat.S_ISLNK(m) else "fifo" if stat.S_ISFIFO(m) else "chr" if stat.S_ISCHR(m)
            else "socket" if stat.S_ISSOCK(m) else "dir" if stat.S_ISDIR(m) else "file")


def tags(path):
    seen = []
    torch.load(path, map_location=lambda s, loc: (seen.append(loc), s)[1])
    return sorted(set(seen))


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tc, samples, out = argv[1], argv[2], out_dir(argv[3], torch)
    p = lambda *n: os.path.join(out, *n)  # noqa: E731
    src = os.path.join(samples, "tiny_mlp_cuda0.pt")
    want = torch.load(src, map_location="cpu")
    rep = Report()

    # ---- only a regular file (or a free name) is replaced
    os.mkfifo(p("fifo"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(p("sock"))
    os.symlink("elsewhere.pt", p("link.pt"))
    os.mkdir(p("folder.pt"))
    cases = [("a named pipe", p("fifo"), "fifo", "is a named pipe (FIFO)"), ("a socket", p("sock"), "socket", "is a socket"),
             ("a symbolic link", p("link.pt"), "link", "is a symbolic link"),
             ("a folder", p("folder.pt"), "dir", "is a folder")]
    # a device node of our own (never the system's /dev/null, which a regression would destroy); making one needs root
    try:
        os.mknod(p("null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
        cases.append(("a character device", p("null"), "chr", "is a character device"))
    except (PermissionError, AttributeError, OSError) as e:
        print("note: no device node of our own (%s): the device case is left to root" % e)
    for what, target, k, needle in cases:
        for args in (["to-cpu", src, "-o", target], ["to-cpu", src, "-o", target, "--force"],
                     ["convert", src, target, "--force", "--format", "safetensors"],
                     ["extract", src, "-o", target, "--force", "--format", "pt"]):
            rc, _, err = run(tc, *args, timeout=60)
            if k == "dir":
                # one file into a folder: written inside it under the input's name, as cp does (convert and
                # extract with the extension of the format written)
                stem = os.path.splitext(os.path.basename(src))[0]
                name = {"to-cpu": os.path.basename(src), "convert": stem + ".safetensors", "extract": stem + ".pt"}[args[0]]
                inside = os.path.join(target, name)
                probs = [] if rc == 0 else ["exit %d, want 0: %r" % (rc, err.strip())]
                if kind(target) != k:
                    probs.append("it is now a %s" % kind(target))
                elif not os.path.isfile(inside) or (name.endswith(".pt") and tags(inside) != ["cpu"]):
                    probs.append("%s was not written (with every storage on the CPU)" % inside)
                rep.check("%s: %s %s writes %s inside it" % (args[0], what, " ".join(args[3:]), name), probs)
                continue
            lines = err.strip().splitlines()
            probs = [] if rc == 2 else ["exit %d, want 2" % rc]
            if len(lines) != 1 or needle not in lines[0] or "replaces only regular files" not in lines[0]:
                probs.append("stderr %r" % err.strip())
            if kind(target) != k:
                probs.append("it is now a %s" % kind(target))
            rep.check("%s: %s %s is refused and left as it is" % (args[0], what, " ".join(args[3:])), probs)
    rc, _, err = run(tc, "to-cpu", src, "-o", "-")
    rep.check("-o - (standard output) is refused in one line",
              [] if rc == 2 and err.strip() == "tensorctl: -: writing to standard output is not supported: "
                                              "outputs are written by seeking, into a seekable regular file; "
                                              "name one" else ["exit %d: %r" % (rc, err)])

    # ---- --in-place into a content-addressed store
    repo = p("models--x")
    os.makedirs(os.path.join(repo, "blobs"))
    data = open(src, "rb").read()
    old = hashlib.sha256(data).hexdigest()
    blob = os.path.join(repo, "blobs", old)
    with open(blob, "wb") as f:
        f.write(data)
    os.chmod(blob, 0o444)
    links = []
    for rev in ("r1", "r2"):
        os.makedirs(os.path.join(repo, "snapshots", rev))
        links.append(os.path.join(repo, "snapshots", rev, "model.pt"))
        os.symlink("../../blobs/" + old, links[-1])
    rc, _, err = run(tc, "to-cpu", "--in-place", links[0])
    probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
    text = os.readlink(links[0]) if os.path.islink(links[0]) else None
    new = text.rsplit("/", 1)[-1] if text else ""
    if not text or not text.startswith("../../blobs/") or new == old:
        probs.append("the link reads %r" % text)
    elif sha(os.path.join(repo, "blobs", new)) != new:
        probs.append("the new blob %s is not named by its SHA-256" % new)
    if sha(blob) != old:
        probs.append("the old blob changed")
    if os.readlink(links[1]) != "../../blobs/" + old:
        probs.append("the other revision's link changed: %s" % os.readlink(links[1]))
    if "a new blob %s" % new not in err or "old blob %s is left" % old not in err:
        probs.append("the summary does not say so: %r" % err.strip())
    if not probs:
        if tags(links[0]) != ["cpu"]:
            probs.append("the new blob's storages are tagged %s" % tags(links[0]))
        probs += torch_verify.same_tensors(dict(torch.load(links[0], weights_only=True)), dict(want))
        if stat.S_IMODE(os.stat(os.path.join(repo, "blobs", new)).st_mode) != 0o444:
            probs.append("the new blob lost the old one's mode")
    rep.check("--in-place through a cache link: a new blob, that link repointed, the rest untouched", probs)
    rc, _, err = run(tc, "to-cpu", "--in-place", blob)
    rep.check("--in-place on the blob itself is refused",
              [] if rc == 2 and "is a blob of a content-addressed store" in err and sha(blob) == old
              else ["exit %d: %s" % (rc, err.strip())])

    # ---- a set over an earlier set
    lm = p("lm.pt")
    torch.manual_seed(0)
    sd = {"layer%d.weight" % i: torch.randn(16, 16) for i in range(9)}
    torch.save(sd, lm)
    ix = p("set", "model.safetensors.index.json")
    rc, _, err = run(tc, "extract", "-q", lm, "-o", ix, "--max-shard-size", "1KB")
    before = sorted(os.listdir(p("set"))) if os.path.isdir(p("set")) else []
    rep.check("an earlier set of 9 shards", [] if rc == 0 and len(before) == 10 else ["exit %d: %s %s" %
                                                                                      (rc, err.strip(), before)])
    with open(p("set", "README.md"), "w") as f:
        f.write("kept\n")
    with open(p("set", "model-00001-of-00099.safetensors"), "wb") as f:
        f.write(b"not named by the index\n")
    os.makedirs(p("set", "sub"))
    with open(p("set", "sub", "deeper.safetensors"), "wb") as f:
        f.write(b"in a subfolder\n")
    with open(ix) as f:
        old_ix = json.load(f)
    old_ix["weight_map"]["stray"] = "sub/deeper.safetensors"  # named by the old index, but not a file of its folder
    with open(ix, "w") as f:
        json.dump(old_ix, f)
    before.append("sub")
    rc, _, err = run(tc, "extract", "-q", lm, "-o", ix)
    rep.check("without --force the earlier set is refused, nothing changed",
              [] if rc == 2 and sorted(os.listdir(p("set"))) == sorted(before + ["README.md",
                                                                                "model-00001-of-00099.safetensors"])
              else ["exit %d: %s" % (rc, err.strip())])
    rc, _, err = run(tc, "extract", lm, "-o", ix, "--force")
    left = sorted(os.listdir(p("set")))
    probs = [] if rc == 0 else ["exit %d: %s" % (rc, err.strip())]
    want_left = ["README.md", "model-00001-of-00001.safetensors", "model-00001-of-00099.safetensors",
                 "model.safetensors.index.json", "sub"]
    if left != want_left:
        probs.append("the folder holds %s, want %s" % (left, want_left))
    if not os.path.exists(p("set", "sub", "deeper.safetensors")):
        probs.append("a file in a subfolder that the old index named was removed")
    olds = ["model-%05d-of-00009.safetensors" % (i + 1) for i in range(9)]
    if "removed 9 shards" not in err or not all(o in err for o in olds):
        probs.append("stderr does not list the 9 removed shards: %r" % err.strip())
    if not probs:
        got = dict(read_tensors(os.path.join(p("set"), "model-00001-of-00001.safetensors")))
        probs += torch_verify.same_tensors(got, sd)
    rep.check("with --force the shards the old index named go, listed; nothing else", probs)
    # an index that names a file outside its folder is no set to replace: nothing of it is removed
    with open(p("outside.safetensors"), "wb") as f:
        f.write(b"outside\n")
    with open(ix) as f:
        bad_ix = json.load(f)
    bad_ix["weight_map"]["stray"] = "../outside.safetensors"
    with open(ix, "w") as f:
        json.dump(bad_ix, f)
    run(tc, "extract", "-q", lm, "-o", p("set", "other.safetensors"))  # a file of the folder, not of the set
    rc, _, err = run(tc, "extract", "-q", lm, "-o", ix, "--force", "--max-shard-size", "1KB")
    rep.check("over an index naming a file outside its folder: nothing of it removed",
              [] if rc == 0 and os.path.exists(p("outside.safetensors")) and
              os.path.exists(p("set", "other.safetensors")) else ["exit %d: %s" % (rc, err.strip())])
    return rep.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
