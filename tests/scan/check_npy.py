#!/usr/bin/env python3
"""The npy and npz drivers against numpy itself (this interpreter's).

    check_npy.py TENSORCTL OUTDIR      (under tests/run_with_torch.sh: every Python with torch has numpy)

1. Arrays numpy.save and numpy.savez(_compressed) write, of every dtype torch
   has a tensor type for, in C and Fortran order, 0-d and empty: inspect
   --json --hash gives each the shape, dtype and SHA-256 of numpy's own
   elements in C order; arrays of other dtypes (text, bytes, datetimes,
   records, big-endian) are safe and no tensor; arrays of objects unsafe.
2. Headers numpy reads and headers it refuses, mutated from valid ones
   (fixed seed): whenever numpy.load(allow_pickle=False) returns an array of
   a dtype torch has, tensorctl reads the same shape; when numpy refuses
   the header, tensorctl does not read an array of numbers from it.
3. dtype strings numpy.dtype reads (type characters and names, sub-arrays,
   fields separated by commas): the same tensor, or safe and no tensor, or
   unsafe where the dtype holds objects.
"""
import hashlib, json, os, random, shutil, struct, subprocess, sys, warnings


def inspect(tc, path):
    r = subprocess.run([tc, 'inspect', '--json', '--hash', path], capture_output=True, text=True, timeout=120)
    try:
        return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None, r.stderr.strip()
    except ValueError:
        return r.returncode, None, r.stderr.strip()


TORCH_NAME = {'float16': 'float16', 'float32': 'float32', 'float64': 'float64', 'int8': 'int8', 'int16': 'int16',
              'int32': 'int32', 'int64': 'int64', 'uint8': 'uint8', 'uint16': 'uint16', 'uint32': 'uint32',
              'uint64': 'uint64', 'bool': 'bool', 'complex64': 'complex64', 'complex128': 'complex128'}


def arrays(np):
    rng = np.random.default_rng(0)
    out = {}
    for dt in TORCH_NAME:
        a = (rng.standard_normal((3, 4)) * 50).astype(dt)
        out[dt] = a
        out[dt + '_fortran'] = np.asfortranarray(a)
    out['scalar'] = np.array(3.5, dtype=np.float32)
    out['empty'] = np.zeros((0, 5), dtype=np.int16)
    out['rank5'] = np.arange(2 * 3 * 1 * 2 * 2, dtype=np.float64).reshape(2, 3, 1, 2, 2)
    return out


def sha_c(np, a):
    return hashlib.sha256(np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tobytes()).hexdigest()


def check_values(np, tc, out, fails):
    n = 0
    arrs = arrays(np)
    for name, a in arrs.items():
        p = os.path.join(out, name + '.npy')
        np.save(p, a)
        rc, info, err = inspect(tc, p)
        if rc != 0 or not info:
            fails.append('%s: inspect exit %d: %s' % (name, rc, err))
            continue
        t = info['tensors'][0] if info['tensors'] else None
        if not t or t['shape'] != list(a.shape) or t['dtype'] != TORCH_NAME[a.dtype.name] or \
                t.get('sha256') != sha_c(np, a):
            fails.append('%s: tensorctl %s, numpy %s %s' % (name, t and (t['shape'], t['dtype']), a.shape, a.dtype))
        n += 1
    for how in ('savez', 'savez_compressed'):
        p = os.path.join(out, how + '.npz')
        getattr(np, how)(p, **arrs)
        rc, info, err = inspect(tc, p)
        if rc != 0 or not info:
            fails.append('%s: inspect exit %d: %s' % (how, rc, err))
            continue
        got = {t['name']: t for t in info['tensors']}
        for name, a in arrs.items():
            t = got.get(name)
            if not t or t['shape'] != list(a.shape) or t.get('sha256') != sha_c(np, a):
                fails.append('%s: member %s: tensorctl %s, numpy %s' % (how, name, t and t['shape'], a.shape))
            n += 1
    others = {'text': np.array(['ab', 'c']), 'bytes': np.array([b'xy']), 'dates': np.array(['2024-01-01'],
              dtype='datetime64[D]'), 'records': np.zeros(2, dtype=[('a', '<i4'), ('b', '<f8', (2,))]),
              'big_endian': np.arange(4, dtype='>i4'), 'long_double': np.ones(2, dtype=np.longdouble)}
    for name, a in others.items():
        p = os.path.join(out, name + '.npy')
        np.save(p, a)
        rc, info, err = inspect(tc, p)
        if rc != 0 or not info or info['tensors']:
            fails.append('%s: want safe with no tensor, got exit %d %s' % (name, rc, err))
        n += 1
    for name, a in {'objects': np.array([1, 'a', None], dtype=object),
                    'object_records': np.zeros(1, dtype=[('a', '<i4'), ('o', 'O')])}.items():
        p = os.path.join(out, name + '.npy')
        np.save(p, a, allow_pickle=True)
        rc, info, err = inspect(tc, p)
        if rc != 4 or not info or not info['hazards']:
            fails.append('%s: want unsafe (an object array), got exit %d %s' % (name, rc, err))
        n += 1
    return n


def npy_bytes(header, data, version=1):
    h = header.encode('latin1')
    pre = 10 if version == 1 else 12
    h += b' ' * (63 - (pre + len(h)) % 64) + b'\n'
    ln = struct.pack('<H', len(h)) if version == 1 else struct.pack('<I', len(h))
    return b'\x93NUMPY' + bytes([version, 0]) + ln + h + data


def mutants(rng):
    bases = ["{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
             "{'descr': '|u1', 'fortran_order': True, 'shape': (6,), }",
             "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"]
    pieces = ["'", '"', ',', ' ', '(', ')', '{', '}', '[', ']', ':', '#', '\\', 'L', '0x1', '0o7', '1_0', '-1', '+2',
              'True', 'False', 'None', '1.5', 'b', 'u', 'r', "'<f4'", "'<c8'", "'>f4'", "'|O'", "'S3'", '\n', '\t',
              "'shape'", "'descr'", "'fortran_order'", '(1,)', '(2, 3)', '()', '007', '3j']
    for b in bases:
        yield b
    for _ in range(3000):
        s = rng.choice(bases)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s) + 1)
            k = rng.random()
            if k < 0.4:
                s = s[:i] + rng.choice(pieces) + s[i:]
            elif k < 0.8:
                s = s[:i] + s[i + rng.randint(1, 4):]
            else:
                s = s[:i] + rng.choice(pieces) + s[i + rng.randint(1, 3):]
        yield s


def check_headers(np, tc, out, fails):
    rng = random.Random(1)
    n = agree = 0
    batch = os.path.join(out, 'headers')
    os.makedirs(batch, exist_ok=True)
    cases = []
    for i, h in enumerate(mutants(rng)):
        p = os.path.join(batch, 'h%05d.npy' % i)
        with open(p, 'wb') as f:
            f.write(npy_bytes(h, bytes(range(256)) * 4))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a Python 2 header (the L suffix): numpy says so
                a = np.load(p, allow_pickle=False)
            want = (list(a.shape), a.dtype.name if a.dtype.name in TORCH_NAME and a.dtype.byteorder != '>' else None)
        except Exception:  # noqa: BLE001  (numpy refuses the header, or the data is short)
            want = None
        cases.append((p, h, want))
    # one scan over the folder gives every file's verdict and kind; inspect the ones read as arrays
    r = subprocess.run([tc, 'scan', '--json', '--all', batch], capture_output=True, text=True, timeout=600)
    items = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if 'path' in o:
            items[o['path']] = o
    for p, h, want in cases:
        n += 1
        it = items.get(p)
        if it is None:
            fails.append('%r: no scan item' % h)
            continue
        if want and want[1]:  # numpy reads numbers of a torch dtype: so must tensorctl, with the same shape
            rc, info, err = inspect(tc, p)
            t = info['tensors'][0] if info and info['tensors'] else None
            if rc != 0 or not t or t['shape'] != want[0]:
                fails.append('%r: numpy reads %s, tensorctl exit %d %s %s' % (h, want, rc, t and t['shape'], err))
            else:
                agree += 1
        elif want is None and it['verdict'] == 'safe' and it['kind'] == 'npy':
            rc, info, err = inspect(tc, p)
            if info and info['tensors']:
                fails.append('%r: numpy refuses it, tensorctl reads a tensor %s' % (h, info['tensors'][0]['shape']))
            else:
                agree += 1
        else:
            agree += 1
    return n, agree


# dtype strings numpy.dtype reads beyond the dtype.str numpy.save writes: type characters and
# names, sub-arrays, fields separated by commas (with a trailing comma and spaces), objects.
DESCRS = ['<f', 'f', 'd', 'e', 'h', 'H', 'i', 'I', 'l', 'L', 'q', 'Q', '?', 'b', 'B', 'F', 'D', 'g', 'int', 'float',
          'float32', 'single', 'half', 'double', 'complex', 'int16', 'uint64', 'bool', 'longdouble', 'S3', 'U2',
          'V8', 'M8', 'M8[ns]', 'm8[s]', 'datetime64', 'str', 'bytes', 'void', '(1,)<f4', '()<f4', '1f4', '(2,3)<f4',
          '3f4', '(2,)i2', 'i4,f8', 'i4, f8,', 'i4 ,f8 , ', 'f4,i4,u1', 'i4,O', 'O,f4', '(2,)O', 'O', 'O8', 'object',
          'object_', '|O', 'i4,,f8', ',i4', 'i4,xyz']


def check_descrs(np, tc, out, fails):
    """Each DESCRS string as a header's descr: an array numpy reads as numbers of a
    torch dtype is a tensor of the same shape; one numpy reads otherwise is safe and
    no tensor; one whose dtype holds objects is unsafe."""
    from numpy.lib import format as npf
    d = os.path.join(out, 'descrs')
    os.makedirs(d, exist_ok=True)
    cases = []
    for i, descr in enumerate(DESCRS):
        p = os.path.join(d, 'd%03d.npy' % i)
        with open(p, 'wb') as f:
            f.write(npy_bytes("{'descr': %r, 'fortran_order': False, 'shape': (2,), }" % descr, bytes(range(256))))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # '1f4': numpy says it will read it as '(1,)f4' one day
                objects = npf.descr_to_dtype(descr).hasobject
        except Exception:  # noqa: BLE001  (numpy refuses the dtype: no array to judge)
            continue
        want = 'unsafe' if objects else None
        if not objects:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    a = np.load(p, allow_pickle=False)
                want = (list(a.shape), a.dtype.name) if a.dtype.name in TORCH_NAME else 'safe'
            except Exception:  # noqa: BLE001  (too little data for the dtype: never a tensor)
                want = 'no tensor'
        cases.append((p, descr, want))
    for p, descr, want in cases:
        rc, info, err = inspect(tc, p)
        t = info['tensors'][0] if info and info.get('tensors') else None
        if want == 'unsafe':
            ok = rc == 4 and info and info['hazards']
        elif want in ('safe', 'no tensor'):
            ok = (rc == 0 or want == 'no tensor') and not t
        else:
            ok = rc == 0 and t and t['shape'] == want[0] and t['dtype'] == TORCH_NAME[want[1]]
        if not ok:
            fails.append('descr %r: numpy %s, tensorctl exit %d %s %s' % (descr, want, rc, t and (t['shape'], t['dtype']),
                                                                         err))
    return len(cases)


def main():
    try:
        import numpy as np
    except ImportError:
        print('no numpy: skipped')
        return 77
    tc, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    out = os.path.join(out, 'py%d' % os.getpid())
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    fails = []
    n = check_values(np, tc, out, fails)
    h, agree = check_headers(np, tc, out, fails)
    nd = check_descrs(np, tc, out, fails)
    shutil.rmtree(out, ignore_errors=True)
    print('numpy %s: %d arrays read as numpy reads them; %d headers, %d judged alike; %d dtype strings' %
          (np.__version__, n, h, agree, nd))
    for f in fails[:40]:
        print('FAIL ' + f)
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
