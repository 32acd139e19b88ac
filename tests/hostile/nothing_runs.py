#!/usr/bin/env python3
"""Nothing in a checkpoint ever runs: every command over pickles that would
create a marker file when unpickled (os.system, builtins.exec, through
REDUCE, INST, OBJ, STACK_GLOBAL, legacy format; a global whose name hides
opcodes that a naive rewrite would emit), and the reference malicious.pt
files. Asserts the marker never appears, the refusals exit 4 (3 for the
malformed one), and what --allow-unsafe writes is still reported dangerous.
A missing corpus, a torch-* folder of it without malicious.pt, or a run of
no command at all fails.

    nothing_runs.py --tensorctl T --corpus DIR   (sample_models/corpus, or the reference corpus)
"""
import argparse, glob, os, pickletools, shutil, struct, subprocess, sys, tempfile, zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import (PROTO, STOP, FOUR_FLOATS, op_str, op_global, op_tuple, dict_of, tensor, state_dict,
                     torch_zip, legacy, dcp, write_case)


def payloads(marker):
    cmd = 'touch ' + marker
    code = "open(%r, 'w').close()" % marker
    w = ('w', tensor())
    # os.system(cmd) via REDUCE
    yield 'reduce_os_system', torch_zip(state_dict(dict_of([w, ('p', op_global('os', 'system') + op_tuple([op_str(cmd)]) + b'R')])), {'0': FOUR_FLOATS}), 4
    # builtins.exec(code)
    yield 'reduce_builtins_exec', torch_zip(state_dict(dict_of([w, ('p', op_global('builtins', 'exec') + op_tuple([op_str(code)]) + b'R')])), {'0': FOUR_FLOATS}), 4
    # python 2 names: __builtin__.eval
    yield 'reduce_py2_eval', torch_zip(state_dict(dict_of([w, ('p', op_global('__builtin__', 'eval') + op_tuple([op_str('__import__("os").system(%r)' % cmd)]) + b'R')])), {'0': FOUR_FLOATS}), 4
    # INST and OBJ
    yield 'inst_os_system', torch_zip(state_dict(dict_of([w, ('p', b'(' + op_str(cmd) + b'ios\nsystem\n')])), {'0': FOUR_FLOATS}), 4
    yield 'obj_subprocess', torch_zip(state_dict(dict_of([w, ('p', b'(' + op_global('subprocess', 'call') + op_str(cmd) + b'o')])), {'0': FOUR_FLOATS}), 4
    # protocol 4 STACK_GLOBAL
    sg = b'\x80\x04' + b'}(' + op_str('w') + tensor() + op_str('p') + op_str('posix') + op_str('system') + b'\x93' + op_tuple([op_str(cmd)]) + b'Ru.'
    yield 'stack_global_posix', torch_zip(sg, {'0': FOUR_FLOATS}), 4
    # legacy stream with the payload in the object pickle
    obj = state_dict(dict_of([w, ('p', op_global('os', 'system') + op_tuple([op_str(cmd)]) + b'R')]))
    yield 'legacy_os_system', legacy(obj, ['0'], [(4, FOUR_FLOATS)]), 4
    # a global whose name carries a newline: harmless to read (no such
    # attribute), but written back as GLOBAL text it would become
    # GLOBAL torch.Size; POP; os.system(cmd)
    hidden = 'Size\n0cos\nsystem\n(V%s\ntR0V' % cmd
    smug = PROTO + b'}(' + op_str('w') + tensor() + op_str('p') + op_str('torch') + op_str(hidden) + b'\x93u' + STOP
    yield 'newline_smuggle', torch_zip(smug, {'0': FOUR_FLOATS}), 3


def dcp_payloads(marker):
    """Distributed checkpoints that would create the marker: in .metadata (read by pickle.load) and
    in a pickled item (read by torch.load(weights_only=False) when DCP loads it)."""
    call = op_global('os', 'system') + op_tuple([op_str('touch ' + marker)]) + b'R'
    yield 'dcp_metadata_os_system', lambda: dcp(planner=call)
    yield 'dcp_item_os_system', lambda: dcp(step=torch_zip(PROTO + call + STOP))


def dcp_runs(a, tmp, marker, fails):
    """Every reading command over the DCP payloads: refused (4), or with --allow-unsafe written
    without the payload (the output inspects safe). Returns the commands run."""
    n = 0
    for name, gen in dcp_payloads(marker):
        path = write_case(gen, os.path.join(tmp, name + '.pt'))
        for args, want in ((['inspect', path], 4), (['inspect', '--json', path], 4),
                           (['consolidate', '-q', path, '-o', 'OUT.pt'], 4),
                           (['consolidate', '-q', path, '-o', 'OUT.safetensors'], 4),
                           (['consolidate', '-q', '--allow-unsafe', path, '-o', 'OUT.pt'], 0)):
            out = os.path.join(tmp, name + '-' + args[-1]) if args[0] == 'consolidate' else None
            argv = args[:-1] + [out] if out else args
            p = subprocess.run([a.tensorctl] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            n += 1
            what = '%s %s' % (' '.join(args[:-2] if out else args[:-1]), name)
            if os.path.exists(marker):
                fails.append('%s: THE PAYLOAD RAN (marker created)' % what)
                os.unlink(marker)
            if p.returncode != want:
                fails.append('%s: exit %d, expected %d: %s' % (what, p.returncode, want, p.stderr.decode()[:300]))
            if out and want and os.path.exists(out):
                fails.append('%s: refused but wrote an output' % what)
            if out and not want and os.path.exists(out):
                r = subprocess.run([a.tensorctl, 'inspect', out], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=120)
                if r.returncode != 0:
                    fails.append('%s: the output inspects with exit %d: the payload went along' % (what, r.returncode))
    return n


def out_globals(path):
    """Globals named by a rewritten file's pickle (parsed, never loaded)."""
    names = []
    with zipfile.ZipFile(path) as z:
        pkl = [n for n in z.namelist() if n.endswith('/data.pkl')][0]
        data = z.read(pkl)
    ops = list(pickletools.genops(data))
    for i, (op, arg, pos) in enumerate(ops):
        if op.name in ('GLOBAL', 'INST'):
            names.append(arg)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tensorctl', required=True)
    ap.add_argument('--corpus', required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='nothing-runs-')
    marker = os.path.join(tmp, 'MARKER-code-ran')
    fails = []
    commands = 0
    try:
        files = []
        for name, data, refusal in payloads(marker):
            p = os.path.join(tmp, name + '.pt')
            with open(p, 'wb') as f:
                f.write(data)
            files.append((p, refusal))
        versions = sorted(glob.glob(os.path.join(a.corpus, 'torch-*')))
        if not versions:
            fails.append('no torch-* folder in the corpus %s (missing?)' % a.corpus)
        for v in versions:
            m = os.path.join(v, 'malicious.pt')
            if os.path.exists(m):
                files.append((m, 4))
            else:
                fails.append('the corpus has no %s' % m)
        for path, refusal in files:
            before = open(path, 'rb').read()
            out = os.path.join(tmp, 'out.pt')
            runs = [(['inspect', path], refusal), (['inspect', '--json', path], refusal),
                    (['to-cpu', '-q', path, '-o', out], refusal), (['to-cuda', '-q', path, '-o', out], refusal),
                    (['to-cpu', '-q', '--dtype', 'bfloat16', path, '-o', out], refusal),
                    (['to-cpu', '-q', '--allow-unsafe', path, '-o', out], 0 if refusal == 4 else refusal),
                    (['to-cuda', '-q', '--allow-unsafe', path, '-o', out], 0 if refusal == 4 else refusal),
                    (['convert', '-q', path, out + '.safetensors'], refusal),
                    (['convert', '-q', path, out + '.conv.pt'], refusal),
                    (['convert', '-q', '--allow-unsafe', path, out + '.safetensors'], None)]
            for args, want in runs:
                for leftover in (out, out + '.safetensors', out + '.conv.pt'):
                    if os.path.exists(leftover):
                        os.unlink(leftover)
                p = subprocess.run([a.tensorctl] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                commands += 1
                what = '%s %s' % (' '.join(args[:-1] if args[-1].startswith(out) else args[:-1]), os.path.basename(path))
                if os.path.exists(marker):
                    fails.append('%s: THE PAYLOAD RAN (marker created)' % what)
                    os.unlink(marker)
                if p.returncode < 0:
                    fails.append('%s: killed by signal %d' % (what, -p.returncode))
                elif want is not None and p.returncode != want:
                    fails.append('%s: exit %d, expected %d: %s' % (what, p.returncode, want, p.stderr.decode()[:300]))
                if want and want != 0 and any(os.path.exists(x) for x in (out, out + '.safetensors', out + '.conv.pt')):
                    fails.append('%s: refused but wrote an output' % what)
                if want == 0 and args[0].startswith('to-') and os.path.exists(out):
                    # kept, never run: the rewrite still names the danger and inspect still refuses it
                    r = subprocess.run([a.tensorctl, 'inspect', out], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, timeout=120)
                    if r.returncode != 4:
                        fails.append('%s: the rewritten file inspects with exit %d, expected 4' % (what, r.returncode))
                    try:
                        bad = [g for g in out_globals(out) if '\n' in g]
                        if bad:
                            fails.append('%s: rewritten pickle has odd globals %r' % (what, bad))
                    except Exception as e:
                        fails.append('%s: rewritten pickle does not parse: %s' % (what, e))
            if open(path, 'rb').read() != before:
                fails.append('%s: the input changed' % path)
        commands += dcp_runs(a, tmp, marker, fails)
        if os.path.exists(marker):
            fails.append('THE PAYLOAD RAN (marker created)')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if commands == 0:
        fails.append('no command was run: nothing was checked')
    for f in fails:
        print('FAIL', f)
    print('%d commands over %d files' % (commands, len(files)))
    print('ok' if not fails else '%d failures' % len(fails))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
