"""What CPython's C unpickler builds from a pickle, with nothing imported and
nothing called, rendered in pkdump's canonical text (see pkdump.c).

The unpickler is CPython's own _pickle.Unpickler, with encoding='utf-8' as
torch.load passes it. Where it would reach into the program, stand-ins answer:

- find_class runs CPython's own find_class (so fix_imports and the protocol-4
  attribute walk are CPython's), with builtins.__import__ swapped for one that
  records the module name and hands back a recorder; the attribute lookups on
  that recorder give the name CPython would fetch. The global becomes a
  stand-in class, one per resolved name (the same name is the same object, as
  an import would give).
- persistent_load returns a fresh stand-in holding the pid.
- A stand-in called (REDUCE, INST/OBJ with arguments) or instantiated
  (NEWOBJ, NEWOBJ_EX, INST/OBJ without arguments: cls.__new__) returns a new
  stand-in recording how, with what; APPENDS (extend), SETITEMS (__setitem__)
  and BUILD (__setstate__) on it are recorded in order.

Every stand-in is a class (so NEWOBJ takes it), callable, and hashable by
identity. The model refuses what no import could resolve: module or attribute
names that are empty or contain NUL or a newline. BUILD, APPENDS and SETITEMS
on a global or on a persistent id raise (an imported class or function takes
them only by accident). pk_read follows the same model (pickle.h)."""
import builtins
import io
import pickle
import struct
import sys

# tensorctl reads INT and LONG text as the Pythons before int_max_str_digits
# (3.11, 3.10.7, 3.9.14, 3.8.14, 3.7.14) read it, the longer of the two
# readings: so does the model
if hasattr(sys, 'set_int_max_str_digits'):
    sys.set_int_max_str_digits(0)

_MISSING = object()
_real_import = builtins.__import__


class StandinMeta(type):
    """The metaclass of every stand-in; _k is 'G' (global), 'O' (call result)
    or 'P' (persistent id)."""

    def __call__(cls, *args, **kwargs):
        if kwargs:
            raise TypeError('stand-in called with keywords')
        return _new_obj('R', cls, args, None)

    def __setstate__(cls, state):
        if cls._k != 'O':
            raise pickle.UnpicklingError('BUILD on a %s' % ('global' if cls._k == 'G' else 'persistent id'))
        cls._events.append(('S', state))

    def extend(cls, items):
        if cls._k != 'O':
            raise AttributeError('extend')
        cls._events.append(('L', list(items)))

    def __setitem__(cls, key, value):
        if cls._k != 'O':
            raise TypeError('item assignment on a stand-in global')
        cls._events.append(('D', key, value))


class StandinBase:
    def __new__(cls, /, *args, **kwargs):
        return _new_obj('N', cls, args, kwargs)


def _new_obj(how, func, args, kwargs):
    return StandinMeta('O', (StandinBase,), {'_k': 'O', '_how': how, '_func': func, '_args': tuple(args),
                                              '_kw': dict(kwargs) if kwargs else None, '_events': []})


def _new_global(mod, name, walk):
    return StandinMeta('G', (StandinBase,), {'_k': 'G', '_mod': mod, '_name': name, '_walk': walk})


def _bad_name(s):
    return not s or '\0' in s or '\n' in s


class _Path:
    """What the swapped __import__ returns, and every attribute of it: the
    module name and the attribute names fetched so far."""
    __slots__ = ('_mod', '_parts')

    def __init__(self, mod, parts):
        object.__setattr__(self, '_mod', mod)
        object.__setattr__(self, '_parts', parts)

    def __getattribute__(self, name):
        if _bad_name(name):
            raise AttributeError('no attribute %r (model: unresolvable name)' % name)
        return _Path(object.__getattribute__(self, '_mod'), object.__getattribute__(self, '_parts') + (name,))


# real objects for the globals pk_write emits, for loading rewritten pickles
def _bytearray(*args):
    if args and isinstance(args[0], int):
        raise ValueError('bytearray(int) refused by the harness')
    return bytearray(*args)


import _codecs  # noqa: E402

REAL4 = {('builtins', 'set'): set, ('builtins', 'frozenset'): frozenset,
         ('builtins', 'bytearray'): _bytearray, ('_codecs', 'encode'): _codecs.encode}
REAL4_NAMES = {id(v): k for k, v in REAL4.items()}


class ModelUnpickler(pickle.Unpickler):
    def __init__(self, data, real4=False, encoding='utf-8'):
        super().__init__(io.BytesIO(data), encoding=encoding)
        self._real4 = real4
        self._globals = {}

    def find_class(self, module, name):
        saved = []

        def fake_import(n, globals=None, locals=None, fromlist=(), level=0):
            if not n and level == 0:
                raise ValueError('Empty module name')
            if _bad_name(n):
                raise ModuleNotFoundError('No module named %r (model: unresolvable name)' % n)
            saved.append((n, sys.modules.get(n, _MISSING)))
            sys.modules[n] = _Path(n, ())
            return sys.modules[n]

        builtins.__import__ = fake_import
        try:
            got = super().find_class(module, name)
        finally:
            builtins.__import__ = _real_import
            for n, old in reversed(saved):
                if old is _MISSING:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = old
        if type(got) is not _Path:
            raise pickle.UnpicklingError('find_class gave %r' % (type(got),))
        mod = object.__getattribute__(got, '_mod')
        parts = object.__getattribute__(got, '_parts')
        walk = len(parts) > 1
        key = (mod, '.'.join(parts), walk)
        if self._real4 and not walk and key[:2] in REAL4:
            return REAL4[key[:2]]
        g = self._globals.get(key)
        if g is None:
            g = self._globals[key] = _new_global(*key)
        return g

    def persistent_load(self, pid):
        return StandinMeta('P', (StandinBase,), {'_k': 'P', '_pid': pid})


def load(data, real4=False, encoding='utf-8'):
    """('OK', object) or ('ERR', 'ExceptionType: message')."""
    try:
        return 'OK', ModelUnpickler(data, real4, encoding).load()
    except RecursionError:
        raise
    except Exception as e:  # every way CPython refuses a pickle
        return 'ERR', '%s: %s' % (type(e).__name__, str(e)[:200].replace('\n', ' '))


# ---- the canonical text ---------------------------------------------------------------

def _text(s):
    out = ['u"']
    for ch in s:
        c = ord(ch)
        if 0x20 <= c < 0x7f and ch not in '"\\':
            out.append(ch)
        else:
            out.append('\\%x;' % c)
    out.append('"')
    return ''.join(out)


def _bytes(pre, b):
    out = [pre]
    for c in b:
        if 0x20 <= c < 0x7f and c not in (0x22, 0x5c):
            out.append(chr(c))
        else:
            out.append('\\%02x' % c)
    out.append('"')
    return ''.join(out)


def _float(f):
    return 'f%016x' % struct.unpack('<Q', struct.pack('<d', f))[0]


def _global(mod, name, walk):
    return 'G' + _text(mod) + ':' + _text(name) + (':path' if walk else '')


def _atom(o):
    t = type(o)
    if o is None:
        return 'N'
    if t is bool:
        return 'T' if o else 'F'
    if t is int:
        return 'i' + hex(o)
    if t is float:
        return _float(o)
    if t is str:
        return _text(o)
    if t is bytes:
        return _bytes('b"', o)
    if t is StandinMeta and o._k == 'G':
        return _global(o._mod, o._name, o._walk)
    if id(o) in REAL4_NAMES:
        return _global(*REAL4_NAMES[id(o)], False)
    return None


DETACHED_DEPTH = 4


def _detached(o, depth=DETACHED_DEPTH):
    """The identity-free key sets are sorted by, to a few levels (stand-ins'
    arguments too, so that two results of one function sort apart)."""
    if depth <= 0:
        return '~'
    t = type(o)
    d = depth - 1
    if t is tuple:
        return '(' + ','.join(_detached(x, d) for x in o) + ')'
    if t is list:
        return '[' + ','.join(_detached(x, d) for x in o) + ']'
    if t is dict:
        parts = []
        for i, x in enumerate(x for kv in o.items() for x in kv):
            parts.append(((':' if i & 1 else ',') if i else '') + _detached(x, d))
        return '{' + ''.join(parts) + '}'
    if t is bytearray:
        return _bytes('a"', o)
    if t is set or t is frozenset:
        return ('set{' if t is set else 'fs{') + ','.join(sorted(_detached(x, d) for x in o)) + '}'
    if t is StandinMeta and o._k == 'O':
        return 'C' + o._how + _detached(o._func, d) + '(' + ','.join(_detached(x, d) for x in o._args) + ')'
    if t is StandinMeta and o._k == 'P':
        return 'P(' + _detached(o._pid, d) + ')'
    a = _atom(o)
    return a if a is not None else '?' + t.__name__


def render(root):
    ids = {}
    out = []
    w = out.append

    def label(o):
        n = ids.get(id(o))
        if n is not None:
            w('@%d' % n)
            return False
        n = ids[id(o)] = len(ids) + 1
        w('#%d=' % n)
        return True

    def seq(items, pairs=False):
        for i, x in enumerate(items):
            if i:
                w(':' if pairs and i & 1 else ',')
            obj(x)

    def members(s):
        keyed = sorted(((_detached(x), i) for i, x in enumerate(s)))
        lst = list(s)
        for j, (_, i) in enumerate(keyed):
            if j:
                w(',')
            obj(lst[i])

    def obj(o):
        a = _atom(o)
        if a is not None:
            w(a)
            return
        t = type(o)
        if t is bytearray:
            if label(o):
                w(_bytes('a"', o))
        elif t is tuple:
            if not o:
                w('()')
            elif label(o):
                w('(')
                seq(o)
                w(')')
        elif t is list:
            if label(o):
                w('[')
                seq(o)
                w(']')
        elif t is dict:
            if label(o):
                w('{')
                seq([x for kv in o.items() for x in kv], True)
                w('}')
        elif t is set:
            if label(o):
                w('set{')
                members(o)
                w('}')
        elif t is frozenset:
            if not o:
                w('fs{}')
            elif label(o):
                w('fs{')
                members(o)
                w('}')
        elif t is StandinMeta and o._k == 'P':
            if label(o):
                w('P(')
                obj(o._pid)
                w(')')
        elif t is StandinMeta and o._k == 'O':
            if not label(o):
                return
            w('C%s(' % o._how)
            obj(o._func)
            w(';')
            seq(o._args)
            w(';')
            if o._kw:
                w('{')
                seq([x for kv in o._kw.items() for x in kv], True)
                w('}')
            w(';')
            ev = o._events
            items = [e for e in ev if e[0] != 'S']
            states = [e for e in ev if e[0] == 'S']
            canonical = ev == items + states and len({e[0] for e in items}) <= 1
            if not canonical:  # pk_read refuses these; write them in the order they came
                w('!order')
                for e in ev:
                    if e[0] == 'L':
                        w('L[')
                        seq(e[1])
                        w(']')
                    elif e[0] == 'D':
                        w('D{')
                        seq(e[1:], True)
                        w('}')
                    else:
                        w('S')
                        obj(e[1])
                w(')')
                return
            if items and items[0][0] == 'L':
                w('L[')
                seq([x for e in items for x in e[1]])
                w(']')
            elif items:
                w('D{')
                seq([x for e in items for x in e[1:]], True)
                w('}')
            w(';')
            for e in states:
                w('S')
                obj(e[1])
            w(')')
        else:
            w('?' + t.__name__)

    obj(root)
    return ''.join(out)


def model_line(data, encoding='utf-8'):
    """pkdump's line for what CPython builds: 'OK <text>' or 'ERR <exception>'."""
    st, v = load(data, encoding=encoding)
    if st == 'ERR':
        return 'ERR ' + v
    return 'OK ' + render(v)
