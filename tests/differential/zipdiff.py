#!/usr/bin/env python3
"""tensorctl's zip reader against torch's own (torch._C.PyTorchFileReader, in
every Python here that has torch): for each archive, whether it opens, its
record list and every record's bytes must be the same.

    zipdiff.py --zipdump Z corpus FILE_OR_DIR...        every file (folders: every file below)
    zipdiff.py --zipdump Z generated --count N --seed S generated and mutated archives
    zipdiff.py worker                                  (internal) torch's reading, paths on stdin

The Pythons are /usr/bin/python3 and the colon-separated TENSORCTL_EXTRA_PYTHONS
(TENSORCTL_TEST_PYTHON too), each of which must import torch if named. The only
difference allowed: tensorctl refusing at open an archive whose entries
share bytes (its one refusal beyond torch's reader; counted and shown), and
archives whose version record torch hands out without reading it (a
directory entry, or no compressed data: torch parses uninitialised memory,
its answer changes from run to run, and when the entry claims gigabytes
torch may die of it; counted and shown).
zipdump's UNDEF (a record torch hands out without reading it) needs torch's
length only. Exit 0 when all agree and something was compared, 1 otherwise, 77
when no Python has torch.
"""
import argparse, os, random, shutil, struct, subprocess, sys, tempfile, time, zlib

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- torch's side ------------------------------------------------------------------------

def worker():
    import torch  # noqa: F401  (PyTorchFileReader lives in torch._C)
    from torch._C import PyTorchFileReader
    out = sys.stdout
    for line in sys.stdin:
        path = line.rstrip('\n')
        if not path:
            continue
        out.write('FILE %s\n' % path)
        out.flush()  # a crash inside torch is then pinned to this file
        try:
            r = PyTorchFileReader(path)
        except Exception:  # noqa: BLE001
            out.write('OPEN ERR\nEND\n')
            out.flush()
            continue
        try:
            recs = r.get_all_records()
        except Exception:  # noqa: BLE001
            out.write('OPEN ok\nRECORDS ERR\nEND\n')
            out.flush()
            continue
        out.write('OPEN ok\nRECORDS %d\n' % len(recs))
        for n in recs:
            h = n.encode('utf-8', 'surrogatepass').hex()
            try:
                b = r.get_record(n)
                out.write('REC %s %d %08x %08x\n' % (h, len(b), zlib.crc32(b) & 0xffffffff, zlib.adler32(b) & 0xffffffff))
            except Exception:  # noqa: BLE001
                out.write('REC %s ERR\n' % h)
        out.write('END\n')
        out.flush()
    return 0


def run_reader(cmd, paths, env=None):
    """{path: [lines]} from a reader that takes paths on stdin; a crash marks its file CRASH and the rest go on."""
    res, todo = {}, list(paths)
    while todo:
        p = subprocess.run(cmd, input='\n'.join(todo) + '\n', capture_output=True, text=True, env=env,
                           errors='replace')
        cur, lines = None, []
        for line in p.stdout.splitlines():
            if line.startswith('FILE '):
                cur, lines = line[5:], []
            elif line == 'END':
                res[cur] = lines
                cur = None
            elif cur is not None:
                lines.append(line)
        done = set(res)
        if cur is not None:  # died inside this one
            res[cur] = ['CRASH %d' % p.returncode]
            done.add(cur)
        rest = [t for t in todo if t not in done]
        if len(rest) == len(todo):
            raise RuntimeError('%s read nothing (exit %d): %s' % (cmd[0], p.returncode, p.stderr[-2000:]))
        todo = rest
    return res


def torch_pythons():
    asked = [p for v in ('TENSORCTL_TEST_PYTHON', 'TENSORCTL_EXTRA_PYTHONS')
             for p in os.environ.get(v, '').split(':') if p]
    out, seen = [], set()
    for py in ['/usr/bin/python3'] + asked:
        if py in seen:
            continue
        seen.add(py)
        r = subprocess.run([py, '-c', 'import torch; print(torch.__version__)'], capture_output=True, text=True) \
            if shutil.which(py) else None
        if r is not None and r.returncode == 0:
            out.append((py, r.stdout.strip()))
        elif py in asked:
            raise SystemExit('FAIL %s was named but cannot import torch' % py)
    return out


# ---- comparing ---------------------------------------------------------------------------

def compare(ours, theirs):
    """None when they agree (or ours refuses by policy), else a reason."""
    if ours in (['OPEN POLICY'], ['OPEN UNDEF']):
        return None
    if len(ours) != len(theirs):
        return 'ours %r, torch %r' % (ours[:6], theirs[:6])
    for a, b in zip(ours, theirs):
        if a == b:
            continue
        fa, fb = a.split(' '), b.split(' ')  # a record's name may be empty: keep its field
        if len(fa) == 4 and fa[0] == 'REC' and fa[2] == 'UNDEF' and len(fb) == 5 and fa[1] == fb[1] and fa[3] == fb[2]:
            continue  # bytes torch never wrote: only the length is torch's
        return 'ours %r, torch %r' % (a, b)
    return None


# ---- archives ------------------------------------------------------------------------------

def deflate(data, level=6):
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def build(entries, prefix=b'', comment=b'', trailing=b'', zip64=True, comment_len=None):
    """A zip of entries (dicts: name, data, method, flags, descriptor, zip64, time, attr, lfh_name,
    cd_extra, lfh_extra, csize/usize/crc overrides), as torch's writer lays it out when left alone."""
    out = bytearray(prefix)
    cds = []
    for e in entries:
        data = e.get('data', b'')
        method = e.get('method', 0)
        comp = deflate(data) if method == 8 else data
        crc = e.get('crc', zlib.crc32(data) & 0xffffffff)
        usize, csize = e.get('usize', len(data)), e.get('csize', len(comp))
        flags = e.get('flags', 0x0808 if e.get('descriptor', True) else 0x0800)
        lfh_off = len(out)
        lname = e.get('lfh_name', e['name'])
        lextra = e.get('lfh_extra', b'')
        pad = (64 - (len(out) + 30 + len(lname) + len(lextra) + 4) % 64) % 64
        lextra += b'FB' + struct.pack('<H', pad) + b'Z' * pad
        desc = flags & 8
        out += struct.pack('<IHHHHHIIIHH', 0x04034b50, 0, flags, method, e.get('time', 0), 0,
                           0 if desc else crc, 0 if desc else csize, 0 if desc else usize, len(lname), len(lextra))
        out += lname + lextra + comp
        if desc and (csize or usize):
            out += struct.pack('<IIII', 0x08074b50, crc, csize, usize)
        z64 = e.get('zip64', False)
        cextra = e.get('cd_extra', b'')
        if z64:
            cextra = struct.pack('<HHQQQ', 1, 24, usize, csize, lfh_off) + cextra
        cds.append(struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0, 0, flags, method, e.get('time', 0), 0, crc,
                               0xFFFFFFFF if z64 else csize, 0xFFFFFFFF if z64 else usize, len(e['name']),
                               len(cextra), 0, 0, 0, e.get('attr', 0), 0xFFFFFFFF if z64 else lfh_off)
                   + e['name'] + cextra)
    cd_off = len(out)
    for c in cds:
        out += c
    cd_size = len(out) - cd_off
    n = len(entries)
    if zip64:
        z64_off = len(out)
        out += struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 0x031E, 0x002D, 0, 0, n, n, cd_size, cd_off)
        out += struct.pack('<IIQI', 0x07064b50, 0, z64_off, 1)
    out += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), cd_size, cd_off,
                       len(comment) if comment_len is None else comment_len)
    return bytes(out) + comment + trailing


VERSIONS = [b'3\n', b'3', b' +3abc', b'10', b'11', b'0', b'-1', b'x', b'', b'3\0junk', b'99999999999999999999999',
            b'\t7\n', b'1']
EXTRA_NAMES = [b'byteorder', b'.data/version', b'.format_version', b'.data/serialization_id', b'constants.pkl',
               b'code/__torch__.py', b'code/__torch__.py.debug_pkl', b'data/1', b'data/10', b'extra/a.txt',
               b'../x', b'a/../../b', b'/abs', b'data/', b'\xff\xfe', b'caf\xc3\xa9', b'\xed\xa0\x80', b'x' * 600]


def flip_case(rng, b):
    return bytes(c ^ 0x20 if (65 <= c <= 90 or 97 <= c <= 122) and rng.random() < 0.5 else c for c in b)


def gen_entries(rng):
    folder = rng.choice([b'archive'] * 8 + [b'Archive', b'a', b'', b'x.y', b'a\xff'])
    names = [b'data.pkl', b'data/0', b'version']
    for _ in range(rng.randrange(0, 5)):
        names.append(rng.choice(EXTRA_NAMES))
    if rng.random() < 0.35:  # the same name again, maybe in other letters
        k = rng.choice(names)
        names.append(flip_case(rng, k) if rng.random() < 0.7 else k)
    if rng.random() < 0.15:
        names = [flip_case(rng, n) for n in names]
    if rng.random() < 0.1:  # a name cut short by a NUL as torch lists it
        i = rng.randrange(len(names))
        names.append(names[i] + b'\0' + rng.choice([b'x', b'junk', b'']))
    rng.shuffle(names)
    if rng.random() < 0.3:
        names.sort(key=lambda n: n != b'version')
    out = []
    for nm in names:
        full = (folder + b'/' + nm) if rng.random() > 0.01 else rng.choice([b'other/' + nm, nm, folder.upper() + b'/' + nm])
        if nm.rstrip(b'\0x') == b'version' or nm == b'.data/version':
            data = rng.choice(VERSIONS) if rng.random() < 0.4 else b'3\n'
        else:
            data = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 4, 16, 100, 1000])))
        e = {'name': full, 'data': data, 'method': 8 if rng.random() < 0.25 else 0,
             'descriptor': rng.random() < 0.8}
        if rng.random() < 0.1:
            e['zip64'] = True
        if rng.random() < 0.05:
            e['time'] = rng.randrange(1, 65536)
        if rng.random() < 0.05:
            e['attr'] = 0x10
        if rng.random() < 0.04:
            e['lfh_name'] = flip_case(rng, full)
        if rng.random() < 0.03:
            e['flags'] = rng.choice([0x0809, 0x0848, 0x0828, 0x2808, 0x0000, 0xffff])
        if rng.random() < 0.03:
            e['method'] = rng.choice([1, 12, 14, 99])
        out.append(e)
    return out


def gen_archive(rng):
    entries = gen_entries(rng)
    kw = {'zip64': rng.random() < 0.7}
    r = rng.random()
    if r < 0.1:
        kw['trailing'] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 22, 100, 4000, 4100, 5000])))
    elif r < 0.15:
        kw['trailing'] = b'\0' * rng.choice([60000, 65535, 65600, 66000, 70000])
    elif r < 0.2:
        kw['comment'] = rng.choice([b'hi', b'PK\x05\x06' + bytes(18), b'x' * 300])
        if rng.random() < 0.5:
            kw['comment_len'] = rng.randrange(65536)
    elif r < 0.25:
        kw['prefix'] = rng.choice([b'PYTORCH1', b'PK\x03\x04', b'\0' * 64, b'garbage'])
    return build(entries, **kw)


def mutate(rng, data):
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if not b:
            break
        k = rng.random()
        if k < 0.4:  # a header field: near a signature
            sigs = [i for i in range(len(b) - 4) if b[i:i + 2] == b'PK' and b[i + 2] in (1, 3, 5, 6, 7)]
            at = rng.choice(sigs) + rng.randrange(4, 46) if sigs else rng.randrange(len(b))
            if at + 4 <= len(b):
                w = rng.choice([1, 2, 4])
                v = rng.choice([0, 1, 0xFF, 0xFFFF, 0xFFFFFFFF, len(b), len(b) - 1, rng.randrange(1 << 32)])
                b[at:at + w] = (v & ((1 << (8 * w)) - 1)).to_bytes(w, 'little')
        elif k < 0.7:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif k < 0.8:
            del b[rng.randrange(len(b)):]
        elif k < 0.9:
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
        else:
            i = rng.randrange(len(b))
            del b[i:i + rng.randrange(1, 40)]
    return bytes(b)


def generated(count, seed, tmp):
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        data = gen_archive(rng)
        if rng.random() < 0.5:
            data = mutate(rng, data)
        p = os.path.join(tmp, 'g%06d.zip' % i)
        with open(p, 'wb') as f:
            f.write(data)
        paths.append(p)
    return paths


def corpus(items):
    out = []
    for it in items:
        if os.path.isdir(it):
            for root, _, files in os.walk(it):
                out += [os.path.join(root, f) for f in sorted(files)]
        elif os.path.exists(it):
            out.append(it)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('what', choices=['corpus', 'generated', 'worker'])
    ap.add_argument('items', nargs='*')
    ap.add_argument('--zipdump')
    ap.add_argument('--count', type=int, default=10000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--keep', help='copy disagreeing archives here')
    a = ap.parse_args()
    if a.what == 'worker':
        return worker()
    pys = torch_pythons()
    if not pys:
        print('SKIP: no Python here imports torch')
        return 77
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix='zipdiff-')
    try:
        paths = corpus(a.items) if a.what == 'corpus' else generated(a.count, a.seed, tmp)
        if a.what == 'corpus' and not paths:
            print('FAIL: nothing to compare in %s' % a.items)
            return 1
        fails, policy, undef, opened, crashed = [], 0, 0, 0, 0
        for py, ver in pys:
            ours = run_reader([a.zipdump, '--torch', ver.split('.')[0]], paths)
            theirs = run_reader([py, os.path.abspath(__file__), 'worker'], paths)
            for p in paths:
                o, t = ours.get(p, ['MISSING']), theirs.get(p, ['MISSING'])
                if t and t[0].startswith('CRASH'):
                    if o == ['OPEN UNDEF']:  # torch allocated and parsed the memory it never wrote
                        crashed += 1
                        continue
                    fails.append('%s: torch %s crashed (%s); ours %r' % (p, ver, t[0], o[:3]))
                    continue
                why = compare(o, t)
                if why:
                    fails.append('%s: torch %s: %s' % (p, ver, why))
                    if a.keep:
                        os.makedirs(a.keep, exist_ok=True)
                        shutil.copy(p, a.keep)
                policy += o == ['OPEN POLICY']
                undef += o == ['OPEN UNDEF']
                opened += len(t) > 1 and t[0] == 'OPEN ok' and t[1] != 'RECORDS ERR'
        for f in fails[:50]:
            print('FAIL', f)
        print('%d archives x %d torch (%s): %d disagree, %d refused by tensorctl beyond torch (shared bytes), '
              '%d whose version record torch reads from memory it never wrote (torch died on %d of them), '
              '%d read whole by torch; %.0f s'
              % (len(paths), len(pys), ', '.join(v for _, v in pys), len(fails), policy, undef, crashed, opened,
                 time.time() - t0))
        return 1 if fails or not paths else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
