#!/usr/bin/env python3
"""Hostile checkpoints, made byte by byte (no torch; nothing is unpickled),
and the checks tensorctl must pass on each.

    hostile.py list                      case names, one a line
    hostile.py gen OUTDIR                write every case's file(s)
    hostile.py check --tensorctl T --case NAME [--tmp DIR]

A case is a file plus runs. A failing run must exit non-zero (3 unless said
otherwise), print exactly one stderr line `tensorctl: FILE: ...` containing the
expected fragment, and leave no OUT and no `.OUT.tensorctl-*` temporary. A
passing run (a raised limit) must exit 0. An unknown case, or a case with no
run, fails: a check that ran nothing never passes.
"""
import argparse, io, os, shutil, struct, subprocess, sys, tempfile, zipfile, zlib

# ---- pickle bytes --------------------------------------------------------------

def op_int(v):
    if 0 <= v < 256:
        return b'K' + bytes([v])
    if -2**31 <= v < 2**31:
        return b'J' + struct.pack('<i', v)
    n = (v.bit_length() + 8) // 8
    return b'\x8a' + bytes([n]) + v.to_bytes(n, 'little', signed=True)

def op_str(s):
    b = s.encode()
    return b'X' + struct.pack('<I', len(b)) + b

def op_global(mod, name):
    return b'c' + mod.encode() + b'\n' + name.encode() + b'\n'

def op_tuple(items):
    return b'(' + b''.join(items) + b't'

FALSE = b'\x89'
PROTO = b'\x80\x02'
STOP = b'.'

def storage_pid(key, numel, stype='FloatStorage', loc='cpu'):
    return op_tuple([op_str('storage'), op_global('torch', stype), op_str(key), op_str(loc), op_int(numel)]) + b'Q'

def tensor(key='0', numel=4, offset=0, shape=(2, 2), stride=(2, 1), stype='FloatStorage'):
    hooks = op_global('collections', 'OrderedDict') + b')R'
    args = [storage_pid(key, numel, stype), op_int(offset), op_tuple([op_int(x) for x in shape]),
            op_tuple([op_int(x) for x in stride]), FALSE, hooks]
    return op_global('torch._utils', '_rebuild_tensor_v2') + op_tuple(args) + b'R'

def dict_of(pairs):
    return b'}(' + b''.join(op_str(k) + v for k, v in pairs) + b'u'

def state_dict(body):
    return PROTO + body + STOP

# ---- containers ------------------------------------------------------------------

def torch_zip(pkl, records=None, archive='archive', method=zipfile.ZIP_STORED, extra=(), pkl_only=False,
              byteorder='little'):
    """torch.save's zip: every record compressed with method, or data.pkl alone with pkl_only."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_STORED if pkl_only else method) as z:
        z.writestr(zipfile.ZipInfo(archive + '/data.pkl'), pkl, compress_type=method)
        z.writestr(archive + '/byteorder', byteorder)
        for k, v in (records or {}).items():
            z.writestr(archive + '/data/' + k, v)
        for name, v in extra:
            z.writestr(name, v)
        z.writestr(archive + '/version', '3\n')
    return b.getvalue()

LEGACY_MAGIC = 0x1950a86a20f9469cfc6c

def legacy(obj_pkl, keys, storages):
    """torch's legacy stream: magic, protocol, sys_info, object, keys, then storages."""
    out = PROTO + op_int(LEGACY_MAGIC) + STOP
    out += PROTO + op_int(1001) + STOP
    out += PROTO + dict_of([('protocol_version', op_int(1001)), ('little_endian', b'\x88'),
                            ('type_sizes', b'}')]) + STOP
    out += obj_pkl
    out += PROTO + b'(' + b''.join(op_str(k) for k in keys) + b'l' + STOP
    for numel, data in storages:
        out += struct.pack('<q', numel) + data
    return out

FOUR_FLOATS = struct.pack('<4f', 1, 2, 3, 4)

def good():
    return torch_zip(state_dict(dict_of([('w', tensor())])), {'0': FOUR_FLOATS})

def patch_cd(data, fn):
    """Apply fn(buf, cd_entry_offset, index) to every central directory entry."""
    buf = bytearray(data)
    eocd = buf.rfind(b'PK\x05\x06')
    n, = struct.unpack_from('<H', buf, eocd + 10)
    p, = struct.unpack_from('<I', buf, eocd + 16)
    for i in range(n):
        fn(buf, p, i)
        nl, xl, cl = struct.unpack_from('<HHH', buf, p + 28)
        p += 46 + nl + xl + cl
    return bytes(buf)

def cd_names(data):
    out = []
    def f(buf, p, i):
        nl, = struct.unpack_from('<H', buf, p + 28)
        out.append((p, bytes(buf[p + 46:p + 46 + nl])))
    patch_cd(data, f)
    return out

def rename_entry(data, old, new):
    """Same-length rename in both the local and central headers."""
    assert len(old) == len(new)
    return data.replace(old.encode(), new.encode())

# ---- the cases -------------------------------------------------------------------

def deep_marks(n=5000):
    # n MARKs open at once (each immediately popped later): a huge MARK stack
    body = b'(' * n + b'1' * n + dict_of([('w', tensor())])
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def deep_nesting(n):
    inner = dict_of([('w', tensor())])
    body = inner + b'\x85' * n  # tuple(tuple(...({'w': t},)...))
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def deep_late_nesting(n=60000):
    # n empty lists memoized first, then linked so that each is appended
    # before it gets its own child: nesting depth n that no container sees
    # growing while it is built
    body = bytearray(b']' + b'r' + struct.pack('<I', 0))  # (bytes += would copy it all each time)
    for i in range(1, n):
        body += b']r' + struct.pack('<I', i) + b'0'
    for i in range(n - 1, 0, -1):  # list[i-1].append(list[i]), outermost first
        body += b'j' + struct.pack('<I', i - 1) + b'j' + struct.pack('<I', i) + b'a0'
    body += b'j' + struct.pack('<I', n - 1) + dict_of([('w', tensor())]) + b'a0'
    body += b'j' + struct.pack('<I', 0)
    return torch_zip(state_dict(bytes(body)), {'0': FOUR_FLOATS})

def memo_unset():
    return torch_zip(state_dict(b'}(' + op_str('w') + b'h\x29u'), {})

def shared_million(n=1000000):
    # one tensor referenced n times from a list
    body = tensor() + b'q\x00' + b'0' + b'](' + b'h\x00' * n + b'e'
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def shared_doubling(levels=40):
    # x0 = tensor; x(k+1) = [xk, xk]: 2**levels paths through 2*levels objects
    body = tensor() + b'r' + struct.pack('<I', 0) + b'0'
    for k in range(levels):
        body += b'j' + struct.pack('<I', k) + b'j' + struct.pack('<I', k) + b'\x86r' + struct.pack('<I', k + 1) + b'0'
    body += b'j' + struct.pack('<I', levels)
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def dims_overflow():
    return torch_zip(state_dict(dict_of([('w', tensor(shape=(2**40, 2**40), stride=(1, 1)))])), {'0': FOUR_FLOATS})

def strides_overflow():
    return torch_zip(state_dict(dict_of([('w', tensor(shape=(4, 4), stride=(2**62, 1)))])), {'0': FOUR_FLOATS})

def storage_numel_overflow():
    return torch_zip(state_dict(dict_of([('w', tensor(numel=2**62))])), {'0': FOUR_FLOATS})

def offset_past_record():
    return torch_zip(state_dict(dict_of([('w', tensor(offset=100))])), {'0': FOUR_FLOATS})

def record_past_eof():
    data = bytearray(good())
    # grow data/0's sizes in the central directory (stored: both sizes)
    def f(buf, p, i):
        nl, = struct.unpack_from('<H', buf, p + 28)
        if bytes(buf[p + 46:p + 46 + nl]) == b'archive/data/0':
            struct.pack_into('<II', buf, p + 20, 1 << 30, 1 << 30)
    return patch_cd(data, f)

def legacy_past_eof():
    obj = state_dict(dict_of([('w', tensor(numel=1000, shape=(10, 100), stride=(100, 1)))]))
    return legacy(obj, ['0'], [(1000, b'\0' * 64)])  # 4000 bytes promised, 64 present

def zip_overlap():
    data = good()
    # point data/0's central entry at data.pkl's local header: two entries, one span
    def f(buf, p, i):
        nl, = struct.unpack_from('<H', buf, p + 28)
        if bytes(buf[p + 46:p + 46 + nl]) == b'archive/byteorder':
            struct.pack_into('<I', buf, p + 42, 0)
    return patch_cd(data, f)

def name_dotdot():
    return torch_zip(state_dict(dict_of([('w', tensor())])), {'0': FOUR_FLOATS},
                     extra=[('archive/../../etc/evil', b'x')])

def name_absolute():
    return torch_zip(state_dict(dict_of([('w', tensor())])), {'0': FOUR_FLOATS}, extra=[('/etc/evil', b'x')])

def duplicate_names():
    data = torch_zip(state_dict(dict_of([('w', tensor())])), {'0': FOUR_FLOATS, '1': FOUR_FLOATS})
    return rename_entry(data, 'archive/data/1', 'archive/data/0')

def zip_of(entries):
    """A zip of exactly these (name, bytes) entries, in this order (duplicates too)."""
    import warnings
    b = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # zipfile warns of duplicate names
        with zipfile.ZipFile(b, 'w') as z:
            for name, v in entries:
                z.writestr(zipfile.ZipInfo(name), v)
    return b.getvalue()

def system_call(cmd):
    return op_global('posix', 'system') + op_tuple([op_str(cmd)]) + b'R'

GOOD_PKL = state_dict(dict_of([('w', tensor())]))
EVIL_PKL = state_dict(dict_of([('w', tensor()), ('x', system_call('true'))]))

def case_duplicate_pickle():
    # torch's lookup of data.pkl finds DATA.pkl (checked: torch 1.13 and 2.15 run its payload)
    return zip_of([('archive/data.pkl', GOOD_PKL), ('archive/DATA.pkl', EVIL_PKL),
                   ('archive/data/0', FOUR_FLOATS), ('archive/version', b'3\n')])

def case_duplicate_pickle_hidden():
    # the other order: torch reads the benign one, a case-exact reader would take the payload
    return zip_of([('archive/DATA.pkl', EVIL_PKL), ('archive/data.pkl', GOOD_PKL),
                   ('archive/data/0', FOUR_FLOATS), ('archive/version', b'3\n')])

def case_duplicate_storage():
    return zip_of([('archive/data.pkl', GOOD_PKL), ('archive/byteorder', b'little'),
                   ('archive/data/0', FOUR_FLOATS), ('archive/DATA/0', struct.pack('<4f', 9, 9, 9, 9)),
                   ('archive/version', b'3\n')])

def case_only_record():
    # the only pickle is archive/Data.pkl: torch finds it as data.pkl and runs it
    return zip_of([('archive/Data.pkl', EVIL_PKL), ('archive/data/0', FOUR_FLOATS), ('archive/version', b'3\n')])

def cd_lies_offset():
    def f(buf, p, i):
        if i == 1:
            struct.pack_into('<I', buf, p + 42, 7)
    return patch_cd(good(), f)

def cd_lies_count():
    buf = bytearray(good())
    eocd = buf.rfind(b'PK\x05\x06')
    struct.pack_into('<HH', buf, eocd + 8, 60000, 60000)
    return bytes(buf)

def inflate_bomb_pickle():
    # data.pkl: a valid pickle padded with 64 MiB of zeros past its STOP, deflated to ~64 KiB
    pkl = state_dict(dict_of([('w', tensor())])) + b'\0' * (64 << 20)
    return torch_zip(pkl, {'0': FOUR_FLOATS}, method=zipfile.ZIP_DEFLATED)

def inflate_claim_storage():
    # data/0 claims 4 GiB - 1 inflated from a few bytes; the pickle agrees
    n = (1 << 30) - 1
    pkl = state_dict(dict_of([('w', tensor(numel=n, shape=(n,), stride=(1,)))]))
    data = torch_zip(pkl, {'0': b'\0' * 4096}, method=zipfile.ZIP_DEFLATED)
    def f(buf, p, i):
        nl, = struct.unpack_from('<H', buf, p + 28)
        if bytes(buf[p + 46:p + 46 + nl]) == b'archive/data/0':
            struct.pack_into('<I', buf, p + 24, n * 4)
    return patch_cd(data, f)

def big_pickle():
    # a 2 MiB string inside an otherwise normal checkpoint
    return torch_zip(state_dict(dict_of([('w', tensor()), ('blob', op_str('x' * (2 << 20)))])), {'0': FOUR_FLOATS})

def big_legacy_pickle():
    obj = state_dict(dict_of([('w', tensor()), ('blob', op_str('x' * (3 << 20)))]))
    return legacy(obj, ['0'], [(4, FOUR_FLOATS)])

def many_objects(n=5000):
    body = b']q\x00(' + b'N' * n + b'e' + dict_of([('w', tensor())]) + b'a'
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def many_memo_slots(n=3000):
    body = b']' + b''.join(b'r' + struct.pack('<I', i) for i in range(n)) + b'0' + dict_of([('w', tensor())])
    return torch_zip(state_dict(body), {'0': FOUR_FLOATS})

def rebuild_v2_short_args():
    # _rebuild_tensor_v2 with 4 arguments: readable, but a cast must not copy
    # the missing requires_grad and hooks (it read past the argument array)
    args = [storage_pid('0', 4), op_int(0), op_tuple([op_int(4)]), op_tuple([op_int(1)])]
    t = op_global('torch._utils', '_rebuild_tensor_v2') + op_tuple(args) + b'R'
    return torch_zip(state_dict(dict_of([('w', t)])), {'0': FOUR_FLOATS})

def view_stride0(n=17000000):
    """One float seen as 17M floats through stride 0: 68 MB written out whole."""
    return torch_zip(state_dict(dict_of([('w', tensor(numel=1, shape=(n,), stride=(0,)))])), {'0': FOUR_FLOATS[:4]})

def tensor_named_metadata():
    return torch_zip(state_dict(dict_of([('__metadata__', tensor()), ('w', tensor())])), {'0': FOUR_FLOATS})

def build_replaces_tensor():
    """BUILD with a 4-tuple on a rebuilt tensor: torch calls set_() with it, replacing the data."""
    state = op_tuple([storage_pid('0', 4), op_int(2), op_tuple([op_int(2)]), op_tuple([op_int(1)])])
    return torch_zip(state_dict(dict_of([('w', tensor() + state + b'b')])), {'0': FOUR_FLOATS})

def setitems_into_tensor():
    """SETITEM into a rebuilt tensor: torch would write into its data."""
    return torch_zip(state_dict(dict_of([('w', tensor() + op_int(0) + op_int(7) + b's')])), {'0': FOUR_FLOATS})

def not_a_checkpoint():
    return b'hello, this is not a checkpoint at all\n'

def truncated():
    return good()[:-30]

# ---- distributed checkpoints (torch.distributed.checkpoint): a folder, .metadata and .distcp ----

DCPM = 'torch.distributed.checkpoint.metadata'

def newobj(mod, cls, state=None):
    """cls.__new__(cls) with BUILD state, as pickle.dump writes a dataclass."""
    return op_global(mod, cls) + b')\x81' + (state + b'b' if state is not None else b'')

def dict_raw(pairs):
    return b'}(' + b''.join(k + v for k, v in pairs) + b'u'

def torch_size(ints):
    return op_global('torch', 'Size') + op_tuple([op_tuple([op_int(x) for x in ints])]) + b'R'

def chunk_md(off, sizes):
    return newobj(DCPM, 'ChunkStorageMetadata', dict_of([('offsets', torch_size(off)), ('sizes', torch_size(sizes))]))

def tensor_md(shape, chunks, dtype='float32'):
    props = newobj(DCPM, 'TensorProperties', op_tuple([op_global('torch', dtype), b'N', FALSE, b'N', FALSE]))
    lst = b'](' + b''.join(chunk_md(o, z) for o, z in chunks) + b'e'
    return newobj(DCPM, 'TensorStorageMetadata', dict_of([('properties', props), ('size', torch_size(shape)),
                                                          ('chunks', lst)]))

def meta_index(fqn, off):
    return newobj(DCPM, 'MetadataIndex', dict_of([('fqn', op_str(fqn)), ('offset', torch_size(off) if off is not None
                                                                                   else b'N'), ('index', b'N')]))

def storage_info(path, offset, length, extra=()):
    return newobj('torch.distributed.checkpoint.filesystem', '_StorageInfo',
                  dict_of([('relative_path', op_str(path)), ('offset', op_int(offset)), ('length', op_int(length))]
                          + list(extra)))

def chunk_blob(sizes, fill=1.0, stype='FloatStorage', stride=None, byteorder='little'):
    n = 1
    for x in sizes:
        n *= x
    if stride is None:
        stride, acc = [], 1
        for x in reversed(sizes):
            stride.insert(0, acc)
            acc *= x
    return torch_zip(state_dict(tensor(numel=n, shape=tuple(sizes), stride=tuple(stride), stype=stype)),
                     {'0': struct.pack('<%df' % n, *([fill] * n)) if stype == 'FloatStorage' else b'\0' * (8 * n)},
                     byteorder=byteorder)

def dcp(shape=(2, 2), chunks=(((0, 0), (1, 2)), ((1, 0), (1, 2))), blobs=None, spans=None, step=None,
        path='__0_0.distcp', planner=b'N', files=None, extra_info=(), dtype='float32'):
    """A distributed checkpoint: tensor 'w' of shape in chunks (offsets, sizes), each stored as its own
    torch.save archive in one .distcp file, and a pickled item 'step' (7). blobs, spans (offset, length
    per item), step (the item's bytes) and files override the parts; returns {relative path: bytes}."""
    blobs = list(blobs) if blobs is not None else [chunk_blob(z) for _, z in chunks]
    step = step if step is not None else torch_zip(PROTO + op_int(7) + STOP)
    data, auto = b'', []
    for b in blobs + [step]:
        auto.append((len(data), len(b)))
        data += b
    spans = spans or auto
    storage = [(meta_index('w', o), storage_info(path, *spans[i], extra=extra_info)) for i, (o, _) in enumerate(chunks)]
    storage.append((meta_index('step', None), storage_info(path, *spans[len(chunks)])))
    md = PROTO + newobj(DCPM, 'Metadata', dict_of([
        ('state_dict_metadata', dict_raw([(op_str('w'), tensor_md(shape, chunks, dtype)),
                                          (op_str('step'), newobj(DCPM, 'BytesStorageMetadata'))])),
        ('planner_data', planner), ('storage_data', dict_raw(storage)), ('version', op_str('1.0.0'))])) + STOP
    out = {'.metadata': md, '__0_0.distcp': data}
    out.update(files or {})
    return out

def dcp_evil_step():
    """A pickled item whose archive calls posix.system: DCP loads it with torch.load(weights_only=False)."""
    evil = torch_zip(PROTO + op_global('posix', 'system') + op_tuple([op_str('echo pwned')]) + b'R' + STOP)
    return dcp(step=evil)

def dcp_item_case_duplicate():
    """A pickled item's archive with data.pkl twice, differing in case: DCP's torch.load reads the one torch's
    lookup finds, DATA.pkl here (checked with torch in tests/security/torch_accepts.py)"""
    step = zip_of([('archive/DATA.pkl', PROTO + system_call('true') + STOP), ('archive/data.pkl', PROTO + op_int(7) + STOP),
                   ('archive/version', b'3\n')])
    return dcp(step=step)

def dcp_chunk_case_duplicate():
    """A chunk's archive with data/0 and DATA/0"""
    pkl = state_dict(tensor(numel=2, shape=(1, 2), stride=(2, 1)))
    blob = zip_of([('archive/data.pkl', pkl), ('archive/data/0', struct.pack('<2f', 1, 1)),
                   ('archive/DATA/0', struct.pack('<2f', 9, 9)), ('archive/version', b'3\n')])
    return dcp(blobs=[chunk_blob((1, 2)), blob])

def dcp_evil_planner():
    return dcp(planner=op_global('posix', 'system') + op_tuple([op_str('echo pwned')]) + b'R')

def dcp_many_chunks(n=20000):
    """n two-element chunks, one starting at each element of an n-element tensor: refused by counting,
    before any chunk is read or swept (no work per pair of chunks)."""
    return dcp(shape=(n,), chunks=[((i,), (2,)) for i in range(n - 1)], blobs=[b''] * (n - 1))

def dcp_not_metadata():
    return {'.metadata': state_dict(dict_of([('w', op_int(1))])), '__0_0.distcp': b''}

# name -> (generator, runs). A run: (args before FILE, expected fragment or None
# for success, exit status). 'OUT' in args is replaced by an output path.
INSPECT_AND_MOVE = lambda frag: [([], frag, 3), (['to-cpu-out'], frag, 3)]
CONFUSED = lambda i, a, j, b: [(args, "zip entries %d '%s' and %d '%s' are one name to torch's reader, which looks names "
                                     "up ignoring letter case (and lists them cut at a NUL byte or at 511 bytes): which "
                                     "one a reader takes is not the same everywhere; tensorctl read what torch's lookup "
                                     "finds" % (i, a, j, b), 4) for args in ([], ['to-cpu-out'], ['convert-st'])]
DCP_RUNS = lambda frag: [([], frag, 3), (['consolidate-out'], frag, 3)]

CASES = {
    'deep_marks': (deep_marks, [([], 'raise with --max-depth', 3), (['to-cpu-out'], 'raise with --max-depth', 3),
                                (['--max-depth', '1300'], None, 0), (['to-cpu-out', '--max-depth', '1300'], None, 0)]),
    'deep_nesting': (lambda: deep_nesting(1500), [([], 'raise with --max-depth', 3),
                                                  (['to-cpu-out'], 'raise with --max-depth', 3),
                                                  (['--max-depth', '2000'], None, 0),
                                                  (['to-cpu-out', '--max-depth', '2000'], None, 0)]),
    'deep_nesting_extreme': (lambda: deep_nesting(99000), [(['--max-depth', '100000'], 'ANY', None),
                                                           (['to-cpu-out', '--max-depth', '100000'], 'ANY', None)]),
    'deep_late_nesting': (deep_late_nesting, INSPECT_AND_MOVE('raise with --max-depth')),
    'memo_unset': (memo_unset, INSPECT_AND_MOVE('memo slot 41 read but never set')),
    'shared_million': (shared_million, [([], 'ANY', None), (['to-cpu-out'], 'ANY', None)]),
    'shared_doubling': (shared_doubling, INSPECT_AND_MOVE('shared very many times')),
    'dims_overflow': (dims_overflow, INSPECT_AND_MOVE('dimensions overflow 64 bits')),
    'strides_overflow': (strides_overflow, INSPECT_AND_MOVE('overflow')),
    'storage_numel_overflow': (storage_numel_overflow, INSPECT_AND_MOVE('overflow')),
    'offset_past_record': (offset_past_record, INSPECT_AND_MOVE('offset or strides past the storage')),
    'record_past_eof': (record_past_eof, INSPECT_AND_MOVE('runs past the end of the file')),
    'legacy_past_eof': (legacy_past_eof, INSPECT_AND_MOVE('past the end of the file')),
    'zip_overlap': (zip_overlap, INSPECT_AND_MOVE('overlap')),
    # torch's reader takes names as they are (no paths are made of them): read as torch reads it
    'name_dotdot': (name_dotdot, [([], None, 0), (['to-cpu-out'], None, 0)]),
    'name_absolute': (name_absolute, INSPECT_AND_MOVE("zip entry '/etc/evil' is outside the top folder 'archive/' "
                                                      "(torch refuses this)")),
    # two entries one name to torch's reader (exact or letter case): a hazard, never rewritten
    'duplicate_names': (duplicate_names, CONFUSED(2, 'archive/data/0', 3, 'archive/data/0')),
    'case_duplicate_pickle': (case_duplicate_pickle, [([], 'loading it runs posix.system', 4),
                                                      (['to-cpu-out'], 'loading it runs posix.system', 4)]),
    'case_duplicate_pickle_hidden': (case_duplicate_pickle_hidden,
                                     CONFUSED(0, 'archive/DATA.pkl', 1, 'archive/data.pkl')),
    'case_duplicate_storage': (case_duplicate_storage, CONFUSED(2, 'archive/data/0', 3, 'archive/DATA/0')),
    'case_only_record': (case_only_record, [([], 'loading it runs posix.system (runs shell commands and touches files)', 4),
                                            (['to-cpu-out'], 'posix.system', 4)]),
    'cd_lies_offset': (cd_lies_offset, INSPECT_AND_MOVE('the central directory lies')),
    'cd_lies_count': (cd_lies_count, INSPECT_AND_MOVE('cannot fit in a central directory')),
    'inflate_bomb_pickle': (inflate_bomb_pickle, [(['--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                                  (['to-cpu-out', '--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                                  ([], '--max-inflate-ratio', 3),
                                                  (['to-cpu-out'], '--max-inflate-ratio', 3),
                                                  (['--max-inflate-ratio', '2000'], None, 0)]),
    'inflate_claim_storage': (inflate_claim_storage, INSPECT_AND_MOVE("beyond deflate's limit")),
    'big_pickle': (big_pickle, [(['--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                (['to-cpu-out', '--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                (['--max-pickle-size', '3MiB'], None, 0), ([], None, 0)]),
    'big_legacy_pickle': (big_legacy_pickle, [(['--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                              (['to-cpu-out', '--max-pickle-size', '1MiB'], '--max-pickle-size', 3),
                                              ([], None, 0), (['to-cpu-out'], None, 0)]),
    'many_objects': (many_objects, [(['--max-objects', '1000'], '--max-objects', 3),
                                    (['to-cpu-out', '--max-objects', '1000'], '--max-objects', 3),
                                    ([], None, 0), (['to-cpu-out'], None, 0)]),
    'many_memo_slots': (many_memo_slots, [(['--max-objects', '2000'], 'raise with --max-objects', 3),
                                          (['to-cpu-out', '--max-objects', '2000'], 'raise with --max-objects', 3),
                                          ([], None, 0), (['to-cpu-out'], None, 0)]),
    'rebuild_v2_short_args': (rebuild_v2_short_args, [([], None, 0), (['to-cpu-out'], None, 0),
                                                      (['to-cpu-out', '--dtype', 'bfloat16'], 'needs 6', 3)]),
    'view_stride0': (view_stride0, [([], None, 0), (['convert-st'], '--max-expand', 2),
                                    (['convert-st', '--max-expand', '20000000'], None, 0)]),
    'tensor_named_metadata': (tensor_named_metadata, [([], None, 0), (['convert-st'], 'keeps for its metadata', 2),
                                                      (['convert-st', '--drop', '__metadata__'], None, 0)]),
    'build_replaces_tensor': (build_replaces_tensor, INSPECT_AND_MOVE('replaces its data')),
    'setitems_into_tensor': (setitems_into_tensor, INSPECT_AND_MOVE('assigns items into the rebuilt tensor')),
    'byteorder_unknown': (lambda: torch_zip(state_dict(dict_of([('w', tensor())])), {'0': FOUR_FLOATS},
                                            byteorder='middle'), INSPECT_AND_MOVE("neither 'little' nor 'big'")),
    'not_a_checkpoint': (not_a_checkpoint, INSPECT_AND_MOVE('not a checkpoint')),
    'truncated': (truncated, INSPECT_AND_MOVE('truncated')),
    # distributed checkpoints: a folder (inspect DIR, consolidate DIR -o OUT)
    'dcp_good': (dcp, [([], None, 0), (['consolidate-out'], None, 0)]),
    'dcp_missing_chunk': (lambda: dcp(chunks=[((0, 0), (1, 2))]), DCP_RUNS('a chunk is missing')),
    'dcp_overlapping_chunks': (lambda: dcp(chunks=[((0, 0), (2, 2)), ((1, 0), (1, 2))]), DCP_RUNS('chunks overlap')),
    'dcp_overlap_same_count': (lambda: dcp(chunks=[((0, 0), (1, 2)), ((0, 1), (2, 1))]),
                               DCP_RUNS('overlap at element [0, 1]')),
    'dcp_shape_not_covered': (lambda: dcp(shape=(4, 2)), DCP_RUNS('a chunk is missing')),
    'dcp_chunk_past_shape': (lambda: dcp(chunks=[((0, 0), (1, 2)), ((1, 1), (1, 2))]), DCP_RUNS('reaches past its shape')),
    'dcp_chunk_past_file': (lambda: dcp(spans=[(0, 10**6), (10**6, 10), (10**6 + 10, 10)]),
                            DCP_RUNS('lies past the end of the file')),
    'dcp_items_overlap': (lambda: dcp(spans=[(0, 900), (500, 900), (1400, 300)]), DCP_RUNS('overlap at byte')),
    'dcp_chunk_wrong_shape': (lambda: dcp(blobs=[chunk_blob((1, 2)), chunk_blob((2, 1))]), DCP_RUNS('its archive holds shape')),
    'dcp_chunk_wrong_dtype': (lambda: dcp(blobs=[chunk_blob((1, 2)), chunk_blob((1, 2), stype='DoubleStorage')]),
                              DCP_RUNS('its archive holds float64')),
    'dcp_chunk_big_endian': (lambda: dcp(blobs=[chunk_blob((1, 2)), chunk_blob((1, 2), byteorder='big')]),
                             DCP_RUNS('its archive is big-endian')),
    'dcp_chunk_not_an_archive': (lambda: dcp(blobs=[chunk_blob((1, 2)), b'\x80\x02N.' * 100]), DCP_RUNS('not a torch.save archive')),
    'dcp_missing_file': (lambda: dcp(path='__9_0.distcp'), DCP_RUNS('incomplete copy of the checkpoint')),
    'dcp_file_escapes': (lambda: dcp(path='../../../etc/passwd'), DCP_RUNS("not a plain file name")),
    'dcp_file_is_symlink': (lambda: dcp(path='link.distcp', files={'link.distcp': ('symlink', '__0_0.distcp')}),
                            DCP_RUNS('symbolic link')),
    'dcp_transform': (lambda: dcp(extra_info=[('transform_descriptors', b'](' + op_str('zstd') + b'e')]),
                      DCP_RUNS('through a transform (zstd)')),
    'dcp_dangerous_item': (dcp_evil_step, [([], 'posix.system', 4), (['consolidate-out'], 'posix.system', 4)]),
    'dcp_dangerous_planner': (dcp_evil_planner, [([], 'posix.system', 4), (['consolidate-out'], 'posix.system', 4)]),
    'dcp_many_chunks': (dcp_many_chunks, DCP_RUNS('chunks overlap')),
    'dcp_item_case_duplicate': (dcp_item_case_duplicate,
                                [(args, 'loading it runs posix.system', 4) for args in ([], ['consolidate-out'])]),
    'dcp_chunk_case_duplicate': (dcp_chunk_case_duplicate,
                                 [(args, "zip entries 1 'archive/data/0' and 2 'archive/DATA/0' are one name to torch's "
                                         "reader", 4) for args in ([], ['consolidate-out'])]),
    'dcp_not_metadata': (dcp_not_metadata, DCP_RUNS('not a torch.distributed.checkpoint Metadata')),
}

# ---- checking ----------------------------------------------------------------------

def leftovers(folder, out_name):
    return [n for n in os.listdir(folder) if n == out_name or n.startswith('.' + out_name + '.tensorctl-')]

def write_case(gen, path):
    """The case's file, or for a distributed checkpoint its folder (path without .pt)."""
    data = gen()
    if not isinstance(data, dict):
        with open(path, 'wb') as f:
            f.write(data)
        return path
    path = path[:-3]
    os.makedirs(path)
    for rel, v in data.items():
        os.makedirs(os.path.dirname(os.path.join(path, rel)), exist_ok=True)
        if isinstance(v, tuple):
            os.symlink(v[1], os.path.join(path, rel))
        else:
            with open(os.path.join(path, rel), 'wb') as f:
                f.write(v)
    return path

def snapshot(path):
    if os.path.islink(path):
        return os.readlink(path)
    if not os.path.isdir(path):
        return open(path, 'rb').read()
    return {n: snapshot(os.path.join(path, n)) for n in sorted(os.listdir(path))}

def run_case(tensorctl, name, tmp):
    gen, runs = CASES[name]
    path = write_case(gen, os.path.join(tmp, name + '.pt'))
    before = snapshot(path)
    failures = []
    for args, frag, status in runs:
        outdir = tempfile.mkdtemp(dir=tmp)
        out = os.path.join(outdir, 'out.pt')
        if args and args[0] == 'to-cpu-out':
            cmd = [tensorctl, 'to-cpu', '-q'] + args[1:] + [path, '-o', out]
        elif args and args[0] == 'convert-st':
            out = os.path.join(outdir, 'out.safetensors')
            cmd = [tensorctl, 'convert', '-q'] + args[1:] + [path, out]
        elif args and args[0] == 'consolidate-out':
            cmd = [tensorctl, 'consolidate', '-q'] + args[1:] + [path, '-o', out]
        else:
            # -q: the report is not judged here; an unsafe verdict is then the one stderr line
            cmd = [tensorctl, 'inspect', '-q'] + args + [path]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        except subprocess.TimeoutExpired:
            failures.append('%s: hung (no answer in 120 s)' % ' '.join(cmd[1:]))
            continue
        err = p.stderr.decode(errors='replace').splitlines()
        what = ' '.join(cmd[1:])
        if p.returncode < 0:
            failures.append('%s: killed by signal %d' % (what, -p.returncode))
        elif frag is None:
            if p.returncode != 0:
                failures.append('%s: exit %d, expected success; stderr: %s' % (what, p.returncode, err))
        else:
            if p.returncode == 0 and frag != 'ANY':
                failures.append('%s: accepted, expected a failure with "%s"' % (what, frag))
            if p.returncode != 0:
                if status is not None and p.returncode != status:
                    failures.append('%s: exit %d, expected %d; stderr: %s' % (what, p.returncode, status, err))
                if len(err) != 1:
                    failures.append('%s: %d stderr lines, expected 1: %s' % (what, len(err), err))
                elif not (err[0].startswith('tensorctl: %s: ' % path) or
                          (os.path.isdir(path) and err[0].startswith('tensorctl: %s/' % path))):
                    failures.append('%s: stderr does not name the file: %s' % (what, err[0]))
                elif frag != 'ANY' and frag not in err[0]:
                    failures.append('%s: stderr lacks "%s": %s' % (what, frag, err[0]))
                left = leftovers(outdir, 'out.pt') + leftovers(outdir, 'out.safetensors')
                if left:
                    failures.append('%s: left %s behind' % (what, left))
        shutil.rmtree(outdir, ignore_errors=True)
    if snapshot(path) != before:
        failures.append('the input changed')
    return failures

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('action', choices=['list', 'gen', 'check'])
    ap.add_argument('outdir', nargs='?')
    ap.add_argument('--tensorctl')
    ap.add_argument('--case')
    ap.add_argument('--tmp')
    a = ap.parse_args()
    if a.action == 'list':
        print('\n'.join(CASES))
        return 0
    if a.action == 'gen':
        os.makedirs(a.outdir, exist_ok=True)
        for name, (gen, _) in CASES.items():
            write_case(gen, os.path.join(a.outdir, name + '.pt'))
        return 0
    if not a.tensorctl or a.case not in CASES:
        print('FAIL: check needs --tensorctl and one of the cases of `hostile.py list` (got %r)' % a.case)
        return 2
    if not CASES[a.case][1]:
        print('FAIL %s: the case has no run: it checks nothing' % a.case)
        return 1
    tmp = tempfile.mkdtemp(prefix='hostile-', dir=a.tmp)
    try:
        fails = run_case(a.tensorctl, a.case, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print('FAIL %s: %s' % (a.case, f))
    if not fails:
        print('ok %s' % a.case)
    return 1 if fails else 0

if __name__ == '__main__':
    sys.exit(main())
