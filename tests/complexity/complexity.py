#!/usr/bin/env python3
"""Complexity tests: every adversarial shape built at size n and 8n (byte by
byte, no torch; nothing is unpickled), the relevant tensorctl commands run on
both, and the cost compared. Promise 5 of docs/security.md: time about
linear, memory proportional to the input, on any input.

    complexity.py list                          case names, one a line
    complexity.py check --tensorctl T --case NAME [--meter cpu|callgrind] [--runner R] [--tmp DIR]
                                                exit 0 pass, 1 fail (one line per command)
    complexity.py report --tensorctl T [--case NAME ...] [...]   a table of all (or the given) cases
    complexity.py gen OUTDIR [--case NAME ...] [--scale K]       write the inputs at K x n
    complexity.py profile --tensorctl T --case NAME [--scale K] [--command I]
                                                callgrind_annotate of each run (for diagnosis)

A case is one input shape and the commands run on it. For each command:

  time    cost(8n) / max(cost(n), floor) <= 2.5 x growth, where growth is the
          ratio of the input sizes in bytes (about 8, so the limit is about 20:
          linear gives 8, n log n about 10, quadratic 64). cost is the
          child's user+sys CPU time (min of 3 runs at n) or, with --meter
          callgrind, its instruction count (repeatable).
  memory  (rss(8n) - base) / max(rss(n) - base, 8 MiB) <= 1.5 x growth
          (ru_maxrss of the child; base: tensorctl on a tiny checkpoint).
  size    rss - base <= 256 x input bytes + 64 MiB, at n and at 8n: memory
          proportional to the input (catches bombs whose growth is linear
          but whose constant is not, e.g. 2^k paths through k objects, or a
          deflated pickle).
  output  bytes written <= 16 x input bytes + 16 MiB; every run is held to
          RLIMIT_FSIZE 100 MiB, so nothing ever writes more than that.

An input refused with a limit error (exit 3, the message naming the --max-*
option that raises it) is bounded, but the refusal is measured like any run
and must be cheap too. Runs are held to an address-space cap (1.5 GiB) and a
CPU budget: the 8n run may use 1.3 x (the time limit) x cost(n) and is
killed past it (a failure), so failing cases stay quick; `report` allows
up to 80 x cost(n) (at most 60 s) so that its table shows the actual ratios.

Runs go through cplx_run (cplx_run.c; built with cc when --runner is not
given): a child forked by Python would count Python's own pages in its
ru_maxrss. The child runs without MALLOC_* variables (meson test sets
MALLOC_PERTURB_, whose memset on every malloc and free is not tensorctl's
cost). With --meter callgrind the memory rules are not applied (valgrind's
RSS is its own). Inputs and outputs go to /dev/shm when it is usable (an
fsync there costs nothing and does not vary), else to the system's temporary
folder; outputs are removed after every run.
"""
import argparse, json, math, os, shutil, signal, struct, subprocess, sys, tempfile, time, zipfile

# ---- pickle bytes (the style of tests/hostile/hostile.py) ------------------------

PROTO2 = b'\x80\x02'
FALSE = b'\x89'
TRUE = b'\x88'
STOP = b'.'
MARK = b'('
MEMOIZE = b'\x94'

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'hostile'))
import hostile as H  # noqa: E402  (the pickle and container builders every hostile-input test uses)

op_int, op_str, op_global = H.op_int, H.op_str, H.op_global


class Pickle:
    """An opcode list with a memo, as CPython's pickler writes it: protocol 2
    memoizes with BINPUT/LONG_BINPUT, protocol 4 with MEMOIZE (and frames)."""

    def __init__(self, proto=2):
        self.proto = proto
        self.ops = []
        self.n = 0
        self.cache = {}

    def emit(self, *ops):
        self.ops.extend(ops)

    def put(self):
        i = self.n
        self.n += 1
        if self.proto >= 4:
            self.ops.append(MEMOIZE)
        elif i < 256:
            self.ops.append(b'q' + bytes([i]))
        else:
            self.ops.append(b'r' + struct.pack('<I', i))
        return i

    def get(self, i):
        self.ops.append(b'h' + bytes([i]) if i < 256 else b'j' + struct.pack('<I', i))

    def empty(self, op):
        """An empty dict (b'}') or list (b']'), memoized: its memo index."""
        self.ops.append(op)
        return self.put()

    def obj(self, mod, name):
        """mod.name() built with NEWOBJ (the state follows: BUILD), memoized."""
        self.glob(mod, name)
        self.ops.append(b')\x81')
        return self.put()

    def ordered_dict(self):
        """collections.OrderedDict(), memoized."""
        self.glob('collections', 'OrderedDict')
        self.ops.append(b')R')
        return self.put()

    def str(self, s):
        b = s.encode()
        if self.proto >= 4 and len(b) < 256:
            self.ops.append(b'\x8c' + bytes([len(b)]) + b)
        else:
            self.ops.append(op_str(s))

    def key(self, s):
        """A string memoized as the pickler memoizes it (each new one): a dict key, mostly."""
        self.str(s)
        return self.put()

    def mstr(self, s):
        """A string written once and fetched from the memo after."""
        k = ('s', s)
        if k in self.cache:
            self.get(self.cache[k])
        else:
            self.str(s)
            self.cache[k] = self.put()

    def glob(self, mod, name):
        k = ('g', mod, name)
        if k in self.cache:
            self.get(self.cache[k])
            return
        if self.proto >= 4:
            self.str(mod)
            self.put()
            self.str(name)
            self.put()
            self.ops.append(b'\x93')
        else:
            self.ops.append(op_global(mod, name))
        self.cache[k] = self.put()

    def int(self, v):
        self.ops.append(op_int(v))

    def tuple_of_ints(self, vals):
        if not vals:
            self.ops.append(b')')
            return
        body = [op_int(v) for v in vals]
        if len(vals) <= 3:
            self.ops.extend(body)
            self.ops.append(bytes([0x84 + len(vals)]))
        else:
            self.ops.append(MARK)
            self.ops.extend(body)
            self.ops.append(b't')
        self.put()

    def persid(self, key, numel, stype='FloatStorage', loc='cpu', smod='torch'):
        self.ops.append(MARK)
        self.mstr('storage')
        self.glob(smod, stype)
        self.mstr(key)
        self.mstr(loc)
        self.int(numel)
        self.ops.append(b't')
        self.put()
        self.ops.append(b'Q')

    def tensor(self, key='0', numel=4, offset=0, shape=(4,), stride=(1,), stype='FloatStorage', pid_memo=None,
               dtype=None):
        """_rebuild_tensor_v2 (or v3 with dtype, on an UntypedStorage); pid_memo: reuse a memoized storage."""
        self.glob('torch._utils', '_rebuild_tensor_v3' if dtype else '_rebuild_tensor_v2')
        self.ops.append(MARK)
        if pid_memo is not None:
            self.get(pid_memo)
        elif dtype:
            self.persid(key, numel, 'UntypedStorage', smod='torch.storage')
        else:
            self.persid(key, numel, stype)
        self.int(offset)
        self.tuple_of_ints(list(shape))
        self.tuple_of_ints(list(stride))
        self.ops.append(FALSE)
        self.ordered_dict()
        if dtype:
            self.glob('torch', dtype)
        self.ops.append(b't')
        self.put()
        self.ops.append(b'R')
        return self.put()

    def storage_memo(self, key, numel, stype='FloatStorage'):
        """A persistent id pushed, memoized and popped: later tensors fetch it (one pid for many tensors)."""
        self.persid(key, numel, stype)
        i = self.put()
        self.ops.append(b'0')
        return i

    def bytes(self):
        if self.proto < 4:
            return PROTO2 + b''.join(self.ops) + STOP
        # frames of about 64 KiB on opcode boundaries, as CPython's framer
        out = [b'\x80' + bytes([self.proto])]
        cur, size = [], 0
        for o in self.ops + [STOP]:
            cur.append(o)
            size += len(o)
            if size >= 65536:
                out.append(b'\x95' + struct.pack('<Q', size) + b''.join(cur))
                cur, size = [], 0
        if cur:
            out.append(b'\x95' + struct.pack('<Q', size) + b''.join(cur))
        return b''.join(out)


def batched(p, keys, item, setitems=True):
    """MARK ... SETITEMS (or APPENDS) in batches of 1000, as the pickler writes them: item(k)
    emits the ops of one entry, for each k of keys."""
    keys = list(keys)
    for i in range(0, len(keys), 1000):
        p.emit(MARK)
        for k in keys[i:i + 1000]:
            item(k)
        p.emit(b'u' if setitems else b'e')


def w_dict(p, **tensor):
    """Open {'w': tensor, ...} on p, its MARK left open for more items (SETITEMS closes it):
    (the dict's memo index, the tensor's). tensor: Pickle.tensor's arguments."""
    dm = p.empty(b'}')
    p.emit(MARK)
    p.key('w')
    return dm, p.tensor(**tensor)


def tiny_sd():
    """The pickle of {'w': a tensor of four floats}."""
    p = Pickle(2)
    w_dict(p)
    p.emit(b'u')
    return p.bytes()

# ---- containers --------------------------------------------------------------------


def torch_zip(pkl, records=None, archive='archive', method=zipfile.ZIP_STORED, extra=()):
    return H.torch_zip(pkl, records, archive, method, extra, pkl_only=True)


legacy = H.legacy


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, bytes)] laid out in order."""
    hdr, data, pos = {}, [], 0
    if metadata is not None:
        hdr['__metadata__'] = metadata
    for name, dt, shape, b in tensors:
        hdr[name] = {'dtype': dt, 'shape': list(shape), 'data_offsets': [pos, pos + len(b)]}
        data.append(b)
        pos += len(b)
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    return struct.pack('<Q', len(h)) + h + b''.join(data)


F1 = struct.pack('<f', 1.0)


def write(path, data):
    with open(path, 'wb') as f:
        f.write(data)
    return path


def in_pt(d, pkl, records=None, **zip_args):
    """d/in.pt: a torch zip of pkl and records (by default storage '0' of four floats)."""
    return write(os.path.join(d, 'in.pt'), torch_zip(pkl, records or {'0': F1 * 4}, **zip_args))


def in_st(d, tensors, metadata=None):
    """d/in.safetensors (see safetensors)."""
    return write(os.path.join(d, 'in.safetensors'), safetensors(tensors, metadata))

# ---- the shapes ----------------------------------------------------------------------
# Each generator writes its input(s) into folder d for size n and returns the
# path tensorctl is given.


def g_vocab(d, n, proto):
    # a state_dict plus a tokenizer vocabulary: {'w': tensor, 'vocab': {str: int}}
    p = Pickle(proto)
    w_dict(p)
    p.key('vocab')
    p.empty(b'}')
    batched(p, range(n), lambda i: (p.key('tok%07d' % i), p.int(i)))
    p.emit(b'u')
    return in_pt(d, p.bytes())


def g_many_globals(d, n):
    # n distinct (harmless) globals in a list next to the state_dict
    p = Pickle(2)
    w_dict(p)
    p.key('objects')
    p.empty(b']')
    batched(p, range(n), lambda i: p.glob('userlib.m%d' % (i % 97), 'Thing%d' % i), setitems=False)
    p.emit(b'u')
    return in_pt(d, p.bytes())


def st_shards(d, shards, meta_total=True):
    """shards: {file: [(name, bytes)]} of F32 vectors; writes them and model.safetensors.index.json."""
    wm, total = {}, 0
    for f, ts in shards.items():
        write(os.path.join(d, f), safetensors([(nm, 'F32', [len(b) // 4], b) for nm, b in ts]))
        for nm, b in ts:
            wm[nm] = f
            total += len(b)
    ix = {'metadata': {'total_size': total}, 'weight_map': wm}
    return write(os.path.join(d, 'model.safetensors.index.json'), json.dumps(ix, indent=2).encode())


def g_index_entries(d, n, nshards=8):
    per = -(-n // nshards)
    sh = {}
    for s in range(nshards):
        f = 'model-%05d-of-%05d.safetensors' % (s + 1, nshards)
        sh[f] = [('model.layers.%d.weight' % i, F1) for i in range(s * per, min(n, (s + 1) * per))]
    return st_shards(d, sh)


def g_index_shards(d, n):
    sh = {'model-%05d-of-%05d.safetensors' % (i + 1, n): [('layer.%d.weight' % i, F1)] for i in range(n)}
    return st_shards(d, sh)


def g_index_one_shard(d, n):
    return st_shards(d, {'model-00001-of-00001.safetensors': [('w.%d' % i, F1) for i in range(n)]})


def g_shared_doubling(d, n):
    # x0 = {'w': tensor}; x(k+1) = {K1: xk, K2: xk} with two long memoized keys:
    # 2^n paths through 2n objects, each path a name of about 200 n bytes
    p = Pickle(2)
    k1, k2 = 'a' * 200, 'b' * 200
    prev, _ = w_dict(p)
    p.emit(b'u', b'0')
    p.mstr(k1)
    p.emit(b'0')
    p.mstr(k2)
    p.emit(b'0')
    for _ in range(n):
        cur = p.empty(b'}')
        p.emit(MARK)
        p.mstr(k1)
        p.get(prev)
        p.mstr(k2)
        p.get(prev)
        p.emit(b'u', b'0')
        prev = cur
    p.get(prev)
    return in_pt(d, p.bytes())


def g_deep_names(d, n, depth=200):
    # a chain of `depth` dicts under one memoized 255-byte key, and n tensors at
    # its bottom (views of one storage through one persistent id): every tensor's
    # name is about 51 KB, from about 40 bytes of pickle each
    p = Pickle(2)
    key = 'k' * 255
    pid = p.storage_memo('0', n)
    p.mstr(key)
    p.emit(b'0')
    for _ in range(depth):
        p.empty(b'}')
        p.emit(MARK)
        p.mstr(key)
    p.empty(b'}')
    batched(p, range(n), lambda i: (p.str('t%d' % i), p.tensor(offset=i, shape=(1,), stride=(1,), pid_memo=pid)))
    p.emit(*[b'u'] * depth)
    return in_pt(d, p.bytes(), {'0': F1 * n})


def g_nones(d, n, method=zipfile.ZIP_STORED):
    # a list of n Nones before the state_dict in data.pkl (stored: the graph's own memory per input byte)
    return in_pt(d, PROTO2 + b']q\x00(' + b'N' * n + b'e0' + tiny_sd()[2:], method=method)


def g_inflate_objects(d, n):
    # the same, deflated: 1000 n Nones in about n bytes
    return g_nones(d, 1000 * n, zipfile.ZIP_DEFLATED)


def g_inflate_string(d, n):
    # a deflated data.pkl holding one 8000 n-byte string (about 8 n bytes deflated)
    p = Pickle(2)
    w_dict(p)
    p.str('blob')
    p.emit(b'X' + struct.pack('<I', 8000 * n) + b'x' * (8000 * n))
    p.emit(b'u')
    return in_pt(d, p.bytes(), method=zipfile.ZIP_DEFLATED)


def g_stride0(d, n):
    # one float, viewed as a vector of 2^26 n elements with stride 0 (a 500-byte file)
    p = Pickle(2)
    w_dict(p, numel=1, shape=((1 << 26) * n,), stride=(0,))
    p.emit(b'u')
    return in_pt(d, p.bytes(), {'0': F1})


def flat_state_dict(p, names, tensor_fn):
    """{names[i]: tensor_fn(i)}: tensor_fn emits the i-th tensor."""
    p.empty(b'}')
    batched(p, range(len(names)), lambda i: (p.key(names[i]), tensor_fn(i)))


def g_views_one_storage(d, n):
    # n tensors viewing one storage at n offsets, each with its own persistent
    # id tuple (torch pickles a new tuple for every tensor): flat parameters
    p = Pickle(2)
    flat_state_dict(p, ['p.%d' % i for i in range(n)],
                    lambda i: p.tensor('0', n, offset=i, shape=(1,), stride=(1,)))
    return in_pt(d, p.bytes(), {'0': F1 * n})


def g_own_storages(d, n, name='layer.%d.weight'):
    # a plain state_dict: n tensors (named name % i), n storages, n data/ records
    p = Pickle(2)
    flat_state_dict(p, [name % i for i in range(n)], lambda i: p.tensor(str(i), 1, shape=(1,)))
    return in_pt(d, p.bytes(), {str(i): F1 for i in range(n)})


def g_rekey_keys(d, n):
    # the same under 'module.' keys
    return g_own_storages(d, n, 'module.w%d')


def g_tied_pairs(d, n):
    # n storages, each seen by two tensors (the whole and a slice), side by side
    p = Pickle(2)
    p.empty(b'}')
    batched(p, range(n), lambda i: (p.key('a.%d' % i), p.tensor(str(i), 4, shape=(4,)),
                                    p.key('b.%d' % i), p.tensor(str(i), 4, offset=2, shape=(2,))))
    return in_pt(d, p.bytes(), {str(i): F1 * 4 for i in range(n)})


def g_top_level_mixed(d, n):
    # a top-level dict of n tensors (one storage, one persistent id) and n ints
    p = Pickle(2)
    pid = p.storage_memo('0', n)
    p.empty(b'}')
    batched(p, range(n), lambda i: (p.key('w%d' % i), p.tensor(offset=i, shape=(1,), stride=(1,), pid_memo=pid),
                                    p.key('step%d' % i), p.int(i)))
    return in_pt(d, p.bytes(), {'0': F1 * n})


def g_deep_nesting(d, n, depth=900):
    # n chains of 900 nested 1-tuples (near the default --max-depth 1000), each
    # around the same tensor
    p = Pickle(2)
    _, t = w_dict(p)
    p.key('chains')
    p.empty(b']')
    p.emit(MARK)
    for _ in range(n):
        p.get(t)
        p.emit(b'\x85' * depth)
    p.emit(b'e', b'u')
    return in_pt(d, p.bytes())


def g_long_names(d, n):
    # n tensors whose names are 200 bytes (one storage, one persistent id)
    p = Pickle(2)
    pid = p.storage_memo('0', n)
    flat_state_dict(p, [('%06d' % i) * 33 + 'xx' for i in range(n)],
                    lambda i: p.tensor(offset=i, shape=(1,), stride=(1,), pid_memo=pid))
    return in_pt(d, p.bytes(), {'0': F1 * n})


def g_st_tensors(d, n):
    return in_st(d, [('model.layers.%d.weight' % i, 'F32', [1], F1) for i in range(n)])


def g_st_small_tensors(d, n):
    # the cost per tensor (issue 21): n tensors of two float32 elements, the header nearly all the file
    return in_st(d, [('layers.%d.weight' % i, 'F32', [2], F1 * 2) for i in range(n)])


def g_pt_small_tensors(d, n):
    # the same as a torch state_dict: n tensors on n storages, n data/ records
    p = Pickle(2)
    flat_state_dict(p, ['layers.%d.weight' % i for i in range(n)], lambda i: p.tensor(str(i), 2, shape=(2,)))
    return in_pt(d, p.bytes(), {str(i): F1 * 2 for i in range(n)})


def g_pt_st_small_tensors(d, n):
    # the .pt of g_pt_small_tensors and, beside it, the same tensors as safetensors ({in}.safetensors):
    # diff of the two holds a torch graph and a safetensors header at once
    pt = g_pt_small_tensors(d, n)
    write(pt + '.safetensors', safetensors([('layers.%d.weight' % i, 'F32', [2], F1 * 2) for i in range(n)]))
    return pt


def g_st_aliases(d, n):
    # one written tensor of n elements and n aliases of it (views) in __metadata__
    al = {'view.%d' % i: {'of': 'base', 'offset': i, 'shape': [1], 'stride': [1], 'same': False} for i in range(n)}
    return in_st(d, [('base', 'F32', [n], F1 * n)], {'format': 'pt', 'tensorctl.aliases': json.dumps(al)})


def g_st_metadata(d, n):
    return in_st(d, [('w', 'F32', [1], F1)], {'key%07d' % i: 'value%d' % i for i in range(n)})


def g_st_keep(d, n):
    return in_st(d, [('block%d.sub%d.weight' % (i // 7, i % 7), 'F32', [1], F1) for i in range(n)])


def g_zip_entries(d, n):
    return in_pt(d, tiny_sd(), extra=[('archive/extra/%d' % i, b'x') for i in range(n)])


def g_legacy(d, n, elem=F1, dtype=None):
    # a legacy (pre-1.6) file: n one-element tensors, each on its own storage holding elem
    # (dtype: _rebuild_tensor_v3 on UntypedStorages)
    p = Pickle(2)
    flat_state_dict(p, ['w%d' % i for i in range(n)], lambda i: p.tensor(str(i), 1, shape=(1,), dtype=dtype))
    return write(os.path.join(d, 'in.pt'), legacy(p.bytes(), [str(i) for i in range(n)], [(1, elem)] * n))


def g_untyped_storages(d, n):
    # float8 tensors (_rebuild_tensor_v3 on UntypedStorages), one storage each; legacy container
    return g_legacy(d, n, b'\x38', 'float8_e4m3fn')


def g_cast_overflow(d, n):
    # n float32 storages each holding 1e30 (overflows float16), legacy container
    return g_legacy(d, n, struct.pack('<f', 1e30))


def g_module_buffers(d, n):
    # a whole nn.Module pickled: n buffers, half of them non-persistent
    p = Pickle(2)
    pid = p.storage_memo('0', n)
    p.obj('mymodels', 'Net')
    p.empty(b'}')
    p.emit(MARK)
    p.str('training')
    p.emit(TRUE)
    p.str('_parameters')
    p.ordered_dict()
    p.str('_buffers')
    p.ordered_dict()
    batched(p, range(n), lambda i: (p.key('buf%d' % i), p.tensor(offset=i, shape=(1,), stride=(1,), pid_memo=pid)))
    p.str('_non_persistent_buffers_set')
    p.glob('builtins', 'set')
    p.empty(b']')
    batched(p, range(0, n, 2), lambda i: p.str('buf%d' % i), setitems=False)
    p.emit(b'\x85R')
    p.put()
    p.str('_modules')
    p.ordered_dict()
    p.emit(b'ub')
    return in_pt(d, p.bytes(), {'0': F1 * n})


def fnv_collisions(count, bits=20, target=0x5a5a5):
    """Names whose 64-bit FNV-1a hash (src/ckpt.c hash_str) ends in the same `bits`
    bits, so that they share one bucket of the storage table up to 2^bits slots:
    a prefix, then three printable bytes solved for modulo 2^bits (a table of
    the prefix states that each suffix sends to the target, made once)."""
    m = (1 << bits) - 1
    P = 1099511628211 & m
    Pinv = pow(P, -1, 1 << bits)
    ok = [c for c in range(0x21, 0x7f) if chr(c) not in '"\\/']
    suffix = {}
    for c2 in ok:
        a = ((((target & m) * Pinv) & m) ^ c2) * Pinv & m
        for c1 in ok:
            v = ((a ^ c1) * Pinv) & m
            for c0 in ok:
                suffix[v ^ c0] = bytes([c0, c1, c2])
    out, i = [], 0
    while len(out) < count:
        prefix = ('t%07d.' % i).encode()
        i += 1
        h = 1469598103934665603
        for b in prefix:
            h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        sfx = suffix.get(h & m)
        if sfx:
            out.append((prefix + sfx).decode())
    return out


def g_st_hash_collisions(d, n):
    # n safetensors tensors whose names all land in one bucket of the storage hash table
    return in_st(d, [(nm, 'F32', [1], F1) for nm in fnv_collisions(n)])


def g_shared_subtree(d, n):
    # one dict of n ints, referenced n times from a list: n^2 paths, no tensor among them
    p = Pickle(2)
    w_dict(p)
    p.str('shared')
    sub = p.empty(b'}')
    batched(p, range(n), lambda i: (p.str('k%d' % i), p.int(i)))
    p.str('refs')
    p.empty(b']')
    p.emit(MARK)
    for _ in range(n):
        p.get(sub)
    p.emit(b'e', b'u')
    return in_pt(d, p.bytes())


def g_long_decimals(d, n, count=200):
    # protocol-0 LONG text: 200 integers of 64 n decimal digits (the reader takes up to 4096)
    p = Pickle(2)
    w_dict(p)
    p.str('ints')
    p.empty(b']')
    p.emit(MARK)
    for i in range(count):
        p.emit(b'L' + (str(i + 1) * (64 * n))[:64 * n].encode() + b'L\n')
    p.emit(b'e', b'u')
    return in_pt(d, p.bytes())


def g_index_metadata(d, n):
    ix = json.loads(open(g_index_entries(d, 8)).read())
    for i in range(n):
        ix['metadata']['note%06d' % i] = 'value %d' % i
    return write(os.path.join(d, 'model.safetensors.index.json'), json.dumps(ix, indent=2).encode())


def ts_object(p, cls, items, training=False):
    """A TorchScript object: GLOBAL __torch__ cls, NEWOBJ, a dict of items (each a function that
    emits a key and its value; 'training': True first with training), BUILD."""
    p.obj('__torch__', cls)
    p.empty(b'}')
    if training:
        items = [lambda: (p.str('training'), p.emit(TRUE))] + list(items)
    batched(p, items, lambda item: item())
    p.emit(b'b')


def in_ts(d, p, code, records):
    """d/in.pt: a TorchScript archive of p, its code/__torch__.py code and an empty constants.pkl."""
    return in_pt(d, p.bytes(), records, extra=[('archive/code/__torch__.py', code.encode()),
                                              ('archive/constants.pkl', PROTO2 + b')' + STOP)])


def g_ts_many_classes(d, n):
    # a TorchScript archive: n module classes in code/__torch__.py (each with a method whose body
    # assigns __parameters__, deeper indented), the root holding one object of each
    code = ['class Root(Module):\n  __parameters__ = []\n  __buffers__ = []\n  training : bool\n']
    for i in range(n):
        code.append('class M%d(Module):\n  __parameters__ = ["w", ]\n  __buffers__ = ["b", ]\n  w : Tensor\n'
                    '  def forward(self: __torch__.M%d,\n    x: Tensor) -> Tensor:\n    __parameters__ = x\n'
                    '    return x\n' % (i, i))
    p = Pickle(2)
    pid = p.storage_memo('0', 2 * n)

    def child(i):
        p.str('c%d' % i)
        ts_object(p, 'M%d' % i, [lambda: (p.str('w'), p.tensor(offset=2 * i, shape=(1,), pid_memo=pid)),
                                 lambda: (p.str('b'), p.tensor(offset=2 * i + 1, shape=(1,), pid_memo=pid))])
    ts_object(p, 'Root', [lambda i=i: child(i) for i in range(n)], training=True)
    return in_ts(d, p, ''.join(code), {'0': F1 * 2 * n})


def g_ts_long_declaration(d, n):
    # a TorchScript module declaring n parameters on one line, its object holding them and n other attributes;
    # torch's importClass makes attributes of annotated names only, so each is annotated too
    names = ['p%d' % i for i in range(n)]
    code = 'class Root(Module):\n  __parameters__ = [%s]\n  __buffers__ = ["x\\x41\\\\\\"", ]\n%s' % (
        ''.join('"%s", ' % nm for nm in names), ''.join('  %s : Tensor\n' % nm for nm in names))
    p = Pickle(2)
    pid = p.storage_memo('0', n)
    items = []
    for i in range(n):
        items.append(lambda i=i: (p.str('p%d' % i), p.tensor(offset=i, shape=(1,), pid_memo=pid)))
        items.append(lambda i=i: (p.str('other%d' % i), p.int(i)))
    ts_object(p, 'Root', items, training=True)
    return in_ts(d, p, code, {'0': F1 * n})


def g_weights_many_candidates(d, n):
    # n top-level EMA-looking entries, each a state_dict of one tensor: n candidates extract lists
    p = Pickle(2)
    pid = p.storage_memo('0', n)
    p.empty(b'}')
    batched(p, range(n), lambda i: (p.str('model_ema_%d' % i), p.empty(b'}'), p.str('w'),
                                    p.tensor(offset=i, shape=(1,), pid_memo=pid), p.emit(b's')))
    return in_pt(d, p.bytes(), {'0': F1 * n})


def g_rekey_dicts(d, n):
    # n dicts, each holding two tensors under 'module.' keys: key surgery on a whole rewrite, dict by dict
    p = Pickle(2)
    pid = p.storage_memo('0', 2 * n)
    p.empty(b'}')

    def one(i):
        p.str('d%d' % i)
        p.empty(b'}')
        p.emit(MARK)
        p.str('module.a')
        p.tensor(offset=2 * i, shape=(1,), pid_memo=pid)
        p.str('module.b')
        p.tensor(offset=2 * i + 1, shape=(1,), pid_memo=pid)
        p.emit(b'u')
    batched(p, range(n), one)
    return in_pt(d, p.bytes(), {'0': F1 * 2 * n})


def g_tiny(d, n):
    return in_pt(d, tiny_sd())

# ---- distributed checkpoints (the .metadata and .distcp makers of tests/hostile/hostile.py) ----


def dcp_folder(d, tensors, items=()):
    """A DCP folder: tensors [(name, shape, [(offsets, sizes)], blob)] (blob: the chunk's sizes ->
    archive bytes), items [(name, archive bytes)], all in one .distcp file."""
    data, sdm, storage = bytearray(), [], []
    cache = {}
    for name, shape, chunks, blob in tensors:
        sdm.append((H.op_str(name), H.tensor_md(shape, chunks)))
        for off, sz in chunks:
            b = cache.get(tuple(sz)) or cache.setdefault(tuple(sz), blob(sz))
            storage.append((H.meta_index(name, off), H.storage_info('__0_0.distcp', len(data), len(b))))
            data += b
    for name, b in items:
        sdm.append((H.op_str(name), H.newobj(H.DCPM, 'BytesStorageMetadata')))
        storage.append((H.meta_index(name, None), H.storage_info('__0_0.distcp', len(data), len(b))))
        data += b
    md = H.PROTO + H.newobj(H.DCPM, 'Metadata', H.dict_of([
        ('state_dict_metadata', H.dict_raw(sdm)), ('planner_data', b'N'),
        ('storage_data', H.dict_raw(storage)), ('version', op_str('1.0.0'))])) + STOP
    f = os.path.join(d, 'dcp')
    os.makedirs(f, exist_ok=True)
    write(os.path.join(f, '__0_0.distcp'), bytes(data))
    write(os.path.join(f, '.metadata'), md)
    return f


def g_dcp_row_chunks(d, n):
    return dcp_folder(d, [('w', (n, 4), [((i, 0), (1, 4)) for i in range(n)], H.chunk_blob)])


def g_dcp_grid_chunks(d, n):
    return dcp_folder(d, [('w', (n, 8), [((i, j), (1, 1)) for i in range(n) for j in range(8)], H.chunk_blob)])


def g_dcp_columns(d, n):
    return dcp_folder(d, [('w', (n, 2), [((0, 0), (n, 1)), ((0, 1), (n, 1))], H.chunk_blob)])


def g_dcp_items(d, n):
    step = H.torch_zip(H.PROTO + op_int(7) + STOP)
    return dcp_folder(d, [('w', (2, 2), [((0, 0), (2, 2))], H.chunk_blob)],
                      [('opt.group%d.step' % i, step) for i in range(n)])

# ---- cases ---------------------------------------------------------------------------
# name -> (generator, n, commands, note[, options]). A command is an argument
# list with {in} (the input) and {out} (a folder for outputs, removed after
# each run). Options: {'user_only': why} counts user CPU time only (with the
# cpu meter), for cases whose system time is I/O the kernel varies.

INSPECT = ['inspect', '{in}']
JSON = ['inspect', '--json', '{in}']
TOCPU = ['to-cpu', '-q', '{in}', '-o', '{out}/out.pt']
TO_ST = ['convert', '-q', '{in}', '{out}/out.safetensors']
TO_PT = ['convert', '-q', '{in}', '{out}/out.pt']
# a file of globals outside torch's allowlist: inspect's verdict is exit 4, a rewrite needs --allow-unsafe
INSPECT_UNSAFE = (INSPECT, {'expect': (4, 'UNSAFE')})
TOCPU_UNSAFE = ['to-cpu', '-q', '--allow-unsafe', '{in}', '-o', '{out}/out.pt']
IX_ST = ['convert', '-q', '{in}', '{out}/o/model.safetensors.index.json']
EXTRACT = ['extract', '-q', '--allow-unsafe', '{in}', '-o', '{out}/out.pt']
EXTRACT_ST = ['extract', '-q', '--allow-unsafe', '{in}', '-o', '{out}/out.safetensors']
IX_PT = ['convert', '-q', '{in}', '{out}/o/pytorch_model.bin.index.json']
DCP_ST = ['consolidate', '-q', '{in}', '-o', '{out}/out.safetensors']
DIFF = ['diff', '{in}', '{in}']
DCP_PT = ['consolidate', '-q', '{in}', '-o', '{out}/out.pt']
KEEPS = [a for i in range(256) for a in ('--keep', 'block%d.sub[0-3].*' % (i * 13))]

CASES = {
    'vocab_p4_memoize': (lambda d, n: g_vocab(d, n, 4), 40000, [INSPECT, TOCPU],
                         'protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE for a 40k-entry str->int dict'),
    'vocab_p2_binput': (lambda d, n: g_vocab(d, n, 2), 40000, [INSPECT, TOCPU],
                        'the same dict written with protocol 2 (BINPUT): the control'),
    'many_globals': (g_many_globals, 10000, [INSPECT_UNSAFE, TOCPU_UNSAFE], '10k distinct GLOBALs'),
    'index_entries': (g_index_entries, 5000, [INSPECT, IX_ST, IX_PT],
                      'model.safetensors.index.json over 8 shards, 5k weight_map entries'),
    'index_many_shards': (g_index_shards, 3000, [INSPECT], 'an index of 3000 shards of one tensor each'),
    'index_many_shards_convert': (g_index_shards, 120, [IX_ST],
                                  'an index of 120 shards of one tensor each, converted (convert holds every '
                                  'input shard open: 8n stays under 1024 files)'),
    'index_shards_to_shards': (g_index_shards, 120,
                               [(IX_ST + ['--max-shard-size', '4'],
                                 {'precreate': 'o/model.safetensors.index.json', 'expect': (2, 'exists')})],
                               '120 shards of one tensor each, to be written as 120 shards: the checks of '
                               'the outputs (the index exists, so it stops there, having written nothing)'),
    'index_to_many_shards': (g_index_one_shard, 500, [IX_ST + ['--max-shard-size', '4'],
                                                      IX_PT + ['--max-shard-size', '4']],
                             'one shard of 500 tensors written as 500 shards (--max-shard-size 4)',
                             {'user_only': 'system time is one fsync per output file, which varies widely'}),
    'shared_doubling': (g_shared_doubling, 10, [INSPECT, TOCPU],
                        'x(k+1) = {K1: xk, K2: xk}: 2^k paths to one tensor through 2k dicts, 200-byte keys'),
    'deep_names': (g_deep_names, 400, [INSPECT, JSON],
                   '400 tensors at the bottom of a chain of 200 dicts under one 255-byte key (51 KB names)'),
    'inflate_bomb_objects': (g_inflate_objects, 256, [INSPECT], 'deflated data.pkl: 256k Nones in ~300 bytes'),
    'inflate_bomb_string': (g_inflate_string, 1024, [INSPECT], 'deflated data.pkl: an 8 MB string in ~8 KB'),
    'many_small_objects': (g_nones, 200000, [INSPECT],
                           'stored data.pkl: 200k Nones (the graph\'s own memory per byte: the control)'),
    'stride0_view': (g_stride0, 1, [(TO_ST, {'expect': (2, '--max-expand')}), ['inspect', '--hash', '{in}'], TOCPU],
                     'one float viewed as 2^26 elements with stride 0 (convert would write 256 MiB: refused '
                     'past --max-expand)'),
    'views_one_storage': (g_views_one_storage, 20000, [INSPECT, JSON, TOCPU],
                          '20k tensors viewing one storage, each with its own persistent id'),
    'views_one_storage_convert': (g_views_one_storage, 4000, [TO_ST],
                                  '4k tensors viewing one storage, converted (each written as a copy)'),
    'many_storages': (g_own_storages, 6000, [INSPECT, JSON, TOCPU, TO_ST],
                      'a state_dict of 6k tensors, 6k storages, 6k data/ records'),
    'tied_pairs': (g_tied_pairs, 2000, [INSPECT, TO_ST], '2k storages each seen by two tensors'),
    'top_level_mixed': (g_top_level_mixed, 4000, [INSPECT], 'a top-level dict of 4k tensors and 4k ints'),
    'deep_nesting': (g_deep_nesting, 100, [INSPECT, TOCPU], '100 chains of 900 nested tuples (depth limit 1000)'),
    'long_names': (g_long_names, 5000, [INSPECT, JSON, TO_ST], '5k tensors with 200-byte names'),
    'st_many_tensors': (g_st_tensors, 10000, [INSPECT, JSON, TO_PT], 'a safetensors header of 10k tensors'),
    'st_small_tensors': (g_st_small_tensors, 20000, [INSPECT, JSON, TO_PT, TO_ST, DIFF],
                         'safetensors: 20k tensors of two elements (the cost per tensor: names, shapes, maps)'),
    'pt_small_tensors': (g_pt_small_tensors, 10000, [INSPECT, TOCPU, TO_ST, DIFF],
                         'a state_dict of 10k tensors of two elements on 10k storages (the cost per tensor)'),
    'pt_st_small_tensors': (g_pt_st_small_tensors, 10000, [['diff', '{in}.safetensors', '{in}']],
                            'the 10k tensors of pt_small_tensors as .safetensors and as .pt, diffed (the cost '
                            'per tensor of both sides\' readers and the report)'),
    'st_many_aliases': (g_st_aliases, 3000, [INSPECT, TO_PT],
                        'safetensors: one tensor and 3k aliases in __metadata__ tensorctl.aliases'),
    'st_many_metadata': (g_st_metadata, 5000, [INSPECT, TO_ST], 'safetensors __metadata__ with 5k keys'),
    'keep_patterns': (g_st_keep, 2000, [TO_PT + ['--dtype', 'float16'] + KEEPS],
                      '2k tensors cast with 256 --keep patterns (the most the CLI takes)'),
    'zip_many_entries': (g_zip_entries, 20000, [INSPECT, TOCPU], 'a torch zip with 20k extra records'),
    'legacy_many_storages': (g_legacy, 4000, [INSPECT, JSON, TOCPU],
                             'legacy (pre-1.6) file: 4k tensors on 4k storages'),
    'untyped_storages': (g_untyped_storages, 6000, [TOCPU, TO_ST],
                         '6k float8 tensors (_rebuild_tensor_v3, UntypedStorage), one storage each'),
    'st_hash_collisions': (g_st_hash_collisions, 10000, [INSPECT],
                           'safetensors: 10k tensor names that collide in the storage hash table (FNV-1a low bits)'),
    'cast_overflow_storages': (g_cast_overflow, 4000,
                               [['to-cpu', '-q', '--dtype', 'float16', '{in}', '-o', '{out}/out.pt']],
                               'legacy file: 4k float32 storages whose values overflow float16 (one warning each)'),
    'shared_subtree': (g_shared_subtree, 1000, [INSPECT, TOCPU],
                       'a dict of 1000 ints referenced 1000 times: 1000^2 paths without a tensor'),
    'long_decimal_ints': (g_long_decimals, 8, [INSPECT],
                          '200 protocol-0 LONG texts of 512 digits (8n: 4096, the most the reader takes)'),
    'index_many_metadata': (g_index_metadata, 20000, [INSPECT, IX_ST], 'an index whose metadata has 20k keys'),
    'module_buffers': (g_module_buffers, 4000, [INSPECT_UNSAFE, EXTRACT],
                       'a pickled nn.Module with 4k buffers, 2k of them non-persistent'),
    'dcp_row_chunks': (g_dcp_row_chunks, 1000, [INSPECT, DCP_ST, DCP_PT],
                       'a distributed checkpoint: one tensor in 1000 chunks of one row each'),
    'dcp_grid_chunks': (g_dcp_grid_chunks, 200, [INSPECT, DCP_ST],
                        'a distributed checkpoint: a 200x8 tensor in 1600 chunks of one element (the tiling sweep)'),
    'dcp_columns': (g_dcp_columns, 100000, [['inspect', '--hash', '{in}'], DCP_ST, DCP_PT],
                    'a distributed checkpoint: a 100000x2 tensor in two column chunks (200000 runs of one element)'),
    'dcp_many_items': (g_dcp_items, 2000, [INSPECT, DCP_PT],
                       'a distributed checkpoint with 2000 pickled items under one key'),
    'ts_many_classes': (g_ts_many_classes, 2000, [INSPECT_UNSAFE, EXTRACT],
                        'a TorchScript archive: 2k module classes in its code, an object of each'),
    'ts_long_declaration': (g_ts_long_declaration, 8000, [INSPECT_UNSAFE, EXTRACT, EXTRACT_ST],
                            'a TorchScript module declaring 8k parameters on one line, 8k other attributes'),
    'weights_many_candidates': (g_weights_many_candidates, 4000,
                                [INSPECT, JSON, (EXTRACT, {'expect': (2, 'sets of weights')}),
                                 ['extract', '-q', '{in}', '-o', '{out}/out.pt', '--from', 'model_ema_7']],
                                '4k top-level EMA-looking state_dicts: 4k candidates listed'),
    'rekey_many_dicts': (g_rekey_dicts, 4000, [TOCPU + ['--strip-prefix', '--drop', 'd1*.module.a']],
                         'key surgery on a whole rewrite: 4k dicts of two module. keys each'),
    'rekey_many_keys': (g_rekey_keys, 6000, [TOCPU + ['--strip-prefix', '--rename', 'w(1[0-9]*)=v\\1',
                                                     '--drop', 'module.w2*'],
                                             ['extract', '-q', '--strip-prefix', '--add-prefix', 'x.', '{in}', '-o',
                                              '{out}/out.pt']],
                        'key surgery on a state_dict of 6k tensors, 6k storages, some left out'),
}

# ---- measuring ------------------------------------------------------------------------

TIME_FACTOR = 2.5     # x input growth: 20 for 8x
MEM_FACTOR = 1.5      # x input growth: 12 for 8x
AMP = 256             # bytes of memory per input byte
AMP_SLACK = 64 << 20
OUT_AMP = 16
OUT_SLACK = 16 << 20
FSIZE = 100 << 20
AS_CAP = 1536 << 20
MEM_FLOOR = 8 << 20
N_BUDGET = 60.0       # seconds of CPU for any run at n
FLOORS = {'cpu': 0.02, 'callgrind': 20e6}


def input_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def out_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs
               if os.path.isfile(os.path.join(r, f)))


class Run:
    def __init__(self):
        self.cost = 0.0       # seconds, or instructions
        self.rss = 0          # bytes
        self.rc = 0
        self.err = ''
        self.killed = None    # why we stopped it, if we did
        self.out = 0


RUNNER = None
USER_ONLY = False  # set per case: cost is user CPU time only


def find_runner(given, tmp):
    """The small C program that runs tensorctl and reports its rusage (cplx_run.c):
    given, or built here with cc (a few hundred ms, once)."""
    global RUNNER
    if given:
        RUNNER = os.path.abspath(given)
        return
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cplx_run.c')
    cc = os.environ.get('CC') or shutil.which('cc') or shutil.which('gcc') or shutil.which('clang')
    if not cc:
        sys.exit('complexity.py: no C compiler to build %s; give --runner' % src)
    exe = os.path.join(tmp, 'cplx_run')
    subprocess.run([cc, '-O1', '-o', exe, src], check=True)
    RUNNER = exe


def split(cmd):
    """A command is an argument list, or (argument list, options): 'precreate', a
    file made under {out} first; 'expect', (exit status, message fragment) of a
    refusal that is the point of the run."""
    return (cmd[0], cmd[1]) if isinstance(cmd, tuple) else (cmd, {})


def prepare(cmd, inp, outdir):
    """(the arguments of cmd for input inp and output folder outdir, its options); the file it
    asks to be there first is made."""
    argv, opts = split(cmd)
    if opts.get('precreate'):
        pc = os.path.join(outdir, opts['precreate'])
        os.makedirs(os.path.dirname(pc), exist_ok=True)
        write(pc, b'{}')
    return [a.replace('{in}', inp).replace('{out}', outdir) for a in argv], opts


def run_once(tensorctl, cmd, inp, tmp, meter, budget):
    """One run; budget in the meter's unit (cpu seconds, or instructions for callgrind)."""
    outdir = tempfile.mkdtemp(dir=tmp, prefix='out-')
    args, opts = prepare(cmd, inp, outdir)
    errpath = os.path.join(tmp, 'stderr')
    cmd = [tensorctl] + args
    cg = None
    if meter == 'callgrind':
        cg = os.path.join(tmp, 'callgrind.out')
        cmd = ['valgrind', '--tool=callgrind', '--callgrind-out-file=' + cg, '-q'] + cmd
        wall = budget / 5e6 + 30  # valgrind runs ~50x slower than native, ~1e8 Ir/s
        cpu, aslim = int(wall * 2), 0
    elif USER_ONLY:  # the budget is user time; the kernel's share is not held against it
        cpu, aslim = max(30, int(math.ceil(budget * 20))), AS_CAP
        wall = budget * 40 + 30
    else:
        cpu, aslim = max(1, int(math.ceil(budget))), AS_CAP
        wall = budget * 4 + 10
    # meson test sets MALLOC_PERTURB_, which makes glibc fill every block on
    # malloc and free: costs that are not tensorctl's (and that turn
    # realloc-by-one into copying), so the child runs without it
    env = {k: v for k, v in os.environ.items() if not k.startswith('MALLOC_')}
    env.update(MALLOC_ARENA_MAX='2', LC_ALL='C')
    t0 = time.time()
    p = subprocess.run([RUNNER, str(aslim), str(FSIZE), str(cpu), str(int(math.ceil(wall))), errpath, '--'] + cmd,
                       stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    rep = dict(kv.split('=') for kv in p.stdout.decode().split())
    r = Run()
    r.wall = time.time() - t0
    status = int(rep['status'])
    r.utime, r.stime = float(rep['utime']), float(rep['stime'])
    r.cost = r.utime if USER_ONLY else r.utime + r.stime
    r.rss = int(rep['maxrss_kb']) * 1024
    if rep['killed'] == '1':
        r.killed = 'wall clock %.0f s' % wall
    if os.WIFSIGNALED(status):
        r.rc = -os.WTERMSIG(status)
        if not r.killed and (r.rc == -signal.SIGXCPU or
                             (r.rc == -signal.SIGKILL and r.utime + r.stime >= cpu - 0.5)):
            r.killed = 'CPU budget %.1f s' % cpu
    else:
        r.rc = os.WEXITSTATUS(status)
    with open(errpath, 'rb') as f:
        r.err = f.read().decode(errors='replace').strip()
    r.out = out_bytes(outdir) - (2 if opts.get('precreate') else 0)
    r.expect = opts.get('expect')
    shutil.rmtree(outdir, ignore_errors=True)
    if cg:
        r.cost = callgrind_total(cg)
        if os.path.exists(cg):
            os.unlink(cg)
    return r


def callgrind_total(path):
    try:
        with open(path, errors='replace') as f:
            for line in f:
                if line.startswith('summary:') or line.startswith('totals:'):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def is_refusal(r):
    return r.rc == 3 and ('raise with --max-' in r.err or '--max-' in r.err)


def outcome(r):
    """None when the run ended acceptably (success, or a limit refusal), else why not."""
    if r.killed:
        return 'stopped: over its %s' % r.killed
    if r.rc < 0:
        return 'killed by signal %d' % -r.rc
    if 'File too large' in r.err:
        return 'wrote more than the %d MiB file-size cap' % (FSIZE >> 20)
    if 'out of memory' in r.err:
        return 'ran out of the %d MiB address-space cap' % (AS_CAP >> 20)
    if r.rc == 0 or is_refusal(r):
        return None
    if r.expect and r.rc == r.expect[0] and r.expect[1] in r.err:
        return None
    return 'exit %d: %s' % (r.rc, r.err.splitlines()[-1] if r.err else '')


def fmt_cost(v, meter):
    if meter == 'cpu':
        return '%.3f s' % v
    return '%.3g Ir' % v


def mib(b):
    return '%.1f MiB' % (b / 1048576.0)


class Verdict:
    def __init__(self, case, argv):
        self.case = case
        self.what = ' '.join(a for a in argv if not a.startswith('{') and a not in ('-q', '-o'))
        if len(self.what) > 60:
            self.what = self.what[:57] + '...'
        self.problems = []
        self.r1 = self.r8 = None
        self.tratio = self.mratio = None
        self.tlimit = self.mlimit = None
        self.size1 = self.size8 = 0

    @property
    def ok(self):
        return not self.problems


def measure(tensorctl, case, cmd, dirs, sizes, tmp, meter, base_rss, full=False):
    v = Verdict(case, split(cmd)[0])
    v.size1, v.size8 = sizes
    growth = sizes[1] / float(sizes[0])
    floor = FLOORS[meter]
    v.tlimit = TIME_FACTOR * growth
    v.mlimit = MEM_FACTOR * growth
    nb = N_BUDGET if meter == 'cpu' else N_BUDGET * 1e8
    # n: min of 3 (1 with callgrind, which repeats)
    runs1 = []
    for _ in range(3 if meter == 'cpu' else 1):
        r = run_once(tensorctl, cmd, dirs[0], tmp, meter, nb)
        runs1.append(r)
        if outcome(r):
            break
    r1 = min(runs1, key=lambda r: r.cost)
    r1.rss = min(r.rss for r in runs1)
    v.r1 = r1
    bad = [outcome(r) for r in runs1 if outcome(r)]
    if bad:
        v.problems.append('at n (a %d-byte input): %s' % (sizes[0], bad[0]))
        return v
    # 8n: one run within the budget the rule allows, repeated when close to the limit
    budget = v.tlimit * max(r1.cost, floor) * 1.3
    if full:
        budget = max(budget, min(80 * max(r1.cost, floor), 60.0 if meter == 'cpu' else 6e9))
    if meter == 'cpu':
        budget = max(budget, 1.0)
    r8 = run_once(tensorctl, cmd, dirs[1], tmp, meter, budget)
    if not outcome(r8):
        t = r8.cost / max(r1.cost, floor)
        if 0.6 * v.tlimit < t <= 1.3 * v.tlimit and meter == 'cpu':
            for _ in range(2):
                r = run_once(tensorctl, cmd, dirs[1], tmp, meter, budget)
                if not outcome(r) and r.cost < r8.cost:
                    r.rss = min(r.rss, r8.rss)
                    r8 = r
    v.r8 = r8
    o8 = outcome(r8)
    v.tratio = r8.cost / max(r1.cost, floor)
    if o8 and 'budget' in o8:
        v.problems.append('time x%s (n: %s, 8n: stopped past %s; limit x%.1f)'
                          % ('>%.0f' % v.tratio if v.tratio >= v.tlimit else '%.1f' % v.tratio,
                             fmt_cost(r1.cost, meter), fmt_cost(budget if meter == 'cpu' else r8.cost, meter),
                             v.tlimit))
    elif o8:
        v.problems.append('at 8n (a %d-byte input): %s' % (sizes[1], o8))
    elif v.tratio > v.tlimit:
        v.problems.append('time x%.1f (n: %s, 8n: %s; limit x%.1f)'
                          % (v.tratio, fmt_cost(r1.cost, meter), fmt_cost(r8.cost, meter), v.tlimit))
    if meter == 'cpu':
        m1, m8 = max(r1.rss - base_rss, 0), max(r8.rss - base_rss, 0)
        v.mratio = m8 / float(max(m1, MEM_FLOOR))
        if v.mratio > v.mlimit and not o8:
            v.problems.append('memory x%.1f (n: %s, 8n: %s over a %s base; limit x%.1f)'
                              % (v.mratio, mib(r1.rss), mib(r8.rss), mib(base_rss), v.mlimit))
        for tag, r, size in (('n', r1, sizes[0]), ('8n', r8, sizes[1])):
            allowed = AMP * size + AMP_SLACK
            if r.rss - base_rss > allowed:
                v.problems.append('memory %s at %s for a %d-byte input (%.0f bytes per input byte; allowed %s)'
                                  % (mib(r.rss), tag, size, (r.rss - base_rss) / float(size), mib(allowed)))
                break
    for tag, r, size in (('n', r1, sizes[0]), ('8n', r8, sizes[1])):
        if r.out > OUT_AMP * size + OUT_SLACK:
            v.problems.append('wrote %s at %s for a %d-byte input' % (mib(r.out), tag, size))
            break
    return v


_base = {}


def baseline_rss(tensorctl, tmp):
    if tensorctl not in _base:
        d = tempfile.mkdtemp(dir=tmp, prefix='base-')
        p = g_tiny(d, 1)
        rs = [run_once(tensorctl, INSPECT, p, tmp, 'cpu', 10).rss for _ in range(3)]
        _base[tensorctl] = min(rs)
    return _base[tensorctl]


def run_case(tensorctl, name, tmp, meter, full=False):
    global USER_ONLY
    gen, n, cmds, _ = CASES[name][:4]
    USER_ONLY = 'user_only' in (CASES[name][4] if len(CASES[name]) > 4 else {})
    dirs, sizes = [], []
    for k in (1, 8):
        d = os.path.join(tmp, '%s-%dn' % (name, k))
        os.makedirs(d)
        p = gen(d, n * k)
        dirs.append(p)
        sizes.append(input_bytes(d))
    base = baseline_rss(tensorctl, tmp) if meter == 'cpu' else 0
    out = []
    for cmd in cmds:
        before = [open(p, 'rb').read() if os.path.isfile(p) else None for p in dirs]
        v = measure(tensorctl, name, cmd, dirs, sizes, tmp, meter, base, full)
        if [open(p, 'rb').read() if os.path.isfile(p) else None for p in dirs] != before:
            v.problems.append('the input file changed')
        out.append(v)
    return out


def profile(a):
    """callgrind over each command of a case at scale K, with the top of callgrind_annotate."""
    need_valgrind('callgrind')
    tmp = tempfile.mkdtemp(prefix='cplx-prof-', dir=a.tmp)
    try:
        for c in a.case or []:
            gen, n, cmds, _ = CASES[c][:4]
            d = os.path.join(tmp, c)
            os.makedirs(d)
            inp = gen(d, n * a.scale)
            for i, cmd in enumerate(cmds):
                if a.command is not None and i != a.command:
                    continue
                outdir = tempfile.mkdtemp(dir=tmp)
                cg = os.path.join(tmp, 'cg.out')
                args, _ = prepare(cmd, inp, outdir)
                subprocess.run(['valgrind', '--tool=callgrind', '--callgrind-out-file=' + cg, '-q',
                                os.path.abspath(a.tensorctl)] + args,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                ann = subprocess.run(['callgrind_annotate', '--inclusive=no', cg], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL).stdout.decode(errors='replace').splitlines()
                print('== %s: tensorctl %s (n x %d, %d input bytes)' % (c, ' '.join(split(cmd)[0]), a.scale,
                                                                        input_bytes(d)))
                start = next((k for k, l in enumerate(ann) if 'file:function' in l), 0)
                print('\n'.join(ann[max(0, start - 4):start + 16]))
                shutil.rmtree(outdir, ignore_errors=True)
                os.unlink(cg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def need_valgrind(meter):
    if meter == 'callgrind' and not shutil.which('valgrind'):
        sys.exit('complexity.py: --meter callgrind needs valgrind')


def line(v, meter):
    if v.ok:
        return 'ok %s: %s: time x%.1f (%s -> %s), memory x%s' % (
            v.case, v.what, v.tratio, fmt_cost(v.r1.cost, meter), fmt_cost(v.r8.cost, meter),
            '%.1f' % v.mratio if v.mratio is not None else '-')
    return 'FAIL %s: %s: %s' % (v.case, v.what, '; '.join(v.problems))


def default_tmp():
    """/dev/shm when there is one (fsync costs nothing there and does not vary), else the system's."""
    try:
        st = os.statvfs('/dev/shm')
        if os.access('/dev/shm', os.W_OK) and st.f_bavail * st.f_frsize > (2 << 30):
            return '/dev/shm'
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('action', choices=['list', 'check', 'report', 'gen', 'profile'])
    ap.add_argument('outdir', nargs='?')
    ap.add_argument('--tensorctl')
    ap.add_argument('--case', action='append')
    ap.add_argument('--scale', type=int, default=1)
    ap.add_argument('--command', type=int, help='profile: which of the case\'s commands (0 first; default all)')
    ap.add_argument('--meter', choices=['cpu', 'callgrind'], default='cpu')
    ap.add_argument('--runner', help='cplx_run built from cplx_run.c (default: build it with cc)')
    ap.add_argument('--tmp', help='folder for inputs and outputs (default: /dev/shm when usable)')
    a = ap.parse_intermixed_args()
    if a.tmp is None:
        a.tmp = default_tmp()
    if a.action == 'list':
        print('\n'.join(CASES))
        return 0
    if a.action == 'gen':
        os.makedirs(a.outdir, exist_ok=True)
        for c in a.case or CASES:
            d = os.path.join(a.outdir, c)
            os.makedirs(d, exist_ok=True)
            print(CASES[c][0](d, CASES[c][1] * a.scale))
        return 0
    if not a.tensorctl:
        ap.error('--tensorctl is required')
    if a.action == 'profile':
        return profile(a)
    need_valgrind(a.meter)
    tensorctl = os.path.abspath(a.tensorctl)
    cases = a.case or (list(CASES) if a.action == 'report' else None)
    if not cases:
        ap.error('check needs --case')
    for c in cases:
        if c not in CASES:
            ap.error('unknown case %s' % c)
    fails = 0
    rtmp = tempfile.mkdtemp(prefix='cplx-run-', dir=a.tmp)
    try:
        find_runner(a.runner, rtmp)
        fails = run_cases(a, tensorctl, cases)
    finally:
        shutil.rmtree(rtmp, ignore_errors=True)
    return 1 if fails else 0


def run_cases(a, tensorctl, cases):
    fails = 0
    if a.action == 'report':
        print('%-22s %-44s %9s %9s %8s %7s %9s %9s %7s  %s' % (
            'case', 'command', 'input(n)', 'cost(n)', 'cost(8n)', 'time', 'rss(n)', 'rss(8n)', 'memory', 'verdict'))
    for c in cases:
        tmp = tempfile.mkdtemp(prefix='cplx-', dir=a.tmp)
        try:
            vs = run_case(tensorctl, c, tmp, a.meter, a.action == 'report')
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for v in vs:
            fails += not v.ok
            if a.action == 'check':
                print(line(v, a.meter))
                continue
            r1, r8 = v.r1, v.r8
            print('%-22s %-44s %9s %9s %8s %7s %9s %9s %7s  %s' % (
                c, v.what[:44], '%dB' % v.size1, fmt_cost(r1.cost, a.meter).replace(' ', ''),
                fmt_cost(r8.cost, a.meter).replace(' ', '') if r8 else '-',
                ('x%.1f' % v.tratio) if v.tratio is not None else '-',
                mib(r1.rss).replace(' ', ''), mib(r8.rss).replace(' ', '') if r8 else '-',
                ('x%.1f' % v.mratio) if v.mratio is not None else '-',
                'ok' if v.ok else 'FAIL: ' + '; '.join(v.problems)))
            sys.stdout.flush()
    return fails


if __name__ == '__main__':
    sys.exit(main())
