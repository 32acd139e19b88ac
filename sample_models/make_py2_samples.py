#!/usr/bin/env python3
"""Write checkpoints exactly as torch 0.3.1 / 0.4.1 under CPython 2.7 (cPickle, protocol 2) wrote
them, and beside each one NAME.expect.json made from what real torch loads.

    python3 sample_models/make_py2_samples.py            # write the .pt files (no torch needed)
    python3 sample_models/make_py2_samples.py --expect   # and the expect files + py2_load_matrix.json

There is no Python 2 here, so the bytes come from a small emulation of CPython 2.7's cPickle fed
with the objects torch 0.3/0.4 handed it. Each fact below names where it was read; [ours] marks a
choice of this script (tensor values, storage addresses, object ids), [inferred] a fact reasoned
out but not read in that version's source. Output is deterministic.

SOURCES: torch 0.3.1 / 0.4.0 / 0.4.1 Python sources as published in pytorch/pytorch.github.io
docs/<version>/_modules/... ("docs/0.4.0 serialization" below); CPython 2.7.11 Modules/cPickle.c,
Objects/{dict,string,unicode,set}object.c, Python/{ceval,compile}.c, Lib/collections.py (read in
the GitHub mirror hzxzh/MyPython_2_7_11); pytorch/pytorch#8633 (Parameter pickling, June 2018).

The legacy (non-zip) file (docs/0.3.1 and docs/0.4.0 serialization, `_save`): back to back
  1. pickle of MAGIC_NUMBER 0x1950a86a20f9469cfc6c, a py2 long -> LONG1, 10 bytes;
  2. pickle of PROTOCOL_VERSION 1001 -> BININT2;
  3. pickle of sys_info = dict(protocol_version=1001, little_endian=True,
     type_sizes=dict(short=2, int=4, long=4))  ('=l' is the standard size, 4);
  4. the object: `pickle_module.Pickler(f, protocol=2)` with `.persistent_id = persistent_id`,
     pickle_module being cPickle under Python 2;
  5. pickle of `sorted(serialized_storages.keys())` (str keys: byte-wise order, not numeric), then
     per key `_write_file`: int64 element count, then the raw little-endian data [inferred from
     the loader's reading of the same format; THPStorage writeFileRaw not read for 0.3/0.4].
Every `pickle_module.dump` is a fresh Pickler: its own PROTO, memo and STOP.

persistent_id of a storage (same text in docs/0.3.0 and docs/0.4.0 serialization) returns
    ('storage', normalize_storage_type(type(obj)), str(root._cdata), location_tag(obj),
     root.size(), view_metadata)
  * normalize_storage_type = getattr(torch, type.__name__): torch.cuda.HalfStorage is written as
    GLOBAL 'torch HalfStorage';
  * the key is str() of the THStorage pointer, a decimal [ours: made-up values of 8, 14 and 15
    digits, as non-PIE heaps, PIE heaps and mmap/thread arenas give; their byte-wise sort is
    not numeric];
  * location_tag: _cpu_tag returns the constant 'cpu'; _cuda_tag returns
    'cuda:' + str(obj.get_device()), a new string at every call;
  * root.size() counts the elements of the whole storage; view_metadata is None unless a storage
    slice (not a tensor view) was saved. Tensor views share the root storage and its key.

cPickle (cPickle.c `put`, `put2`, `save`, `save_reduce`, `save_tuple`, `batch_*`, `save_int`):
  * memo ids start at 1 (p = len(memo) + 1); BINPUT below 256, LONG_BINPUT from 256;
  * `save` looks an object up in the memo only when its refcount is > 1, and `put` memoizes only
    objects with refcount >= 2; `put2` (non-empty lists and dicts, and a REDUCE with a non-dict
    state) always memoizes; strings of length 0 or 1 and the empty tuple never;
  * a REDUCEd object is memoized after REDUCE: save() holds the bound __reduce_ex__, whose
    im_self is the object, so its refcount is >= 2 - except when that method is bound to another
    object, as for super(Parameter, self);
  * hence never memoized: the persistent-id tuple, the reduce argument tuple, tuple(size) and
    stride() (all refcount 1), 'cuda:N', and a str referenced by one dict only (str(args));
    memoized once then BINGET: 'storage' and 'cpu' (function constants), GLOBALs, interned key
    names; the storage key string is memoized the first time (it is also serialized_storages'
    dict key) and written again, unmemoized, at every later reference to the same storage
    (str(_cdata) makes a new string and the dict keeps its first key);
  * int: BININT1/BININT2/BININT when it fits 32 bits, else the TEXT opcode INT 'I<digits>\\n'
    (save_int with SIZEOF_LONG > 4); long: LONG1; float: BINFLOAT; str: SHORT_BINSTRING below
    256 bytes, else BINSTRING; unicode: BINUNICODE (UTF-8); bool: NEWTRUE/NEWFALSE; a class or
    function: GLOBAL with its __module__ (Python 2 names: set is '__builtin__ set');
  * a dict is written in hash-table order (batch_dict_exact walks PyDict_Next): one item as key
    value SETITEM, more as MARK ... SETITEMS; lists likewise with APPEND / APPENDS.
Hash-table order is CPython 2.7's (64-bit, no -R): string/unicode hash x = c0 << 7,
x = 1000003*x ^ c, x ^= len; int hash = value; probing i = 5i + perturb + 1, perturb >>= 5; 8 slots,
resized to the smallest power of two above 4*used when fill*3 >= 2*slots (dictobject.c; sets the
same, setobject.c). A dict display is BUILD_MAP n (presized when n > 5) then STORE_MAP in source
order; a comprehension BUILD_MAP 0 then MAP_ADD; dict(a=.., b=..) builds its keyword dict
last-keyword-first (ceval.c update_keyword_args pops them) and PyDict_Merge copies it in table
order. Checked against known Python 2 results: hash('a') == 12416037344; {'a','b','c'} iterates
a, c, b; {'x','y'} iterates y, x. Unicode keys hash as UCS4 code points [inferred: Linux
distributions built 2.7 with UCS4].

collections.OrderedDict (Lib/collections.py 2.7.11): __reduce__ returns
(OrderedDict, ([[k, v], ...],)) - a list of 2-element LISTS - and, when the instance has
attributes besides its two private ones, their dict as a third element, written after REDUCE
with BUILD. A state_dict is GLOBAL 'collections OrderedDict' ] MARK ... APPENDS TUPLE1 REDUCE.

Tensors:
  * 0.3.1 (docs/0.3.1 tensor): _TensorBase.__reduce__ returns (_rebuild_tensor,
    (self.storage(), self.storage_offset(), tuple(self.size()), self.stride())): GLOBAL
    'torch._utils _rebuild_tensor' and a 4-tuple. stride() gave a tuple [inferred].
    state_dict() stores `param.data`; 0.2/0.3's THPVariable_get_data caches the data tensor
    object (`if (!self->data) self->data = createPyObject(...)`; python_variable.cpp of that era,
    read in copies not tagged with a version), so a tied weight is ONE tensor object: its second
    key is a BINGET of the first REDUCE.
    cuDNN RNNs on the GPU: flatten_parameters() re-points every weight into one weight buffer
    (W_ih, W_hh, b_ih, b_hh per layer [inferred from memory of 0.3's cudnn/rnn.py
    get_parameters]): views of one storage at increasing offsets.
  * 0.4.0 / 0.4.1 (docs/0.4.0 tensor, docs/0.4.1 _utils): Tensor.__reduce_ex__ returns
    (torch._utils._rebuild_tensor_v2, (storage, storage_offset, tuple(size), stride(),
    requires_grad, self._backward_hooks)). _backward_hooks is None unless a hook was registered
    (THPVariable_get_backwards_hooks returns None); OrderedDict() there only came in torch 1.0.
    No metadata argument, and no _rebuild_parameter in 0.4.1's _utils (it came in 1.0).
    `param.data` makes a new tensor object at every call in 0.4 (THPVariable_Wrap(make_variable(
    ...))), so tied weights in a 0.4 state_dict are two REDUCEs of one storage key.
  * 0.4.1 state_dict (module.py of 0.4.1 as copied in public repositories; docs/0.4.1
    batchnorm: BatchNorm _version = 2, num_batches_tracked = 0-dim int64,
    _load_from_state_dict(state_dict, prefix, metadata, ...)): destination._metadata =
    OrderedDict(); every module, parent before children, sets
    _metadata[prefix[:-1]] = dict(version=self._version); buffers are stored as buf.data.
    0.3.1 has no _metadata.
  * Parameters: 0.3.1 Variable.__reduce_ex__(proto 2) (docs/0.3.1 autograd/variable) returns
    type(self), (self.data,), (requires_grad, volatile, _backward_hooks): REDUCE, then BUILD with
    a 3-tuple. 0.4.0's Parameter has no __reduce_ex__ (docs/0.4.0 nn/parameter): a plain tensor
    REDUCE. 0.4.1 (pytorch/pytorch#8633) returns Parameter, (super(Parameter, self),
    self.requires_grad): the super object goes through Tensor.__reduce_ex__ (a _rebuild_tensor_v2
    REDUCE with requires_grad, not memoized), then REDUCE of GLOBAL 'torch.nn.parameter
    Parameter' [the final form read in copies of 0.4.1's parameter.py; 0.4.1's own docs page is
    not stored].
  * Optimizer.state_dict (docs/0.4.0 optim/optimizer, sgd): 'params': [id(p) ...] and 'state'
    keyed by id(p); SGD's defaults = dict(lr, momentum, dampening, weight_decay, nesterov) set on
    the group with setdefault; momentum_buffer = torch.zeros_like(p.data). On 64-bit Python 2
    id() is an int above 2**31: cPickle writes it with the text opcode INT, which torch's
    weights_only unpickler rejects ("Unsupported operand 73") in 1.13 and 2.15.

What real torch does with them (py2_load_matrix.py, recorded in py2_load_matrix.json and each
expect note): torch.load decodes py2 str with encoding='utf-8', so every key comes back a Python 3
str, in 1.13 and 2.15, with weights_only False or True; both torches give the same tensors.
weights_only=True fails on the training checkpoint (INT) in both, and on the set/BINSTRING file
in both for different reasons (1.13: "Unsupported class __builtin__.set"; 2.15: BINSTRING,
"Unsupported operand 84").

Files:
  py2_torch03_state_dict_cuda0.pt    0.3.1 word-LM state_dict: tied encoder/decoder weight (one
                                     object, BINGET) and cuDNN-flattened LSTM weights (four views
                                     of one storage at offsets 0, 1024, 2048, 2112), cuda:0
  py2_torch04_state_dict_cuda1.pt    0.4.1 state_dict with _metadata (BUILD), float16 conv/fc
                                     weights, float32 BatchNorm, int64 0-dim num_batches_tracked,
                                     uint8 buffer, cuda:1
  py2_torch04_train_ckpt_cuda0.pt    0.4.1 ImageNet-example checkpoint: epoch, arch, DataParallel
                                     state_dict, best_prec1 (float), SGD state_dict with momentum
                                     buffers, INT-opcode ids, a py2 long ('seed' [ours]), cuda:0
  py2_unicode_keys_cpu.pt            str and unicode keys mixed, UTF-8 bytes in str keys and
                                     values, non-ASCII unicode keys, cpu
  py2_torch041_params_keep_vars_cuda0.pt  state_dict(keep_vars=True) in 0.4.1: Parameters as
                                     Parameter(super(...)) REDUCEs, a tied Parameter (BINGET), a
                                     frozen one, plain buffers
  py2_torch03_parameters_build_cpu.pt  0.3.1 Variable-style Parameters: REDUCE + BUILD(3-tuple)
  py2_torch04_builtin_set_binstring_cpu.pt  a set (GLOBAL '__builtin__ set', the Python 2 module
                                     name) and a str of 256+ bytes (BINSTRING) beside a state_dict
"""

import argparse
import collections
import hashlib
import json
import math
import os
import random
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------
# CPython 2.7 hashing and dict layout (LP64, hash randomization off, as 2.7 ships)

M64 = (1 << 64) - 1


def _s64(x):
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _seq_hash(units):
    if not units:
        return 0
    x = units[0] << 7
    for c in units:
        x = _s64(1000003 * x) ^ c
    x = _s64(x ^ len(units))
    return -2 if x == -1 else x


def py2_hash(key):
    if isinstance(key, Str2):
        return _seq_hash(key.b)
    if isinstance(key, Uni2):
        return _seq_hash([ord(c) for c in key.s])   # UCS4 build (Linux distributions)
    if isinstance(key, (int, Long2)) and not isinstance(key, bool):
        v = int(key)
        if -(1 << 63) <= v < (1 << 63):
            return -2 if v == -1 else v
    raise TypeError("no Python 2 hash for %r" % (key,))


def py2_eq(a, b):
    if isinstance(a, (Str2, Uni2)) and isinstance(b, (Str2, Uni2)):
        def text(k):
            if isinstance(k, Uni2):
                return ("u", k.s)
            try:
                return ("u", k.b.decode("ascii"))
            except UnicodeDecodeError:
                return ("b", k.b)
        return text(a) == text(b)
    if isinstance(a, (int, Long2)) and isinstance(b, (int, Long2)):
        return int(a) == int(b)
    return False


class Py2Dict:
    """The slot table of a CPython 2.7 dict: only insertions (no deletions are needed here)."""

    def __init__(self, presize=0):
        self.table = [None] * 8
        self.fill = 0
        if presize > 5:                      # _PyDict_NewPresized
            self._resize(presize)

    def _find(self, table, key, h):
        mask = len(table) - 1
        i = h & M64
        perturb = h & M64
        while True:
            e = table[i & mask]
            if e is None or e[0] is key or (e[1] == h and py2_eq(e[0], key)):
                return i & mask
            i = ((i << 2) + i + perturb + 1) & M64
            perturb >>= 5

    def _resize(self, minused):
        n = 8
        while n <= minused:
            n <<= 1
        old = self.table
        self.table = [None] * n
        for e in old:                          # insertdict_clean, in old table order
            if e is not None:
                self.table[self._find(self.table, e[0], e[1])] = e

    def _insert(self, key, value, resize=True):
        h = py2_hash(key)
        i = self._find(self.table, key, h)
        if self.table[i] is not None:
            self.table[i] = (self.table[i][0], h, value)   # replace: keeps the old key object
            return
        self.table[i] = (key, h, value)
        self.fill += 1
        if resize and self.fill * 3 >= len(self.table) * 2:
            self._resize(4 * self.fill)

    def setitem(self, key, value):           # PyDict_SetItem
        self._insert(key, value)

    def setdefault(self, key, value):
        for k, v in self.items():
            if py2_eq(k, key):
                return v
        self._insert(key, value)
        return value

    def items(self):                         # PyDict_Next order
        return [(e[0], e[2]) for e in self.table if e is not None]

    @classmethod
    def display(cls, pairs):                 # {k: v, ...}: BUILD_MAP n + STORE_MAP
        d = cls(len(pairs))
        for k, v in pairs:
            d.setitem(k, v)
        return d

    @classmethod
    def comprehension(cls, pairs):           # {k: v for ...}: BUILD_MAP 0 + MAP_ADD
        d = cls()
        for k, v in pairs:
            d.setitem(k, v)
        return d

    @classmethod
    def kwargs(cls, pairs):                  # dict(a=.., b=..): kw dict built last-first, merged
        kw = cls()
        for k, v in reversed(pairs):
            kw.setitem(k, v)
        d = cls()
        if (d.fill + kw.fill) * 3 >= len(d.table) * 2:
            d._resize((d.fill + kw.fill) * 2)
        for k, v in kw.items():
            d._insert(k, v, resize=False)     # PyDict_Merge uses insertdict directly
        return d


# ---------------------------------------------------------------------------
# Python 2 objects, as cPickle sees them

class Str2:
    """A py2 str (bytes). memo: whether cPickle memoizes it (refcount >= 2 when pickled)."""

    def __init__(self, b, memo=True):
        self.b = b if isinstance(b, bytes) else b.encode("utf-8")
        self.memo = memo

    def __repr__(self):
        return "Str2(%r)" % self.b


class Uni2:
    def __init__(self, s, memo=True):
        self.s = s
        self.memo = memo

    def __repr__(self):
        return "Uni2(%r)" % self.s


class Long2(int):
    """A py2 long (LONG1), as opposed to a py2 int."""


class Tup2:
    def __init__(self, items, memo=False):
        self.items = list(items)
        self.memo = memo


class List2:
    def __init__(self, items, memo=True):
        self.items = list(items)
        self.memo = memo


class Dict2:
    def __init__(self, d, memo=True):
        self.d = d
        self.memo = memo


class Glob:
    _cache = {}

    def __new__(cls, module, name):
        key = (module, name)
        if key not in cls._cache:
            obj = object.__new__(cls)
            obj.module, obj.name = module, name
            cls._cache[key] = obj
        return cls._cache[key]


class Red:
    """An object pickled by REDUCE (+ BUILD when state is given)."""

    def __init__(self, func, args, state=None, memo=True):
        self.func, self.args, self.state, self.memo = func, args, state, memo


class Storage:
    TYPES = {"FloatStorage": ("<f", 4), "HalfStorage": ("<e", 2), "LongStorage": ("<q", 8),
             "ByteStorage": ("<B", 1), "DoubleStorage": ("<d", 8), "IntStorage": ("<i", 4)}

    def __init__(self, type_name, key, location, values):
        fmt, size = self.TYPES[type_name]
        self.type_name = type_name
        self.key = key
        self.key_obj = Str2(key)               # the first str(_cdata): dict key, memoized
        self.location = location
        self.numel = len(values)
        self.data = b"".join(struct.pack(fmt, v) for v in values)
        assert len(self.data) == self.numel * size


class StorageArg:
    """The storage inside a tensor's reduce arguments (tensor.storage(): a new wrapper each time,
    pickled through persistent_id)."""

    def __init__(self, storage):
        self.storage = storage


STORAGE_TAG = Str2(b"storage")   # constant of persistent_id: memoized once
CPU_TAG = Str2(b"cpu")           # constant of _cpu_tag: memoized once


class CPickler:
    """cPickle.Pickler(f, protocol=2) of CPython 2.7.11, for the objects above."""

    def __init__(self):
        self.out = bytearray()
        self.memo = {}
        self.keep = []
        self.seen_storages = set()

    def dump(self, obj):
        self.out += b"\x80\x02"
        self.save(obj)
        self.out += b"."
        return bytes(self.out)

    def _put(self, obj):
        n = len(self.memo) + 1
        self.memo[id(obj)] = n
        self.keep.append(obj)
        self.out += (b"q" + bytes([n])) if n < 256 else (b"r" + struct.pack("<I", n))

    def _get(self, obj):
        n = self.memo[id(obj)]
        self.out += (b"h" + bytes([n])) if n < 256 else (b"j" + struct.pack("<I", n))

    def save(self, obj):
        o = self.out
        if obj is None:
            o += b"N"
        elif obj is True or obj is False:
            o += b"\x88" if obj else b"\x89"
        elif isinstance(obj, Long2):
            v = int(obj)
            if v == 0:
                o += b"\x8a\x00"
                return
            n = (abs(v).bit_length() >> 3) + 1
            data = v.to_bytes(n, "little", signed=True)
            if v < 0 and n > 1 and data[-1] == 0xFF and data[-2] & 0x80:
                data = data[:-1]
            if len(data) < 256:
                o += b"\x8a" + bytes([len(data)])
            else:
                o += b"\x8b" + struct.pack("<i", len(data))
            o += data
        elif isinstance(obj, int):
            if -(1 << 31) <= obj < (1 << 31):
                if 0 <= obj < 0x100:
                    o += b"K" + bytes([obj])
                elif 0 <= obj < 0x10000:
                    o += b"M" + struct.pack("<H", obj)
                else:
                    o += b"J" + struct.pack("<i", obj)
            else:
                o += b"I" + str(obj).encode() + b"\n"     # save_int on LP64: text INT
        elif isinstance(obj, float):
            o += b"G" + struct.pack(">d", obj)
        elif isinstance(obj, Str2):
            if len(obj.b) >= 2 and id(obj) in self.memo:
                self._get(obj)
                return
            n = len(obj.b)
            o += (b"U" + bytes([n])) if n < 256 else (b"T" + struct.pack("<i", n))
            o += obj.b
            if n >= 2 and obj.memo:
                self._put(obj)
        elif isinstance(obj, Uni2):
            if len(obj.s) >= 2 and id(obj) in self.memo:
                self._get(obj)
                return
            b = obj.s.encode("utf-8")
            o += b"X" + struct.pack("<i", len(b)) + b
            if len(obj.s) >= 2 and obj.memo:
                self._put(obj)
        elif isinstance(obj, Tup2):
            n = len(obj.items)
            if n == 0:
                o += b")"
                return
            if id(obj) in self.memo:
                self._get(obj)
                return
            if n <= 3:
                for x in obj.items:
                    self.save(x)
                o += bytes([0x84 + n])
            else:
                o += b"("
                for x in obj.items:
                    self.save(x)
                o += b"t"
            if obj.memo:
                self._put(obj)
        elif isinstance(obj, List2):
            if id(obj) in self.memo:
                self._get(obj)
                return
            o += b"]"
            if not obj.items:
                if obj.memo:
                    self._put(obj)
                return
            self._put(obj)
            self._batch(obj.items, b"a", b"e", pairs=False)
        elif isinstance(obj, Dict2):
            if id(obj) in self.memo:
                self._get(obj)
                return
            o += b"}"
            items = obj.d.items()
            if not items:
                if obj.memo:
                    self._put(obj)
                return
            self._put(obj)
            self._batch(items, b"s", b"u", pairs=True)
        elif isinstance(obj, Glob):
            if id(obj) in self.memo:
                self._get(obj)
                return
            o += b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n"
            self._put(obj)
        elif isinstance(obj, Red):
            if id(obj) in self.memo:
                self._get(obj)
                return
            self.save(obj.func)
            self.save(obj.args)
            o += b"R"
            if obj.state is not None and not isinstance(obj.state, Dict2):
                self._put(obj)                       # put2
            elif obj.memo:
                self._put(obj)
            if obj.state is not None:
                self.save(obj.state)
                o += b"b"
        elif isinstance(obj, StorageArg):
            st = obj.storage
            first = id(st) not in self.seen_storages
            self.seen_storages.add(id(st))
            key = st.key_obj if first else Str2(st.key, memo=False)
            loc = CPU_TAG if st.location == "cpu" else Str2(st.location, memo=False)
            self.keep.append(key)
            self.save(Tup2([STORAGE_TAG, Glob("torch", st.type_name), key, loc, st.numel, None]))
            o += b"Q"
        else:
            raise TypeError("cannot pickle %r" % (obj,))

    def _batch(self, items, one, many, pairs):
        def save_item(x):
            if pairs:
                self.save(x[0])
                self.save(x[1])
            else:
                self.save(x)
        if len(items) == 1:
            save_item(items[0])
            self.out += one
            return
        for start in range(0, len(items), 1000):
            self.out += b"("
            for x in items[start:start + 1000]:
                save_item(x)
            self.out += many


def pickle2(obj):
    return CPickler().dump(obj)


# ---------------------------------------------------------------------------
# What torch 0.3 / 0.4 handed to cPickle

class Tensor:
    """A tensor as the era's state_dict held it: storage, offset, size, stride."""

    def __init__(self, storage, size, stride=None, offset=0):
        self.storage, self.size, self.offset = storage, tuple(size), offset
        if stride is None:
            stride, acc = [], 1
            for s in reversed(self.size):
                stride.insert(0, acc)
                acc *= s
        self.stride = tuple(stride)


def tensor03(t):
    """0.3 _TensorBase.__reduce__: (_rebuild_tensor, __getstate__())."""
    return Red(Glob("torch._utils", "_rebuild_tensor"),
               Tup2([StorageArg(t.storage), t.offset, Tup2(t.size), Tup2(t.stride)]))


def tensor04(t, requires_grad=False, memo=True):
    """0.4 Tensor.__reduce_ex__: (_rebuild_tensor_v2, (..., requires_grad, _backward_hooks=None))."""
    return Red(Glob("torch._utils", "_rebuild_tensor_v2"),
               Tup2([StorageArg(t.storage), t.offset, Tup2(t.size), Tup2(t.stride), requires_grad, None]),
               memo=memo)


def parameter041(t, requires_grad=True):
    """0.4.1 Parameter.__reduce_ex__: Parameter, (super(Parameter, self), self.requires_grad)."""
    inner = tensor04(t, requires_grad, memo=False)    # the super object: refcount 1, no memo
    return Red(Glob("torch.nn.parameter", "Parameter"), Tup2([inner, requires_grad]))


def parameter03(data_red, requires_grad=True, volatile=False):
    """0.3 Variable.__reduce_ex__(2): type(self), (self.data,), (requires_grad, volatile, hooks)."""
    return Red(Glob("torch.nn.parameter", "Parameter"), Tup2([data_red]),
               state=Tup2([requires_grad, volatile, None]))


def ordered_dict(pairs, metadata=None):
    """Python 2.7 OrderedDict.__reduce__: (OrderedDict, ([[k, v], ...],)[, inst_dict])."""
    items = List2([List2([k, v]) for k, v in pairs])
    state = None
    if metadata is not None:
        state = Dict2(Py2Dict.display([(Str2("_metadata"), metadata)]))
    return Red(Glob("collections", "OrderedDict"), Tup2([items]), state=state)


def py2_set(elements):
    """set([...]) in Python 2.7: the same table as a dict (setobject.c set_add_key); set.__reduce__
    returns (set, (list(self),), None), so GLOBAL '__builtin__ set' + REDUCE."""
    table = Py2Dict()
    for e in elements:
        table.setitem(e, None)
    return Red(Glob("__builtin__", "set"), Tup2([List2([k for k, _ in table.items()])]))


def metadata_041(entries):
    """state_dict._metadata in 0.4.1: OrderedDict(prefix[:-1] -> dict(version=N)), pre-order."""
    version = Str2("version")
    return ordered_dict([(Str2(p), Dict2(Py2Dict.kwargs([(version, v)]))) for p, v in entries])


def write_legacy(path, obj, storages):
    magic = pickle2(Long2(0x1950A86A20F9469CFC6C))
    proto = pickle2(1001)
    sys_info = Dict2(Py2Dict.kwargs([
        (Str2("protocol_version"), 1001),
        (Str2("little_endian"), True),
        (Str2("type_sizes"), Dict2(Py2Dict.kwargs([(Str2("short"), 2), (Str2("int"), 4),
                                                   (Str2("long"), 4)]))),
    ]))
    main = pickle2(obj)
    by_key = {}
    for st in storages:
        assert st.key not in by_key, "duplicate storage key %s" % st.key
        by_key[st.key] = st
    keys = sorted(by_key)                       # sorted(serialized_storages.keys())
    keylist = pickle2(List2([by_key[k].key_obj for k in keys]))
    raw = b"".join(struct.pack("<q", by_key[k].numel) + by_key[k].data for k in keys)
    with open(path, "wb") as f:
        f.write(magic + proto + pickle2(sys_info) + main + keylist + raw)


# ---------------------------------------------------------------------------
# Values (ours: deterministic, realistic magnitudes)

def normal(rng, n, scale):
    return [struct.unpack("<f", struct.pack("<f", rng.gauss(0.0, scale)))[0] for _ in range(n)]


def uniform(rng, n, bound):
    return [struct.unpack("<f", struct.pack("<f", rng.uniform(-bound, bound)))[0] for _ in range(n)]


def halfs(vals):
    return [struct.unpack("<e", struct.pack("<e", v))[0] for v in vals]


# ---------------------------------------------------------------------------
# The samples

def torch03_state_dict_cuda0():
    """torch 0.3.1 word_language_model RNNModel('LSTM', ntoken=50, ninp=16, nhid=16, tied) on
    cuda:0 after flatten_parameters(): model.state_dict() saved under Python 2."""
    rng = random.Random(301)
    ntok, h = 50, 16
    enc = Storage("FloatStorage", "94479702331632", "cuda:0", uniform(rng, ntok * h, 0.1))
    # cuDNN weight buffer: W_ih (4h x in), W_hh (4h x h), b_ih (4h), b_hh (4h)
    flat = Storage("FloatStorage", "94479703985696", "cuda:0",
                   uniform(rng, 4 * h * h * 2 + 8 * h, 1 / math.sqrt(h)))
    dec_b = Storage("FloatStorage", "140233563210880", "cuda:0", [0.0] * ntok)
    e = tensor03(Tensor(enc, (ntok, h)))
    sd = ordered_dict([
        (Str2("encoder.weight"), e),
        (Str2("rnn.weight_ih_l0"), tensor03(Tensor(flat, (4 * h, h), offset=0))),
        (Str2("rnn.weight_hh_l0"), tensor03(Tensor(flat, (4 * h, h), offset=4 * h * h))),
        (Str2("rnn.bias_ih_l0"), tensor03(Tensor(flat, (4 * h,), offset=8 * h * h))),
        (Str2("rnn.bias_hh_l0"), tensor03(Tensor(flat, (4 * h,), offset=8 * h * h + 4 * h))),
        (Str2("decoder.weight"), e),           # tie_weights: the same cached .data object
        (Str2("decoder.bias"), tensor03(Tensor(dec_b, (ntok,)))),
    ])
    return sd, [enc, flat, dec_b], (
        "torch 0.3.1 / Python 2.7 cPickle: state_dict of a tied LSTM language model on cuda:0; "
        "_rebuild_tensor (4 args), OrderedDict as [[k, v], ...], str keys; decoder.weight is a "
        "BINGET of encoder.weight's tensor; the four rnn.* tensors view one cuDNN weight storage "
        "at offsets 0, 1024, 2048, 2112")


def torch04_state_dict_cuda1():
    """torch 0.4.1: a net converted with .half() whose BatchNorm went back to float (the fp16
    recipe of the time), with a registered uint8 buffer, on cuda:1."""
    rng = random.Random(401)
    mask = Storage("ByteStorage", "94812034512976", "cuda:1", [rng.randint(0, 1) for _ in range(32)])
    conv = Storage("HalfStorage", "94812035004528", "cuda:1", halfs(normal(rng, 8 * 3 * 3 * 3, 0.2)))
    bn_w = Storage("FloatStorage", "94812034997440", "cuda:1", [rng.uniform(0, 1) for _ in range(8)])
    bn_b = Storage("FloatStorage", "94812035011216", "cuda:1", normal(rng, 8, 0.05))
    bn_m = Storage("FloatStorage", "94812035020320", "cuda:1", normal(rng, 8, 0.3))
    bn_v = Storage("FloatStorage", "94812035026112", "cuda:1", [abs(x) + 0.5 for x in normal(rng, 8, 0.4)])
    bn_n = Storage("LongStorage", "94812035031808", "cuda:1", [1200])
    fc_w = Storage("HalfStorage", "140390115667968", "cuda:1", halfs(uniform(rng, 4 * 8, 0.35)))
    fc_b = Storage("HalfStorage", "140390115668480", "cuda:1", halfs(uniform(rng, 4, 0.35)))
    sd = ordered_dict([
        (Str2("mask"), tensor04(Tensor(mask, (4, 8)))),
        (Str2("conv.weight"), tensor04(Tensor(conv, (8, 3, 3, 3)))),
        (Str2("bn.weight"), tensor04(Tensor(bn_w, (8,)))),
        (Str2("bn.bias"), tensor04(Tensor(bn_b, (8,)))),
        (Str2("bn.running_mean"), tensor04(Tensor(bn_m, (8,)))),
        (Str2("bn.running_var"), tensor04(Tensor(bn_v, (8,)))),
        (Str2("bn.num_batches_tracked"), tensor04(Tensor(bn_n, ()))),
        (Str2("fc.weight"), tensor04(Tensor(fc_w, (4, 8)))),
        (Str2("fc.bias"), tensor04(Tensor(fc_b, (4,)))),
    ], metadata=metadata_041([("", 1), ("conv", 1), ("bn", 2), ("fc", 1)]))
    return sd, [mask, conv, bn_w, bn_b, bn_m, bn_v, bn_n, fc_w, fc_b], (
        "torch 0.4.1 / Python 2.7 cPickle: state_dict with _metadata (OrderedDict BUILD), "
        "_rebuild_tensor_v2 with requires_grad=False and backward_hooks=None; float16 conv/fc, "
        "float32 BatchNorm, 0-dim int64 num_batches_tracked, uint8 buffer; every storage cuda:1")


def torch04_train_ckpt_cuda0():
    """torch 0.4.1 pytorch/examples imagenet save_checkpoint({...}) with DataParallel and SGD."""
    rng = random.Random(402)
    loc = "cuda:0"
    conv = Storage("FloatStorage", "94229161253120", loc, normal(rng, 4 * 3 * 3 * 3, 0.27))
    bn_w = Storage("FloatStorage", "94229161260368", loc, [rng.uniform(0.5, 1.5) for _ in range(4)])
    bn_b = Storage("FloatStorage", "94229161262400", loc, normal(rng, 4, 0.1))
    bn_m = Storage("FloatStorage", "94229161264432", loc, normal(rng, 4, 0.2))
    bn_v = Storage("FloatStorage", "94229161266464", loc, [abs(x) + 0.8 for x in normal(rng, 4, 0.2)])
    bn_n = Storage("LongStorage", "94229161268496", loc, [50050])
    fc_w = Storage("FloatStorage", "94229161270528", loc, uniform(rng, 3 * 4, 0.5))
    fc_b = Storage("FloatStorage", "94229161272560", loc, uniform(rng, 3, 0.5))
    params = [("conv1.weight", conv, (4, 3, 3, 3)), ("bn1.weight", bn_w, (4,)), ("bn1.bias", bn_b, (4,)),
              ("fc.weight", fc_w, (3, 4)), ("fc.bias", fc_b, (3,))]
    # momentum buffers: torch.zeros_like(p.data) at the first step, on the GPU, new storages
    mom_keys = ["140076915884544", "140076915885056", "140076915885568", "94229162031648",
                "94229162033680"]
    moms = [Storage("FloatStorage", k, loc, normal(rng, st.numel, 0.01))
            for k, (_, st, _) in zip(mom_keys, params)]
    prefix = "module."
    sd = ordered_dict([
        (Str2(prefix + "conv1.weight"), tensor04(Tensor(conv, (4, 3, 3, 3)))),
        (Str2(prefix + "bn1.weight"), tensor04(Tensor(bn_w, (4,)))),
        (Str2(prefix + "bn1.bias"), tensor04(Tensor(bn_b, (4,)))),
        (Str2(prefix + "bn1.running_mean"), tensor04(Tensor(bn_m, (4,)))),
        (Str2(prefix + "bn1.running_var"), tensor04(Tensor(bn_v, (4,)))),
        (Str2(prefix + "bn1.num_batches_tracked"), tensor04(Tensor(bn_n, ()))),
        (Str2(prefix + "fc.weight"), tensor04(Tensor(fc_w, (3, 4)))),
        (Str2(prefix + "fc.bias"), tensor04(Tensor(fc_b, (3,)))),
    ], metadata=metadata_041([("", 1), ("module", 1), ("module.conv1", 1), ("module.bn1", 2),
                              ("module.relu", 1), ("module.fc", 1)]))
    # id() of the five Parameter objects (ours; 80-byte pymalloc spacing of a 64-bit heap)
    ids = [140076916101984, 140076916102064, 140076916102144, 140076916102304, 140076916102384]
    # SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4): defaults = dict(lr=...,
    # momentum=..., dampening=0, weight_decay=..., nesterov=False); group = {'params': [...]}
    # then group.setdefault(name, default) over defaults.items()
    defaults = Py2Dict.kwargs([(Str2("lr"), 0.1), (Str2("momentum"), 0.9), (Str2("dampening"), 0),
                               (Str2("weight_decay"), 0.0001), (Str2("nesterov"), False)])
    params_key = Str2("params")
    group = Py2Dict.display([(params_key, "param list")])
    for k, v in defaults.items():
        group.setdefault(k, v)
    packed = Py2Dict.comprehension([(k, v) for k, v in group.items() if k is not params_key])
    packed.setitem(params_key, List2(ids))
    # self.state: a defaultdict keyed by the Parameters (hash = id), filled in step() order;
    # packed_state = {id(k): v for k, v in self.state.items()}
    mb = Str2("momentum_buffer")
    state = Py2Dict()
    for pid, (_, _, shape), st in zip(ids, params, moms):
        state.setitem(pid, Dict2(Py2Dict.display([(mb, tensor04(Tensor(st, shape)))])))
    packed_state = Py2Dict.comprehension(state.items())
    opt = Dict2(Py2Dict.display([(Str2("state"), Dict2(packed_state)),
                                 (Str2("param_groups"), List2([Dict2(packed)]))]))
    ckpt = Dict2(Py2Dict.display([
        (Str2("epoch"), 10),
        (Str2("arch"), Str2("resnet18")),
        (Str2("state_dict"), sd),
        (Str2("best_prec1"), 0.75),
        (Str2("optimizer"), opt),
        (Str2("seed"), Long2(13249421950716393479)),
    ]))
    storages = [conv, bn_w, bn_b, bn_m, bn_v, bn_n, fc_w, fc_b] + moms
    return ckpt, storages, (
        "torch 0.4.1 / Python 2.7 cPickle: ImageNet-example checkpoint {'epoch', 'arch', "
        "'state_dict' (DataParallel 'module.' keys, _metadata), 'best_prec1' (BINFLOAT), "
        "'optimizer' (SGD: momentum buffers under 'state' keyed by id(p), 'param_groups' with "
        "lr/momentum/dampening/weight_decay/nesterov and 'params' = ids), 'seed' (py2 long, "
        "LONG1)}; the ids are py2 ints above 2**31, written with the text opcode INT; py2 dict "
        "order; every storage cuda:0")


def unicode_keys_cpu():
    """torch 0.4.1, a utf-8 source file without unicode_literals: a state_dict renamed through a
    mapping read from JSON (unicode values), saved with a few other entries."""
    rng = random.Random(403)
    emb = Storage("FloatStorage", "93952157443520", "cpu", normal(rng, 10 * 4, 1.0))
    pw = Storage("FloatStorage", "93952157451712", "cpu", uniform(rng, 16, 0.5))
    pb = Storage("FloatStorage", "93952157453744", "cpu", uniform(rng, 4, 0.5))
    hw = Storage("FloatStorage", "93952157455776", "cpu", uniform(rng, 12, 0.5))
    hb = Storage("FloatStorage", "93952157457808", "cpu", uniform(rng, 3, 0.5))
    leg = Storage("FloatStorage", "93952158012416", "cpu", [0.5, 1.5, 2.5])
    renamed = ordered_dict([
        (Str2("embed.weight"), tensor04(Tensor(emb, (10, 4)))),
        (Uni2(u"proje\u00e7\u00e3o.weight"), tensor04(Tensor(pw, (4, 4)))),
        (Str2("proj.bias"), tensor04(Tensor(pb, (4,)))),
        (Uni2(u"classifier.weight"), tensor04(Tensor(hw, (3, 4)))),
        (Uni2(u"classifier.bias"), tensor04(Tensor(hb, (3,)))),
    ])
    obj = Dict2(Py2Dict.display([
        (Str2("state_dict"), renamed),
        (Uni2(u"vocab_size"), 10),
        (Str2(u"l\u00e9gende".encode("utf-8")), tensor04(Tensor(leg, (3,)))),
        (Uni2(u"mod\u00e8le"), Str2(u"t\u00eate".encode("utf-8"))),
    ]))
    return obj, [emb, pw, pb, hw, hb, leg], (
        "torch 0.4.1 / Python 2.7 cPickle: str keys (SHORT_BINSTRING), unicode keys (BINUNICODE), "
        "a non-ASCII unicode key u'proje\u00e7\u00e3o.weight', a non-ASCII str key "
        "'l\u00e9gende' and str value 't\u00eate' stored as UTF-8 bytes (torch.load decodes py2 "
        "str with encoding='utf-8'); every storage cpu")


def params_keep_vars_cuda0():
    """torch 0.4.1: torch.save(model.state_dict(keep_vars=True)) of a language model whose frozen
    embedding is tied to the decoder."""
    rng = random.Random(404)
    loc = "cuda:0"
    emb = Storage("FloatStorage", "94683328901120", loc, normal(rng, 12 * 4, 1.0))
    ew = Storage("FloatStorage", "94683328905216", loc, uniform(rng, 16, 0.5))
    eb = Storage("FloatStorage", "94683328907248", loc, uniform(rng, 4, 0.5))
    bw = Storage("FloatStorage", "94683328909280", loc, [1.0] * 4)
    bb = Storage("FloatStorage", "94683328911312", loc, [0.0] * 4)
    bm = Storage("FloatStorage", "94683328913344", loc, normal(rng, 4, 0.1))
    bv = Storage("FloatStorage", "94683328915376", loc, [abs(x) + 0.9 for x in normal(rng, 4, 0.1)])
    bn = Storage("LongStorage", "94683328917408", loc, [7])
    db = Storage("FloatStorage", "94683328919440", loc, uniform(rng, 12, 0.5))
    embed = parameter041(Tensor(emb, (12, 4)), requires_grad=False)   # frozen
    sd = ordered_dict([
        (Str2("embed.weight"), embed),
        (Str2("enc.weight"), parameter041(Tensor(ew, (4, 4)))),
        (Str2("enc.bias"), parameter041(Tensor(eb, (4,)))),
        (Str2("bn.weight"), parameter041(Tensor(bw, (4,)))),
        (Str2("bn.bias"), parameter041(Tensor(bb, (4,)))),
        (Str2("bn.running_mean"), tensor04(Tensor(bm, (4,)))),
        (Str2("bn.running_var"), tensor04(Tensor(bv, (4,)))),
        (Str2("bn.num_batches_tracked"), tensor04(Tensor(bn, ()))),
        (Str2("dec.weight"), embed),          # self.dec.weight = self.embed.weight
        (Str2("dec.bias"), parameter041(Tensor(db, (12,)))),
    ], metadata=metadata_041([("", 1), ("embed", 1), ("enc", 1), ("bn", 2), ("dec", 1)]))
    return sd, [emb, ew, eb, bw, bb, bm, bv, bn, db], (
        "torch 0.4.1 / Python 2.7 cPickle: state_dict(keep_vars=True): Parameters pickled as "
        "REDUCE(torch.nn.parameter.Parameter, (REDUCE(_rebuild_tensor_v2, ...), requires_grad)) "
        "(0.4.1's Parameter.__reduce_ex__ returns Parameter, (super(Parameter, self), "
        "requires_grad)); dec.weight is a BINGET of the frozen embed.weight Parameter; buffers are "
        "plain tensors; every storage cuda:0")


def torch03_parameters_build_cpu():
    """torch 0.3.1: torch.save({'weight': p, 'frozen': q, 'alias': p}) of Parameters on the cpu."""
    rng = random.Random(302)
    s1 = Storage("FloatStorage", "31542816", "cpu", normal(rng, 12, 0.5))
    s2 = Storage("FloatStorage", "31546240", "cpu", normal(rng, 6, 0.5))
    p = parameter03(tensor03(Tensor(s1, (3, 4))), requires_grad=True)
    q = parameter03(tensor03(Tensor(s2, (6,))), requires_grad=False)
    obj = Dict2(Py2Dict.display([(Str2("weight"), p), (Str2("frozen"), q), (Str2("alias"), p)]))
    return obj, [s1, s2], (
        "torch 0.3.1 / Python 2.7 cPickle: Variable-era Parameters: REDUCE(Parameter, "
        "(REDUCE(_rebuild_tensor, ...),)) then BUILD with (requires_grad, volatile, "
        "backward_hooks); 'alias' is a BINGET of 'weight'; every storage cpu")


def builtin_set_binstring_cpu():
    """torch 0.4.1: torch.save({'model': model.state_dict(), 'classes': set([...]),
    'args': str(args)}) on the cpu."""
    rng = random.Random(405)
    w = Storage("FloatStorage", "94101533516544", "cpu", uniform(rng, 6, 0.5))
    b = Storage("FloatStorage", "94101533518576", "cpu", uniform(rng, 2, 0.5))
    sd = ordered_dict([(Str2("weight"), tensor04(Tensor(w, (2, 3)))),
                       (Str2("bias"), tensor04(Tensor(b, (2,))))],
                      metadata=metadata_041([("", 1)]))
    args = ("Namespace(arch='resnet18', batch_size=256, data='/data/imagenet', dist_backend='gloo', "
            "dist_url='tcp://224.66.41.62:23456', epochs=90, evaluate=False, gpu=None, lr=0.1, "
            "momentum=0.9, pretrained=False, print_freq=10, resume='', seed=None, start_epoch=0, "
            "weight_decay=0.0001, workers=4, world_size=1)")
    obj = Dict2(Py2Dict.display([
        (Str2("model"), sd),
        (Str2("classes"), py2_set([Str2("cat"), Str2("dog"), Str2("bird")])),
        (Str2("args"), Str2(args, memo=False)),   # str(args): held by the dict only, refcount 1
    ]))
    assert len(args) >= 256
    return obj, [w, b], (
        "torch 0.4.1 / Python 2.7 cPickle: a set pickled as GLOBAL '__builtin__ set' (Python 2 "
        "module name) + REDUCE of a list, and a py2 str of %d bytes as BINSTRING (not memoized: "
        "str(args) is referenced by the dict only); state_dict with _metadata; every storage "
        "cpu" % len(args))


SAMPLES = [
    ("py2_torch03_state_dict_cuda0.pt", torch03_state_dict_cuda0),
    ("py2_torch04_state_dict_cuda1.pt", torch04_state_dict_cuda1),
    ("py2_torch04_train_ckpt_cuda0.pt", torch04_train_ckpt_cuda0),
    ("py2_unicode_keys_cpu.pt", unicode_keys_cpu),
    ("py2_torch041_params_keep_vars_cuda0.pt", params_keep_vars_cuda0),
    ("py2_torch03_parameters_build_cpu.pt", torch03_parameters_build_cpu),
    ("py2_torch04_builtin_set_binstring_cpu.pt", builtin_set_binstring_cpu),
]

NOTES = {}

# ---------------------------------------------------------------------------
# Expect files and the load matrix, from real torch (run in subprocesses: one per interpreter)

# Debian's torch, then the newer ones TENSORCTL_EXTRA_PYTHONS names (as the tests take them), then CI's venv
PYTHONS = [p for p in ["/usr/bin/python3"] + [x for x in os.environ.get("TENSORCTL_EXTRA_PYTHONS", "").split(":") if x]
           + [os.path.join(HERE, "..", ".ci", "venv", "bin", "python")] if os.path.exists(p)]
PYTHONS = [p for i, p in enumerate(PYTHONS) if os.path.realpath(p) not in map(os.path.realpath, PYTHONS[:i])]
MATRIX = os.path.join(HERE, "py2_load_matrix.py")


def run_matrix(python, files):
    run = subprocess.run([python, MATRIX] + files, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit("%s %s failed:\n%s" % (python, MATRIX, run.stderr))
    return json.loads(run.stdout)


def compact(per):
    """The load matrix of one file, each result written once: a later load that gives the same
    as an earlier one says so instead of repeating it."""
    out = collections.OrderedDict()
    seen = []
    for version, res in per.items():
        entry = collections.OrderedDict()
        for mode, r in res["loads"].items():
            same = next((label for label, other in seen if other == r), None)
            entry[mode] = ("same as " + same) if same else r
            seen.append(("torch %s %s" % (version, mode), r))
        if "expect_vs_plain_load" not in res:
            entry["expect_vs_plain_load"] = "not compared (plain torch.load failed)"
        else:
            mism = res["expect_vs_plain_load"]
            entry["expect_vs_plain_load"] = mism or "the expect entries equal plain torch.load's tensors"
        out["torch " + version] = entry
    return out


def summarize(res):
    """One line per torch load mode."""
    out = []
    for mode in ("weights_only=False", "weights_only=True"):
        r = res["loads"].get(mode)
        if r is None:
            continue
        if r["ok"]:
            out.append("%s: loads" % mode)
        else:
            out.append("%s: %s" % (mode, r["error"]))
    return "; ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--expect", action="store_true",
                    help="also load every file in each torch here and write NAME.expect.json")
    a = ap.parse_args()
    paths = []
    for name, make in SAMPLES:
        obj, storages, note = make()
        path = os.path.join(HERE, name)
        write_legacy(path, obj, storages)
        NOTES[name] = note
        paths.append(path)
        with open(path, "rb") as f:
            data = f.read()
        print("%-40s %6d bytes  sha256 %s" % (name, len(data), hashlib.sha256(data).hexdigest()[:16]))
    if not a.expect:
        return 0
    results = {py: run_matrix(py, paths) for py in PYTHONS}
    matrix = collections.OrderedDict()
    for path in paths:
        name = os.path.basename(path)
        per = collections.OrderedDict()
        for py in PYTHONS:
            res = results[py][name]
            per[res["torch"]] = res
        matrix[name] = compact(per)
        versions = list(per)
        ref = per[versions[0]]
        if ref["expect"] is None:
            raise SystemExit("%s: torch %s could not load it: %s" % (name, versions[0], summarize(ref)))
        agree = all(per[v]["expect"] == ref["expect"] for v in versions[1:])
        loads = " | ".join("torch %s: %s" % (v, summarize(per[v])) for v in versions)
        note = NOTES[name] + ". Real torch (map_location='cpu'): " + loads + ". " + (
            "Every torch here loads the same tensors." if agree else
            "TORCH VERSIONS DISAGREE on the tensors; entries are those of torch %s." % versions[0])
        doc = collections.OrderedDict([("file", name), ("note", note), ("torch", versions[0]),
                                       ("tensors", ref["expect"])])
        with open(path + ".expect.json", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print("%-40s %2d tensors  %s" % (name, len(ref["expect"]), "torch agree" if agree else "DISAGREE"))
    with open(os.path.join(HERE, "py2_load_matrix.json"), "w") as f:
        json.dump(matrix, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
