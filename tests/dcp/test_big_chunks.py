#!/usr/bin/env python3
"""Chunks large enough for every path of the assembly (no torch: made byte by byte, judged byte by byte).

    test_big_chunks.py TENSORCTL OUTDIR

A distributed checkpoint with three 4 MiB float32 tensors: 'rows' in two chunks of 256 rows (each
one run of 2 MiB: the parallel transfer, copied in the kernel, the chunks' own CRC-32s trusted),
'cols' in two chunks of 1024 columns (runs of 4 KiB: gathered through the buffer), 'grid' in 2x2
chunks, and 'tail' whose rows are split unevenly. Consolidated to .safetensors, .pt and .pt with
--dtype float16, each tensor's bytes must be the whole tensor's in C order (float16: Python's own
IEEE rounding of values it represents exactly), and every zip record's CRC-32 must be right
(zipfile's testzip). Then 300 .distcp files of one chunk each, read under a limit of 48 open files.
Fails when any check fails or nothing was checked.
"""
import os
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'hostile'))
sys.path.insert(0, os.path.join(HERE, '..'))
import hostile  # noqa: E402
from judge import Report, out_dir, run  # noqa: E402
from st_read import read_raw  # noqa: E402

R, C = 512, 2048


def value(name, i, j):
    return float(((i * 7 + j * 3 + len(name)) % 1000) * 0.25)  # exact in float16 and float32


def box(name, off, sizes):
    i0, j0 = off
    return [value(name, i0 + a, j0 + b) for a in range(sizes[0]) for b in range(sizes[1])]


def blob(name, off, sizes):
    n = sizes[0] * sizes[1]
    pkl = hostile.state_dict(hostile.tensor(numel=n, shape=tuple(sizes), stride=(sizes[1], 1)))
    return hostile.torch_zip(pkl, {'0': struct.pack('<%df' % n, *box(name, off, sizes))})


TENSORS = {
    'rows': [((0, 0), (256, C)), ((256, 0), (256, C))],
    'cols': [((0, 0), (R, 1024)), ((0, 1024), (R, 1024))],
    'grid': [((0, 0), (256, 1024)), ((0, 1024), (256, 1024)), ((256, 0), (256, 1024)), ((256, 1024), (256, 1024))],
    'tail': [((0, 0), (300, C)), ((300, 0), (212, C))],
}


def make(d):
    os.makedirs(d)
    data, sdm, storage = bytearray(), [], []
    for name, chunks in TENSORS.items():
        sdm.append((hostile.op_str(name), hostile.tensor_md((R, C), chunks)))
        for off, sz in reversed(chunks):  # stored in another order than the tensor's
            b = blob(name, off, sz)
            storage.append((hostile.meta_index(name, off), hostile.storage_info('__0_0.distcp', len(data), len(b))))
            data += b
    md = hostile.PROTO + hostile.newobj(hostile.DCPM, 'Metadata', hostile.dict_of([
        ('state_dict_metadata', hostile.dict_raw(sdm)), ('planner_data', b'N'),
        ('storage_data', hostile.dict_raw(storage)), ('version', hostile.op_str('1.0.0'))])) + hostile.STOP
    with open(os.path.join(d, '__0_0.distcp'), 'wb') as f:
        f.write(bytes(data))
    with open(os.path.join(d, '.metadata'), 'wb') as f:
        f.write(md)


def whole(name, fmt):
    return struct.pack('<%d%s' % (R * C, fmt), *[value(name, i, j) for i in range(R) for j in range(C)])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tool, out = sys.argv[1:]
    out_dir(out)
    src = os.path.join(out, 'dcp')
    make(src)
    want = {n: whole(n, 'f') for n in TENSORS}
    half = {n: whole(n, 'e') for n in TENSORS}
    rep = Report()
    check = rep.check

    st = os.path.join(out, 'o.safetensors')
    rc, _, err = run(tool, 'consolidate', '-q', src, '-o', st)
    problems = ['exit %d: %s' % (rc, err.strip())] if rc else []
    if not problems:
        hdr, body = read_raw(st)
        for name in TENSORS:
            a, b = hdr[name]['data_offsets']
            if body[a:b] != want[name]:
                problems.append('%s: bytes differ from the whole tensor in C order' % name)
    check('.safetensors: every tensor assembled (rows, columns, a grid, uneven rows)', problems)

    for args, ref, what in (([], want, '.pt'), (['--dtype', 'float16'], half, '.pt --dtype float16')):
        pt = os.path.join(out, 'o.pt')
        if os.path.exists(pt):
            os.unlink(pt)
        rc, _, err = run(tool, 'consolidate', '-q', src, '-o', pt, *args)
        problems = ['exit %d: %s' % (rc, err.strip())] if rc else []
        if not problems:
            with zipfile.ZipFile(pt) as z:
                bad = z.testzip()
                if bad:
                    problems.append('record %s: wrong CRC-32' % bad)
                pkl = z.read([x for x in z.namelist() if x.endswith('/data.pkl')][0])
                recs = {x.rsplit('/', 1)[1]: x for x in z.namelist() if '/data/' in x}
                # the storages are written in the tensors' order: data/0 is 'rows', ...
                for k, name in enumerate(TENSORS):
                    if name.encode() not in pkl:
                        problems.append('%s not named in data.pkl' % name)
                    elif z.read(recs[str(k)]) != ref[name]:
                        problems.append('%s: record data/%d differs from the whole tensor' % (name, k))
        check('%s: every tensor assembled, every CRC-32 right' % what, problems)
    # 300 files of one row chunk each, under a limit of 48 open files
    many = os.path.join(out, 'many')
    os.makedirs(many)
    n, sdm, storage = 300, [], []
    chunks = [((i, 0), (1, 8)) for i in range(n)]
    sdm.append((hostile.op_str('w'), hostile.tensor_md((n, 8), chunks)))
    for (off, sz) in chunks:
        b = blob('w', off, sz)
        name = '__%d_0.distcp' % off[0]
        with open(os.path.join(many, name), 'wb') as f:
            f.write(b)
        storage.append((hostile.meta_index('w', off), hostile.storage_info(name, 0, len(b))))
    with open(os.path.join(many, '.metadata'), 'wb') as f:
        f.write(hostile.PROTO + hostile.newobj(hostile.DCPM, 'Metadata', hostile.dict_of([
            ('state_dict_metadata', hostile.dict_raw(sdm)), ('planner_data', b'N'),
            ('storage_data', hostile.dict_raw(storage)), ('version', hostile.op_str('1.0.0'))])) + hostile.STOP)

    def few_files():
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
    st = os.path.join(out, 'many.safetensors')
    rc, _, err = run(tool, 'consolidate', '-q', many, '-o', st, preexec_fn=few_files)
    problems = ['exit %d: %s' % (rc, err.strip())] if rc else []
    if not problems:
        _, body = read_raw(st)
        if body != struct.pack('<%df' % (n * 8), *[value('w', i, j) for i in range(n) for j in range(8)]):
            problems.append('w: bytes differ')
    check('300 .distcp files read with at most 48 files open', problems)
    return rep.finish()


if __name__ == '__main__':
    sys.exit(main())
