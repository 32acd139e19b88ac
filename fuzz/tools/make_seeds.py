#!/usr/bin/env python3
"""Fill fuzz/corpus/<target>/ with small seeds: the reference checkpoints
(from ../shared/corpus and sample_models), their pickles, and a few
hand-made pickles and zips. No torch needed; nothing is unpickled.

    python3 fuzz/tools/make_seeds.py [--max-size 65536] [--gguf]
    python3 fuzz/tools/make_seeds.py --readers        only the seeds of torch's own readings
"""
import argparse, collections, io, os, pickle, pickletools, sys, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'fuzz', 'corpus')


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def sources(max_size):
    dirs = [os.path.join(ROOT, '..', 'shared', 'corpus', v) for v in ('torch-1.13', 'torch-2.14')]
    dirs.append(os.path.join(ROOT, 'sample_models'))
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for n in sorted(os.listdir(d)):
            p = os.path.join(d, n)
            if n.endswith(('.json', '.py', '.md')) or not os.path.isfile(p):
                continue
            data = open(p, 'rb').read()
            if len(data) <= max_size:
                yield os.path.basename(d) + '_' + n, data


def legacy_pickles(data):
    """The pickles at the head of a legacy file, split at each STOP."""
    out, pos = [], 0
    for _ in range(5):
        try:
            ops = list(pickletools.genops(data[pos:]))
        except Exception:
            break
        end = ops[-1][2] + 1
        out.append(data[pos:pos + end])
        pos += end
    return out


def tiny_torch_zip(pkl, records, archive='archive', method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', method) as z:
        z.writestr(archive + '/data.pkl', pkl)
        z.writestr(archive + '/byteorder', 'little')
        for k, v in records.items():
            z.writestr(archive + '/data/' + k, v)
        z.writestr(archive + '/version', '3\n')
    return b.getvalue()


def with_byteorder(data, byteorder, method=zipfile.ZIP_STORED):
    """A torch zip with its byteorder record saying byteorder, every record stored with method."""
    b = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(b, 'w', method) as z:
        for info in src.infolist():
            body = byteorder.encode() if info.filename.endswith('/byteorder') else src.read(info)
            z.writestr(info.filename, body)
    return b.getvalue()


def gguf_seeds(max_size):
    """fuzz_gguf: the GGUF samples (sample_models/gguf, its bad/, ../shared/corpus/gguf) up to max_size."""
    for sub in (('sample_models', 'gguf'), ('sample_models', 'gguf', 'bad'), ('..', 'shared', 'corpus', 'gguf'),
                ('..', 'shared', 'corpus', 'gguf', 'bad')):
        d = os.path.join(ROOT, *sub)
        if not os.path.isdir(d):
            continue
        for n in sorted(os.listdir(d)):
            p = os.path.join(d, n)
            if n.endswith('.gguf') and os.path.getsize(p) <= max_size:
                yield 'gguf_' + '_'.join(sub[-1:] if sub[-1] == 'bad' else ()) + n, open(p, 'rb').read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--max-size', type=int, default=65536)
    ap.add_argument('--gguf', action='store_true', help='only the GGUF seeds (fuzz_gguf)')
    a = ap.parse_args()
    for name, data in gguf_seeds(a.max_size):
        put('fuzz_gguf', name, data)
    if a.gguf:
        return
    for name, data in sources(a.max_size):
        put('fuzz_ckpt', name, data)
        put('fuzz_roundtrip', name, data)
        if data[:4] == b'PK\x03\x04':
            put('fuzz_zip', name, data)
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for info in z.infolist():
                    if info.filename.endswith('.pkl'):
                        put('fuzz_pickle', name + '.' + os.path.basename(info.filename), z.read(info))
        elif data[:1] == b'\x80':
            for i, p in enumerate(legacy_pickles(data)):
                put('fuzz_pickle', '%s.%d.pkl' % (name, i), p)
    for name, data in handmade():
        put('fuzz_pickle', name, data)
    # a deflated torch zip, and a plain zip with a zip64 end record
    pkl = pickle.dumps({'w': 1}, protocol=2)
    put('fuzz_zip', 'deflated.zip', tiny_torch_zip(pkl, {'0': b'\0' * 64}, method=zipfile.ZIP_DEFLATED))
    put('fuzz_ckpt', 'deflated_no_tensors.pt', tiny_torch_zip(pkl, {}, method=zipfile.ZIP_DEFLATED))
    # big-endian: the data swapped as it is read (stored, and deflated)
    with open(os.path.join(ROOT, 'sample_models', 'tiny_mlp_cuda0.pt'), 'rb') as f:
        tiny = f.read()
    for target in ('fuzz_ckpt', 'fuzz_roundtrip'):
        put(target, 'tiny_big_endian.pt', with_byteorder(tiny, 'big'))
        put(target, 'tiny_big_endian_deflated.pt', with_byteorder(tiny, 'big', zipfile.ZIP_DEFLATED))
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', allowZip64=True) as z:
        with z.open('a/big', 'w', force_zip64=True) as f:
            f.write(b'x' * 100)
    put('fuzz_zip', 'zip64.zip', b.getvalue())
    reader_seeds()


def reader_seeds():
    """Files of torch's own readings: zip names in other letter case, the tar format, text magic numbers,
    long integers, TorchScript code whose strings look like declarations (tests/security/torch_accepts.py
    makes them)."""
    sys.path.insert(0, os.path.join(ROOT, 'tests', 'security'))
    import torch_accepts as T
    for name in ('zip_case_only_record', 'zip_case_hidden', 'zip_case_storage', 'zip_no_version'):
        data = T.CASES[name][0]('/nonexistent/m')
        put('fuzz_zip', name + '.zip', data)
        put('fuzz_ckpt', name + '.pt', data)
    for name in ('tar_good', 'tar_evil_storages', 'tar_with_zip', 'tar_no_storages', 'legacy_text_magic',
                 'legacy_text_magic_evil', 'long_digits'):
        data = T.CASES[name][0]('/nonexistent/m')
        put('fuzz_ckpt', name + '.pt', data)
        put('fuzz_readings', name + '.pt', b'\0' + data)
    for name in ('tar_good', 'legacy_text_magic'):
        put('fuzz_roundtrip', name + '.pt', T.CASES[name][0]('/nonexistent/m'))
    put('fuzz_pickle', 'long_4301_digits.pkl', b'L' + b'1' * 4301 + b'L\n.')
    put('fuzz_pickle', 'text_magic.pkl', T.TEXT_MAGIC)
    put('fuzz_script', 'strings_and_brackets.py',
        b'class Net(Module):\n  __parameters__ = ["w", ]\n  __buffers__ = []\n  w : Tensor\n'
        b'  __annotations__["0"] = __torch__.Sub\n  c : Final[int] = 3\n'
        b'  def forward(self: __torch__.Net, x: Tensor) -> Tensor:\n    """doc\n  __parameters__ = ["secret"]\n'
        b'"""\n    y = torch.add(x,\n  __buffers__ = ["b"]\n      x)  # (\n    return y\n'
        b"  __parameters__ = ['w' \"v\", ]\n  wv : Tensor\n")


if __name__ == '__main__':
    if sys.argv[1:] == ['--readers']:
        reader_seeds()
    else:
        main()
