"""What the sample makers of this folder share; each still runs on its own, with torch
(/usr/bin/python3 sample_models/make_samples.py), and tests/extract uses throwaway_module too.

    tagged(tag)                     torch.save tags storages with tag (a str: every storage; else
                                    tag(storage)), as a save on that device would; nothing else changes
    same_tensors(a, b)              whether files a and b hold the same tensors (False when a cannot be read)
    throwaway_module(src, name)     src imported as module name from a temporary folder; on leaving,
                                    the module is gone, so a file pickling its classes cannot be loaded
    write_expect(path, note, tag, like=None)
                                    PATH.expect.json: the entries of tests/torch_verify.py for the file
                                    as its safe loader reads it back, every one saved as tag (a str;
                                    or a dict: the device of each dotted name); like: a file with the
                                    same tensors to read them from, for a PATH that must not be loaded
"""

import collections
import contextlib
import importlib
import json
import os
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import torch_verify  # noqa: E402


@contextlib.contextmanager
def tagged(tag):
    orig = torch.serialization.location_tag
    torch.serialization.location_tag = (lambda s: tag) if isinstance(tag, str) else tag
    try:
        yield
    finally:
        torch.serialization.location_tag = orig


def same_tensors(a, b):
    try:
        ea = torch_verify.expect_entries(a)
    except Exception:
        return False
    return ea == torch_verify.expect_entries(b)


@contextlib.contextmanager
def throwaway_module(src, name):
    d = tempfile.mkdtemp()
    with open(os.path.join(d, name + ".py"), "w") as f:
        f.write(src)
    sys.path.insert(0, d)
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(d)
        sys.modules.pop(name, None)
        shutil.rmtree(d)


def write_expect(path, note, tag, like=None):
    """The entries written."""
    loaded = torch_verify.load_checkpoint(like or path)
    entries = torch_verify.expect_entries(like or path, loaded)
    for e in entries:
        want = tag if isinstance(tag, str) else tag[".".join(e["path"])]
        if e["device"] != want:
            raise SystemExit("%s: %s loaded with device %s, saved as %s"
                             % (path, "/".join(e["path"]), e["device"], want))
    doc = collections.OrderedDict([("file", os.path.basename(path)), ("note", note),
                                   ("torch", torch.__version__), ("tensors", entries)])
    with open(path + ".expect.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return entries
