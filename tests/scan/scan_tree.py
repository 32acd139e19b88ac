#!/usr/bin/env python3
"""A tree that mixes every kind of file scan judges, made by the real tools
(torch.save, numpy.save, pickle, joblib, dill, tarfile, zipfile, 7z), and
what scan must say of each file, checked against what the real loaders do.

    scan_tree.py gen DIR              write DIR/tree and DIR/manifest.json (needs torch, numpy,
                                      joblib, dill: Debian's /usr/bin/python3)
    scan_tree.py check --tensorctl T --dir DIR
                                      scan DIR/tree (text, --json, --sarif, --all, --jobs 1 and 4):
                                      every item's verdict, kind and named globals as the manifest
                                      says, blobs of the Hugging Face cache named by their snapshot
                                      paths, the exit status, the summary, the SARIF log
    scan_tree.py loaders --dir DIR    (under run_with_torch.sh) the manifest against the real
                                      loaders of this interpreter: each payload runs (it creates a
                                      marker file), each unsafe file is refused by the loader's safe
                                      mode (torch's weights_only, numpy's allow_pickle=False), each
                                      safe one loads, each unreadable one fails
    scan_tree.py auto [--tensorctl T] --dir DIR --mode check|loaders [--only FEATURE[,...]]
                                      gen (with /usr/bin/python3) into DIR/tree.run-* once for the tests
                                      of one `meson test` (judge.folder_once_per_run), then the check
    scan_tree.py features --mode check|loaders
                                      the features of a mode, one a line (meson registers
                                      scan-tree/FEATURE and scan-tree-loaders/FEATURE): check's
                                      json, text, quiet, sarif; the loaders' groups (LOADERS)

A payload is os.system('touch "$TC_SCAN_MARKERS/ID"') (or builtins.exec of the
same): the loaders run with TC_SCAN_MARKERS set to an empty folder, and a
marker named ID appears only when the payload ran.
"""
import argparse, gzip, hashlib, io, json, lzma, os, re, shutil, subprocess, sys, tarfile, tempfile, zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from judge import folder_once_per_run  # noqa: E402

GEN_PYTHON = '/usr/bin/python3'

# ---- payloads ----------------------------------------------------------------------

def touch_cmd(mid):
    return 'touch "$TC_SCAN_MARKERS/%s"' % mid


class Payload:
    """Unpickling it runs a shell command that creates the marker mid."""
    def __init__(self, mid):
        self.mid = mid

    def __reduce__(self):
        return (os.system, (touch_cmd(self.mid),))


class ExecPayload:
    """The same through builtins.exec (a global no denylist misses, named here as the classic)."""
    def __init__(self, mid):
        self.mid = mid

    def __reduce__(self):
        code = "open(__import__('os').environ['TC_SCAN_MARKERS'] + '/%s', 'w').close()" % self.mid
        return (exec, (code,))


def protocol0_payload(mid):
    """A protocol 0 pickle written by hand: plain text that torch.load and pickle.load run."""
    return ("cposix\nsystem\n(S'%s'\ntR." % touch_cmd(mid).replace("'", "\\'")).encode()


# ---- the tree ------------------------------------------------------------------------

class Tree:
    def __init__(self, root):
        self.root = root
        self.items = []

    def path(self, rel):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def expect(self, name, verdict, oracle, loader=None, kind=None, marker=None, globals_=(), file=None, chain=()):
        """name: the item as scan names it (relative to the tree's parent); oracle: what the real
        loader must do (runs, refused, loads, fails, none); file + chain: the file and the archive
        members down to the bytes the loader reads."""
        self.items.append({'name': name, 'verdict': verdict, 'oracle': oracle, 'loader': loader, 'kind': kind,
                           'marker': marker, 'globals': list(globals_), 'file': file or name,
                           'chain': list(chain)})


def gen(out):
    import numpy as np
    import torch
    import joblib
    import dill
    root = os.path.join(out, 'tree')
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    T = Tree(root)
    t = lambda rel: 'tree/' + rel  # noqa: E731  (names as scan gives them, run from out)

    def save_bytes(rel, data):
        with open(T.path(rel), 'wb') as f:
            f.write(data)

    def torch_bytes(obj, zip_=True):
        b = io.BytesIO()
        torch.save(obj, b, _use_new_zipfile_serialization=zip_)
        return b.getvalue()

    def np_bytes(arr, allow_pickle=False):
        b = io.BytesIO()
        np.save(b, arr, allow_pickle=allow_pickle)
        return b.getvalue()

    def st_bytes(tensors):
        """A safetensors file, written as the format's specification lays it out."""
        header, blobs, off = {}, [], 0
        for name, arr in tensors.items():
            raw = arr.astype('<f4').tobytes()
            header[name] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
        h = json.dumps(header, separators=(',', ':')).encode()
        h += b' ' * (-len(h) % 8)
        return len(h).to_bytes(8, 'little') + h + b''.join(blobs)

    state = {'w': torch.arange(6, dtype=torch.float32).reshape(2, 3), 'b': torch.ones(3)}
    good_pt = torch_bytes(state)

    # not model files
    save_bytes('README.md', b'# a model\n\nSee config.json.\n')
    save_bytes('config.json', b'{\n  "hidden_size": 16\n}\n')
    T.expect(t('README.md'), 'skipped', 'none', kind='not a model file')
    T.expect(t('config.json'), 'skipped', 'none', kind='not a model file')
    os.mkfifo(T.path('queue.fifo'))  # never opened (an open would wait for a writer)
    T.expect(t('queue.fifo'), 'skipped', 'none', kind='special file')

    # plain model files, safe
    save_bytes('plain/good_zip.pt', good_pt)
    T.expect(t('plain/good_zip.pt'), 'safe', 'loads', 'torch')
    save_bytes('plain/good_legacy.pt', torch_bytes(state, zip_=False))
    T.expect(t('plain/good_legacy.pt'), 'safe', 'loads', 'torch')
    save_bytes('plain/good.safetensors', st_bytes({'w': np.arange(6, dtype='f4').reshape(2, 3)}))
    T.expect(t('plain/good.safetensors'), 'safe', 'loads', 'safetensors', kind='safetensors')
    save_bytes('plain/numbers.npy', np_bytes(np.arange(12, dtype=np.float32).reshape(3, 4)))
    T.expect(t('plain/numbers.npy'), 'safe', 'loads', 'numpy', kind='npy')
    save_bytes('plain/fortran.npy', np_bytes(np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))))
    T.expect(t('plain/fortran.npy'), 'safe', 'loads', 'numpy', kind='npy')
    save_bytes('plain/text.npy', np_bytes(np.array(['ab', 'c'])))
    T.expect(t('plain/text.npy'), 'safe', 'loads', 'numpy', kind='npy')
    b = io.BytesIO()
    np.savez_compressed(b, w=np.ones(4, dtype=np.float16), b=np.arange(3))
    save_bytes('plain/arrays.npz', b.getvalue())
    T.expect(t('plain/arrays.npz'), 'safe', 'loads', 'numpy', kind='npz')
    save_bytes('plain/state.pkl', pickle_dumps({'lr': 0.1, 'steps': [1, 2, 3], 'name': 'run'}))
    T.expect(t('plain/state.pkl'), 'safe', 'loads', 'pickle', kind='pickle')
    import collections
    save_bytes('plain/ordered.pickle', pickle_dumps(collections.OrderedDict(a=1, b=(2, 3))))
    T.expect(t('plain/ordered.pickle'), 'safe', 'loads', 'pickle', kind='pickle')
    save_bytes('plain/plain.joblib', joblib_bytes(joblib, {'lr': 0.5}, None))
    T.expect(t('plain/plain.joblib'), 'safe', 'loads', 'joblib', kind='pickle')
    save_bytes('plain/plain_z.joblib', joblib_bytes(joblib, {'lr': 0.5}, 3))
    T.expect(t('plain/plain_z.joblib'), 'safe', 'loads', 'joblib', kind='zlib: pickle')
    # a sharded safetensors set: each shard, and the index judged as the set
    sh1 = st_bytes({'a': np.ones(2, dtype='f4')})
    sh2 = st_bytes({'b': np.zeros(3, dtype='f4')})
    save_bytes('plain/sharded/model-00001-of-00002.safetensors', sh1)
    save_bytes('plain/sharded/model-00002-of-00002.safetensors', sh2)
    save_bytes('plain/sharded/model.safetensors.index.json', json.dumps(
        {'metadata': {'total_size': 20}, 'weight_map': {'a': 'model-00001-of-00002.safetensors',
                                                        'b': 'model-00002-of-00002.safetensors'}}).encode())
    for n in ('model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'):
        T.expect(t('plain/sharded/' + n), 'safe', 'loads', 'safetensors', kind='safetensors')
    T.expect(t('plain/sharded/model.safetensors.index.json'), 'safe', 'none', kind='safetensors-index')

    # unsafe, without a payload: loaders' safe modes refuse them
    save_bytes('plain/objects_plain.npy', np_bytes(np.array([1, 'two', None], dtype=object), allow_pickle=True))
    T.expect(t('plain/objects_plain.npy'), 'unsafe', 'refused', 'numpy', kind='npy')
    save_bytes('plain/custom.pkl',
               b'\x80\x02ctc_scan_fixture\nModel\nq\x00)\x81q\x01}q\x02X\x01\x00\x00\x00wq\x03K\x01sb.')
    T.expect(t('plain/custom.pkl'), 'unsafe', 'refused', 'pickle', kind='pickle',
             globals_=['tc_scan_fixture.Model'])
    save_bytes('plain/with_arrays.joblib', joblib_bytes(joblib, {'w': np.ones(3)}, None))
    T.expect(t('plain/with_arrays.joblib'), 'unsafe', 'refused', 'pickle', kind='pickle',
             globals_=['joblib.numpy_pickle.NumpyArrayWrapper'])

    # hostile: every payload creates its marker when the real loader reads the file
    def hostile(rel, data, loader, kind=None, marker=None, globals_=('posix.system',)):
        save_bytes(rel, data)
        T.expect(t(rel), 'unsafe', 'runs', loader, kind=kind, marker=marker, globals_=globals_)

    hostile('hostile/payload.pkl', pickle_dumps(Payload('pkl')), 'pickle', 'pickle', 'pkl')
    hostile('hostile/payload_p0.pkl', protocol0_payload('p0'), 'pickle', 'pickle', 'p0')
    hostile('hostile/payload_exec.pickle', pickle_dumps(ExecPayload('exec')), 'pickle', 'pickle', 'exec',
            globals_=('builtins.exec',))
    hostile('hostile/payload.pt', torch_bytes({'w': torch.ones(2), 'x': Payload('pt')}), 'torch', 'torch-zip', 'pt')
    hostile('hostile/payload_legacy.pt', torch_bytes({'w': torch.ones(2), 'x': Payload('legacy')}, zip_=False),
            'torch', 'torch-legacy', 'legacy')
    hostile('hostile/objects.npy', np_bytes(np.array([Payload('npy'), 1], dtype=object), allow_pickle=True),
            'numpy', 'npy', 'npy')
    b = io.BytesIO()
    np.savez(b, w=np.ones(3), evil=np.array([Payload('npz')], dtype=object))
    hostile('hostile/payload.npz', b.getvalue(), 'numpy', 'npz', 'npz')
    # folders 70 deep: the walk holds 64 open, and looks entries below them up by their paths; a
    # symlink down there is judged under its name, the file it names once, as anywhere else
    deep = 'deep/' + ''.join('d%02d/' % i for i in range(70))
    hostile(deep + 'payload.pkl', pickle_dumps(Payload('deepdir')), 'pickle', 'pickle', 'deepdir')
    os.symlink('payload.pkl', T.path(deep + 'alias.pkl'))
    del T.items[-1]  # (payload.pkl comes after the link that names it: judged as alias.pkl)
    T.expect(t(deep + 'alias.pkl'), 'unsafe', 'runs', 'pickle', kind='pickle', marker='deepdir',
             globals_=['posix.system'])
    T.expect(t(deep + 'payload.pkl'), 'skipped', 'none', kind='link')
    hostile('hostile/payload.joblib', joblib_bytes(joblib, {'model': Payload('joblib_z')}, 3), 'joblib',
            'zlib: pickle', 'joblib_z')
    hostile('hostile/payload_gz.joblib', joblib_bytes(joblib, {'model': Payload('joblib_gz')}, ('gzip', 3)),
            'joblib', 'gzip: pickle', 'joblib_gz')
    hostile('hostile/payload.dill', dill.dumps(Payload('dill')), 'dill', 'pickle', 'dill')
    hostile('hostile/payload.pkl.xz', lzma.compress(pickle_dumps(Payload('xz'))), 'pickle_xz', 'xz: pickle', 'xz')
    # a text file: torch.load unpickles what is no zip from byte 0, whatever its name
    hostile('hostile/notes.txt', protocol0_payload('txt'), 'torch', 'pickle', 'txt')

    # archives, member by member
    def tar_of(members, mode):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode=mode) as tf:
            for name, data in members:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        return b.getvalue()

    def zip_of(members, method=zipfile.ZIP_DEFLATED):
        b = io.BytesIO()
        with zipfile.ZipFile(b, 'w', method) as zf:
            for name, data in members:
                zf.writestr(name, data)
        return b.getvalue()

    pay_pkl = lambda mid: pickle_dumps(Payload(mid))  # noqa: E731
    save_bytes('archives/bundle.tar', tar_of([('model/good.pt', good_pt), ('model/payload.pkl', pay_pkl('tar'))],
                                             'w'))
    T.expect(t('archives/bundle.tar') + '!model/good.pt', 'safe', 'loads', 'torch', chain=['model/good.pt'],
             file=t('archives/bundle.tar'))
    T.expect(t('archives/bundle.tar') + '!model/payload.pkl', 'unsafe', 'runs', 'pickle', kind='pickle',
             marker='tar', globals_=['posix.system'], chain=['model/payload.pkl'], file=t('archives/bundle.tar'))
    save_bytes('archives/bundle.tar.gz', tar_of([('good.pt', good_pt),
                                                 ('payload.pt', torch_bytes({'x': Payload('targz')}))], 'w:gz'))
    T.expect(t('archives/bundle.tar.gz') + '!good.pt', 'safe', 'loads', 'torch', chain=['good.pt'],
             file=t('archives/bundle.tar.gz'))
    T.expect(t('archives/bundle.tar.gz') + '!payload.pt', 'unsafe', 'runs', 'torch', kind='torch-zip',
             marker='targz', globals_=['posix.system'], chain=['payload.pt'], file=t('archives/bundle.tar.gz'))
    save_bytes('archives/bundle.tar.bz2', tar_of(
        [('objects.npy', np_bytes(np.array([Payload('tarbz2')], dtype=object), allow_pickle=True))], 'w:bz2'))
    T.expect(t('archives/bundle.tar.bz2') + '!objects.npy', 'unsafe', 'runs', 'numpy', kind='npy', marker='tarbz2',
             globals_=['posix.system'], chain=['objects.npy'], file=t('archives/bundle.tar.bz2'))
    save_bytes('archives/bundle.tar.xz', tar_of([('model.safetensors', sh1)], 'w:xz'))
    T.expect(t('archives/bundle.tar.xz') + '!model.safetensors', 'safe', 'loads', 'safetensors', kind='safetensors',
             chain=['model.safetensors'], file=t('archives/bundle.tar.xz'))
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w') as zf:
        zf.writestr(zipfile.ZipInfo('good.pt'), good_pt, compress_type=zipfile.ZIP_STORED)
        zf.writestr('payload.pkl', pay_pkl('zip'), compress_type=zipfile.ZIP_DEFLATED)
    save_bytes('archives/bundle.zip', b.getvalue())
    T.expect(t('archives/bundle.zip') + '!good.pt', 'safe', 'loads', 'torch', chain=['good.pt'],
             file=t('archives/bundle.zip'))
    T.expect(t('archives/bundle.zip') + '!payload.pkl', 'unsafe', 'runs', 'pickle', kind='pickle', marker='zip',
             globals_=['posix.system'], chain=['payload.pkl'], file=t('archives/bundle.zip'))
    inner_zip = zip_of([('payload.pkl', pay_pkl('zipzip'))])
    inner_tgz = tar_of([('good.pt', good_pt)], 'w:gz')
    save_bytes('archives/nested.zip', zip_of([('inner.zip', inner_zip), ('inner.tar.gz', inner_tgz)],
                                             zipfile.ZIP_STORED))
    T.expect(t('archives/nested.zip') + '!inner.zip!payload.pkl', 'unsafe', 'runs', 'pickle', kind='pickle',
             marker='zipzip', globals_=['posix.system'], chain=['inner.zip', 'payload.pkl'],
             file=t('archives/nested.zip'))
    T.expect(t('archives/nested.zip') + '!inner.tar.gz!good.pt', 'safe', 'loads', 'torch',
             chain=['inner.tar.gz', 'good.pt'], file=t('archives/nested.zip'))
    # five levels of zips: the fifth is deeper than --max-archive-depth's 4, so it is not judged
    deep = zip_of([('payload.pkl', pay_pkl('deep'))])
    chain = []
    for lvl in range(1, 5):
        deep = zip_of([('z%d.zip' % lvl, deep)])
        chain.insert(0, 'z%d.zip' % lvl)
    save_bytes('archives/deep.zip', deep)
    T.expect(t('archives/deep.zip') + '!' + '!'.join(chain), 'unreadable', 'runs', 'pickle', marker='deep',
             chain=chain + ['payload.pkl'], file=t('archives/deep.zip'))
    # members too big to keep whole once decompressed (over 16 MiB): read through once, their first
    # and last MiBs kept, the local headers between read by decompressing again
    g = torch.Generator().manual_seed(0)  # numbers that do not compress 1000 times, as zeros do
    big = {'layer%d' % i: torch.randint(0, 256, (600000,), generator=g, dtype=torch.uint8).float() for i in range(8)}
    big_good = torch_bytes(big)
    big['x'] = Payload('bigtgz')
    save_bytes('archives/big.tar.gz', tar_of([('big_good.pt', big_good), ('big_payload.pt', torch_bytes(big))],
                                             'w:gz'))
    T.expect(t('archives/big.tar.gz') + '!big_good.pt', 'safe', 'loads', 'torch', kind='torch-zip',
             chain=['big_good.pt'], file=t('archives/big.tar.gz'))
    T.expect(t('archives/big.tar.gz') + '!big_payload.pt', 'unsafe', 'runs', 'torch', kind='torch-zip',
             marker='bigtgz', globals_=['posix.system'], chain=['big_payload.pt'], file=t('archives/big.tar.gz'))
    save_bytes('archives/big.tar', tar_of([('big_good.pt', big_good)], 'w'))  # read in place
    T.expect(t('archives/big.tar') + '!big_good.pt', 'safe', 'loads', 'torch', kind='torch-zip',
             chain=['big_good.pt'], file=t('archives/big.tar'))
    save_bytes('archives/docs.tar', tar_of([('README.md', b'docs only\n')], 'w'))
    T.expect(t('archives/docs.tar'), 'skipped', 'none', kind='tar archive')
    T.expect(t('archives/docs.tar') + '!README.md', 'skipped', 'none', kind='not a model file')
    if shutil.which('7z'):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, 'good.pt'), 'wb') as f:
                f.write(good_pt)
            with open(os.path.join(tmp, 'payload.pkl'), 'wb') as f:
                f.write(pay_pkl('7z'))
            subprocess.run(['7z', 'a', '-bd', '-bso0', '-bsp0', os.path.abspath(T.path('archives/bundle.7z')),
                            'good.pt', 'payload.pkl'], cwd=tmp, check=True)
        T.expect(t('archives/bundle.7z') + '!good.pt', 'safe', 'loads', 'torch', chain=['good.pt'],
                 file=t('archives/bundle.7z'))
        T.expect(t('archives/bundle.7z') + '!payload.pkl', 'unsafe', 'runs', 'pickle', kind='pickle', marker='7z',
                 globals_=['posix.system'], chain=['payload.pkl'], file=t('archives/bundle.7z'))

    # unreadable
    save_bytes('broken/truncated.pt', good_pt[:len(good_pt) // 2])
    T.expect(t('broken/truncated.pt'), 'unreadable', 'fails', 'torch')
    tgz = bytearray(tar_of([('good.pt', good_pt), ('state.pkl', pickle_dumps({'a': 1}))], 'w:gz'))
    for i in range(len(tgz) // 2, len(tgz) // 2 + 64):
        tgz[i] ^= 0x5a
    save_bytes('broken/corrupt.tar.gz', bytes(tgz))
    T.expect(t('broken/corrupt.tar.gz'), 'unreadable', 'fails', 'tar', kind='gzip')
    os.symlink('missing.pt', T.path('broken/dangling.pt'))
    T.expect(t('broken/dangling.pt'), 'unreadable', 'fails', 'torch', kind='symlink')
    save_bytes('broken/bad_header.npy', b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (2,)}    \n" + b'\0' * 8)
    T.expect(t('broken/bad_header.npy'), 'unreadable', 'fails', 'numpy', kind='npy')

    # a Hugging Face cache: snapshots are symlinks into blobs/, judged once, named by the snapshot path
    repo = 'hf/models--acme--tiny/'
    blobs = {}
    for key, data in [('config', b'{"model_type": "tiny"}\n'), ('st', sh1), ('bin', good_pt),
                      ('args', torch_bytes(Payload('hf')))]:
        h = hashlib.sha256(data).hexdigest()
        blobs[key] = h
        save_bytes(repo + 'blobs/' + h, data)
    save_bytes(repo + 'refs/main', b'1111111111111111111111111111111111111111')
    for rev, files in [('1111111111111111111111111111111111111111', [('config.json', 'config'),
                                                                       ('model.safetensors', 'st'),
                                                                       ('pytorch_model.bin', 'bin')]),
                       ('2222222222222222222222222222222222222222', [('pytorch_model.bin', 'bin'),
                                                                       ('training_args.bin', 'args')])]:
        for name, key in files:
            link = T.path(repo + 'snapshots/%s/%s' % (rev, name))
            os.symlink('../../blobs/' + blobs[key], link)
    r1, r2 = 'tree/' + repo + 'snapshots/1111111111111111111111111111111111111111/', \
        'tree/' + repo + 'snapshots/2222222222222222222222222222222222222222/'
    T.expect(r1 + 'config.json', 'skipped', 'none', kind='not a model file')
    T.expect(r1 + 'model.safetensors', 'safe', 'loads', 'safetensors', kind='safetensors')
    T.expect(r1 + 'pytorch_model.bin', 'safe', 'loads', 'torch')
    T.expect(r2 + 'pytorch_model.bin', 'skipped', 'none', kind='link')  # the same blob, judged above
    T.expect(r2 + 'training_args.bin', 'unsafe', 'runs', 'torch', marker='hf', globals_=['posix.system'])
    T.expect('tree/' + repo + 'refs/main', 'skipped', 'none', kind='not a model file')
    for key, h in blobs.items():
        T.expect('tree/' + repo + 'blobs/' + h, 'skipped', 'none', kind='link target')
    # one file under two names (a hard link): judged once, under the name the walk meets first; the
    # walk lists both without a stat, so which is which is settled as the judged files are handed on
    save_bytes('linked/a_first.pt', torch_bytes(Payload('hardlink')))
    os.link(T.path('linked/a_first.pt'), T.path('linked/b_again.pt'))
    T.expect(t('linked/a_first.pt'), 'unsafe', 'runs', 'torch', marker='hardlink', globals_=['posix.system'])
    T.expect(t('linked/b_again.pt'), 'skipped', 'none', kind='link')
    with open(os.path.join(out, 'manifest.json'), 'w') as f:
        json.dump({'items': T.items, 'blobs': list(blobs.values())}, f, indent=1)
    return 0


def pickle_dumps(obj):
    import pickle
    return pickle.dumps(obj, protocol=2)


def joblib_bytes(joblib, obj, compress):
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, 'x.joblib')
        joblib.dump(obj, p, compress=compress or 0)
        with open(p, 'rb') as f:
            return f.read()


# ---- the check of scan's output ----------------------------------------------------------

def run_scan(tc, cwd, *args):
    r = subprocess.run([tc, 'scan'] + list(args) + ['tree'], cwd=cwd, capture_output=True, timeout=600)
    return r.returncode, r.stdout.decode('utf-8', 'replace'), r.stderr.decode('utf-8', 'replace')


def item_name(o):
    return '!'.join([o['path']] + o['member'])


def manifest(d):
    with open(os.path.join(d, 'manifest.json')) as f:
        man = json.load(f)
    return man, {i['name']: i for i in man['items']}


def check_json(tc, d):
    """--json --all: every item's verdict, kind and named globals as the manifest says; the summary."""
    man, want = manifest(d)
    fails = []
    ex, out, err = run_scan(tc, d, '--json', '--all', '--jobs', '4')
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    if not lines or 'summary' not in lines[-1]:
        return ['--json: no summary object last (exit %d, stderr %s)' % (ex, err.strip())]
    summary, got = lines[-1]['summary'], {item_name(o): o for o in lines[:-1]}
    if len(got) != len(lines) - 1:
        fails.append('--json: an item named twice')
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            fails.append('%s: not reported (want %s)' % (name, w['verdict']))
            continue
        if g['verdict'] != w['verdict']:
            fails.append('%s: %s (%s: %s), want %s' % (name, g['verdict'], g['kind'], g['reason'], w['verdict']))
        if w['kind'] and g['kind'] != w['kind']:
            fails.append('%s: kind %r, want %r' % (name, g['kind'], w['kind']))
        named = {x['name'] for x in g['unsafe_globals']}
        for gl in w['globals']:
            if gl not in named:
                fails.append('%s: does not name %s among %s' % (name, gl, sorted(named)))
        if g['verdict'] == 'unsafe' and not (g['unsafe_globals'] or g['hazards']):
            fails.append('%s: unsafe without a global or hazard named' % name)
        if g['verdict'] in ('unsafe', 'unreadable', 'skipped') and not g['reason']:
            fails.append('%s: %s without a reason' % (name, g['verdict']))
    for name, g in got.items():
        if name not in want:
            fails.append('%s: reported (%s, %s) but not in the manifest' % (name, g['verdict'], g['kind']))
    counts = {v: sum(1 for i in man['items'] if i['verdict'] == v) for v in ('safe', 'unsafe', 'unreadable',
                                                                             'skipped')}
    for v, n in counts.items():
        if summary[v] != n:
            fails.append('summary: %d %s, the manifest has %d' % (summary[v], v, n))
    # of the skipped: the other names of files judged under one before, the special files, and the
    # kernel's folders (none in the tree)
    kinds = [i['kind'] for i in man['items'] if i['verdict'] == 'skipped']
    for key, n in (('other_names', sum(k in ('link', 'link target') for k in kinds)),
                   ('special_files', kinds.count('special file')),
                   ('kernel_folders', kinds.count('kernel folder'))):
        if summary.get(key) != n:
            fails.append('summary: %s %s, the manifest has %d' % (key, summary.get(key), n))
    if ex != 4:
        fails.append('exit %d with unsafe files, want 4' % ex)
    return fails


def check_text(tc, d):
    """The default output: blobs named by their snapshot paths, --jobs 1 as --jobs 4, a line per file."""
    man, want = manifest(d)
    fails = []
    # the blobs of the cache are judged under their snapshot names only
    ex1, out1, _ = run_scan(tc, d, '--jobs', '1')
    for h in man['blobs']:
        if h in out1:
            fails.append('blob %s named in the default output' % h)
    # the output is the same on one thread and on four (the summary's time aside)
    ex4, out4, _ = run_scan(tc, d, '--jobs', '4')
    strip = lambda s: [x for x in s.splitlines() if ' in ' not in x or not x.rstrip().endswith(' s')]  # noqa: E731
    if strip(out1) != strip(out4) or ex1 != ex4:
        fails.append('--jobs 1 and --jobs 4 differ')
    # the default output: a line per judged file, none for the skipped ones
    judged = [n for n, w in want.items() if w['verdict'] != 'skipped']
    body = [x for x in out1.splitlines() if x and not x.startswith(('\n',)) and x.split()[0] in
            ('safe', 'UNSAFE', 'unreadable', 'skipped')]
    if len(body) != len(judged):
        fails.append('default output: %d lines, want %d (one per judged file)' % (len(body), len(judged)))
    if not any(x.startswith('%d files judged' % len(judged)) for x in out1.splitlines()):
        fails.append('default output: no summary line saying %d files judged' % len(judged))
    return fails


def check_quiet(tc, d):
    """-q: the unsafe and unreadable files only, no summary."""
    man, want = manifest(d)
    fails = []
    exq, outq, _ = run_scan(tc, d, '-q')
    bad = [n for n, w in want.items() if w['verdict'] in ('unsafe', 'unreadable')]
    if len(outq.splitlines()) != len(bad) or exq != 4:
        fails.append('-q: %d lines (exit %d), want %d (exit 4)' % (len(outq.splitlines()), exq, len(bad)))
    return fails


def check_sarif(tc, d):
    """SARIF: one result per unsafe or unreadable file, with its rule, level, message and location."""
    man, want = manifest(d)
    fails = []
    bad = [n for n, w in want.items() if w['verdict'] in ('unsafe', 'unreadable')]
    exs, outs, errs = run_scan(tc, d, '--sarif')
    try:
        log = json.loads(outs)
        run = log['runs'][0]
        if log['version'] != '2.1.0' or run['tool']['driver']['name'] != 'tensorctl':
            fails.append('--sarif: not a SARIF 2.1.0 log of tensorctl')
        rules = [r['id'] for r in run['tool']['driver']['rules']]
        res = run['results']
        if len(res) != len(bad):
            fails.append('--sarif: %d results, want %d' % (len(res), len(bad)))
        for r in res:
            if rules[r['ruleIndex']] != r['ruleId'] or r['level'] not in ('error', 'warning') or \
                    not r['message']['text'] or not r['locations'][0]['physicalLocation']['artifactLocation']['uri']:
                fails.append('--sarif: a malformed result %s' % json.dumps(r)[:200])
        if run['invocations'][0]['exitCode'] != exs or exs != 4:
            fails.append('--sarif: exit %d, invocation says %s' % (exs, run['invocations'][0]['exitCode']))
    except (ValueError, KeyError, IndexError) as e:
        fails.append('--sarif: not a log (%s): %s' % (e, errs.strip()))
    return fails


CHECKS = {'json': check_json, 'text': check_text, 'quiet': check_quiet, 'sarif': check_sarif}


# ---- the loaders --------------------------------------------------------------------------

def extract(d, item, tmp):
    """The bytes the loader reads: the file, or the member at the end of the chain, written to tmp."""
    path = os.path.join(d, item['file'])
    if not item['chain']:
        return path
    data = None
    src = path
    for k, m in enumerate(item['chain']):
        with open(src, 'rb') as f:
            head = f.read(8)
        if head.startswith(b'PK'):
            with zipfile.ZipFile(src) as zf:
                data = zf.read(m)
        elif head.startswith(b"7z\xbc\xaf'\x1c"):
            if not shutil.which('7z'):
                return None
            subprocess.run(['7z', 'x', '-y', '-bd', '-bso0', '-bsp0', '-o' + tmp + '/x7', src, m], check=True)
            with open(os.path.join(tmp, 'x7', m), 'rb') as f:
                data = f.read()
        else:
            with tarfile.open(src) as tf:
                data = tf.extractfile(m).read()
        src = os.path.join(tmp, 'm%d_%s' % (k, os.path.basename(m)))
        with open(src, 'wb') as f:
            f.write(data)
    return src


class Recorder:
    """CPython's own unpickler, stopped at the first global it would import."""
    @staticmethod
    def load(f):
        import pickle

        class U(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError('the unpickler imports the global %s.%s' % (module, name))
        return U(f).load()


def load(loader, path, safe):
    """Read path as loader does: the default (unsafe) way, or its safe mode. Raises when it fails.
    The safe mode of a pickle is torch's weights_only unpickler, the allowlist scan judges by; where
    it lacks an opcode (FRAME, and BINFLOAT in torch 1.13), CPython's unpickler stopped at its first
    global says whether one is imported at all."""
    try:
        return load_(loader, path, safe)
    except Exception as e:  # noqa: BLE001
        if not (safe and 'Unsupported operand' in str(e) and loader in ('pickle', 'joblib')):
            raise
        import zlib
        with open(path, 'rb') as f:
            data = f.read()
        data = gzip.decompress(data) if data[:2] == b'\x1f\x8b' else zlib.decompress(data) if data[:1] == b'x' \
            else data
        Recorder.load(io.BytesIO(data))
        raise RuntimeError('Unsupported operand, and no global imported') from e


def load_(loader, path, safe):
    import pickle
    if loader == 'torch':
        import torch
        if safe:
            return torch.load(path, map_location='cpu', weights_only=True)
        return torch.load(path, map_location='cpu', weights_only=False)
    if loader == 'numpy':
        import numpy as np
        r = np.load(path, allow_pickle=not safe)
        if hasattr(r, 'files'):
            return {k: r[k] for k in r.files}
        return r
    if loader in ('pickle', 'pickle_xz', 'joblib', 'dill'):
        opener = lzma.open if loader == 'pickle_xz' else open
        if safe:  # torch's weights_only unpickler: the allowlist scan judges by
            import torch._weights_only_unpickler as wo
            if loader == 'joblib':
                import joblib
                with open(path, 'rb') as f:
                    head = f.read(2)
                opener = gzip.open if head == b'\x1f\x8b' else opener
                if head[:1] == b'x':
                    import zlib
                    with open(path, 'rb') as f:
                        return wo.Unpickler(io.BytesIO(zlib.decompress(f.read())), encoding='utf-8').load()
            with opener(path, 'rb') as f:
                return wo.Unpickler(f, encoding='utf-8').load()
        if loader == 'joblib':
            import joblib
            return joblib.load(path)
        if loader == 'dill':
            import dill
            with open(path, 'rb') as f:
                return dill.load(f)
        with opener(path, 'rb') as f:
            return pickle.load(f)
    if loader == 'safetensors':
        from safetensors.numpy import load_file
        return load_file(path)
    if loader == 'tar':
        with tarfile.open(path) as tf:
            return [tf.extractfile(m).read() for m in tf.getmembers()]
    raise ValueError('no loader ' + loader)


# The loaders' features (scan-tree-loaders/FEATURE): the loaders of each, every loader of the
# manifest in one of them.
LOADERS = {'torch': ['torch'], 'pickle': ['pickle', 'pickle_xz', 'dill', 'joblib'], 'numpy': ['numpy'],
           'safetensors-and-archives': ['safetensors', 'tar']}


def loaders(d, only):
    try:
        import torch
    except ImportError:
        print('no torch here: skipped')
        return 77
    with open(os.path.join(d, 'manifest.json')) as f:
        man = json.load(f)
    fails, checked, unavailable = [], 0, set()
    grouped = {x for g in LOADERS.values() for x in g}
    for item in man['items']:
        if item['oracle'] != 'none' and item['loader'] not in grouped:
            fails.append('%s: its loader %s is in none of the features %s' % (item['name'], item['loader'],
                                                                              sorted(LOADERS)))
    wanted = {x for g in only for x in LOADERS[g]}
    for item in man['items']:
        if item['oracle'] == 'none' or item['loader'] not in wanted:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            markers = os.path.join(tmp, 'markers')
            os.makedirs(markers)
            os.environ['TC_SCAN_MARKERS'] = markers
            try:
                path = extract(d, item, tmp)
            except Exception as e:  # noqa: BLE001
                if item['oracle'] != 'fails':
                    fails.append('%s: cannot extract: %s' % (item['name'], e))
                else:
                    checked += 1
                continue
            if path is None:
                unavailable.add('7z')
                continue
            o = item['oracle']
            err = None
            try:
                load(item['loader'], path, safe=o in ('refused', 'loads'))
            except ImportError as e:
                unavailable.add(str(e))
                continue
            except BaseException as e:  # noqa: BLE001  (a payload may raise anything)
                err = '%s: %s' % (type(e).__name__, str(e)[:160])
            ran = os.listdir(markers)
            if o == 'loads' and err and 'Unsupported operand' in err:
                # an opcode this torch's weights_only unpickler lacks (torch 1.13: BINFLOAT, FRAME):
                # it says nothing of the globals the verdict is about
                unavailable.add('opcodes of ' + item['loader'])
                continue
            if o == 'runs' and item['marker'] not in ran:
                fails.append('%s: the payload did not run under %s (%s)' % (item['name'], item['loader'], err))
            elif o == 'refused' and (err is None or not re.search(r'(?i)global|class|allow_pickle', err)):
                fails.append('%s: the safe mode of %s loaded it or failed for another reason (%s); tensorctl says '
                             'unsafe' % (item['name'], item['loader'], err))
            elif o == 'loads' and err is not None:
                fails.append('%s: the safe mode of %s refused it (%s); tensorctl says safe' % (
                    item['name'], item['loader'], err))
            elif o == 'fails' and err is None:
                fails.append('%s: %s loaded it; tensorctl says unreadable' % (item['name'], item['loader']))
            elif o != 'runs' and ran:
                fails.append('%s: a marker appeared: %s' % (item['name'], ran))
            else:
                checked += 1
    import torch
    print('torch %s, %s: %d verdicts agree with the real loaders%s' % (
        torch.__version__, ', '.join(only), checked, '; not available here: ' + ', '.join(sorted(unavailable)) if unavailable else ''))
    for f in fails:
        print('FAIL ' + f)
    return 1 if fails or not checked else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('what', choices=['gen', 'check', 'loaders', 'auto', 'features'])
    ap.add_argument('dir', nargs='?')
    ap.add_argument('--tensorctl')
    ap.add_argument('--dir', dest='dir2')
    ap.add_argument('--mode', choices=['check', 'loaders'])
    ap.add_argument('--only', help='the features to judge, comma-separated (all when absent)')
    a = ap.parse_args()
    d = a.dir2 or a.dir
    if a.what == 'features':
        print('\n'.join(CHECKS if a.mode == 'check' else LOADERS))
        return 0
    mode = a.mode if a.what == 'auto' else a.what
    names = list(CHECKS if mode == 'check' else LOADERS)
    only = names if not a.only else a.only.split(',')
    if mode != 'gen' and any(f not in names for f in only):
        print('unknown feature in %s (the features of %s: %s)' % (a.only, mode, ', '.join(names)), file=sys.stderr)
        return 2
    if a.tensorctl:
        a.tensorctl = os.path.abspath(a.tensorctl)
    if a.what == 'gen':
        return gen(d)
    if a.what == 'auto':
        if not os.path.exists(GEN_PYTHON) or subprocess.run(
                [GEN_PYTHON, '-c', 'import torch, numpy, joblib, dill'], capture_output=True).returncode:
            print('%s with torch, numpy, joblib and dill is needed to make the tree: skipped' % GEN_PYTHON)
            return 77
        # made once for every test of the run (each feature of check and of loaders, under each torch)
        d = folder_once_per_run(d, 'tree', lambda p: subprocess.run(
            [GEN_PYTHON, os.path.abspath(__file__), 'gen', p], check=True))
    return run_mode(mode, a.tensorctl, d, only)


def run_mode(mode, tc, d, only):
    if mode == 'loaders':
        return loaders(d, only)
    fails = []
    for f in only:
        fails += ['%s: %s' % (f, x) for x in CHECKS[f](tc, d)]
    for f in fails:
        print('FAIL ' + f)
    if not fails:
        print('scan: every item of the tree as the manifest says (%s)' % ', '.join(only))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
