#!/usr/bin/env python3
"""Seeds for fuzz_npy (numpy files: the first byte picks the name, 0 .npy,
1 .npz, 2 none) and fuzz_scan (any file scan meets: archives nested and
compressed, compressed single files, pickles). Standard library only:
.npy files are laid out as numpy/lib/format.py writes them; nothing is
unpickled, and the payload pickles are made by hand.

    python3 fuzz/tools/make_scan_seeds.py
"""
import bz2, gzip, io, lzma, os, shutil, struct, subprocess, tarfile, tempfile, zipfile, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'fuzz', 'corpus')


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def npy(header, data, version=1):
    h = header.encode('latin1')
    pre = 10 if version == 1 else 12
    h += b' ' * (63 - (pre + len(h)) % 64) + b'\n'
    ln = struct.pack('<H', len(h)) if version == 1 else struct.pack('<I', len(h))
    return b'\x93NUMPY' + bytes([version, 0]) + ln + h + data


PAYLOAD = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
OBJECTS = (b'\x80\x03cnumpy.core.multiarray\n_reconstruct\nq\x00cnumpy\nndarray\nq\x01K\x00\x85q\x02C\x01bq\x03'
           b'\x87q\x04Rq\x05(K\x01K\x01\x85q\x06cnumpy\ndtype\nq\x07X\x02\x00\x00\x00O8q\x08\x89\x88\x87q\tRq\n'
           b'(K\x03X\x01\x00\x00\x00|q\x0bNNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tq\x0cb\x89]q\rK\x07atq\x0eb.')


def npy_seeds():
    f4 = struct.pack('<6f', *range(6))
    seeds = {
        'f4-c': npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
        'f4-fortran': npy("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", f4),
        'i8-scalar': npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", struct.pack('<q', 7)),
        'bool-empty': npy("{'descr': '|b1', 'fortran_order': False, 'shape': (0, 4), }", b''),
        'v2-header': npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", struct.pack('<d', 1), 2),
        'v3-utf8': npy("{'descr': [('\u00e9', '<i4')], 'fortran_order': False, 'shape': (1,), }",
                       b'\0' * 4, 3),
        'py2-longs': npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", f4),
        'big-endian': npy("{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", f4),
        'unicode': npy("{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", b'a\0\0\0b\0\0\0' * 2),
        'datetime': npy("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }", b'\0' * 8),
        'structured': npy("{'descr': [('a', '<i4'), ('b', [('c', '<f8', (2,))])], 'fortran_order': False, "
                          "'shape': (1,), }", b'\0' * 20),
        'objects': npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", OBJECTS),
        'objects-payload': npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", PAYLOAD),
        'structured-object': npy("{'descr': [('a', '<i4'), ('b', '|O')], 'fortran_order': False, "
                                 "'shape': (1,), }", PAYLOAD),
        'unknown-dtype': npy("{'descr': 'object', 'fortran_order': False, 'shape': (1,), }", PAYLOAD),
        'strings-escapes': npy("{'descr': '<f4' '', \"fortran_order\": False, 'sh\\x61pe': (6,), } # c", f4),
        'missing-key': npy("{'descr': '<f4', 'shape': (6,), }", f4),
        'extra-key': npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1, }", f4),
        'set-not-dict': npy("{'descr', 'shape'}", f4),
        'nested-deep': npy('{' * 70, b''),
        'truncated-data': npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }", f4),
        # dtype strings numpy.dtype reads beyond dtype.str: type characters, type names,
        # sub-arrays (of one element: no sub-array), fields separated by commas
        'type-char': npy("{'descr': '<f', 'fortran_order': False, 'shape': (6,), }", f4),
        'type-name': npy("{'descr': 'float32', 'fortran_order': False, 'shape': (6,), }", f4),
        'object-name': npy("{'descr': 'object_', 'fortran_order': False, 'shape': (1,), }", PAYLOAD),
        'subarray-one': npy("{'descr': '(1,)<f4', 'fortran_order': False, 'shape': (6,), }", f4),
        'subarray-many': npy("{'descr': '(2,3)<f4', 'fortran_order': False, 'shape': (1,), }", f4),
        'subarray-count': npy("{'descr': '3f4', 'fortran_order': False, 'shape': (2,), }", f4),
        'comma-fields': npy("{'descr': 'i4, f8,', 'fortran_order': False, 'shape': (1,), }", b'\0' * 12),
        'comma-object': npy("{'descr': 'i4,O', 'fortran_order': False, 'shape': (1,), }", PAYLOAD),
        'timedelta-bare': npy("{'descr': 'm[s]', 'fortran_order': False, 'shape': (1,), }", b'\0' * 8),
    }
    for k, v in seeds.items():
        put('fuzz_npy', 'npy-' + k, b'\0' + v)
    put('fuzz_npy', 'npz-stored', b'\1' + zip_of([('w.npy', seeds['f4-c']), ('o.npy', seeds['objects-payload'])]))
    put('fuzz_npy', 'npz-deflated', b'\1' + zip_of([('w.npy', seeds['f4-fortran']), ('s.npy', seeds['structured']),
                                                     ('raw.npy', b'not an array')], zipfile.ZIP_DEFLATED))
    put('fuzz_npy', 'npz-other-member', b'\2' + zip_of([('w.npy', seeds['f4-c']),
                                                         ('notes.txt', b'another member: not an npz')]))
    return seeds


# Every stamp is fixed (gzip's mtime, zip's and 7z's member times) so that running
# the script again rewrites the corpus byte for byte.
def tar_of(members, mode='w'):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode='w') as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    raw = b.getvalue()
    return {'w': raw, 'w:gz': gzip.compress(raw, mtime=0), 'w:bz2': bz2.compress(raw), 'w:xz': lzma.compress(raw)}[mode]


def zip_of(members, method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', method) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, compress_type=method)
    return b.getvalue()


def scan_seeds(np_seeds):
    members = [('model/payload.pkl', PAYLOAD), ('model/w.npy', np_seeds['f4-c']),
               ('model/o.npy', np_seeds['objects-payload']), ('README.md', b'text\n')]
    put('fuzz_scan', 'tar', tar_of(members))
    put('fuzz_scan', 'tar-pax-long-names', tar_of([('d' * 120 + '/p.pkl', PAYLOAD)], 'w'))
    put('fuzz_scan', 'tar-gz', tar_of(members, 'w:gz'))
    put('fuzz_scan', 'tar-bz2', tar_of(members[:2], 'w:bz2'))
    put('fuzz_scan', 'tar-xz', tar_of(members[:2], 'w:xz'))
    put('fuzz_scan', 'zip-deflated', zip_of(members, zipfile.ZIP_DEFLATED))
    inner = zip_of([('p.pkl', PAYLOAD)], zipfile.ZIP_DEFLATED)
    put('fuzz_scan', 'zip-in-zip', zip_of([('inner.zip', inner), ('t.tar.gz', tar_of(members[:1], 'w:gz'))]))
    deep = PAYLOAD
    for i in range(5):
        deep = zip_of([('z%d' % i, deep)])
    put('fuzz_scan', 'zip-deep', deep)
    put('fuzz_scan', 'gzip-pickle', gzip.compress(PAYLOAD, mtime=0))
    put('fuzz_scan', 'bzip2-pickle', bz2.compress(PAYLOAD))
    put('fuzz_scan', 'xz-pickle', lzma.compress(PAYLOAD))
    put('fuzz_scan', 'zlib-pickle', zlib.compress(PAYLOAD))
    put('fuzz_scan', 'pickle-payload', PAYLOAD)
    put('fuzz_scan', 'pickles-back-to-back', b'\x80\x02K\x01.' + PAYLOAD)
    put('fuzz_scan', 'npy-objects', np_seeds['objects-payload'])
    put('fuzz_scan', 'text-protocol0', b"cposix\nsystem\n(S'true'\ntR.")
    put('fuzz_scan', 'gzip-corrupt', gzip.compress(PAYLOAD * 20, mtime=0)[:40] + b'\xff' * 30)
    if shutil.which('7z'):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, 'p.pkl'), 'wb') as f:
                f.write(PAYLOAD)
            os.utime(os.path.join(tmp, 'p.pkl'), (0, 0))
            subprocess.run(['7z', 'a', '-bd', '-bso0', '-bsp0', 'x.7z', 'p.pkl'], cwd=tmp, check=True)
            with open(os.path.join(tmp, 'x.7z'), 'rb') as f:
                put('fuzz_scan', '7z', f.read())


def main():
    np_seeds = npy_seeds()
    scan_seeds(np_seeds)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
