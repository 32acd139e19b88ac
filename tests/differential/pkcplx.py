#!/usr/bin/env python3
"""pk_read's cost on adversarial pickles grows linearly: every shape is built
at n and 8n, read by `pkdump --bench` (the read alone, best of three), and the
time ratio must stay far below the 64 a quadratic path gives. A shape over the limit is timed
again, longer; when its small case took a few milliseconds (too short to time on a busy
machine), at 8n and 64n instead.

    pkcplx.py --pkdump PATH [--n N] [--max-ratio R] [--shape NAME]"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile

F1 = b'G?\xf0\x00\x00\x00\x00\x00\x00'  # 1.0


def shapes():
    """name -> (function of n giving a pickle, n)"""
    u32 = lambda v: struct.pack('<I', v)  # noqa: E731
    return {
        # the memo
        'memoize_one_object': (lambda n: b'\x80\x04N' + b'\x94' * n + b'.', 200000),
        'memoize_many_objects': (lambda n: b'\x80\x04' + b'N\x94' * n + b'.', 100000),
        'long_binput_sparse': (lambda n: b'N' + b''.join(b'r' + u32((i * 2654435761) & 0xFFFFFFFF) for i in range(n))
                               + b'.', 50000),
        'put_text_sparse': (lambda n: b'N' + b''.join(b'p%d\n' % ((i * 1000003) % (1 << 32)) for i in range(n)) + b'.', 50000),
        'get_one_slot': (lambda n: b'Nq\x00(' + b'h\x00' * n + b'l.', 200000),
        # globals and calls
        'distinct_globals': (lambda n: b''.join(b'cmod%d\nname%d\n0' % (i % 97, i) for i in range(n)) + b'N.', 50000),
        'same_global': (lambda n: b'cos\nsystem\n0' * n + b'N.', 100000),
        'call_appends': (lambda n: b'cm\nf\n)R' + b'K\x01a' * n + b'.', 100000),
        'call_setitems': (lambda n: b'cm\nf\n)R(' + b'K\x01K\x02' * n + b'u.', 100000),
        # dicts and sets: duplicate keys, keys equal across types, distinct keys
        'dict_same_key': (lambda n: b'}(' + b'K\x01K\x02' * n + b'u.', 100000),
        'dict_equal_keys_mixed': (lambda n: b'}(' + (b'K\x01N' + F1 + b'N\x88N') * (n // 3) + b'u.', 100000),
        'dict_distinct_keys': (lambda n: b'}(' + b''.join(b'J' + u32(i) + b'N' for i in range(n)) + b'u.', 100000),
        'dict_distinct_str_keys': (lambda n: b'}(' + b''.join(b'X' + u32(len(b'%d' % i)) + b'%d' % i + b'N'
                                                              for i in range(n)) + b'u.', 50000),
        'dict_shared_str_key': (lambda n: b'}X\x03\x00\x00\x00abcq\x00' + b'0' + b'h\x00Ns' * n + b'.', 100000),
        'dict_setitem_one_by_one': (lambda n: b'}' + b''.join(b'J' + u32(i % 1000) + b'Ns' for i in range(n)) + b'.',
                                    100000),
        'dict_tuple_keys': (lambda n: b'}(' + b''.join(b'(J' + u32(i) + b'K\x01tN' for i in range(n)) + b'u.', 50000),
        'set_distinct': (lambda n: b'\x8f(' + b''.join(b'J' + u32(i) for i in range(n)) + b'\x90.', 100000),
        'set_same': (lambda n: b'\x8f(' + b'K\x01' * n + b'\x90.', 100000),
        'frozenset_distinct': (lambda n: b'(' + b''.join(b'J' + u32(i) for i in range(n)) + b'\x91.', 100000),
        'dict_long_str_key_many_times': (lambda n: b'}X' + u32(n) + b'a' * n + b'q\x00' + b'0' + b'h\x00Ns' * 1000
                                         + b'.', 100000),
        # in-place item assignment
        'list_setitem_same_index': (lambda n: b']Na' + b'K\x00K\x01s' * n + b'.', 100000),
        'bytearray_append': (lambda n: b'\x96' + b'\x00' * 8 + b'K\x41a' * n + b'.', 100000),
        # marks and the stack
        'deep_marks': (lambda n: b'(' * n + b'1' * n + b'N.', 20000),
        'mark_pop_pairs': (lambda n: b'(N1' * n + b'N.', 100000),
        'tuples_popped': (lambda n: b'(NNt0' * n + b'N.', 100000),
        'pop_under_marks': (lambda n: b'N' + b'(0' * n + b'.', 100000),
        'frames': (lambda n: b'\x80\x04' + (b'\x95\x02' + b'\x00' * 7 + b'N0') * n + b'N.', 100000),
        # long text and long arguments
        'int_hex_text': (lambda n: b'I0x' + b'f' * n + b'\n.', 200000),
        'long_hex_text': (lambda n: b'L-0x' + b'7' * n + b'L\n.', 200000),
        'float_long_mantissa': (lambda n: b'F0.' + b'1' * n + b'\n.', 200000),
        'string_escapes': (lambda n: b"S'" + b'\\x41\\n' * n + b"'\n.", 100000),
        'unicode_escapes': (lambda n: b'V' + b'\\u00e9a' * n + b'\n.', 100000),
        'binunicode_multibyte': (lambda n: b'X' + u32(2 * n) + '\u00e9'.encode() * n + b'.', 200000),
        'long4_bytes': (lambda n: b'\x8b' + u32(n) + b'\x7f' * n + b'.', 400000),
        'global_long_name': (lambda n: b'cm\n' + b'a' * n + b'\n.', 200000),
        'text_lines_many': (lambda n: b'(' + b'I1\n' * n + b'l.', 100000),
        # tuples shared as keys: a DAG whose expansion is exponential
        'tuple_dag_key': (lambda n: b'}K\x01q\x00' + b'0' + b'h\x00h\x00\x86q\x000' * n + b'h\x00Ns.', 1000),
    }


def bench(pkdump, data, depth, reps=3):
    with tempfile.NamedTemporaryFile(prefix='pkcplx-', delete=False) as f:
        f.write(data)
        path = f.name
    try:
        best = None
        for _ in range(reps):
            out = subprocess.run([pkdump, '--bench', '--max-depth', str(depth), '--max-objects', str(1 << 32), path],
                                 stdout=subprocess.PIPE, check=True).stdout.decode()
            st, secs = out.split()[0], float(out.split()[1])
            if st != 'OK':
                raise SystemExit('FAIL: shape refused: %s' % out.strip())
            best = secs if best is None else min(best, secs)
        return best
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--pkdump', required=True)
    ap.add_argument('--max-ratio', type=float, default=24.0)
    ap.add_argument('--shape')
    ap.add_argument('--scale', type=float, default=1.0)
    a = ap.parse_args()
    fails = 0
    for name, (make, n) in sorted(shapes().items()):
        if a.shape and name != a.shape:
            continue
        n = max(8, int(n * a.scale))
        depth = 8 * n + 100
        small, big = make(n), make(8 * n)
        t1 = bench(a.pkdump, small, depth)
        t8 = bench(a.pkdump, big, depth)
        ratio = t8 / max(t1, 1e-4)
        if ratio > a.max_ratio and t8 > 0.05:  # once more, slower, before blaming the reader
            if t1 < 0.01:
                # a few milliseconds are too short to time on a busy machine: compare 8n with 64n,
                # which a quadratic path still puts 64 times apart
                n *= 8
                depth = 8 * n + 100
                small, big = big, make(8 * n)
            t1 = bench(a.pkdump, small, depth, 7)
            t8 = bench(a.pkdump, big, depth, 7)
            ratio = t8 / max(t1, 1e-4)
        bad = ratio > a.max_ratio and t8 > 0.05
        fails += bad
        print('%-30s n=%-7d %8.4fs  8n: %8.4fs  ratio %5.1f%s' % (name, n, t1, t8, ratio, '  FAIL' if bad else ''))
    print('%d shapes over ratio %.0f' % (fails, a.max_ratio))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
