#!/usr/bin/env python3
"""scan gives every file the judgement inspect gives it.

    agree.py --tensorctl T --samples DIR [--corpus DIR]

The files: every file under sample_models/ (always), under ../shared/corpus
when it is there, and every case of the hostile suite (hostile.py,
gadgets.py, polyglots.py, made here). Each folder is scanned once
(scan --json --all); each file is inspected on its own. For every file:

  - inspect reads it (exit 0 or 4, a JSON document): scan's item for it has
    the same verdict, its kind is inspect's format, and it names the same
    globals outside the allowlist;
  - inspect refuses it as unsafe without reading it (exit 4): scan says
    unsafe, with inspect's message among its reasons;
  - a driver of inspect's took it for its format and failed (exit 3): scan
    says unreadable with inspect's message, or unsafe when its bytes read
    from byte 0 are a pickle that imports something;
  - no driver takes it (exit 3, "not a checkpoint"): scan's item for it is
    no verdict of a driver (it is read as what no driver reads: an archive's
    members, a raw pickle, or not a model file).
"""
import argparse, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'hostile'))
sys.path.insert(0, os.path.join(HERE, '..', 'security'))


def hostile_files(out):
    import hostile as H
    import gadgets
    import polyglots
    os.makedirs(out)
    for name, case in H.CASES.items():
        H.write_case(case[0], os.path.join(out, name + '.pt'))
    gdir = os.path.join(out, 'gadgets')
    os.makedirs(gdir)
    gadgets.gen(gdir)
    pdir = os.path.join(out, 'polyglots')
    os.makedirs(pdir)
    for name, fn, data, _, _ in polyglots.cases(os.path.join(out, 'MARKER')):
        with open(os.path.join(pdir, name + '-' + fn), 'wb') as f:
            f.write(data)


def scan_items(tc, root):
    r = subprocess.run([tc, 'scan', '--json', '--all', root], capture_output=True, text=True, timeout=1200)
    items = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if 'summary' in o:
            continue
        items.setdefault(o['path'], []).append(o)
    return items, r.returncode


def files_under(root):
    for dp, dns, fns in os.walk(root):
        dns.sort()
        for fn in sorted(fns):
            p = os.path.join(dp, fn)
            if os.path.isfile(p) and not os.path.islink(p):
                yield p


def judge(tc, path, items, fails):
    """One file: inspect's judgement against scan's items for it. Returns the kind of agreement."""
    r = subprocess.run([tc, 'inspect', '--json', path], capture_output=True, text=True, timeout=300)
    mine = [o for o in items.get(path, []) if not o['member']]
    if len(mine) != 1:
        fails.append('%s: scan gave %d items for the file itself' % (path, len(mine)))
        return None
    s = mine[0]
    if s['kind'] in ('link target', 'link'):  # judged under another name: a symlink's to it, or a hard link's
        linked = [o for o in items.get(s['reason'].split('the same file as ', 1)[-1], []) if not o['member']]
        if len(linked) != 1:
            fails.append('%s: judged as %s, which scan does not report' % (path, s['reason']))
            return None
        s = linked[0]
    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ''
    msg = msg.split(': ', 2)[2] if msg.count(': ') >= 2 else msg
    try:
        info = json.loads(r.stdout) if r.stdout.strip() else None
    except ValueError:
        info = None
    if info is not None and 'error' in info:  # a file inspect could not read: its record says why, no report
        info = None
    if r.returncode in (0, 4) and info:
        want = 'safe' if r.returncode == 0 else 'unsafe'
        if s['verdict'] != want or s['kind'] != info['format']:
            fails.append('%s: inspect says %s (%s), scan %s (%s: %s)' % (path, want, info['format'], s['verdict'],
                                                                     s['kind'], s['reason']))
        ug = set(info.get('unsafe_globals', [])) - set(info.get('admitted_globals', []))
        sg = {g['name'] for g in s['unsafe_globals']}
        if ug != sg:
            fails.append('%s: inspect names %s outside the allowlist, scan %s' % (path, sorted(ug), sorted(sg)))
        if len(info.get('hazards', [])) != len(s['hazards']):
            fails.append('%s: inspect has %d hazards, scan %d' % (path, len(info['hazards']), len(s['hazards'])))
        return want
    if r.returncode == 4:
        if s['verdict'] != 'unsafe' or not any(msg in h for h in s['hazards'] + [s['reason'] or '']) and \
                s['kind'] != 'pickle':
            fails.append('%s: inspect refuses it as unsafe (%s), scan says %s (%s)' % (path, msg, s['verdict'],
                                                                                     s['reason']))
        return 'refused unsafe'
    if r.returncode == 3:
        if not msg.startswith('not a checkpoint'):
            # a driver took it for its format and failed: scan says the same, or finds it unsafe
            # when read as a pickle from byte 0 (a verdict inspect leaves to its failure)
            if s['verdict'] == 'unreadable' and s['reason'] != msg:
                fails.append('%s: inspect says %r, scan %r' % (path, msg, s['reason']))
            if s['verdict'] not in ('unreadable', 'unsafe') or (s['verdict'] == 'unsafe' and s['kind'] != 'pickle'):
                fails.append('%s: inspect cannot read it (%s), scan says %s (%s: %s)' % (
                    path, msg, s['verdict'], s['kind'], s['reason']))
        elif s['verdict'] in ('safe', 'unsafe') and s['kind'] not in ('pickle',) and ':' not in s['kind']:
            fails.append('%s: inspect cannot read it (%s), scan judges it %s as %s' % (path, msg, s['verdict'],
                                                                                    s['kind']))
        return 'unreadable'
    fails.append('%s: inspect exits %d: %s' % (path, r.returncode, msg))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tensorctl', required=True)
    ap.add_argument('--samples', required=True)
    ap.add_argument('--corpus')
    a = ap.parse_args()
    fails, counts = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        hdir = os.path.join(tmp, 'hostile')
        hostile_files(hdir)
        roots = [a.samples, hdir]
        if a.corpus and os.path.isdir(a.corpus):
            roots.append(a.corpus)
        else:
            print('no corpus at %s: the samples and the hostile suite only' % a.corpus)
        for root in roots:
            items, _ = scan_items(a.tensorctl, root)
            for p in files_under(root):
                k = judge(a.tensorctl, p, items, fails)
                counts[k] = counts.get(k, 0) + 1
        if os.path.exists(os.path.join(hdir, 'MARKER')):
            fails.append('A PAYLOAD RAN')
    print('scan and inspect: ' + ', '.join('%d %s' % (n, k) for k, n in sorted(counts.items(), key=str)))
    for f in fails:
        print('FAIL ' + f)
    return 1 if fails or not counts.get('safe') or not counts.get('unsafe') else 0


if __name__ == '__main__':
    sys.exit(main())
