#!/usr/bin/env python3
"""A tree of model files for bench_scan.sh, made by the real tools: torch.save
(zip and legacy), safetensors files, numpy .npy, raw pickles, joblib dumps,
tar.gz and zip archives of checkpoints, a Hugging Face cache layout, and
files that are no model files, a few of each hostile (a payload that would
run `true`).

    make_scan_tree.py OUT [--files N] [--gb G]

About N files in all (default 1000) holding about G GB (default 10): the big
checkpoints are copies of a few made once, written sparse (their tensors
are zeros: `cp --sparse=always`), so the tree takes little disk whatever G.
Prints the number of files and bytes made and of payloads planted.
"""
import argparse, io, json, os, pickle, shutil, subprocess, sys, tarfile, zipfile


PLANTED = [0]


class Payload:
    """Unpickling it runs `true` (each one made counts as a payload planted)."""
    def __init__(self):
        PLANTED[0] += 1

    def __reduce__(self):
        return (os.system, ('true',))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--files', type=int, default=1000)
    ap.add_argument('--gb', type=float, default=10)
    a = ap.parse_args()
    import numpy as np
    import torch
    try:
        import joblib
    except ImportError:
        joblib = None
    out = a.out
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, '.base')
    os.makedirs(base, exist_ok=True)
    n = a.files
    made = []

    def put(rel, data):
        p = os.path.join(out, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, 'wb') as f:
            f.write(data)
        made.append(p)

    def sparse_copy(src, rel):
        p = os.path.join(out, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        subprocess.run(['cp', '--sparse=always', src, p], check=True)
        made.append(p)

    def small_model(seed, layers=4):
        g = torch.Generator().manual_seed(seed)
        return {'layer%d.%s' % (i, k): torch.randn(32, 32, generator=g) for i in range(layers) for k in ('w', 'b')}

    def torch_bytes(obj, zip_=True):
        b = io.BytesIO()
        torch.save(obj, b, _use_new_zipfile_serialization=zip_)
        return b.getvalue()

    def st_bytes(tensors):
        header, blobs, off = {}, [], 0
        for name, arr in tensors.items():
            raw = np.ascontiguousarray(arr, dtype='<f4').tobytes()
            header[name] = {'dtype': 'F32', 'shape': list(arr.shape), 'data_offsets': [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
        h = json.dumps(header, separators=(',', ':')).encode()
        h += b' ' * (-len(h) % 8)
        return len(h).to_bytes(8, 'little') + h + b''.join(blobs)

    # the big ones: 10% of the files hold the bytes, copies of 6 made once (zeros, stored sparse)
    nbig = max(6, n // 10)
    per = int(a.gb * 1e9 / nbig)
    bases = []
    for k in range(3):
        p = os.path.join(base, 'big%d.pt' % k)
        numel = per // 4 // 8
        torch.save({'model.layers.%d.weight' % i: torch.zeros(numel) for i in range(8)}, p,
                   _use_new_zipfile_serialization=k != 2)
        bases.append((p, 'pt' if k != 2 else 'legacy.pt'))
    for k in range(3):
        p = os.path.join(base, 'big%d.safetensors' % k)
        numel = per // 4 // 4
        with open(p, 'wb') as f:
            f.write(st_bytes({'w%d' % i: np.zeros(numel, dtype='f4') for i in range(4)}))
        bases.append((p, 'safetensors'))
    for i in range(nbig):
        src, ext = bases[i % len(bases)]
        sparse_copy(src, 'big/run%03d/model.%s' % (i, ext))

    # a Hugging Face cache: 20 repos, snapshots linked to blobs
    nhf = 20
    for r in range(nhf):
        repo = 'hub/models--org--m%02d/' % r
        blob = torch_bytes(small_model(r))
        h = '%040x' % (r + 1)
        put(repo + 'blobs/' + h, blob)
        put(repo + 'blobs/c' + h[1:], json.dumps({'model_type': 'tiny', 'n': r}).encode())
        snap = os.path.join(out, repo + 'snapshots/%040x' % (r + 99))
        os.makedirs(snap, exist_ok=True)
        os.symlink('../../blobs/' + h, os.path.join(snap, 'pytorch_model.bin'))
        os.symlink('../../blobs/c' + h[1:], os.path.join(snap, 'config.json'))
        made.extend([os.path.join(snap, 'pytorch_model.bin'), os.path.join(snap, 'config.json')])

    left = n - len(made)
    shares = [('pt', 0.30), ('legacy', 0.05), ('st', 0.10), ('npy', 0.10), ('pkl', 0.15), ('joblib', 0.05),
              ('targz', 0.03), ('zip', 0.03), ('text', 0.19)]
    counts = {k: int(left * s) for k, s in shares}
    counts['text'] += left - sum(counts.values())
    for i in range(counts['pt']):
        obj = small_model(i)
        if i % 50 == 7:
            obj['hook'] = Payload()
        put('small/pt/ckpt%04d.pt' % i, torch_bytes(obj))
    for i in range(counts['legacy']):
        put('small/legacy/old%04d.pt' % i, torch_bytes(small_model(i, 2), zip_=False))
    for i in range(counts['st']):
        put('small/st/model%04d.safetensors' % i, st_bytes({'w': np.full((64, 64), i, dtype='f4')}))
    for i in range(counts['npy']):
        b = io.BytesIO()
        if i % 10 == 3:
            np.save(b, np.array([Payload(), i], dtype=object), allow_pickle=True)
        else:
            np.save(b, np.arange(1000, dtype=np.float32) * i)
        put('small/npy/arr%04d.npy' % i, b.getvalue())
    for i in range(counts['pkl']):
        obj = Payload() if i % 20 == 5 else {'step': i, 'lr': 1e-3, 'losses': [0.5] * 50}
        put('small/pkl/state%04d.pkl' % i, pickle.dumps(obj, protocol=4))
    for i in range(counts['joblib']):
        if joblib is None:
            put('small/joblib/est%04d.joblib' % i, pickle.dumps({'i': i}, protocol=4))
            continue
        b = io.BytesIO()
        joblib.dump({'coef': np.ones(100) * i, 'i': i}, b, compress=3 if i % 2 else 0)
        put('small/joblib/est%04d.joblib' % i, b.getvalue())
    for i in range(counts['targz']):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode='w:gz') as tf:
            for name, data in [('model.pt', torch_bytes(small_model(i, 2))),
                               ('extra.pkl', pickle.dumps(Payload() if i % 5 == 1 else [i], protocol=2))]:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        put('archives/bundle%03d.tar.gz' % i, b.getvalue())
    for i in range(counts['zip']):
        b = io.BytesIO()
        with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as zf:
            zf.writestr('weights.pt', torch_bytes(small_model(i, 2)))
            zf.writestr('README.md', 'model %d\n' % i)
        put('archives/release%03d.zip' % i, b.getvalue())
    for i in range(counts['text']):
        put('docs/note%04d.%s' % (i, ('md', 'json', 'txt', 'py')[i % 4]), ('# note %d\n' % i * 20).encode())
    shutil.rmtree(base)
    total = sum(os.path.getsize(p) for p in made)
    print('%d files, %.2f GB, %d payloads' % (len(made), total / 1e9, PLANTED[0]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
