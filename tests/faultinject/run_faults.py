#!/usr/bin/env python3
"""Fault injection over tensorctl's rewrites.

    run_faults.py --tensorctl T --shim libtc_inject.so --input FILE [--part calls|rofs|kill]

calls: for `to-cpu` and `to-cpu --dtype bfloat16`, make each call of write,
pwrite, fsync, close, rename, copy_file_range, read, pread, open, mkostemp and
ioctl (the clones of file system blocks) fail in turn (every call the clean run makes), with ENOSPC, EIO and EACCES.
Each run must end either in success with a complete, readable OUT, or in a
non-zero exit with exactly one `tensorctl: ...` line on stderr, no OUT and no
`.OUT.tensorctl-*` temporary. Failures of the output's write, copy,
rename, close or first fsync must never be reported as success. The input
never changes.

rofs: OUT in a read-only folder (as an unprivileged user when run as root: nobody, running a copy of
tensorctl made in the test's folder, since nobody may not reach the checkout; skipped, saying why,
where nobody cannot run even that).

sync: the shim counts the fsync calls of to-cpu, convert and extract: each
output is made durable (fsync of the file and its folder) unless --no-sync
says not to, and --in-place syncs whatever --no-sync says.

kill: a ~200 MB checkpoint (made here with zipfile, no torch) is frozen
(SIGSTOP) once its output has bytes (an unnamed file the process holds open,
or a hidden temporary where the file system cannot make unnamed ones), then
SIGKILLed: no OUT and nothing else in the folder, input intact; the same with
SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM,
SIGPROF, SIGPIPE, SIGXCPU and a real-time signal: each ends the process as
that signal, leaving nothing. Then with O_TMPFILE refused (the shim), as on a
file system without unnamed files: a hidden temporary, which SIGTERM, SIGUSR1
and SIGPIPE remove.

--no-tmpfile: the shim refuses O_TMPFILE, so that the output is a hidden
temporary renamed into place (the file systems without unnamed files), and
its calls (mkostemp, rename) fail in turn.

--fstype nfs: the shim makes the output's file system pass for NFS, so that
unchanged bytes are copied with copy_file_range (as they are where the server
copies them), and those calls fail in turn too. Without it, on a local file
system, a clean run of a big record must make no copy_file_range call at all
(read and written: faster there); with it, at least one.

--replace: OUT exists, a copy of the input, and is replaced: to-cpu -f, with and
without --no-sync (the names exchanged, then the old one unlinked), and
to-cpu --in-place; each call fails in turn as above, renameat2 and unlink
included. A failure must leave the old OUT byte for byte, alone in its
folder; a success, the new OUT alone. kill also freezes and kills (SIGKILL,
SIGTERM) rewrites over an existing OUT and in place: the old file stays, byte
for byte, and nothing beside it.

freed: a 200 MiB OUT replaced (-f, -f --no-sync, --in-place) through pipes read
to their end: exit 0, OUT new and alone, and within a minute no process holds
anything in its folder open (the old file, freed in the background, is freed).

A part that checked nothing fails: a clean run that logged no call to fail
(the shim not loaded?), or no conversion caught midway.
"""
import argparse, hashlib, io, os, pwd, resource, shutil, signal, struct, subprocess, sys, tempfile, time, traceback, zipfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from judge import open_in  # noqa: E402

CALLS = ['write', 'pwrite', 'fsync', 'close', 'rename', 'copy_file_range', 'read', 'pread', 'open', 'mkostemp',
         'ioctl', 'linkat', 'renameat2', 'unlink']
ERRNOS = ['ENOSPC', 'EIO', 'EACCES']
MUST_FAIL = {'write', 'pwrite', 'copy_file_range', 'rename', 'mkostemp', 'linkat'}


def digest(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for b in iter(lambda: f.read(1 << 20), b''):
            h.update(b)
    return h.hexdigest()


def leftovers(folder, name):
    return sorted(n for n in os.listdir(folder) if n == name or n.startswith('.' + name + '.tensorctl-'))


def env_with(extra):
    e = dict(os.environ)
    e.update(extra)
    # sanitizer builds: the shim comes before the ASan runtime in the load order
    e['ASAN_OPTIONS'] = (e.get('ASAN_OPTIONS', '') + ':verify_asan_link_order=0').lstrip(':')
    return e


def counts_of(log):
    if not os.path.exists(log):
        return {}
    for line in open(log):
        if line.startswith('counts:'):
            return {k: int(v) for k, v in (x.split('=') for x in line.split()[1:])}
    return {}


def part_calls(a, tmp, fails):
    variants = [['to-cpu'], ['to-cpu', '--dtype', 'bfloat16']]
    if a.replace:  # over an existing OUT (a copy of the input): -f with and without --no-sync, and --in-place
        variants = [['to-cpu', '-f'], ['to-cpu', '-f', '--no-sync'], ['to-cpu', '-f', '--no-sync', '--dtype', 'bfloat16'],
                    ['to-cpu', '--in-place']]
    old = digest(a.input)
    for variant in variants:
        outdir = os.path.join(tmp, 'out')
        os.makedirs(outdir, exist_ok=True)
        out = os.path.join(outdir, 'out.pt')
        log = os.path.join(tmp, 'clean.log')
        if os.path.exists(log):
            os.unlink(log)
        if '--in-place' in variant:
            cmd = [a.tensorctl] + variant + ['-q', out]
        else:
            cmd = [a.tensorctl] + variant + ['-q', a.input, '-o', out]
        if a.replace:
            shutil.copy(a.input, out)
        base = {'LD_PRELOAD': a.shim, 'TC_FAULT_LOG': log}
        if a.fstype:
            base['TC_FAULT_FSTYPE'] = a.fstype
        if a.no_tmpfile:
            base['TC_FAULT_NO_TMPFILE'] = '1'
        p = subprocess.run(cmd, env=env_with(base), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            fails.append('%s: clean run failed: %s' % (' '.join(variant), p.stderr.decode()))
            return
        counts = counts_of(log)
        if os.path.exists(log):
            os.unlink(log)
        if a.replace and digest(out) == old:
            fails.append('%s: the clean run left OUT as it was' % ' '.join(variant))
        os.unlink(out)
        print('%s: calls %s' % (' '.join(variant), counts))
        if a.kernel_copy and variant == ['to-cpu']:
            k = counts.get('copy_file_range', 0)
            if (k > 0) != (a.kernel_copy == 'yes'):
                fails.append('%s: %d copy_file_range calls in a clean run, expected %s' %
                             (' '.join(variant), k, 'some' if a.kernel_copy == 'yes' else 'none'))
        runs = tolerated = 0
        for call in CALLS:
            for n in range(1, counts.get(call, 0) + 1):
                for err in ERRNOS:
                    runs += 1
                    if os.path.exists(log):
                        os.unlink(log)
                    if a.replace:
                        shutil.copy(a.input, out)
                    p = subprocess.run(cmd, env=env_with(dict(base, TC_FAULT_CALL=call, TC_FAULT_NTH=str(n),
                                                              TC_FAULT_ERRNO=err)),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                    what = '%s, %s #%d fails with %s' % (' '.join(variant), call, n, err)
                    fired = 'fired:' in open(log).read() if os.path.exists(log) else False
                    errl = p.stderr.decode(errors='replace').splitlines()
                    left = leftovers(outdir, 'out.pt')
                    if p.returncode < 0:
                        fails.append('%s: killed by signal %d' % (what, -p.returncode))
                    elif p.returncode == 0:
                        if fired and call in MUST_FAIL or (fired and call == 'fsync' and n == 1):
                            fails.append('%s: reported success' % what)
                        chk = subprocess.run([a.tensorctl, 'inspect', out], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE)
                        if chk.returncode != 0:
                            fails.append('%s: success, but OUT does not read back: %s' % (what, chk.stderr.decode()))
                        if left != ['out.pt']:
                            fails.append('%s: success, but the folder holds %s' % (what, left))
                        if fired:
                            tolerated += 1
                            print('note: %s: tolerated (exit 0, OUT complete)' % what)
                        if a.replace and digest(out) == old:
                            fails.append('%s: success, but OUT is the old file' % what)
                    else:
                        if len(errl) != 1 or not errl[0].startswith('tensorctl: '):
                            fails.append('%s: expected one error line, got %r' % (what, errl))
                        if a.replace:  # the old OUT, byte for byte, and nothing beside it
                            if left != ['out.pt'] or digest(out) != old:
                                fails.append('%s: failed, but the old OUT is not left as it was (folder: %s)'
                                             % (what, left))
                        elif left:
                            fails.append('%s: left %s behind' % (what, left))
                    for n2 in left:
                        os.unlink(os.path.join(outdir, n2))
        print('%s: %d injected runs, %d tolerated' % (' '.join(variant), runs, tolerated))
        if runs == 0:
            fails.append('%s: the clean run logged no call to fail (is the shim loaded?): nothing was injected'
                         % ' '.join(variant))


class Skip(Exception):
    """The part cannot run here; the message says why (exit 77)."""


def as_nobody(a, tmp):
    """(the tensorctl to run, the preexec_fn that drops to nobody): root writes anywhere, so a
    read-only folder means something only to another user. nobody cannot reach a checkout under a
    private folder (/root, mode 0700), so the binary is copied into tmp, made reachable, and
    checked to start as nobody there."""
    try:
        nobody = pwd.getpwnam('nobody')
    except KeyError:
        raise Skip('running as root, and there is no user nobody to try a read-only folder as')
    tc = os.path.join(tmp, 'bin', 'tensorctl')
    os.makedirs(os.path.dirname(tc))
    shutil.copy(a.tensorctl, tc)
    os.chmod(os.path.dirname(tc), 0o755)
    os.chmod(tc, 0o755)
    pre = lambda: (os.setgroups([]), os.setgid(nobody.pw_gid), os.setuid(nobody.pw_uid))
    try:
        p = subprocess.run([tc, '--version'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre)
        why = 'exit %d: %s' % (p.returncode, p.stderr.decode(errors='replace').strip()) if p.returncode else None
    except OSError as e:
        why = str(e)
    if why:
        raise Skip('nobody cannot run a copy of tensorctl in %s (%s); set TMPDIR to a folder every user can '
                   'reach' % (tmp, why))
    return tc, pre


def part_rofs(a, tmp, fails):
    ro = os.path.join(tmp, 'ro')
    os.makedirs(ro)
    src = os.path.join(tmp, 'in.pt')
    shutil.copy(a.input, src)
    os.chmod(tmp, 0o755)
    os.chmod(src, 0o644)
    os.chmod(ro, 0o555)
    tc, pre = as_nobody(a, tmp) if os.geteuid() == 0 else (a.tensorctl, None)
    for variant in (['to-cpu'], ['to-cpu', '--dtype', 'bfloat16']):
        p = subprocess.run([tc] + variant + ['-q', src, '-o', os.path.join(ro, 'out.pt')],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre)
        errl = p.stderr.decode().splitlines()
        if p.returncode in (0,) or p.returncode < 0:
            fails.append('read-only folder: exit %d' % p.returncode)
        if len(errl) != 1 or not errl[0].startswith('tensorctl: '):
            fails.append('read-only folder: expected one error line, got %r' % errl)
        if os.listdir(ro):
            fails.append('read-only folder: holds %s' % os.listdir(ro))
        print('read-only folder: exit %d: %s' % (p.returncode, errl[:1]))


def part_sync(a, tmp, fails):
    src = os.path.join(tmp, 'in.pt')
    shutil.copy(a.input, src)
    out_pt, out_st = os.path.join(tmp, 'out.pt'), os.path.join(tmp, 'out.safetensors')
    out_set = os.path.join(tmp, 'set', 'model.safetensors.index.json')  # a sharded set: several shards, an index
    cases = [(['to-cpu', src, '-o', out_pt], out_pt), (['convert', src, out_pt], out_pt),
             (['convert', src, out_st], out_st), (['extract', src, '-o', out_st], out_st),
             (['extract', src, '-o', out_pt], out_pt), (['to-cpu', '--dtype', 'bfloat16', src, '-o', out_pt], out_pt),
             (['extract', '--max-shard-size', '1KB', src, '-o', out_set], out_set)]
    for args, out in cases:
        for no_sync in (False, True):
            cmd = [a.tensorctl, args[0], '-q'] + (['--no-sync'] if no_sync else []) + args[1:]
            log = os.path.join(tmp, 'sync.log')
            p = subprocess.run(cmd, env=env_with({'LD_PRELOAD': a.shim, 'TC_FAULT_LOG': log}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            n = counts_of(log).get('fsync', -1)
            what = ' '.join(args[:1] + (['--no-sync'] if no_sync else []) + [os.path.basename(out)])
            if p.returncode != 0:
                fails.append('%s: exit %d: %s' % (what, p.returncode, p.stderr.decode(errors='replace')))
            elif subprocess.run([a.tensorctl, 'inspect', out], stdout=subprocess.DEVNULL).returncode != 0:
                fails.append('%s: the output does not read back' % what)
            elif no_sync and n != 0:
                fails.append('%s: %d fsync calls, expected none' % (what, n))
            elif not no_sync and n < 2:
                fails.append('%s: %d fsync calls, expected the file and its folder' % (what, n))
            print('%s: %d fsync calls' % (what, n))
            for f in (out, log):
                if os.path.exists(f):
                    os.unlink(f)
            shutil.rmtree(os.path.dirname(out_set), ignore_errors=True)
    log = os.path.join(tmp, 'sync.log')
    p = subprocess.run([a.tensorctl, 'to-cpu', '-q', '--no-sync', '--in-place', src],
                       env=env_with({'LD_PRELOAD': a.shim, 'TC_FAULT_LOG': log}),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    n = counts_of(log).get('fsync', -1)
    if p.returncode != 0 or n < 2:
        fails.append('to-cpu --in-place --no-sync: exit %d, %d fsync calls (the input is at stake: expected the '
                     'file and its folder)' % (p.returncode, n))
    print('to-cpu --in-place --no-sync: %d fsync calls' % n)


def big_checkpoint(path, mib=200):
    """A torch zip with one float32 tensor of `mib` MiB, stored, made without torch."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'hostile'))
    from hostile import state_dict, dict_of, tensor
    n = mib << 18
    pkl = state_dict(dict_of([('w', tensor(numel=n, shape=(n,), stride=(1,)))]))
    chunk = struct.pack('<f', 1.5) * (1 << 18)
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_STORED, allowZip64=True) as z:
        z.writestr('big/data.pkl', pkl)
        z.writestr('big/byteorder', 'little')
        with z.open('big/data/0', 'w', force_zip64=True) as f:
            for _ in range(mib):
                f.write(chunk)
        z.writestr('big/version', '3\n')


def child_defaults(sig):
    """In the child before exec: no core file, and the signal the case sends at its default
    disposition. A signal ignored where the tests were started (nohup's SIGHUP, SIGINT and SIGQUIT
    of a background job) stays ignored across exec, and tensorctl rightly keeps it so: the case
    is about a signal that ends the process."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig != signal.SIGKILL:
        signal.signal(sig, signal.SIG_DFL)


def part_kill(a, tmp, fails):
    src = os.path.join(tmp, 'big.pt')
    big_checkpoint(src)
    before = digest(src)
    frozen = 0
    plain = ['to-cpu']
    cases = [(signal.SIGKILL, ['to-cpu', '--dtype', 'bfloat16']), (signal.SIGKILL, plain),
             (signal.SIGTERM, ['to-cpu', '--dtype', 'bfloat16']), (signal.SIGINT, ['to-cpu', '--dtype', 'float16'])]
    cases += [(s, plain) for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
                                   signal.SIGVTALRM, signal.SIGPROF, signal.SIGPIPE, signal.SIGXCPU,
                                   signal.SIGRTMIN + 2)]
    cases = [(s, v, False) for s, v in cases]
    # where the file system has no unnamed files: a hidden temporary, removed by every signal that can be caught
    cases += [(s, plain, True) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGPIPE)]
    # over an existing OUT (a copy of the input; its cache dropped from the start) and in place (the input's
    # cache dropped as it is read): the old file stays, byte for byte
    cases += [(signal.SIGKILL, ['to-cpu', '-f', '--no-sync'], False), (signal.SIGKILL, ['to-cpu', '-f'], False),
              (signal.SIGTERM, ['to-cpu', '-f', '--no-sync', '--dtype', 'bfloat16'], False),
              (signal.SIGKILL, ['to-cpu', '--in-place'], False), (signal.SIGTERM, ['to-cpu', '--in-place'], False)]
    for sig, variant, named in cases:
        outdir = os.path.join(tmp, 'kill-out')
        shutil.rmtree(outdir, ignore_errors=True)
        os.makedirs(outdir)
        out = os.path.join(outdir, 'out.pt')
        replacing = '-f' in variant or '--in-place' in variant
        if replacing:
            shutil.copy(src, out)
        args = [out] if '--in-place' in variant else [src, '-o', out]
        p = subprocess.Popen([a.tensorctl] + variant + ['-q'] + args,
                             env=env_with({'LD_PRELOAD': a.shim, 'TC_FAULT_NO_TMPFILE': '1'}) if named else None,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=lambda: child_defaults(sig))
        deadline = time.time() + 60
        caught = False
        while time.time() < deadline and p.poll() is None:
            # midway: the output is open and has bytes (unnamed, or a hidden temporary)
            tmps = leftovers(outdir, 'out.pt')
            sizes = []
            for fd in open_in(p.pid, outdir):
                try:
                    if os.readlink(fd) == out:
                        continue  # the old OUT (read, or its cache dropped), not the new one
                    sizes.append(os.stat(fd).st_size)
                except OSError:
                    pass
            if any(sizes) or (tmps and os.path.getsize(os.path.join(outdir, tmps[0])) > 0):
                p.send_signal(signal.SIGSTOP)
                caught = True
                break
            time.sleep(0.0005)
        try:
            what = '%s during %s' % (signal.Signals(sig).name, ' '.join(variant))
        except ValueError:
            what = 'signal %d during %s' % (sig, ' '.join(variant))
        if named:
            what += ' (no O_TMPFILE: a hidden temporary)'
        if not caught:
            p.wait()
            print('note: %s: finished before it could be frozen (exit %d)' % (what, p.returncode))
            continue
        frozen += 1
        midway = sorted(os.listdir(outdir))
        if named and not midway:
            fails.append('%s: no hidden temporary while frozen (was O_TMPFILE refused?)' % what)
        if 'out.pt' in midway and not replacing:
            fails.append('%s: OUT exists while the conversion is frozen midway' % what)
        p.send_signal(sig)
        if sig != signal.SIGKILL:
            p.send_signal(signal.SIGCONT)
        p.wait(timeout=60)
        left = sorted(os.listdir(outdir))
        if p.returncode != -sig:
            fails.append('%s: ended with %s, not the signal' % (what, p.returncode))
        if replacing:
            what += ' over an existing OUT'
            if left != ['out.pt'] or digest(out) != before:
                fails.append('%s: the old OUT is not left byte for byte, alone (folder: %s)' % (what, left))
        elif left:  # an unnamed output leaves nothing, whatever the signal, SIGKILL included
            fails.append('%s: left %s behind' % (what, left))
        print('%s: frozen with %s visible, exit %s, then %s' % (what, midway, p.returncode, left))
    if frozen == 0:
        fails.append('no conversion was caught midway (each finished first): nothing was checked')
    if digest(src) != before:
        fails.append('the input changed')


def holders(folder):
    """(pid, fd target) for every process holding a file in folder open."""
    found = []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            for fd in open_in(int(pid), folder):
                try:
                    found.append((int(pid), os.readlink(fd)))
                except OSError:
                    pass
    return found


def part_freed(a, tmp, fails):
    src = os.path.join(tmp, 'big.pt')
    big_checkpoint(src)
    old = digest(src)
    for variant in (['to-cpu', '-f', '--no-sync'], ['to-cpu', '-f'], ['to-cpu', '--in-place']):
        outdir = os.path.join(tmp, 'freed-out')
        shutil.rmtree(outdir, ignore_errors=True)
        os.makedirs(outdir)
        out = os.path.join(outdir, 'out.pt')
        shutil.copy(src, out)
        args = [out] if '--in-place' in variant else [src, '-o', out]
        what = ' '.join(variant) + ' over a 200 MiB OUT'
        # through pipes read to their end: nothing left running may hold them
        p = subprocess.run([a.tensorctl] + variant + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        if p.returncode != 0:
            fails.append('%s: exit %d: %s' % (what, p.returncode, p.stderr.decode(errors='replace')))
            continue
        if sorted(os.listdir(outdir)) != ['out.pt'] or digest(out) == old:
            fails.append('%s: the folder holds %s, OUT %s' % (what, sorted(os.listdir(outdir)),
                                                              'unchanged' if digest(out) == old else 'new'))
        chk = subprocess.run([a.tensorctl, 'inspect', out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if chk.returncode != 0:
            fails.append('%s: OUT does not read back: %s' % (what, chk.stderr.decode(errors='replace')))
        # the old file is freed soon after, by whatever frees it: nothing holds it for long
        deadline = time.time() + 60
        while holders(outdir) and time.time() < deadline:
            time.sleep(0.05)
        if holders(outdir):
            fails.append('%s: a minute on, still held open: %s' % (what, holders(outdir)))
        print('%s: exit 0, %s, nothing held open' % (what, sorted(os.listdir(outdir))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tensorctl', required=True)
    ap.add_argument('--shim', required=True)
    ap.add_argument('--input', required=True)
    ap.add_argument('--part', choices=['calls', 'rofs', 'kill', 'sync', 'freed'], default='calls')
    ap.add_argument('--fstype', choices=['nfs'], help='calls: the output passes for one on this file system')
    ap.add_argument('--no-tmpfile', action='store_true',
                    help='calls: O_TMPFILE is refused, as where the file system has no unnamed files')
    ap.add_argument('--replace', action='store_true',
                    help='calls: OUT exists (a copy of the input) and is replaced (-f, -f --no-sync, --in-place); '
                         'a failure must leave it byte for byte')
    ap.add_argument('--kernel-copy', choices=['yes', 'no'],
                    help='calls: whether to-cpu must copy with copy_file_range (a big record)')
    a = ap.parse_args()
    a.tensorctl, a.shim = os.path.abspath(a.tensorctl), os.path.abspath(a.shim)
    before = digest(a.input)
    tmp = tempfile.mkdtemp(prefix='faultinject-')
    fails = []
    try:
        {'calls': part_calls, 'rofs': part_rofs, 'kill': part_kill, 'sync': part_sync,
         'freed': part_freed}[a.part](a, tmp, fails)
    except Skip as e:
        print('SKIP: %s' % e)
        return 77
    except Exception as e:  # noqa: BLE001 -- said as a failure with its reason, then where it happened
        fails.append('%s part stopped: %s: %s' % (a.part, type(e).__name__, e))
        traceback.print_exc(file=sys.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if digest(a.input) != before:
        fails.append('the input file changed')
    for f in fails:
        print('FAIL', f)
    print('ok' if not fails else '%d failures' % len(fails))
    return 1 if fails else 0


if __name__ == '__main__':
    sys.exit(main())
