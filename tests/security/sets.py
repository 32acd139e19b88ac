#!/usr/bin/env python3
"""Nothing lost: sharded sets and --in-place keep every input byte and leave
no partial output, whatever fails and whenever a signal comes.

    sets.py check --tensorctl T [--case NAME]    every case (or one); no torch needed
    sets.py list

Cases: an index naming itself or another index is refused; shards in
subfolders keep their relative paths; an output over an input folder is
refused; SIGINT, SIGTERM and SIGHUP in the middle of a set, and a write past
the file size limit (SIGXFSZ ignored, EFBIG handled), leave no shard, index,
temporary or folder the run made; --in-place keeps mode, owner and symbolic
links.
"""
import argparse, hashlib, json, os, resource, shutil, signal, stat, struct, subprocess, sys, tempfile, time, zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'hostile'))
sys.path.insert(0, os.path.join(HERE, '..'))
import hostile as H  # noqa: E402
from judge import open_in  # noqa: E402


def tree(folder):
    """Every file under folder with its digest, and every folder."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), folder) + '/'] = 'dir'
        for f in files:
            p = os.path.join(root, f)
            with open(p, 'rb') as fh:
                out[os.path.relpath(p, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def shard(path, name, mib=0, cuda=True):
    """A torch zip shard holding one float32 tensor `name` (mib MiB, or 4 floats)."""
    n = (mib << 18) if mib else 4
    loc = 'cuda:0' if cuda else 'cpu'
    pid = H.op_tuple([H.op_str('storage'), H.op_global('torch', 'FloatStorage'), H.op_str('0'), H.op_str(loc),
                      H.op_int(n)]) + b'Q'
    hooks = H.op_global('collections', 'OrderedDict') + b')R'
    t = H.op_global('torch._utils', '_rebuild_tensor_v2') + H.op_tuple(
        [pid, H.op_int(0), H.op_tuple([H.op_int(n)]), H.op_tuple([H.op_int(1)]), H.FALSE, hooks]) + b'R'
    pkl = H.state_dict(H.dict_of([(name, t)]))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_STORED, allowZip64=True) as z:
        z.writestr('s/data.pkl', pkl)
        z.writestr('s/byteorder', 'little')
        with z.open('s/data/0', 'w', force_zip64=True) as f:
            chunk = struct.pack('<f', 1.5) * (1 << 18) if mib else H.FOUR_FLOATS
            for _ in range(mib or 1):
                f.write(chunk)
        z.writestr('s/version', '3\n')


def index(path, weight_map):
    with open(path, 'w') as f:
        json.dump({'metadata': {'total_size': 16}, 'weight_map': weight_map}, f)


def run(tc, args, **kw):
    return subprocess.run([tc] + args, capture_output=True, text=True, timeout=300, **kw)


class Case:
    def __init__(self, tc, tmp):
        self.tc, self.tmp, self.fails, self.n = tc, tmp, [], 0

    def check(self, ok, what):
        self.n += 1
        if not ok:
            self.fails.append(what)


def index_names_itself(c):
    d = os.path.join(c.tmp, 'self')
    os.makedirs(d)
    ix = os.path.join(d, 'pytorch_model.bin.index.json')
    index(ix, {'w': 'pytorch_model.bin.index.json'})
    for args in (['inspect', ix], ['to-cpu', ix, '-o', os.path.join(c.tmp, 'self-out')]):
        r = run(c.tc, args)
        c.check(r.returncode == 3 and 'is itself an index' in r.stderr,
                'an index naming itself: %s: exit %d: %s' % (args[0], r.returncode, r.stderr.strip()))
    c.check(not os.path.exists(os.path.join(c.tmp, 'self-out')), 'an index naming itself: output folder made')


def indexes_name_each_other(c):
    d = os.path.join(c.tmp, 'mutual')
    os.makedirs(d)
    index(os.path.join(d, 'a.bin.index.json'), {'w': 'b.bin.index.json'})
    index(os.path.join(d, 'b.bin.index.json'), {'w': 'a.bin.index.json'})
    r = run(c.tc, ['inspect', os.path.join(d, 'a.bin.index.json')])
    c.check(r.returncode == 3 and 'is itself an index' in r.stderr,
            'two indexes naming each other: exit %d: %s' % (r.returncode, r.stderr.strip()))


def subfolders_keep_paths(c):
    d = os.path.join(c.tmp, 'sub')
    shard(os.path.join(d, 'a', 'pytorch_model.bin'), 'a.w')
    shard(os.path.join(d, 'b', 'pytorch_model.bin'), 'b.w')
    ix = os.path.join(d, 'pytorch_model.bin.index.json')
    index(ix, {'a.w': 'a/pytorch_model.bin', 'b.w': 'b/pytorch_model.bin'})
    before = tree(d)
    out = os.path.join(c.tmp, 'sub-out')
    r = run(c.tc, ['to-cpu', '-q', ix, '-o', out])
    c.check(r.returncode == 0, 'shards in subfolders: exit %d: %s' % (r.returncode, r.stderr.strip()))
    got = tree(out) if os.path.isdir(out) else {}
    c.check(set(got) == {'a/', 'b/', 'a/pytorch_model.bin', 'b/pytorch_model.bin', 'pytorch_model.bin.index.json'},
            'shards in subfolders keep their paths: %s' % sorted(got))
    for sub, name in (('a', 'a.w'), ('b', 'b.w')):
        r = run(c.tc, ['inspect', '--json', os.path.join(out, sub, 'pytorch_model.bin')])
        try:
            t = json.loads(r.stdout)['tensors']
            c.check([x['name'] for x in t] == [name] and t[0]['device'] == 'cpu',
                    'subfolder %s holds its own shard, on the cpu' % sub)
        except ValueError:
            c.check(False, 'subfolder %s: inspect failed: %s' % (sub, r.stderr.strip()))
    c.check(tree(d) == before, 'shards in subfolders: the input changed')


def output_over_input(c):
    d = os.path.join(c.tmp, 'over')
    shard(os.path.join(d, 'pytorch_model-00001-of-00002.bin'), 'x')
    shard(os.path.join(d, 'pytorch_model-00002-of-00002.bin'), 'y')
    ix = os.path.join(d, 'pytorch_model.bin.index.json')
    index(ix, {'x': 'pytorch_model-00001-of-00002.bin', 'y': 'pytorch_model-00002-of-00002.bin'})
    before = tree(d)
    for args in (['to-cpu', ix, '-o', d], ['to-cpu', '-f', ix, '-o', d],
                 ['convert', '-f', '--max-shard-size', '1', ix, os.path.join(d, 'pytorch_model.bin.index.json')]):
        r = run(c.tc, args)
        c.check(r.returncode == 2 and ('would replace input' in r.stderr or 'input file' in r.stderr),
                'output over the input folder (%s): exit %d: %s' % (' '.join(args[:2]), r.returncode,
                                                                   r.stderr.strip()))
        c.check(tree(d) == before, 'output over the input folder (%s): an input changed' % ' '.join(args[:2]))


def big_set(c, name, n=3, mib=48):
    d = os.path.join(c.tmp, name)
    wm = {}
    for i in range(n):
        fn = 'pytorch_model-%05d-of-%05d.bin' % (i + 1, n)
        shard(os.path.join(d, fn), 't%d' % i, mib=mib)
        wm['t%d' % i] = fn
    ix = os.path.join(d, 'pytorch_model.bin.index.json')
    index(ix, wm)
    return d, ix


def signals_mid_set(c):
    d, ix = big_set(c, 'sig')
    before = tree(d)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        for args in (['to-cpu', '-q', '--dtype', 'bfloat16', ix, '-o'],
                     ['convert', '-q', '--max-shard-size', '40MB', ix]):
            out = os.path.join(c.tmp, 'sig-out', 'deeper')  # folders the run makes go too
            shutil.rmtree(os.path.join(c.tmp, 'sig-out'), ignore_errors=True)
            target = os.path.join(out, 'model.safetensors.index.json') if args[0] == 'convert' else out
            # the signal at its default disposition in the child, though the tests may have been
            # started with it ignored (nohup, a background job), which exec keeps
            p = subprocess.Popen([c.tc] + args + [target], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=lambda s=sig: signal.signal(s, signal.SIG_DFL))
            caught, deadline = False, time.time() + 120
            while time.time() < deadline and p.poll() is None:  # freeze it once a first shard is done
                names = os.listdir(out) if os.path.isdir(out) else []
                # outputs are unnamed until published (open in the process), or hidden temporaries
                if sum('.tensorctl-' in n for n in names) + len(open_in(p.pid, out)) >= 2:
                    p.send_signal(signal.SIGSTOP)
                    caught = True
                    break
                time.sleep(0.001)
            what = '%s during %s' % (signal.Signals(sig).name, args[0])
            if not caught:
                p.wait()
                print('note: %s: finished before it could be frozen (exit %d)' % (what, p.returncode))
                continue
            midway = sorted(os.listdir(out))
            c.check(not any(n.endswith(('.bin', '.safetensors', '.json')) and '.tensorctl-' not in n for n in midway),
                    '%s: a finished output is visible before the whole set is: %s' % (what, midway))
            p.send_signal(sig)
            p.send_signal(signal.SIGCONT)
            p.wait(timeout=60)
            c.check(p.returncode == -sig, '%s: ended with %s, not the signal' % (what, p.returncode))
            c.check(not os.path.exists(os.path.join(c.tmp, 'sig-out', 'deeper')),
                    '%s: left %s' % (what, tree(os.path.join(c.tmp, 'sig-out'))))
            print('%s: frozen with %s, then nothing left' % (what, midway))
    c.check(tree(d) == before, 'signals mid-set: an input changed')


def file_size_limit(c):
    d, ix = big_set(c, 'fsize', n=2, mib=8)
    before = tree(d)
    out = os.path.join(c.tmp, 'fsize-out')

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))
    r = subprocess.run([c.tc, 'to-cpu', '-q', ix, '-o', out], capture_output=True, text=True, timeout=120,
                       preexec_fn=limit)
    c.check(r.returncode == 1 and 'file too large' in r.stderr,
            'a write past the file size limit: exit %d: %s' % (r.returncode, r.stderr.strip()))
    c.check(not os.path.exists(out), 'a write past the file size limit: left %s' % (tree(out) if os.path.isdir(out) else out))
    c.check(tree(d) == before, 'file size limit: an input changed')


def in_place_keeps(c):
    d = os.path.join(c.tmp, 'inplace')
    f = os.path.join(d, 'model.pt')
    shard(f, 'w')
    os.chmod(f, 0o600)
    owner = None
    if os.geteuid() == 0:
        os.chown(f, 1234, 4321)
        owner = (1234, 4321)
    r = run(c.tc, ['to-cpu', '-q', '--in-place', f])
    st = os.stat(f)
    c.check(r.returncode == 0, '--in-place: exit %d: %s' % (r.returncode, r.stderr.strip()))
    c.check(stat.S_IMODE(st.st_mode) == 0o600, '--in-place: mode %o, was 600' % stat.S_IMODE(st.st_mode))
    if owner:
        c.check((st.st_uid, st.st_gid) == owner, '--in-place: owner %d:%d, was %d:%d' % (st.st_uid, st.st_gid, *owner))
    r = run(c.tc, ['inspect', '--json', f])
    c.check('"device": "cpu"' in r.stdout.replace('\t', ' ').replace('  ', ' ') or '"cpu"' in r.stdout,
            '--in-place: the file was not rewritten')
    # a symbolic link (the Hugging Face cache layout): the target is rewritten, the link stays
    blobs = os.path.join(d, 'blobs')
    os.makedirs(blobs)
    target = os.path.join(blobs, 'abc123')
    shard(target, 'w')
    os.chmod(target, 0o640)
    link = os.path.join(d, 'snapshot.pt')
    os.symlink(os.path.relpath(target, d), link)
    r = run(c.tc, ['to-cpu', '-q', '--in-place', link])
    c.check(r.returncode == 0, '--in-place on a link: exit %d: %s' % (r.returncode, r.stderr.strip()))
    c.check(os.path.islink(link) and os.path.realpath(link) == os.path.realpath(target),
            '--in-place on a link: the link was replaced')
    c.check(stat.S_IMODE(os.stat(target).st_mode) == 0o640, '--in-place on a link: the target lost its mode')
    r = run(c.tc, ['inspect', '--json', target])
    try:
        c.check(all(t['device'] == 'cpu' for t in json.loads(r.stdout)['tensors']),
                '--in-place on a link: the target was not rewritten')
    except ValueError:
        c.check(False, '--in-place on a link: inspect of the target failed: %s' % r.stderr.strip())
    c.check(not [n for n in os.listdir(d) + os.listdir(blobs) if '.tensorctl-' in n], '--in-place: temporaries left')


CASES = {f.__name__: f for f in (index_names_itself, indexes_name_each_other, subfolders_keep_paths,
                                  output_over_input, signals_mid_set, file_size_limit, in_place_keeps)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('what', choices=['list', 'check'])
    ap.add_argument('--tensorctl')
    ap.add_argument('--case')
    a = ap.parse_args()
    if a.what == 'list':
        print('\n'.join(CASES))
        return 0
    fails, n = [], 0
    for name, fn in CASES.items():
        if a.case and name != a.case:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            c = Case(a.tensorctl, tmp)
            fn(c)
            fails += ['%s: %s' % (name, f) for f in c.fails]
            n += c.n
    for f in fails:
        print('FAIL', f)
    print('%d checks, %d failed' % (n, len(fails)))
    return 1 if fails or not n else 0


if __name__ == '__main__':
    sys.exit(main())
