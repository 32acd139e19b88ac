#!/usr/bin/env python3
"""Differential test: pk_read (through pkdump) against CPython's C unpickler
(through pkmodel) on the same pickles.

    pkdiff.py --pkdump PATH corpus --corpus DIR [--inputs DIR...]   (DIR: sample_models/corpus or the
                                                                    reference corpus)
    pkdiff.py --pkdump PATH generated --count N --seed S
    pkdiff.py --pkdump PATH files FILE...          (one pickle per file, for triage)

Rules: where CPython builds an object, pk_read must build the same (the same
canonical text, pkdump.c); where CPython raises, pk_read must fail. Exceptions
are counted apart and listed in the summary, and stay few:
  - pk_read's own caps (TC_ERR_LIMIT: depth, objects, marks, memo index);
  - CPython running out of memory (MemoryError: a memo index of 2**31 asks it
    for 32 GiB) where pk_read reads on;
  - what pk_read's graph cannot record and refuses (TC_ERR_UNSUPPORTED with
    one of the messages in ALLOWED_UNSUPPORTED).
And where pk_write rewrites a graph, CPython loading the rewrite must build what
it builds from the original (sets, bytes and bytearrays may turn into the calls
protocol 2 needs, which the loader runs as the real builtins).

Fails when no pickle was checked, when the corpus is missing, or on any
disagreement (the first ones are printed with their bytes)."""
import argparse
import os
import resource
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkmodel  # noqa: E402

TC_ERR_LIMIT = -3
TC_ERR_UNSUPPORTED = -5

# what pk_read refuses although CPython (with stand-ins) accepts: the graph
# keeps one state per object, items before it, of one kind
ALLOWED_UNSUPPORTED = [
    'BUILD applied twice to one object',
    'after BUILD on one object',
    'object receives both list and dict items',
    'READONLY_BUFFER on a bytearray',
    # torch.load's file reader skips the rest of a frame a read does not fit in;
    # pickle.loads does not: two readings, refused
    'crosses the end of a FRAME',
]


def limit_memory():
    """CPython gets 768 MiB more address space than it has now: a memo index of
    2**31 or a length of 2**40 fails at once with MemoryError instead of
    taking the machine (CPython zeroes 16 bytes per memo index)."""
    used = 0
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmSize:'):
                used = int(line.split()[1]) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = used + (768 << 20)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def unlimit():
    """pkdump runs without that limit (AddressSanitizer reserves terabytes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


# pkdump's --py2 for each encoding CPython's Unpickler is given
PY2_MODES = {'utf-8': 'utf8', 'bytes': 'bytes', 'ASCII': 'ascii', 'latin1': 'latin1'}


def run_pkdump(pkdump, pickles, write, encoding='utf-8'):
    with tempfile.NamedTemporaryFile(prefix='pkdiff-', suffix='.bin', delete=False) as f:
        for p in pickles:
            f.write(struct.pack('<I', len(p)))
            f.write(p)
        path = f.name
    try:
        args = [pkdump] + (['--write'] if write else []) + ['--py2', PY2_MODES[encoding], '--batch', path]
        res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=unlimit)
    finally:
        os.unlink(path)
    if res.returncode != 0:
        sys.exit('pkdump failed (%d): %s' % (res.returncode, res.stderr.decode(errors='replace')[:2000]))
    lines = res.stdout.decode('utf-8', 'surrogateescape').split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    if len(lines) != len(pickles):
        sys.exit('pkdump printed %d lines for %d pickles: %s' % (len(lines), len(pickles),
                                                               res.stderr.decode(errors='replace')[:2000]))
    return lines


def classify(data, pk_line, stats, fails, what, encoding='utf-8'):
    """Compare one pickle; returns the pickle's written form (bytes) or None."""
    written = None
    wpart = None
    if '\t' in pk_line:
        pk_line, wpart = pk_line.split('\t', 1)
    cp = pkmodel.model_line(data, encoding)
    if pk_line.startswith('OK ') and cp.startswith('OK '):
        if pk_line == cp:
            stats['agree_accept'] += 1
            if wpart and wpart.startswith('W '):
                written = bytes.fromhex(wpart[2:])
            elif wpart:
                stats['write_refused'] += 1
        else:
            fails.append((what, data, 'both accept, different objects', pk_line, cp))
    elif pk_line.startswith('ERR ') and cp.startswith('ERR '):
        stats['agree_reject'] += 1
    elif pk_line.startswith('ERR '):
        code = int(pk_line.split(' ', 2)[1])
        msg = pk_line.split(' ', 2)[2] if pk_line.count(' ') >= 2 else ''
        if code == TC_ERR_LIMIT:
            stats['allowed: pk_read cap (TC_ERR_LIMIT)'] += 1
        elif code == TC_ERR_UNSUPPORTED and any(a in msg for a in ALLOWED_UNSUPPORTED):
            key = 'allowed: ' + next(a for a in ALLOWED_UNSUPPORTED if a in msg)
            stats[key] += 1
        else:
            fails.append((what, data, 'CPython accepts, pk_read refuses', pk_line, cp))
    else:
        if cp.startswith('ERR MemoryError'):
            stats['allowed: CPython MemoryError'] += 1
        else:
            fails.append((what, data, 'CPython refuses, pk_read accepts', pk_line, cp))
    return written


def check_rewrite(data, written, stats, fails, what):
    st1, o1 = pkmodel.load(data, real4=True)
    if st1 != 'OK':
        stats['rewrite: original refused with real builtins'] += 1
        return
    st2, o2 = pkmodel.load(written, real4=True)
    if st2 != 'OK':
        fails.append((what, data, 'the rewrite does not load', written.hex(), o2))
        return
    r1, r2 = pkmodel.render(o1), pkmodel.render(o2)
    if r1 != r2:
        fails.append((what, data, 'the rewrite loads as another object', r2, r1))
    else:
        stats['rewrite: same object'] += 1


def compare(pkdump, items, write=True, verbose=False, encoding='utf-8'):
    """items: (what, pickle bytes). Returns (stats, fails). Rewrites are
    checked with torch's encoding only (utf-8)."""
    import collections
    stats = collections.Counter()
    fails = []
    t0 = time.time()
    write = write and encoding == 'utf-8'
    lines = run_pkdump(pkdump, [d for _, d in items], write, encoding)
    t1 = time.time()
    rewrites = []
    for (what, data), line in zip(items, lines):
        w = classify(data, line, stats, fails, what, encoding)
        if w is not None:
            rewrites.append((what, data, w))
    for what, data, w in rewrites:
        check_rewrite(data, w, stats, fails, what)
    stats['checked'] = len(items)
    t2 = time.time()
    if verbose:
        print('pkdump %.1fs, CPython %.1fs' % (t1 - t0, t2 - t1))
    return stats, fails


def report(stats, fails, label):
    print('%s: %d pickles checked: %d agree (accepted, same object), %d agree (both refuse), %d disagree'
          % (label, stats['checked'], stats['agree_accept'], stats['agree_reject'], len(fails)))
    for k in sorted(stats):
        if k.startswith(('allowed', 'rewrite', 'write')):
            print('  %-60s %d' % (k, stats[k]))
    for what, data, why, a, b in fails[:25]:
        print('FAIL %s: %s\n  pickle  %s\n  pk_read %s\n  CPython %s' % (what, why, data[:300].hex(),
                                                                       a[:600], b[:600]))
    if len(fails) > 25:
        print('... and %d more' % (len(fails) - 25))
    if stats['checked'] == 0:
        print('FAIL: no pickle was checked')
        return 1
    return 1 if fails else 0


# ---- inputs --------------------------------------------------------------------------

def legacy_pickles(data):
    """The pickles at the head of a legacy torch file (magic, protocol,
    sys_info, object, storage keys), each up to its STOP as CPython reads it."""
    import io
    import pickle

    class Skim(pickle.Unpickler):
        def find_class(self, module, name):
            return pkmodel.StandinBase

        def persistent_load(self, pid):
            return None

    out = []
    f = io.BytesIO(data)
    for _ in range(5):
        start = f.tell()
        try:
            Skim(f, encoding='utf-8').load()
        except Exception:
            break
        out.append(data[start:f.tell()])
    return out


def corpus_items(corpus, inputs):
    """[(group, [(name, pickle)])]: the reference checkpoints first."""
    groups = []
    if not os.path.isdir(corpus):
        sys.exit('FAIL: the reference corpus %s is missing' % corpus)
    items = []
    for dirpath, _, files in sorted(os.walk(corpus)):
        for n in sorted(files):
            p = os.path.join(dirpath, n)
            if n.endswith(('.json', '.md', '.safetensors')):
                continue
            data = open(p, 'rb').read()
            rel = os.path.relpath(p, corpus)
            if zipfile.is_zipfile(p):
                with zipfile.ZipFile(p) as z:
                    for m in z.namelist():
                        if m.endswith('.pkl'):
                            items.append(('%s:%s' % (rel, m), z.read(m)))
            else:
                for i, pk in enumerate(legacy_pickles(data)):
                    items.append(('%s:pickle%d' % (rel, i), pk))
    if not items:
        sys.exit('FAIL: no pickle in the reference corpus %s' % corpus)
    groups.append(('reference checkpoints', items))
    for d in inputs:
        if not os.path.isdir(d):
            sys.exit('FAIL: input folder %s is missing' % d)
        items = []
        for n in sorted(os.listdir(d)):
            p = os.path.join(d, n)
            if n.startswith(('README', '.')) or n.endswith('.canon') or not os.path.isfile(p):
                continue
            if zipfile.is_zipfile(p):
                with zipfile.ZipFile(p) as z:
                    for m in z.namelist():
                        if m.endswith('.pkl'):
                            items.append(('%s:%s' % (n, m), z.read(m)))
                continue
            items.append((n, open(p, 'rb').read()))
        groups.append((os.path.relpath(d, os.path.join(os.path.dirname(__file__), '..', '..')), items))
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--pkdump', required=True)
    ap.add_argument('--no-write', action='store_true')
    ap.add_argument('--verbose', action='store_true')
    sub = ap.add_subparsers(dest='mode', required=True)
    c = sub.add_parser('corpus')
    c.add_argument('--corpus', required=True)
    c.add_argument('--inputs', nargs='*', default=[])
    g = sub.add_parser('generated')
    g.add_argument('--count', type=int, default=100000)
    g.add_argument('--seed', type=int, default=1)
    f = sub.add_parser('files')
    f.add_argument('paths', nargs='+')
    a = ap.parse_args()
    warnings.simplefilter('ignore')  # invalid escapes in STRING warn (DeprecationWarning)
    sys.unraisablehook = lambda u: None
    # CPython prints this when READONLY_BUFFER's memoryview outlives its bytearray
    sys.excepthook = lambda t, v, tb: None if t is SystemError and 'exported buffers' in str(v) \
        else sys.__excepthook__(t, v, tb)
    sys.setrecursionlimit(200000)
    threading.stack_size(512 << 20)
    result = []

    def work():
        limit_memory()
        t0 = time.time()
        if a.mode == 'corpus':
            code = 0
            total = None
            for group, items in corpus_items(a.corpus, a.inputs):
                stats, fails = compare(a.pkdump, items, not a.no_write, a.verbose)
                code |= report(stats, fails, group)
                if group == 'reference checkpoints' and stats['agree_accept'] != len(items):
                    print('FAIL: %d of the %d reference pickles are not read alike by both'
                          % (len(items) - stats['agree_accept'], len(items)))
                    code = 1
                total = stats if total is None else total + stats
            print('all: %d pickles checked, %d agree (accepted, same object), %d agree (both refuse)'
                  % (total['checked'], total['agree_accept'], total['agree_reject']))
            result.append(code)
            return
        if a.mode == 'generated':
            import pkgen
            items = pkgen.generate(a.seed, a.count, lambda d: pkmodel.load(d)[0] == 'OK')
            label = 'generated (seed %d)' % a.seed
        else:
            items = [(p, open(p, 'rb').read()) for p in a.paths]
            label = 'files'
        t1 = time.time()
        stats, fails = compare(a.pkdump, items, not a.no_write, a.verbose)
        if a.mode == 'generated':
            # Python 2 strings read as the other encodings an Unpickler takes
            for enc in ('bytes', 'ASCII', 'latin1'):
                sub = [('program, encoding=%s' % enc, d) for w, d in items if w == 'program'][:a.count // 10]
                s2, f2 = compare(a.pkdump, sub, False, a.verbose, enc)
                for k, v in s2.items():
                    if k in ('checked', 'agree_accept', 'agree_reject') or k.startswith('allowed'):
                        stats[k] += v
                fails += f2
        kinds = {}
        for what, _ in items:
            k = what if a.mode == 'generated' else 'input'
            kinds[k] = kinds.get(k, 0) + 1
        if a.verbose or a.mode == 'generated':
            print('made %s in %.1fs; compared in %.1fs' % (', '.join('%d %ss' % (v, k) for k, v in
                                                                      sorted(kinds.items())), t1 - t0,
                                                           time.time() - t1))
        result.append(report(stats, fails, label))

    def guarded():
        # on this thread a SystemExit would end it without a word: say why, and fail
        try:
            work()
        except SystemExit as e:
            print(e.code if isinstance(e.code, str) else 'FAIL: exit %s' % e.code)
            result.append(1)
        except Exception as e:  # noqa: BLE001
            print('FAIL: %s: %s' % (type(e).__name__, e))
            traceback.print_exc(file=sys.stdout)
            result.append(1)

    t = threading.Thread(target=guarded)
    t.start()
    t.join()
    return result[0] if result else 1


if __name__ == '__main__':
    sys.exit(main())
