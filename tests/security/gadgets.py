#!/usr/bin/env python3
"""Gadget files: checkpoints whose pickle names globals outside torch's
weights_only allowlist that can run code, resolve names to callables or touch
files when unpickled, most of them on no denylist. Made byte by byte; nothing
is unpickled here.

    gadgets.py list                         case names, one a line
    gadgets.py gen OUTDIR                   write every case's file
    gadgets.py check --tensorctl T          every case: inspect says UNSAFE (exit 4) and names the
                                            global; to-cpu and convert to .pt refuse it (exit 4, no
                                            output, input unchanged); --safe-globals cannot admit the
                                            os/posix/nt/sys ones (exit 2)
    gadgets.py torch                        with real torch: weights_only=True refuses every case too
                                            (run under tests/run_with_torch.sh)
"""
import argparse, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'hostile'))
import hostile as H  # noqa: E402  (the byte-level builders)


def call(mod, name, *args):
    """REDUCE of a global over a tuple of args."""
    return H.op_global(mod, name) + H.op_tuple(list(args)) + b'R'


def stack_global(mod, name):
    """Protocol 4's STACK_GLOBAL: a dotted name resolves attribute by attribute."""
    m, n = mod.encode(), name.encode()
    return b'\x8c' + bytes([len(m)]) + m + b'\x8c' + bytes([len(n)]) + n + b'\x93'


def ckpt(payload, proto=2):
    """A valid torch zip: a state_dict with one tensor and one entry holding the payload."""
    body = H.dict_of([('w', H.tensor()), ('x', payload)])
    pkl = b'\x80' + bytes([proto]) + body + H.STOP
    return H.torch_zip(pkl, {'0': H.FOUR_FLOATS})


# (case, globals it names, pickle payload, proto, inadmissible: --safe-globals must refuse it)
CASES = [
    ('os_system', ['posix.system'], call('posix', 'system', H.op_str('true')), 2, True),
    ('resolver_pkgutil', ['pkgutil.resolve_name'],
     call('pkgutil', 'resolve_name', H.op_str('os:system')), 2, False),
    ('resolver_pydoc_locate', ['pydoc.locate'], call('pydoc', 'locate', H.op_str('os.system')), 2, False),
    ('nested_pickle_load_from_bytes', ['torch.storage._load_from_bytes'],
     call('torch.storage', '_load_from_bytes', H.op_str('not a pickle')), 2, False),
    ('file_truncate_open', ['builtins.open'],
     call('builtins', 'open', H.op_str('/tmp/tensorctl-gadget-never'), H.op_str('w')), 2, False),
    ('file_create_zipfile', ['zipfile.ZipFile'],
     call('zipfile', 'ZipFile', H.op_str('/tmp/tensorctl-gadget-never.zip'), H.op_str('w')), 2, False),
    ('getattr_chain', ['builtins.getattr'], call('builtins', 'getattr', H.op_str('x'), H.op_str('y')), 2, False),
    ('functools_partial', ['functools.partial'], call('functools', 'partial', H.op_str('x')), 2, False),
    ('python2_name_builtin_eval', ['builtins.eval'], call('__builtin__', 'eval', H.op_str('1')), 2, False),
    ('sys_modules', ['sys.modules'], H.op_global('sys', 'modules'), 2, True),
    ('dotted_attribute_proto4', ['pathlib.Path.unlink'],
     stack_global('pathlib', 'Path.unlink') + b')R', 4, False),
    ('torch_hub_load', ['torch.hub.load'], call('torch.hub', 'load', H.op_str('x'), H.op_str('y')), 2, False),
    ('numpy_load_pickle', ['numpy.load'], call('numpy', 'load', H.op_str('x.npy')), 2, False),
    ('user_class', ['__main__.Net'], call('__main__', 'Net'), 2, False),
    ('allowed_name_wrong_module', ['torch.nn.modules.linear.Linear'],
     call('torch.nn.modules.linear', 'Linear'), 2, False),
]


def gen(outdir):
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for name, _, payload, proto, _ in CASES:
        p = os.path.join(outdir, name + '.pt')
        with open(p, 'wb') as f:
            f.write(ckpt(payload, proto))
        paths.append(p)
    return paths


def check(tc):
    fails, checks = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        gen(tmp)
        for name, globs, _, _, inadmissible in CASES:
            path = os.path.join(tmp, name + '.pt')
            before = open(path, 'rb').read()
            r = subprocess.run([tc, 'inspect', path], capture_output=True, text=True, timeout=60)
            checks += 1
            if r.returncode != 4 or 'UNSAFE' not in r.stderr or not all(g in r.stderr for g in globs):
                fails.append('%s: inspect exit %d, stderr %r' % (name, r.returncode, r.stderr.strip()))
            for args in (['to-cpu', path, '-o', os.path.join(tmp, 'out.pt')],
                         ['convert', path, os.path.join(tmp, 'out.pt')]):
                r = subprocess.run([tc] + args, capture_output=True, text=True, timeout=60)
                checks += 1
                if r.returncode != 4 or os.path.exists(os.path.join(tmp, 'out.pt')):
                    fails.append('%s: %s exit %d (wanted 4, no output): %s' % (name, args[0], r.returncode,
                                                                             r.stderr.strip()))
                if os.path.exists(os.path.join(tmp, 'out.pt')):
                    os.unlink(os.path.join(tmp, 'out.pt'))
            r = subprocess.run([tc, 'inspect', '--safe-globals', ','.join(globs), path], capture_output=True,
                               text=True, timeout=60)
            checks += 1
            want = 2 if inadmissible else 0
            if r.returncode != want:
                fails.append('%s: inspect --safe-globals %s: exit %d, wanted %d: %s' % (
                    name, ','.join(globs), r.returncode, want, r.stderr.strip()))
            checks += 1
            if open(path, 'rb').read() != before:
                fails.append('%s: the input changed' % name)
    for f in fails:
        print('FAIL', f)
    print('%d checks, %d failed' % (checks, len(fails)))
    return 1 if fails or not checks else 0


def with_torch():
    try:
        import torch
    except ImportError:
        print('no torch: skipped')
        return 77
    fails, checks = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for (name, globs, _, proto, _), path in zip(CASES, gen(tmp)):
            if proto != 2:
                continue  # weights_only refuses protocol 4's FRAME/STACK_GLOBAL opcodes before any global
            checks += 1
            try:
                torch.load(path, map_location='cpu', weights_only=True)
                fails.append('%s: torch %s weights_only=True loaded it' % (name, torch.__version__))
            except Exception as e:  # noqa: BLE001  (UnpicklingError, or RuntimeError wrapping it)
                if not any(g.split('.')[-1] in str(e) for g in globs):
                    fails.append('%s: torch refused it for another reason: %s' % (name, str(e).splitlines()[0]))
    for f in fails:
        print('FAIL', f)
    print('torch %s: %d gadget files refused by weights_only, %d failures' % (torch.__version__, checks, len(fails)))
    return 1 if fails or not checks else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('what', choices=['list', 'gen', 'check', 'torch'])
    ap.add_argument('outdir', nargs='?')
    ap.add_argument('--tensorctl')
    a = ap.parse_args()
    if a.what == 'list':
        print('\n'.join(c[0] for c in CASES))
        return 0
    if a.what == 'gen':
        gen(a.outdir)
        return 0
    if a.what == 'check':
        return check(a.tensorctl)
    return with_torch()


if __name__ == '__main__':
    sys.exit(main())
