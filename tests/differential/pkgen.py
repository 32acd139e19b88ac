"""Pickles for the differential test, from a seed (deterministic):

- trees(): random object graphs dumped by CPython's pickler at protocols 0-5:
  unicode and surrogate strings, bytes, big ints, floats (inf, nan, -0.0,
  subnormals), nested containers with sharing and cycles, globals by
  reference (stdlib names that fix_imports maps, odd module and class names,
  nested classes), and objects whose __reduce_ex__ asks for REDUCE, NEWOBJ,
  NEWOBJ_EX, BUILD, APPENDS, SETITEMS and state setters.
- programs(): opcode sequences assembled by hand: text INT/LONG/FLOAT forms,
  memo gaps, duplicate keys, Python 2 strings, escapes, odd globals, BUILD and
  item opcodes on every kind of target, marks, frames.
- mutate(): byte flips, truncation, opcode insertion and deletion.

Nothing here is unpickled."""
import collections
import copyreg
import functools
import io
import itertools
import math
import pickle
import queue
import random
import socketserver
import struct
import sys
import types
import urllib.parse

# ---- fake modules with odd names, so that objects pickle by reference ----------------

FAKE_MODULES = ['pkgen_mod', 'pkgen.sub', 'pk\u00fcnic\u00f8de', 'torch_fake._utils', 'a.b.c.d']
_fake = {}


def _install_fakes():
    if _fake:
        return
    for name in FAKE_MODULES:
        m = types.ModuleType(name)
        sys.modules[name] = m
        _fake[name] = m

        class Rec:
            """Pickles as whatever its _red says (a __reduce_ex__ value)."""

            def __reduce_ex__(self, proto):
                return self._red
        Rec.__module__ = name
        Rec.__qualname__ = 'Rec'

        class Outer:
            class Inner:
                def __reduce_ex__(self, proto):
                    return self._red
        Outer.__module__ = Outer.Inner.__module__ = name
        Outer.__qualname__ = 'Outer'
        Outer.Inner.__qualname__ = 'Outer.Inner'

        Odd = type('Odd_\u00e9', (), {'__reduce_ex__': lambda self, proto: self._red})
        Odd.__module__ = name

        class LSub(list):
            pass
        LSub.__module__ = name
        LSub.__qualname__ = 'LSub'

        class DSub(dict):
            pass
        DSub.__module__ = name
        DSub.__qualname__ = 'DSub'

        def func(*a, **k):
            return None
        func.__module__ = name
        func.__qualname__ = 'func'

        def setter(obj, state):
            return None
        setter.__module__ = name
        setter.__qualname__ = 'setter'

        for o in (Rec, Outer, Odd, LSub, DSub, func, setter):
            setattr(m, o.__qualname__.split('.')[0], o)


REAL_GLOBALS = [collections.OrderedDict, collections.UserDict, collections.UserList, collections.UserString,
                collections.Counter, functools.reduce, functools.partial, range, zip, map, filter, str, bytes,
                dict, set, frozenset, bytearray, object, getattr, Exception, ValueError, KeyError, OSError,
                itertools.chain, itertools.zip_longest, io.StringIO, io.BytesIO, queue.Queue,
                socketserver.TCPServer, copyreg._reconstructor, urllib.parse.quote, urllib.parse.urlencode,
                struct.pack, math.sqrt, sorted, len, print, eval, exec, compile, open, __import__,
                collections.deque, collections.defaultdict, type, int, float, complex, slice]


class Trees:
    def __init__(self, rng):
        _install_fakes()
        self.r = rng
        self.pool = []  # mutable objects made so far, to share

    # -- atoms --
    def int_(self):
        r = self.r
        k = r.random()
        if k < 0.3:
            return r.randint(-300, 300)
        if k < 0.5:
            return r.choice([0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -2**31, -2**31 - 1,
                             2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 2**64 - 1, -2**64])
        if k < 0.8:
            return r.getrandbits(r.randint(1, 200)) * r.choice([1, -1])
        return r.getrandbits(r.randint(200, 3000)) * r.choice([1, -1])

    def float_(self):
        r = self.r
        k = r.random()
        if k < 0.4:
            return r.choice([0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, 5e-324, -5e-324,
                             2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1e16, 2.0**63, 2.0**64,
                             -2.0**70, 1e300, 123456789.125])
        if k < 0.7:
            return struct.unpack('<d', struct.pack('<Q', r.getrandbits(64)))[0]
        return r.uniform(-1e6, 1e6)

    def str_(self):
        r = self.r
        n = r.choice([0, 1, 2, 5, 20, 100])
        pools = ['abcxyz', ' \t\n\r\\\'"', '\x00\x01\x7f\x80\xff', '\u00e9\u00fc\u0394\u4e2d',
                 '\U0001f600\U0010ffff', '\ud800\udc00\udfff', 'L.0\\u0041\\x41']
        chars = ''.join(r.sample(pools, r.randint(1, 3)))
        return ''.join(r.choice(chars) for _ in range(n))

    def bytes_(self):
        r = self.r
        n = r.choice([0, 1, 3, 16, 300])
        return bytes(r.getrandbits(8) for _ in range(n))

    def hashable(self, depth):
        r = self.r
        k = r.random()
        if depth <= 0 or k < 0.6:
            return r.choice([None, True, False, self.int_(), self.float_(), self.str_(), self.bytes_(),
                             r.choice(REAL_GLOBALS)])
        if k < 0.85:
            return tuple(self.hashable(depth - 1) for _ in range(r.randint(0, 4)))
        return frozenset(self.hashable(depth - 1) for _ in range(r.randint(0, 4)))

    # -- objects --
    def rec(self, depth):
        r = self.r
        m = _fake[r.choice(FAKE_MODULES)]
        cls = r.choice([m.Rec, m.Outer.Inner, getattr(m, 'Odd_\u00e9')])
        o = object.__new__(cls)
        how = r.random()
        args = tuple(self.value(depth - 1) for _ in range(r.randint(0, 3)))
        state = self.value(depth - 1) if r.random() < 0.5 else None
        items = [self.value(depth - 1) for _ in range(r.randint(1, 3))] if r.random() < 0.25 else None
        ditems = [(self.hashable(1), self.value(depth - 1)) for _ in range(r.randint(1, 3))] \
            if r.random() < 0.25 and items is None else None
        setter = m.setter if state is not None and r.random() < 0.2 else None
        if how < 0.35:
            func = r.choice([m.func, r.choice(REAL_GLOBALS), cls, m.Outer])
            red = (func, args)
        elif how < 0.7:
            red = (copyreg.__newobj__, (cls,) + args)
        elif how < 0.85:
            kw = {self.str_() or 'k': self.value(depth - 1) for _ in range(r.randint(0, 2))}
            red = (copyreg.__newobj_ex__, (cls, args, kw))
        else:
            red = (m.func, args)
        red = red + (state, iter(items) if items else None, iter(ditems) if ditems else None)
        if setter:
            red = red + (setter,)
        o._red = red
        return o

    def value(self, depth):
        r = self.r
        k = r.random()
        if depth <= 0 or k < 0.35:
            return r.choice([None, True, False, self.int_(), self.float_(), self.str_(), self.bytes_(),
                             self.int_(), self.str_()])
        if k < 0.42 and self.pool:
            return r.choice(self.pool)
        if k < 0.47:
            return r.choice(REAL_GLOBALS)
        if k < 0.55:
            return self.rec(depth)
        if k < 0.6:
            m = _fake[r.choice(FAKE_MODULES)]
            return r.choice([m.Rec, m.Outer, m.Outer.Inner, m.func, getattr(m, 'Odd_\u00e9')])
        if k < 0.62:
            ba = bytearray(self.bytes_())
            self.pool.append(ba)
            return ba
        kind = r.choice(['tuple', 'list', 'dict', 'set', 'frozenset', 'lsub', 'dsub', 'odict'])
        n = r.randint(0, 5)
        if kind == 'tuple':
            return tuple(self.value(depth - 1) for _ in range(n))
        if kind == 'frozenset':
            return frozenset(self.hashable(2) for _ in range(n))
        if kind == 'set':
            s = {self.hashable(2) for _ in range(n)}
            self.pool.append(s)
            return s
        m = _fake[r.choice(FAKE_MODULES)]
        if kind in ('list', 'lsub'):
            lst = [] if kind == 'list' else m.LSub()
            self.pool.append(lst)
            for _ in range(n):
                lst.append(self.value(depth - 1))
            if r.random() < 0.1:
                lst.append(lst)
            return lst
        d = {} if kind == 'dict' else m.DSub() if kind == 'dsub' else collections.OrderedDict()
        self.pool.append(d)
        for _ in range(n):
            d[self.hashable(2)] = self.value(depth - 1)
        if r.random() < 0.1:
            d['self'] = d
        return d

    def pickle(self):
        r = self.r
        self.pool = []
        obj = self.value(r.randint(1, 5))
        proto = r.randint(0, 5)
        try:
            return pickle.dumps(obj, proto, fix_imports=r.random() < 0.9)
        except (pickle.PicklingError, TypeError, AttributeError, ValueError, RecursionError):
            return None


def trees(rng, n):
    t = Trees(rng)
    out = []
    while len(out) < n:
        p = t.pickle()
        if p is not None:
            out.append(p)
    return out


# ---- hand-assembled opcode sequences ---------------------------------------------------

INT_TOKENS = ['0', '1', '00', '01', '010', '08', '0x10', '0X1f', '0x', '0b11', '0o17', '1_000', '0_0', '_1', '1_',
              '1__0', '+0', '-0', ' 1', '\t7\r', ' 0x1', '0x1 ', '-', '+', '', '9223372036854775807',
              '9223372036854775808', '-9223372036854775808', '-9223372036854775809', '99999999999999999999',
              '0777777777777777777777777', '1e3', '1.0', 'True', '0\x00', '1\x00', '\x001', '12\x00zz', '00x1',
              '0x_f', '0x__f', '\x0b1', '\x0c1', '\x1c1', '\u00a01', '0' * 30, '1' * 4300, '1' * 4301,
              '0x' + 'f' * 2000, '-0x8000000000000000', '0b', '0o', '0xg', 'L', '1L', '01L', ' -1']
FLOAT_TOKENS = ['0', '1.5', '-0.0', '.5', '1.', '.', '1e', '1e+', '1e5', '1E-5', '+.5e-3', 'inf', '-inf', 'Infinity',
                '+iNfInItY', 'infinit', 'nan', '-nan', 'NaN', 'nan(1)', '0x1p3', '1_0', ' 1.5', '1.5 ', '1.5\r',
                '1e500', '-1e500', '1e-500', '4.9e-324', '2e-324', '2.4703282292062328e-324', '1.5\x00x', '--1',
                '1' * 400, '0.' + '0' * 400 + '1e400', '9' * 320, '1e99999999999999999999',
                '2.2250738585072011e-308', '0.1', '1.7976931348623157e308', '1.7976931348623159e308', '']
STRING_TOKENS = ["'abc'", '"abc"', "''", "'", "'abc", "'a\"", '"a\'', "'\\x41'", "'\\x4'", "'\\x4g'", "'\\x'",
                 "'\\777'", "'\\1234'", "'\\0\\1\\12'", "'\\a\\b\\f\\v\\t\\n\\r'", "'\\q'", "'a\\'", "'\\\\'",
                 "'\\''", "'\u00e9'", "'\\xc3\\xa9'", "'\\xff'", "'\\xed\\xa0\\x80'", "'\\xAa'", "'x'y'",
                 'abc', "'\\\n'", "'\\N{DASH}'", "'\\u0041'"]
UNICODE_TOKENS = ['abc', '', '\\u00e9', '\\u00e', '\\u', '\\U0010ffff', '\\U00110000', '\\U0010fffg', '\\ud800',
                  '\\uD800\\uDC00', '\\x41', '\\\\u0041', '\\\\\\u0041', 'a\\', '\\', '\\\\', '\xff', '\\u12',
                  '\\N{DASH}', '\\U0001F600x']
NAMES = [('os', 'system'), ('__builtin__', 'set'), ('__builtin__', 'eval'), ('__builtin__', 'xrange'),
         ('builtins', 'set'), ('copy_reg', '_reconstructor'), ('UserDict', 'IterableUserDict'),
         ('UserDict', 'UserDict'), ('dbm', 'open'), ('anydbm', 'open'), ('itertools', 'izip'),
         ('exceptions', 'ValueError'), ('cPickle', 'loads'), ('torch._utils', '_rebuild_tensor_v2'),
         ('torch', '_utils._rebuild_tensor_v2'), ('torch', 'Size'), ('collections', 'OrderedDict'),
         ('os', 'a.b'), ('os', '<locals>.f'), ('os', 'a.<locals>'), ('os', 'a..b'), ('os', '.a'), ('os', 'a.'),
         ('', 'x'), ('os', ''), ('os\x00', 'x'), ('os', 'x\x00'), ('os', 'Size\n0cos\nsystem'),
         ('\u00fcnic\u00f8de', 'n\u00e4me'), ('m\ud800', 'x'), ('mod', '\udcff'), ('_compat_pickle', 'x'),
         ('multiprocessing', 'AuthenticationError'), ('socket', '_socketobject'), ('test.test_support', 'f'),
         ('whichdb', 'whichdb'), ('_elementtree', 'Element'), ('__main__', 'X'), ('.os', 'x')]


def _u(s):
    return s.encode('utf-8', 'surrogatepass')


class Programs:
    def __init__(self, rng):
        self.r = rng

    def binunicode(self, s):
        b = _u(s)
        r = self.r
        k = r.random()
        if k < 0.5 and len(b) < 256:
            return b'\x8c' + bytes([len(b)]) + b
        if k < 0.8:
            return b'X' + struct.pack('<I', len(b)) + b
        return b'\x8d' + struct.pack('<Q', len(b)) + b

    def py2str(self, b):
        r = self.r
        if r.random() < 0.5 and len(b) < 256:
            return b'U' + bytes([len(b)]) + b
        return b'T' + struct.pack('<I', len(b)) + b

    def atom(self):
        """One opcode pushing one object."""
        r = self.r
        k = r.randrange(30)
        if k == 0:
            return b'I' + _u(r.choice(INT_TOKENS)) + b'\n'
        if k == 1:
            return b'L' + _u(r.choice(INT_TOKENS)) + r.choice([b'', b'L']) + b'\n'
        if k == 2:
            if r.random() < 0.3:  # decimal text of any length: both sides round correctly
                digits = ''.join(r.choice('0123456789') for _ in range(r.randint(1, 40)))
                dot = r.randint(0, len(digits))
                txt = digits[:dot] + '.' + digits[dot:] + (('e%d' % r.randint(-330, 310)) if r.random() < 0.5 else '')
                return b'F' + txt.encode() + b'\n'
            return b'F' + _u(r.choice(FLOAT_TOKENS)) + b'\n'
        if k == 3:
            return b'S' + _u(r.choice(STRING_TOKENS)) + b'\n'
        if k == 4:
            return b'V' + _u(r.choice(UNICODE_TOKENS)) + b'\n'
        if k == 5:
            if r.random() < 0.3:
                b = self.utf8_edge()
                return r.choice([b'\x8c' + bytes([len(b)]) + b, b'X' + struct.pack('<I', len(b)) + b])
            return self.binunicode(r.choice(['a', '', 'k', '\u00e9', '\ud800', 'os', 'system', '\U0001f600']))
        if k == 6:
            b = r.choice([b'', b'a', b'\xc3\xa9', b'k', bytes(r.getrandbits(8) for _ in range(r.randint(0, 6))),
                          self.utf8_edge(), self.utf8_edge()])
            return self.py2str(b)
        if k == 7:
            b = bytes(r.getrandbits(8) for _ in range(r.randint(0, 5)))
            return r.choice([b'C' + bytes([len(b)]) + b, b'B' + struct.pack('<I', len(b)) + b,
                             b'\x8e' + struct.pack('<Q', len(b)) + b, b'\x96' + struct.pack('<Q', len(b)) + b])
        if k == 8:
            return r.choice([b'N', b'\x88', b'\x89', b')', b']', b'}', b'\x8f'])
        if k == 9:
            return b'K' + bytes([r.getrandbits(8)])
        if k == 10:
            return b'M' + struct.pack('<H', r.getrandbits(16))
        if k == 11:
            return b'J' + struct.pack('<i', r.randint(-2**31, 2**31 - 1))
        if k == 12:
            n = r.choice([0, 1, 2, 8, 9, 10])
            b = bytes(r.getrandbits(8) for _ in range(n))
            return r.choice([b'\x8a' + bytes([n]) + b, b'\x8b' + struct.pack('<i', n) + b])
        if k == 13:
            return b'G' + struct.pack('>d', r.choice([1.0, -0.0, math.nan, math.inf, 0.5, 1e300]))
        if k == 14:
            m, n = r.choice(NAMES)
            if '\n' in m or '\n' in n or not m or not n:
                return self.stack_global(m, n)
            return b'c' + _u(m) + b'\n' + _u(n) + b'\n'
        if k == 15:
            m, n = r.choice(NAMES)
            return self.stack_global(m, n)
        if k == 16:
            return b'P' + r.choice([b'key', b'', b'\xc3\xa9', b'0']) + b'\n'
        if k == 17:
            return self.key_atom()
        if k in (18, 19, 20):
            return b'K' + bytes([r.randint(0, 3)])
        if k in (21, 22):
            return self.binunicode(r.choice(['a', 'b', 'c']))
        return r.choice([b'N', b'K\x01', b'\x88', b')', b']', b'}'])

    def stack_global(self, m, n):
        return self.binunicode(m) + self.binunicode(n) + b'\x93'

    def number(self):
        """An integral value written as an int or a float, any opcode: equal
        ones are one dict key whatever their type (2**53 + 1 is no float)."""
        r = self.r
        v = r.choice([0, 1, 2, 1000, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**20, 2**1000, 12345678])
        v *= r.choice([1, -1])
        k = r.randrange(7)
        if k == 0:
            return b'L%d\n' % v
        if k == 1:
            return b'I%d\n' % v
        if k == 2:
            n = (v.bit_length() + 8) // 8
            return b'\x8a' + bytes([n]) + v.to_bytes(n, 'little', signed=True)
        if k == 3 and -2**31 <= v < 2**31:
            return b'J' + struct.pack('<i', v)
        if abs(v) > 1.7e308:
            return b'L%d\n' % v
        f = float(v)
        if k == 4:
            return b'F' + repr(f).encode() + b'\n'
        if k == 5:
            return b'F%d.0\n' % v
        return b'G' + struct.pack('>d', f)

    def utf8_edge(self):
        """Byte sequences at the edges of UTF-8 (overlong, surrogate, past U+10FFFF, cut short)."""
        return self.r.choice([b'\xe0\x80\x80', b'\xe0\x9f\xbf', b'\xe0\xa0\x80', b'\xed\x9f\xbf', b'\xed\xa0\x80',
                              b'\xed\xbf\xbf', b'\xee\x80\x80', b'\xef\xbf\xbf', b'\xf0\x8f\xbf\xbf',
                              b'\xf0\x90\x80\x80', b'\xf4\x8f\xbf\xbf', b'\xf4\x90\x80\x80', b'\xf5\x80\x80\x80',
                              b'\xc0\x80', b'\xc1\xbf', b'\xc2\x80', b'\xdf\xbf', b'\x80', b'\xbf', b'\xe1\x80',
                              b'\xf0\x90\x80', b'\xc2', b'\xed\xa0\xbd\xed\xb8\x80', b'\xf8\x88\x80\x80\x80', b'\xff',
                              b'a\xc3\xa9z', b'\x00'])

    def key_atom(self):
        """Objects CPython's dict takes as equal or not: 1 == 1.0 == True..."""
        r = self.r
        if r.random() < 0.4:
            return self.number()
        return r.choice([b'K\x01', b'I1\n', b'I01\n', b'L1\n', b'J\x01\x00\x00\x00', b'\x8a\x01\x01',
                         b'\x8a\x09\x01' + b'\x00' * 8, b'G?\xf0\x00\x00\x00\x00\x00\x00', b'F1.0\n', b'\x88',
                         b'K\x00', b'\x89', b'G\x80\x00\x00\x00\x00\x00\x00\x00', b'F-0.0\n', b'I00\n',
                         b'Fnan\n', b'G\x7f\xf8\x00\x00\x00\x00\x00\x00', b'\x8c\x01a', b'Va\n', b"S'a'\n",
                         b'Ua\x01a'[:0] + b'U\x01a', b'C\x01a', b'X\x01\x00\x00\x00a',
                         b'(K\x01G?\xf0\x00\x00\x00\x00\x00\x00t', b'K\x01\x85', b'\x88\x85', b'(K\x01\x91',
                         b'(\x88\x91', b'\x8a\x09' + b'\x00' * 8 + b'\x01', b'G' + struct.pack('>d', 2.0**64),
                         b'L18446744073709551616\n', b'F18446744073709551616\n', b'I-1\n', b'J\xff\xff\xff\xff',
                         b'\x8a\x01\xff', b'cmod\nK\n', b'\x8c\x03mod\x8c\x01K\x93', b']', b'}', b'(]t',
                         b'\x96\x00\x00\x00\x00\x00\x00\x00\x00', b'\x8f'])

    def program(self):
        """A random stack program that CPython mostly accepts: operations are
        picked for what the stack holds, with a few wrong ones thrown in."""
        r = self.r
        dirty = r.random() < 0.1
        out = bytearray()
        if r.random() < 0.85:
            out += b'\x80' + bytes([r.choice([0, 1, 2, 2, 3, 4, 4, 5] * 8 + [6])])
        st = [0]  # objects above each open MARK
        puts = []  # memo indexes set
        memo_len = 0

        def atom():
            return self.atom() if dirty or r.random() < 0.15 else self.clean_atom()

        for _ in range(r.randint(1, 30)):
            top = st[-1]
            k = r.random()
            if dirty and k < 0.05:
                out += r.choice([b'\x82\x01', b'\x83\x01\x00', b'\x84\x01\x00\x00\x00', b'\x97', b'\x98',
                                 b'g7\n', b'0', b'1', b'2', b't', b'e', b'u', b'b', b'R', b'\x81', b'\x93', b'Q'])
            elif k < 0.3 or top == 0:
                out += atom()
                st[-1] += 1
            elif k < 0.38:
                out += b'('
                st.append(0)
            elif k < 0.48 and len(st) > 1:
                n = st.pop()
                op = r.choice([b't', b'l', b'\x91', b'1'] + ([b'd'] if n % 2 == 0 else []) + ([b'o'] if n else []))
                if op == b'o' and r.random() < 0.5:
                    m, nm = r.choice(NAMES[:14])
                    out += b'i' + _u(m) + b'\n' + _u(nm) + b'\n'
                else:
                    out += op
                if op != b'1':
                    st[-1] += 1
            elif k < 0.52:
                n = min(top, r.randint(1, 3))
                out += bytes([0x84 + n])
                st[-1] -= n - 1
            elif k < 0.6 and top >= 1:  # a target, then items into it
                kind = r.randrange(3)
                n = r.randint(0, 3)
                if kind == 0:
                    out += b'(' + b''.join(atom() for _ in range(n)) + b'e'
                elif kind == 1:
                    out += b'(' + b''.join(self.key_atom() + atom() for _ in range(n)) + b'u'
                else:
                    out += b'(' + b''.join(self.key_atom() for _ in range(n)) + b'\x90'
            elif k < 0.63 and top >= 2:
                out += r.choice([b'a', b'b', b's' if top >= 3 else b'a'])
                st[-1] -= 1 if out[-1:] != b's' else 2
            elif k < 0.68:
                m, nm = r.choice(NAMES[:14] if not dirty else NAMES)
                out += b'c' + _u(m) + b'\n' + _u(nm) + b'\n' if m and nm and '\n' not in m + nm \
                    else self.stack_global(m, nm)
                out += r.choice([b')R', b')\x81', b'(K\x01tR', b'K\x01\x85\x81', b')}\x92', b'N\x85R', b'', b''])
                st[-1] += 1
                for _ in range(r.randint(0, 2)):
                    out += r.choice([b'(K\x01K\x02e', b'K\x03a', b'(K\x01K\x02u', b'K\x01K\x02s', b'}b',
                                     b'Nb', b'(e', b'(u'])
            elif k < 0.76:
                form = r.randrange(5)
                idx = r.choice([memo_len, memo_len, memo_len, r.randint(0, memo_len + 3),
                                r.choice([255, 256, 1000, 70000])] * 8 + [r.choice([2**20, 2**31, 2**32 - 1])])
                if form == 0 and idx < 256:
                    out += b'q' + bytes([idx])
                elif form == 1:
                    out += b'r' + struct.pack('<I', idx)
                elif form == 2:
                    txt = str(idx).encode()
                    out += b'p' + (r.choice([b' ' + txt, b'0' + txt, txt + b' ', b'+' + txt]) if dirty else txt) + b'\n'
                else:
                    out += b'\x94'
                    idx = memo_len
                if idx not in puts:
                    puts.append(idx)
                    memo_len += 1
            elif k < 0.83 and puts:
                idx = r.choice(puts)
                form = r.randrange(3)
                if form == 0 and idx < 256:
                    out += b'h' + bytes([idx])
                elif form == 1 or idx >= 2**31:
                    out += b'j' + struct.pack('<I', idx)
                else:
                    out += b'g' + str(idx).encode() + b'\n'
                st[-1] += 1
            elif k < 0.87:
                out += r.choice([b'0', b'2', b'Q', b'(0', b'(1'])
                st[-1] += {b'0': -1, b'2': 1, b'Q': 0, b'(0': 0, b'(1': 0}[bytes(out[-2:]) if out[-2:] in (b'(0', b'(1') else bytes(out[-1:])]
            elif k < 0.9:
                out += b'\x95' + struct.pack('<Q', r.choice([0, 1, 2, 4, 9, 30]))
            else:
                out += self.snippet()
                st[-1] += 1
        while len(st) > 1 and r.random() < 0.8:
            st.pop()
            out += b't'
        out += b'.'
        if r.random() < 0.1:
            out += bytes(r.getrandbits(8) for _ in range(r.randint(1, 5)))
        return bytes(out)

    def clean_atom(self):
        r = self.r
        k = r.randrange(12)
        if k == 0:
            return b'I' + r.choice([b'0', b'1', b'00', b'01', b'010', b'0x10', b' 1', b'-7', b'1_000', b'0b11',
                                    b'99999999999999999999', b'-9223372036854775809', b'0_0', b'12\x00z']) + b'\n'
        if k == 1:
            return b'L' + r.choice([b'0', b'1L', b'00', b'-0x_ff', b'123456789012345678901234567890L', b'0_0',
                                    b'0b1010L', b'1 L']) + b'\n'
        if k == 2:
            return b'F' + r.choice([b'1.5', b'-0.0', b'inf', b'-Infinity', b'nan', b'-nan', b'1e-500', b'.5',
                                    b'1.', b'4.9e-324', b'1.5\x00x', b'0.1']) + b'\n'
        if k == 3:
            return b'S' + r.choice([b"'abc'", b'"x"', b"''", b"'\\x41\\n'", b"'\\q'", b"'\\777'"[:0] + b"'\\177'",
                                    b"'\xc3\xa9'", b"'\\0\\12\\123'", b"'\\a\\b\\f\\v'"]) + b'\n'
        if k == 4:
            return b'V' + r.choice([b'abc', b'', b'\\u00e9', b'\\U0001f600', b'\\ud800', b'\\\\u0041', b'a\\',
                                    b'\xff']) + b'\n'
        if k == 5:
            return self.py2str(r.choice([b'', b'a', b'\xc3\xa9', b'key']))
        if k == 6:
            return self.key_atom()
        if k == 7 and r.random() < 0.2:
            b = self.utf8_edge()
            return b'\x8c' + bytes([len(b)]) + b
        if k == 7:
            return self.binunicode(r.choice(['a', '', 'k', '\u00e9', '\ud800', '\U0001f600']))
        return self.atom() if r.random() < 0.5 else r.choice([b'N', b'K\x01', b'\x88', b')', b']', b'}', b'\x8f'])

    def snippet(self):
        """A whole object made to probe one rule."""
        r = self.r
        k = r.randrange(12)
        keys = [self.key_atom() for _ in range(r.randint(1, 5))]
        vals = [self.atom() for _ in keys]
        if k == 0:  # duplicate keys through SETITEMS
            return b'}(' + b''.join(a + b for a, b in zip(keys, vals)) + b'u'
        if k == 1:  # through DICT
            return b'(' + b''.join(a + b for a, b in zip(keys, vals)) + b'd'
        if k == 2:  # through SETITEM one by one
            return b'}' + b''.join(a + b + b's' for a, b in zip(keys, vals))
        if k == 3:  # sets and frozensets
            return r.choice([b'\x8f(', b'(']) + b''.join(keys) + r.choice([b'\x90', b'\x91'])
        if k == 4:  # a shared NaN is one key, two NaNs are two
            return b'}Fnan\n\x94K\x01sh\x00K\x02sFnan\nK\x03s'
        if k == 5:  # list and bytearray item assignment, bytearray extend
            tgt = r.choice([b']K\x01K\x02K\x03\x87\x94\x30(K\x07K\x08K\x09e', b'\x96\x03\x00\x00\x00\x00\x00\x00\x00abc'])
            return tgt + b'(' + b''.join(self.key_atom() + self.atom() for _ in range(r.randint(1, 3))) + b'u'
        if k == 6:
            return b'\x96\x01\x00\x00\x00\x00\x00\x00\x00a(' + b''.join(self.atom() for _ in range(3)) + b'e'
        if k == 7:  # BUILD on builtins: None and (None, {}) do nothing
            return self.atom() + r.choice([b'N', b'N}\x86', b'N}K\x01K\x02s\x86', b'}', b'K\x01', b'NN\x86',
                                           b'(N}t', b'}N\x86']) + b'b'
        if k == 8:  # calls with items and states
            m, n = r.choice(NAMES[:20])
            call = b'c' + _u(m) + b'\n' + _u(n) + b'\n' if m and n and '\n' not in m + n else b'cmod\nC\n'
            body = call + r.choice([b')R', b')\x81', b'}\x92'[:0] + b')}\x92', b'(K\x01i' + b'mod\nC\n'[:0] + b't', b')R'])
            tail = b''
            for _ in range(r.randint(0, 3)):
                tail += r.choice([b'(K\x01K\x02e', b'K\x03a', b'(K\x01K\x02u', b'K\x01K\x02s', b'}b', b'Nb',
                                  b'(K\x01\x90', b'(e', b'(u'])
            return body + tail
        if k == 9:  # kwargs for NEWOBJ_EX
            return b'cmod\nC\n)}(' + b''.join(a + b for a, b in zip(keys, vals)) + b'u\x92'
        if k == 10:  # POP and DUP around marks
            return b'K\x01(' + r.choice([b'0', b'1', b'2', b'N0', b'N1', b'(0', b'((1']) + r.choice([b'', b't', b'0'])
        return b'(' + b''.join(keys) + b'\x91\x94h\x00\x8f(h\x00h\x00\x90'


def programs(rng, n, accepts=None):
    """n programs; when accepts is given, most are retried until CPython
    accepts them, so that their later opcodes get read too."""
    p = Programs(rng)
    out = []
    for _ in range(n):
        prog = p.program()
        if accepts and rng.random() < 0.8:
            for _ in range(5):
                if accepts(prog):
                    break
                prog = p.program()
        out.append(prog)
    return out


# ---- mutations -------------------------------------------------------------------------

OPCODES = b'(.012FIJKLMNPQRSTUVXabcdeghijlopqrstu}])G\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b' \
          b'BC\x8c\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98'


def mutate(rng, data, programs_gen):
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(7)
        if not b:
            b += b'.'
        i = rng.randrange(len(b))
        if k == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif k == 1:
            b[i] = rng.choice(OPCODES)
        elif k == 2:
            b[i:i] = bytes([rng.choice(OPCODES)])
        elif k == 3:
            del b[i:i + rng.randint(1, 4)]
        elif k == 4:
            b = b[:i]
        elif k == 5:
            b[i:i] = programs_gen.atom() if rng.random() < 0.7 else programs_gen.snippet()
        else:
            j = rng.randrange(len(b))
            b[i:i] = b[min(i, j):max(i, j)][:64]
    return bytes(b)


def generate(seed, count, accepts=None):
    """count pickles: about 35% trees, 35% programs, 30% mutations of both."""
    rng = random.Random(seed)
    nt = count * 35 // 100
    npg = count * 35 // 100
    t = trees(random.Random(rng.getrandbits(64)), nt)
    p = programs(random.Random(rng.getrandbits(64)), npg, accepts)
    mr = random.Random(rng.getrandbits(64))
    pg = Programs(mr)
    base = t + p
    m = [mutate(mr, mr.choice(base), pg) for _ in range(count - nt - npg)]
    return [('tree', x) for x in t] + [('program', x) for x in p] + [('mutant', x) for x in m]
