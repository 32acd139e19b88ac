#!/usr/bin/env python3
"""Files with two readings, made byte by byte, and what tensorctl must say
of each: a file readable two ways is never safe.

    polyglots.py check --tensorctl T     each case: tensorctl's verdict, exit status and message
    polyglots.py torch                   (under run_with_torch.sh) the second readings are real: torch's
                                         own machinery takes them (its tar reader, its unpickler, which
                                         runs a harmless marker payload of the safetensors polyglot)
"""
import argparse, io, os, struct, subprocess, sys, tarfile, tempfile, zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'hostile'))
import hostile as H  # noqa: E402


def safetensors_pickle(cmd):
    """A valid safetensors file whose bytes, read from byte 0, are a pickle calling posix.system(cmd):
    BINUNICODE at byte 0 swallows the length field and the start of the JSON header, and the
    pickle resumes inside a __metadata__ string."""
    payload = b"cposix\nsystem\n(S'" + cmd.encode() + b"'\ntR."
    L = 256
    H_len = 0x58 + 256 * L  # the u64 of bytes 0..7: 'X', L (4 bytes), three zero bytes
    prefix = b'{"__metadata__":{"format":"pt","pad":"'
    body = prefix + b'A' * (5 + L - 8 - len(prefix)) + payload
    body += b'"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    body += b' ' * (H_len - len(body))
    return b'X' + struct.pack('<I', L) + b'\0\0\0' + body + struct.pack('<f', 1.0)


def legacy_tar():
    """torch's legacy stream whose first 512 bytes are also a valid tar header (the checksum field
    lands inside a string of sys_info, which the loader ignores)."""
    def build(field):
        magic = H.PROTO + H.op_int(H.LEGACY_MAGIC) + H.STOP
        proto = H.PROTO + H.op_int(1001) + H.STOP
        pre = len(magic) + len(proto) + 2 + 2 + 1 + 4 + len('pad') + 1 + 4  # PROTO '}(' X len 'pad' X len
        pad = bytearray(b' ' * 600)
        pos = 148 - pre
        pad[pos:pos + 8] = field
        sys_info = H.PROTO + b'}(' + H.op_str('pad') + b'X' + struct.pack('<I', len(pad)) + bytes(pad) + b'u' + H.STOP
        obj = H.state_dict(H.dict_of([('w', H.tensor())]))
        body = magic + proto + sys_info + obj + H.PROTO + b'(' + H.op_str('0') + b'l' + H.STOP
        return body + struct.pack('<q', 4) + H.FOUR_FLOATS
    data = build(b'        ')
    assert data[148:156] == b'        '
    chk = 256 + sum(data[:148]) + sum(data[156:512])
    out = build(b'%06o\0 ' % chk)
    assert out[148:156] == b'%06o\0 ' % chk
    return out


def raw_pickle():
    return b'\x80\x02cposix\nsystem\nX\x04\x00\x00\x00true\x85R.'


def zip_broken_after_global():
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w') as z:
        z.writestr('a/data.pkl', b'\x80\x02cposix\nsystem\n(X\x04\x00\x00\x00trueq\x00tR\xff\xff')
        z.writestr('a/version', '3\n')
    return b.getvalue()


def zip_trailing():
    return H.good() + b'trailing bytes after the end record'


def zip_hidden_eocd():
    """An end record whose comment holds a second end record (a reader scanning back finds that one)."""
    data = bytearray(H.good())
    fake = b'PK\x05\x06' + bytes(18) + b'more!'
    data[-2:] = struct.pack('<H', len(fake))
    return bytes(data) + fake


# (name, file name, bytes, expected exit, a fragment of the message)
def cases(marker):
    return [
        ('safetensors_is_a_pickle', 'poly.safetensors', safetensors_pickle('touch ' + marker), 4,
         'its bytes are a pickle that imports posix.system'),
        ('legacy_is_a_tar', 'poly_tar.pt', legacy_tar(), 4, 'also a tar header'),
        ('bare_pickle', 'raw.pkl', raw_pickle(), 4, 'torch.load would unpickle it from byte 0, importing posix.system'),
        ('zip_pickle_fails_after_global', 'broken.pt', zip_broken_after_global(), 4,
         'names posix.system before it fails'),
        # torch's reader (miniz) takes the last end record and ignores what follows it: one reading only
        ('zip_end_record_in_comment', 'hidden.pt', zip_hidden_eocd(), 3, 'zip archive has no entries'),
    ]


def check(tc):
    fails, n = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn, data, want, frag in cases(os.path.join(tmp, 'MARKER')):
            p = os.path.join(tmp, fn)
            with open(p, 'wb') as f:
                f.write(data)
            for args in (['inspect', p], ['to-cpu', p, '-o', p + '.out.pt'], ['convert', p, p + '.out.safetensors']):
                r = subprocess.run([tc] + args, capture_output=True, text=True, timeout=60)
                n += 1
                lines = r.stderr.strip().splitlines()
                if r.returncode != want or not lines or frag not in lines[-1]:
                    fails.append('%s: %s: exit %d (wanted %d), stderr %r' % (name, args[0], r.returncode, want,
                                                                            r.stderr.strip()))
                for out in (p + '.out.pt', p + '.out.safetensors'):
                    if os.path.exists(out):
                        fails.append('%s: %s wrote %s' % (name, args[0], out))
                        os.unlink(out)
            if os.path.exists(os.path.join(tmp, 'MARKER')):
                fails.append('%s: THE PAYLOAD RAN' % name)
    for f in fails:
        print('FAIL', f)
    print('%d checks, %d failed' % (n, len(fails)))
    return 1 if fails or not n else 0


def with_torch():
    try:
        import torch
    except ImportError:
        print('no torch: skipped')
        return 77
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        marker = os.path.join(tmp, 'MARKER')
        data = dict((c[0], c[2]) for c in cases(marker))
        # the safetensors polyglot under a .pt name: torch's unpickler runs the payload before the magic check
        p = os.path.join(tmp, 'poly.pt')
        with open(p, 'wb') as f:
            f.write(data['safetensors_is_a_pickle'])
        try:
            torch.load(p, map_location='cpu', weights_only=False)
        except Exception:  # noqa: BLE001  (the magic number check fails, after the payload)
            pass
        if not os.path.exists(marker):
            fails.append('torch %s did not run the pickle reading of the safetensors polyglot' % torch.__version__)
        # the tar polyglot: Python's tarfile, which torch.load tries first, takes its first block as a member
        try:
            with tarfile.open(fileobj=io.BytesIO(data['legacy_is_a_tar']), mode='r:') as t:
                t.getmembers()
        except tarfile.TarError as e:
            fails.append('tarfile refuses the tar polyglot: %s' % e)
    for f in fails:
        print('FAIL', f)
    print('torch %s: second readings taken: %d failures' % (torch.__version__, len(fails)))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('what', choices=['check', 'torch'])
    ap.add_argument('--tensorctl')
    a = ap.parse_args()
    return check(a.tensorctl) if a.what == 'check' else with_torch()


if __name__ == '__main__':
    sys.exit(main())
