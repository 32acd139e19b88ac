#!/usr/bin/env python3
"""Fill fuzz/corpus/fuzz_cli/ with seeds for fuzz_cli: each command with a few option sets over
small real checkpoints (sample_models, ../shared/corpus), hostile ones made byte by byte (names
holding escapes and bytes that are not UTF-8, 500-character keys, an unsafe global), an index with
its shard, and a distributed checkpoint. No torch needed.

    python3 fuzz/tools/make_cli_seeds.py --tensorctl build/tensorctl

The input layout and the name tables are fuzz_cli.c's (keep them in step): option indices are read
from each command's --help, which lists its option table in order; every option value is given
literally (value index 255).
"""
import argparse, os, re, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, 'fuzz', 'corpus', 'fuzz_cli')
sys.path.insert(0, os.path.join(ROOT, 'tests', 'hostile'))
import hostile as H  # noqa: E402  (the pickle and container builders of the hostile tests)

COMMANDS = ['inspect', 'to-cpu', 'to-cuda', 'convert', 'extract', 'consolidate', 'diff', 'devices']  # tc_cmds[]
OUT_NAMES = ['', 'out.pt', 'out.safetensors', 'out.bin', 'outdir/', 'model.safetensors.index.json',
             'pytorch_model.bin.index.json', '\x1b[8mout.pt', 'o\xff\xfe.safetensors', 'noext', 'a\nb.pt', 'out.ckpt']
IN_NAMES = ['model.pt', 'model.safetensors', 'pytorch_model.bin', 'model.safetensors.index.json',
            'model-00001-of-00002.safetensors', 'pytorch_model.bin.index.json', 'pytorch_model-00001-of-00002.bin',
            'm.ckpt', '\x1b[8mevil.pt', 'bad\xff\xfe.pt', 'line\nbreak.safetensors', 'x', 'manifest.json']


def option_tables(tool):
    """command -> [long option names in table order], from --help."""
    tables = {}
    for c in COMMANDS:
        text = subprocess.run([tool, c, '--help'], capture_output=True, text=True).stdout
        tables[c] = re.findall(r'^\s+(?:-\w, )?--([\w-]+)', text, re.M)
    return tables


def seed(tables, cmd, opts, a, b=b'', na=0, nb=1, out=0, both=False):
    """One input: cmd, [(option, value or None)], file A, file B."""
    body = b''
    for name, val in opts:
        body += bytes([tables[cmd].index(name)])
        if val is None:
            body += b'\xfe'
        else:
            v = val.encode('utf-8', 'surrogateescape') if isinstance(val, str) else val
            body += b'\xff' + bytes([len(v)]) + v
    head = bytes([COMMANDS.index(cmd), out, na, nb, (1 if both else 0) | len(opts) << 1])
    return head + body + struct.pack('<H', len(a)) + a + b


def hostile_files():
    f = {}
    esc = H.state_dict(H.dict_of([('\x1b[8mw', H.tensor()), ('obj', H.op_global('__main__', 'Evil\x1b[8m') + b')R')]))
    f['escapes'] = H.torch_zip(esc, {'0': H.FOUR_FLOATS})
    long_keys = H.state_dict(H.dict_of([('w', H.tensor()), ('a' * 500, H.op_int(1)), ('b' * 500, H.op_int(2))]))
    f['long_keys'] = H.torch_zip(long_keys, {'0': H.FOUR_FLOATS})
    odd = H.state_dict(H.dict_of([('a\x7fb\u009bc\u202e', H.tensor()), ('QQ', H.tensor()), ('model.x', H.op_int(3))]))
    f['odd_names'] = H.torch_zip(odd.replace(H.op_str('QQ'), b'X\x02\x00\x00\x00\xff\xfe'),  # not UTF-8
                                 {'0': H.FOUR_FLOATS})
    f['good'] = H.good()
    return f


def shards():
    """The index and the first shard tests/cli/make_shards.py writes (its second shard stays behind)."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(ROOT, 'tests', 'cli', 'make_shards.py'), d], check=True)
        return (read(os.path.join(d, 'model.safetensors.index.json')),
                read(os.path.join(d, 'model-00001-of-00002.safetensors')))


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--tensorctl', required=True)
    ap.add_argument('--max-size', type=int, default=24000)
    a = ap.parse_args()
    T = option_tables(a.tensorctl)
    os.makedirs(OUT, exist_ok=True)
    files = hostile_files()
    corpus = os.path.join(ROOT, '..', 'shared', 'corpus', 'torch-2.14')
    for rel in ['tiny_mlp_cuda0.pt', 'legacy_cuda0.pt', 'tied_views_cpu.pt', 'train_ema_cpu.pt',
                'torchscript_traced.pt', 'special_tensors_cuda0.pt', 'py2_unicode_keys_cpu.pt', 'lightning_dp_cpu.ckpt']:
        files[rel] = read(os.path.join(ROOT, 'sample_models', rel))
    for rel in ['malicious.pt', 'dtypes.safetensors', 'lm.safetensors', 'mixed_devices.pt', 'whole_module_cuda0.pt']:
        p = os.path.join(corpus, rel)
        if os.path.isfile(p):
            files[rel] = read(p)
    files = {k: v for k, v in files.items() if len(v) <= a.max_size}
    index, shard1 = shards()

    def st_name(k):
        return IN_NAMES.index('model.safetensors') if k.endswith('.safetensors') else IN_NAMES.index('model.pt')

    seeds = {}
    for k, data in sorted(files.items()):
        n = st_name(k)
        seeds['inspect-%s' % k] = seed(T, 'inspect', [], data, na=n)
        seeds['inspect-json-hash-%s' % k] = seed(T, 'inspect', [('json', None), ('hash', None)], data, na=n)
        seeds['to-cpu-%s' % k] = seed(T, 'to-cpu', [], data, na=n, out=1)
        seeds['convert-st-%s' % k] = seed(T, 'convert', [], data, na=n, out=2)
        seeds['extract-%s' % k] = seed(T, 'extract', [], data, na=n, out=1)
    g, esc, lk = files['good'], files['escapes'], files['long_keys']
    extra = {
        'inspect-verbose-escapes': seed(T, 'inspect', [('verbose', None)], esc, na=8),
        'inspect-safe-globals': seed(T, 'inspect', [('safe-globals', '__main__.Evil\x1b[8m')], esc),
        'inspect-two-files': seed(T, 'inspect', [], esc, lk, both=True),
        'inspect-limits': seed(T, 'inspect', [('max-objects', '10'), ('max-depth', '3')], lk),
        'to-cpu-bfloat16-keep': seed(T, 'to-cpu', [('dtype', 'bfloat16'), ('keep', '*bias*')], g, out=1),
        'to-cpu-key-surgery': seed(T, 'to-cpu', [('strip-prefix', None), ('add-prefix', '\x1b[8m'),
                                                 ('rename', '(.*)=x.\\1'), ('drop', 'b*')], lk, out=7),
        'to-cpu-in-place': seed(T, 'to-cpu', [('in-place', None), ('allow-unsafe', None)], esc),
        'to-cpu-parts': seed(T, 'to-cpu', [('part', '1/2')], g, out=6),
        'to-cpu-map': seed(T, 'to-cpu', [('map', 'cuda:0=cpu'), ('verify-crc', None)], g, out=3),
        'to-cuda-device': seed(T, 'to-cuda', [('device', 'cuda:1')], g, out=1),
        'convert-long-keys': seed(T, 'convert', [], lk, out=2),
        'convert-key': seed(T, 'convert', [('key', 'state_dict')], g, out=2),
        'convert-shards': seed(T, 'convert', [('max-shard-size', '16')], index, shard1, na=3, nb=4, out=6),
        'convert-format': seed(T, 'convert', [('format', 'pt'), ('only-keys', 'w*')], lk, out=9),
        'convert-index-named-oddly': seed(T, 'convert', [], g, out=8),
        'convert-index-in': seed(T, 'convert', [], index, shard1, na=3, nb=4, out=1),
        'extract-from': seed(T, 'extract', [('from', 'model'), ('verbose', None)], lk, out=2),
        'extract-ema': seed(T, 'extract', [('ema', None)], g, out=4),
        'diff-self-json': seed(T, 'diff', [('json', None)], g, g, out=0),
        'diff-stats': seed(T, 'diff', [('stats', None), ('atol', '1e-3')], g, lk),
        'diff-strip': seed(T, 'diff', [('strip-prefix', None), ('verbose', None)], lk, esc),
        'diff-index': seed(T, 'diff', [], index, shard1, na=3, nb=4),
        'devices': seed(T, 'devices', [], b''),
        'help': seed(T, 'convert', [('help', None)], b''),
    }
    seeds.update(extra)
    for ws in ['ws1_plain', 'ws2_sharded']:
        d = os.path.join(ROOT, 'sample_models', 'dcp', ws)
        md, blob = read(os.path.join(d, '.metadata')), read(os.path.join(d, '__0_0.distcp'))
        if len(md) < 65536:
            seeds['consolidate-pt-%s' % ws] = seed(T, 'consolidate', [], md, blob, out=1)
            seeds['consolidate-st-%s' % ws] = seed(T, 'consolidate', [('from', 'model')], md, blob, out=2)
            seeds['consolidate-keys-%s' % ws] = seed(T, 'consolidate', [('add-prefix', 'm.'), ('drop', '*bias*')],
                                                     md, blob, out=1)
            seeds['consolidate-sharded-%s' % ws] = seed(T, 'consolidate', [('max-shard-size', '1KiB')], md, blob, out=5)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, re.sub(r'[^\w.-]', '_', name)), 'wb') as f:
            f.write(data)
    print('%d seeds in %s' % (len(seeds), OUT))


if __name__ == '__main__':
    main()
