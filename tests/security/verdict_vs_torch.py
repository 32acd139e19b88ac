#!/usr/bin/env python3
"""The verdict against real torch: for every checkpoint given (and every
gadget file of gadgets.py), tensorctl's verdict must agree with what this
torch's own weights_only loader does.

  - torch.load(weights_only=True) loads it   -> tensorctl says safe
  - it refuses a global G                    -> tensorctl says unsafe and lists G
  - it fails for another reason (an opcode an old torch lacks, a format it
    cannot read)                             -> nothing to compare; counted
  - and per torch: tensorctl's "weights_only" answer for this torch's version
    (1.13 or 2.x) must be what this torch does: "loads" exactly when
    torch.load(weights_only=True) returns

usage: verdict_vs_torch.py TENSORCTL FILE...   (under tests/run_with_torch.sh)
Exit 0 when every comparison agrees and there were some, 1 otherwise, 77 without torch.
"""
import json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def refused_global(msg):
    """The global torch's weights_only loader refused, from its message, or None."""
    for pat in (r'Unsupported global: GLOBAL ([\w.]+)', r'GLOBAL ([\w.]+) was not an allowed global',
                r'Unsupported class ([\w.]+)', r'Trying to call reduce for unrecognized function ([\w.<>]+)',
                r'Unsupported global ([\w.]+)'):
        m = re.search(pat, msg)
        if m:
            return m.group(1)
    return None


def main():
    try:
        import torch
    except ImportError:
        print('no torch: skipped')
        return 77
    import gadgets
    tc, files = sys.argv[1], sys.argv[2:]
    agree = skipped = per_version = 0
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        files = files + gadgets.gen(tmp)
        for f in files:
            r = subprocess.run([tc, 'inspect', '--json', f], capture_output=True, text=True, timeout=120)
            try:
                info = json.loads(r.stdout)
            except ValueError:
                fails.append('%s: inspect gave no JSON (exit %d): %s' % (f, r.returncode, r.stderr.strip()))
                continue
            try:
                torch.load(f, map_location='cpu', weights_only=True)
                err = None
            except Exception as e:  # noqa: BLE001
                err = str(e)
            name = os.path.basename(os.path.dirname(f)) + '/' + os.path.basename(f)
            ver = '1.13' if torch.__version__.startswith('1.') else '2.x'
            wo = (info.get('weights_only') or {}).get(ver)
            if wo is not None:
                if wo['loads'] != (err is None):
                    fails.append('%s: tensorctl says torch %s %s with weights_only=True%s, torch %s %s' % (
                        name, ver, 'loads it' if wo['loads'] else 'refuses it',
                        '' if wo['loads'] else ' (%s)' % wo.get('refuses'), torch.__version__,
                        'loads it' if err is None else 'refuses it: ' + err.strip().splitlines()[-1][:160]))
                else:
                    per_version += 1
            elif f.endswith(('.pt', '.pth', '.ckpt', '.bin')) and info.get('format') != 'safetensors':
                fails.append('%s: inspect --json gives no weights_only answer for torch %s' % (name, ver))
            if err is None:
                if info.get('verdict') != 'safe':
                    fails.append('%s: torch %s loads it with weights_only=True, tensorctl says %s (%s)' % (
                        name, torch.__version__, info.get('verdict'), info.get('unsafe_globals')))
                else:
                    agree += 1
                continue
            g = refused_global(err)
            if g is not None:  # torch names it as written (__builtin__.eval) or bare (eval)
                short = g.split('.')[-1]
                named = [u for u in (info.get('unsafe_globals') or []) if u.split('.')[-1] == short]
                newer = [v for v in info.get('global_verdicts') or []
                         if v['name'].split('.')[-1] == short and v.get('weights_only_of') == '2.x']
                if newer and torch.__version__.startswith('1.') and info.get('verdict') == 'safe':
                    agree += 1  # allowed by torch 2.x's weights_only: safe, though 1.13 cannot load it so
                    continue
                g = named[0] if named else g
            if g is None:
                skipped += 1
                print('skip %s: torch %s fails for another reason: %s' % (name, torch.__version__,
                                                                          err.strip().splitlines()[-1][:160]))
                continue
            if info.get('verdict') != 'unsafe' or g not in (info.get('unsafe_globals') or []):
                fails.append('%s: torch refuses global %s, tensorctl says %s with unsafe globals %s' % (
                    name, g, info.get('verdict'), info.get('unsafe_globals')))
            else:
                agree += 1
    for f in fails:
        print('FAIL', f)
    print('torch %s: %d files agree, %d not comparable, %d disagree; the weights_only answer for this torch right '
          'on %d' % (torch.__version__, agree, skipped, len(fails), per_version))
    return 1 if fails or agree == 0 or per_version == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
