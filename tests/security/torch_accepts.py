#!/usr/bin/env python3
"""Files torch.load accepts (or refuses) in ways a reader can miss, made by
hand where torch cannot write them, and what tensorctl must say of each.

    torch_accepts.py check --tensorctl T     every case: tensorctl's exit status and exact stderr line
    torch_accepts.py torch T                 (under run_with_torch.sh) each case does in this torch what
                                             the case says: a payload creates a marker file (it runs) or
                                             not (torch refuses the file before it unpickles anything),
                                             the tensors torch loads are the ones tensorctl lists, and
                                             tensorctl's weights_only answer for this torch is what its
                                             weights_only loader does on files this torch writes

The cases: zip record names that differ in letter case (torch's reader looks
them up ignoring case); the pre-0.4 tar format, a tar with a torch zip
appended; a legacy stream whose magic number is protocol-0 text; a LONG past
Python 3.11's int_max_str_digits (older Pythons read on); a TorchScript
declaration inside a method's string; and, for each container kind, a file
that torch.load refuses before it unpickles anything (tensorctl: "not a
checkpoint", exit 3). Exit 0 when all hold, 1 otherwise, 77 (torch mode)
without torch.
"""
import hashlib, io, json, os, shutil, struct, subprocess, sys, tarfile, tempfile, zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'hostile'))
import hostile as H  # noqa: E402

MARKER = 'MARKER'


def run_call(marker):
    return H.op_global('posix', 'system') + H.op_tuple([H.op_str('touch ' + marker)]) + b'R'


def pk(body):
    return H.PROTO + body + H.STOP


# ---- zip: names torch's reader finds ignoring case ---------------------------------------------

def zip_case_only_record(m):
    return H.zip_of([('archive/Data.pkl', pk(H.dict_of([('w', H.tensor()), ('x', run_call(m))]))),
                     ('archive/data/0', H.FOUR_FLOATS), ('archive/version', b'3\n')])


def zip_case_hidden(m):
    return H.zip_of([('archive/DATA.pkl', pk(H.dict_of([('w', H.tensor()), ('x', run_call(m))]))),
                     ('archive/data.pkl', H.GOOD_PKL), ('archive/data/0', H.FOUR_FLOATS),
                     ('archive/version', b'3\n')])


def zip_case_storage(m):
    return H.zip_of([('archive/data.pkl', H.GOOD_PKL), ('archive/data/0', H.FOUR_FLOATS),
                     ('archive/DATA/0', struct.pack('<4f', 9, 9, 9, 9)), ('archive/version', b'3\n')])


# ---- the pre-0.4 tar format ----------------------------------------------------------------------

def tar_of(members):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode='w', format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def tar_storages(first=b''):
    """Storage 100 (six floats) and a view 300 of it (3 elements from 2)."""
    st = pk(first + H.op_int(1)) if first else pk(H.op_int(1))
    st += pk(H.op_tuple([H.op_int(100), H.op_str('cpu'), H.op_global('torch', 'FloatStorage')]))
    st += struct.pack('<q', 6) + struct.pack('<6f', 1, 2, 3, 4, 5, 6)
    st += pk(b']' + b'(' + H.op_int(300) + H.op_int(100) + H.op_int(2) + H.op_int(3) + b't' + b'a')
    return st


def tar_tensors():
    """Tensor 200: 2x3 over storage 100; tensor 201: two elements of view 300 from its second."""
    te = pk(H.op_int(2))
    te += pk(H.op_tuple([H.op_int(200), H.op_int(100), H.op_global('torch', 'FloatTensor')]))
    te += struct.pack('<i4x', 2) + struct.pack('<qq', 2, 3) + struct.pack('<qq', 3, 1) + struct.pack('<q', 0)
    te += pk(H.op_tuple([H.op_int(201), H.op_int(300), H.op_global('torch', 'FloatTensor')]))
    te += struct.pack('<i4x', 1) + struct.pack('<q', 2) + struct.pack('<q', 1) + struct.pack('<q', 1)
    return te


def tar_main(extra=b''):
    return pk(b'}(' + H.op_str('a.weight') + H.op_str('200') + b'Q' + H.op_str('b') + H.op_str('201') + b'Q' +
              extra + b'u')


def tar_good(m):
    return tar_of([('sys_info', pk(b'}')), ('storages', tar_storages()), ('tensors', tar_tensors()),
                   ('pickle', tar_main())])


def tar_evil_main(m):
    return tar_of([('sys_info', pk(b'}')), ('storages', tar_storages()), ('tensors', tar_tensors()),
                   ('pickle', tar_main(H.op_str('x') + run_call(m)))])


def tar_evil_storages(m):
    # the storage count's pickle calls posix.system first (a tuple (call, 1)[1] is not what torch reads:
    # the count must be an int, so the call sits in a throwaway list of the storages member's first pickle)
    st = tar_storages()
    first = pk(H.op_int(1))
    evil = H.PROTO + b']' + run_call(m) + b'a0' + H.op_int(1) + H.STOP
    return tar_of([('storages', evil + st[len(first):]), ('tensors', tar_tensors()), ('pickle', tar_main())])


def tar_with_zip(m):
    """The tar archive with a torch zip appended: torch.load reads the tar, torch's zip reader the zip."""
    z = H.torch_zip(pk(H.dict_of([('w', H.tensor()), ('x', run_call(m))])), {'0': H.FOUR_FLOATS})
    zi = zipfile.ZipFile(io.BytesIO(z))
    b = io.BytesIO(tar_good(m))
    b.seek(0, 2)
    with zipfile.ZipFile(b, 'a') as out:
        for info in zi.infolist():
            out.writestr(info, zi.read(info.filename))
    return b.getvalue()


def tar_no_storages(m):
    return tar_of([('pickle', pk(H.dict_of([('x', run_call(m))])))])


# ---- legacy streams --------------------------------------------------------------------------------

TEXT_MAGIC = b'L%dL\n.' % H.LEGACY_MAGIC


def legacy_pid(key, numel):
    return H.op_tuple([H.op_str('storage'), H.op_global('torch', 'FloatStorage'), H.op_str(key), H.op_str('cpu'),
                       H.op_int(numel), b'N']) + b'Q'


def legacy_good_rest():
    hooks = H.op_global('collections', 'OrderedDict') + b')R'
    t = (H.op_global('torch._utils', '_rebuild_tensor_v2') +
         H.op_tuple([legacy_pid('0', 4), H.op_int(0), H.op_tuple([H.op_int(2), H.op_int(2)]),
                     H.op_tuple([H.op_int(2), H.op_int(1)]), H.FALSE, hooks]) + b'R')
    out = pk(H.op_int(1001))
    out += pk(H.dict_of([('protocol_version', H.op_int(1001)), ('little_endian', b'\x88'),
                         ('type_sizes', b'}')]))
    out += pk(H.dict_of([('w', t)]))
    out += pk(b'(' + H.op_str('0') + b'l')
    return out + struct.pack('<q', 4) + H.FOUR_FLOATS


def legacy_text_magic(m):
    return TEXT_MAGIC + legacy_good_rest()


def legacy_text_magic_evil(m):
    return TEXT_MAGIC + pk(run_call(m))


def legacy_bad_magic(m):
    return pk(H.op_int(7)) + pk(run_call(m))


# ---- other refusals before anything is unpickled ---------------------------------------------------

def zip_no_version(m):
    return H.zip_of([('archive/data.pkl', pk(H.dict_of([('x', run_call(m))]))), ('archive/data/0', H.FOUR_FLOATS)])


def zip_outside_folder(m):
    return H.zip_of([('archive/data.pkl', pk(H.dict_of([('x', run_call(m))]))), ('other/README', b'hi'),
                     ('archive/version', b'3\n')])


def text_file(m):
    return b'hello, this is not a checkpoint\n'


# ---- Python versions ----------------------------------------------------------------------------------

def long_digits(m):
    big = b'L' + b'7' * 5000 + b'L\n'
    return H.torch_zip(pk(H.dict_of([('w', H.tensor()), ('n', big), ('x', run_call(m))])), {'0': H.FOUR_FLOATS})


CONFUSED = ("UNSAFE: zip entries %d '%s' and %d '%s' are one name to torch's reader, which looks names up ignoring "
            "letter case (and lists them cut at a NUL byte or at 511 bytes): which one a reader takes is not the "
            "same everywhere; tensorctl read what torch's lookup finds")
RUNS = 'UNSAFE: loading it runs posix.system (runs shell commands and touches files)'

# name: (maker, tensorctl inspect's exit, its stderr after "tensorctl: FILE: " (None: nothing), what torch.load
# does: 'runs' the payload, 'loads' (no payload; the tensors compared), 'refuses' before unpickling anything)
CASES = {
    'zip_case_only_record': (zip_case_only_record, 4, RUNS, 'runs'),
    'zip_case_hidden': (zip_case_hidden, 4, CONFUSED % (0, 'archive/DATA.pkl', 1, 'archive/data.pkl'), 'loads'),
    'zip_case_storage': (zip_case_storage, 4, CONFUSED % (1, 'archive/data/0', 2, 'archive/DATA/0'), 'loads'),
    'tar_good': (tar_good, 0, None, 'loads'),
    'tar_evil_main': (tar_evil_main, 4, RUNS, 'runs'),
    'tar_evil_storages': (tar_evil_storages, 4, RUNS, 'runs'),
    'tar_with_zip': (tar_with_zip, 4, 'UNSAFE: its bytes also hold a zip archive that torch\'s own zip reader opens '
                     '(torch.jit.load and torch._C.PyTorchFileReader read it; torch.load reads the file as it starts)',
                     'loads'),
    'tar_no_storages': (tar_no_storages, 3, "not a checkpoint: a tar archive without a 'storages' member, which "
                        "torch.load's old-format reader fails on (KeyError) before it unpickles anything", 'refuses'),
    'legacy_text_magic': (legacy_text_magic, 0, None, 'loads'),
    'legacy_text_magic_evil': (legacy_text_magic_evil, 4, 'the legacy pickles names posix.system before it fails '
                               '(torch.load would import and call it first): legacy protocol version -1 (expected '
                               '1001)', 'runs'),
    'legacy_bad_magic': (legacy_bad_magic, 3, 'not a checkpoint: no known format starts with bytes 80 02 4b 07 '
                         '(expected a torch zip, legacy torch or safetensors file)', 'refuses'),
    'zip_no_version': (zip_no_version, 3, 'no archive/version record (torch refuses such files)', 'refuses'),
    'zip_outside_folder': (zip_outside_folder, 3, "zip entry 'other/README' is outside the top folder 'archive/' "
                           "(torch refuses this)", 'refuses'),
    'text_file': (text_file, 3, 'not a checkpoint: no known format starts with bytes 68 65 6c 6c (expected a torch '
                  'zip, legacy torch or safetensors file)', 'refuses'),
    'long_digits': (long_digits, 4, RUNS, 'runs-old-python'),
}


def write(tmp, name):
    path = os.path.join(tmp, name + '.pt')
    with open(path, 'wb') as f:
        f.write(CASES[name][0](os.path.join(tmp, MARKER)))
    return path


def check(tc):
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (_, code, err, _) in CASES.items():
            path = write(tmp, name)
            r = subprocess.run([tc, 'inspect', path], capture_output=True, text=True, timeout=120)
            lines = r.stderr.strip().splitlines()
            want = None if err is None else 'tensorctl: %s: %s' % (path, err)
            if r.returncode != code or (want is None and lines) or (want is not None and lines != [want]):
                fails.append('%s: exit %d (wanted %d), stderr %r (wanted %r)' % (name, r.returncode, code,
                                                                                  r.stderr.strip(), want))
            if os.path.exists(os.path.join(tmp, MARKER)):
                fails.append('%s: THE PAYLOAD RAN' % name)
        # what the unsafe ones and the hazards leave to a rewrite: nothing
        for name in ('zip_case_hidden', 'zip_case_storage', 'tar_with_zip'):
            path = write(tmp, name)
            r = subprocess.run([tc, 'to-cpu', path, '-o', path + '.out.pt'], capture_output=True, text=True)
            if r.returncode != 4 or os.path.exists(path + '.out.pt'):
                fails.append('%s: to-cpu exit %d (wanted 4) or wrote an output' % (name, r.returncode))
    for f in fails:
        print('FAIL', f)
    print('%d cases, %d failed' % (len(CASES), len(fails)))
    return 1 if fails else 0


# ---- real torch ----------------------------------------------------------------------------------------------

def sha(t):
    return hashlib.sha256(t.detach().contiguous().cpu().numpy().tobytes()).hexdigest()


def flat(obj, prefix=''):
    """name -> tensor of what torch.load returned (dicts walked)."""
    import torch
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flat(v, prefix + str(k) + '.'))
    elif isinstance(obj, torch.Tensor):
        out[prefix[:-1]] = obj
    return out


def tensorctl_hashes(tc, path, extra=()):
    r = subprocess.run([tc, 'inspect', '--json', '--hash'] + list(extra) + [path], capture_output=True, text=True)
    try:
        info = json.loads(r.stdout)
    except ValueError:
        return None, r
    return {t['name']: t.get('sha256') for t in info.get('tensors', [])}, info


def torch_mode(tc):
    try:
        import torch
    except ImportError:
        print('no torch: skipped')
        return 77
    ver = '1.13' if torch.__version__.startswith('1.') else '2.x'
    fails, n = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        marker = os.path.join(tmp, MARKER)
        for name, (_, code, _, does) in CASES.items():
            path = write(tmp, name)
            if os.path.exists(marker):
                os.unlink(marker)
            try:
                got, err = torch.load(path, map_location='cpu', weights_only=False), None
            except Exception as e:  # noqa: BLE001
                got, err = None, e
            ran = os.path.exists(marker)
            n += 1
            if does == 'runs' and not ran:
                fails.append('%s: torch %s did not run the payload (%s)' % (name, torch.__version__, err))
            elif does in ('loads', 'refuses', 'runs-old-python') and ran:
                fails.append('%s: torch %s RAN the payload' % (name, torch.__version__))
            elif does == 'refuses' and err is None:
                fails.append('%s: torch %s loads it' % (name, torch.__version__))
            elif does == 'loads':
                if err is not None:
                    fails.append('%s: torch %s refuses it: %s' % (name, torch.__version__, err))
                    continue
                # the tensors torch built are the ones tensorctl lists (a hazard's read with what torch's lookup
                # finds: its hashes come from the same reading)
                mine, _ = tensorctl_hashes(tc, path)
                theirs = {k: sha(v) for k, v in flat(got).items()}
                if mine != theirs:
                    fails.append('%s: torch %s loads %s, tensorctl lists %s' % (name, torch.__version__,
                                                                               sorted(theirs), mine))
            if does == 'runs-old-python':
                # Python 3.11 stops at the long integer; older Pythons read on (set_int_max_str_digits(0) is them)
                if err is None or 'digits' not in str(err):
                    fails.append('%s: this Python does not stop at the long integer: %s' % (name, err))
                if hasattr(sys, 'set_int_max_str_digits'):
                    old = sys.get_int_max_str_digits()
                    sys.set_int_max_str_digits(0)
                    try:
                        torch.load(path, map_location='cpu', weights_only=False)
                    except Exception:  # noqa: BLE001
                        pass
                    finally:
                        sys.set_int_max_str_digits(old)
                    if not os.path.exists(marker):
                        fails.append('%s: without int_max_str_digits the payload did not run' % name)
        # the tar polyglot's zip: torch's own reader opens it
        try:
            recs = torch._C.PyTorchFileReader(write(tmp, 'tar_with_zip')).get_all_records()
            if 'data.pkl' not in recs:
                fails.append('tar_with_zip: torch\'s zip reader lists %s' % recs)
        except Exception as e:  # noqa: BLE001
            fails.append('tar_with_zip: torch\'s zip reader does not open it: %s' % e)
        # a training checkpoint with float learning rates, as this torch writes it: tensorctl's weights_only
        # answer for this torch is what its weights_only loader does
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        model(torch.ones(1, 3)).sum().backward()
        opt.step()
        p = os.path.join(tmp, 'train.pt')
        torch.save({'model': model.state_dict(), 'optimizer': opt.state_dict(), 'epoch': 3}, p)
        plain = os.path.join(tmp, 'plain.pt')
        torch.save(model.state_dict(), plain)
        for f in (p, plain):
            r = subprocess.run([tc, 'inspect', '--json', f], capture_output=True, text=True)
            wo = json.loads(r.stdout).get('weights_only', {}).get(ver)
            try:
                torch.load(f, map_location='cpu', weights_only=True)
                loads, why = True, ''
            except Exception as e:  # noqa: BLE001
                loads, why = False, str(e).strip().splitlines()[-1][:120]
            n += 1
            if not wo or wo['loads'] != loads:
                fails.append('%s: tensorctl says torch %s weights_only %r, torch %s: %s' % (
                    os.path.basename(f), ver, wo, 'loads' if loads else 'refuses', why))
        # TorchScript: a declaration inside a method's string declares nothing
        n += 1
        why = torchscript_string_decl(torch, tc, tmp)
        if why:
            fails.append('torchscript_string_decl: ' + why)
    for f in fails:
        print('FAIL', f)
    print('torch %s: %d checks, %d failed' % (torch.__version__, n, len(fails)))
    return 1 if fails else 0


def torchscript_string_decl(torch, tc, tmp):
    """A scripted module whose code/ gets a method with a docstring holding `__parameters__ = ["w",
    "secret"]` and `secret : Tensor`: torch.jit.load's state_dict() has w only, and so must tensorctl."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))
            self.secret = torch.zeros(3)

        def forward(self, x):
            return x * self.w + self.secret.sum()

    src = os.path.join(tmp, 'ts.pt')
    torch.jit.save(torch.jit.script(M()), src)
    out = os.path.join(tmp, 'ts_doc.pt')
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, 'w') as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith('code/__torch__.py'):
                text = data.decode()
                at = text.index('  def forward')
                # the string's lines at the class body's indentation, where a line-by-line reader takes them
                doc = ('  def helper(self: __torch__.M) -> str:\n'
                       '    return """\n  __parameters__ = ["w", "secret"]\n  secret : Tensor\n"""\n')
                data = (text[:at] + doc + text[at:]).encode()
            zout.writestr(info, data)
    want = sorted(torch.jit.load(out).state_dict())
    r = subprocess.run([tc, 'inspect', '--json', out], capture_output=True, text=True)
    try:
        got = sorted(t['name'] for t in json.loads(r.stdout)['tensors'])
    except (ValueError, KeyError):
        return 'inspect gave no JSON (exit %d): %s' % (r.returncode, r.stderr.strip())
    return None if got == want == ['w'] else 'torch.jit.load state_dict %s, tensorctl %s' % (want, got)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == 'check' and sys.argv[2] == '--tensorctl':
        return check(sys.argv[3])
    if len(sys.argv) == 3 and sys.argv[1] == 'torch':
        return torch_mode(sys.argv[2])
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main())
