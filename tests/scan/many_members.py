#!/usr/bin/env python3
"""scan holds an archive's results a batch at a time, not whole: a tar.gz of
200,000 members (about 1 MB) is scanned in bounded memory, every member is
reported once and in the archive's order, a payload among them is found, and
the output is the same on one thread and on three.

    many_members.py TENSORCTL WORKDIR [--no-rss]   (--no-rss: a sanitizer build, whose shadow
                                                    memory is not tensorctl's: the bound is not
                                                    checked, and 20,000 members are enough to check
                                                    the rest)
    many_members.py --make TREE N     (the archives alone, N members in the big one)
    many_members.py --run OUT ARGV... (ARGV run, its output in OUT: prints its exit status and
                                      peak RSS in KiB)

Members are empty .pkl files (each one unreadable: pickle.load of no bytes
raises EOFError), with a pickle that runs os.system 7 members from the end,
a second archive beside it so that the big one is not the only file (its
batches then wait for the file before it), and a hard link to the big one,
found to be another name of it only once its first results are handed on
(the rest of them, the payload's among them, are then dropped). Peak RSS comes from the child's
ru_maxrss; the bound (48 MiB) is far above what a batch costs and far below
the 80-90 MiB that holding 200,000 results took.
"""
import io, os, pickle, subprocess, sys, tarfile, tempfile, zipfile

N = 200000
BOUND_KIB = 48 * 1024


class Payload:
    def __reduce__(self):
        return (os.system, ('true',))


def make(tree, n):
    os.makedirs(tree, exist_ok=True)
    payload = pickle.dumps(Payload(), protocol=2)
    with tarfile.open(os.path.join(tree, 'b-many.tar.gz'), 'w:gz') as t:
        for i in range(n):
            data = payload if i == n - 7 else b''
            ti = tarfile.TarInfo('m%06d.pkl' % i)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    # another name of the big one, after it: found to be so once its first results are handed on
    os.link(os.path.join(tree, 'b-many.tar.gz'), os.path.join(tree, 'c-same.tar.gz'))
    with zipfile.ZipFile(os.path.join(tree, 'a-few.zip'), 'w') as z:
        for i in range(300):
            z.writestr('f%03d.pkl' % i, pickle.dumps({'step': i}, protocol=2))


def run_measured(out_path, argv):
    """argv run with its stdout in out_path: (exit status, peak RSS in KiB). Called in a Python of
    its own (--run): a child's ru_maxrss counts the pages it had before its exec, its parent's."""
    with open(out_path, 'wb') as f:
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.DEVNULL, env=dict(os.environ, MALLOC_PERTURB_='0'))
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its rusage
    return p.returncode, ru.ru_maxrss


def scan(tensorctl, tree, jobs, work):
    """(exit status, stdout, peak RSS of the child in KiB)"""
    out_path = os.path.join(work, 'out-%d.txt' % jobs)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), '--run', out_path, tensorctl, 'scan', '--jobs',
                        str(jobs), tree], stdout=subprocess.PIPE, check=True)
    rc, rss = (int(x) for x in r.stdout.split())
    with open(out_path) as f:
        return rc, f.read(), rss


def main():
    if sys.argv[1] == '--make':
        make(sys.argv[2], int(sys.argv[3]))
        return
    if sys.argv[1] == '--run':
        print('%d %d' % run_measured(sys.argv[2], sys.argv[3:]))
        return
    tensorctl, work = sys.argv[1], sys.argv[2]
    check_rss = '--no-rss' not in sys.argv[3:]
    n = N if check_rss else N // 10
    os.makedirs(work, exist_ok=True)
    fails = []
    with tempfile.TemporaryDirectory(dir=work) as d:
        tree = os.path.join(d, 'tree')
        # made, and each scan measured, by a Python of its own (run_measured)
        subprocess.run([sys.executable, os.path.abspath(__file__), '--make', tree, str(n)], check=True)
        outs = {}
        for jobs in (3, 1):
            rc, out, rss = scan(tensorctl, tree, jobs, d)
            outs[jobs] = out
            lines = out.splitlines()
            members = [l for l in lines if '!m' in l]
            print('--jobs %d: exit %d, %d member lines, peak RSS %s KiB' % (jobs, rc, len(members), rss))
            if rc != 4:
                fails.append('--jobs %d: exit %d, not 4 (a payload is inside)' % (jobs, rc))
            names = [l.split('b-many.tar.gz!', 1)[1].split(':', 1)[0] for l in members]
            if names != ['m%06d.pkl' % i for i in range(n)]:
                fails.append('--jobs %d: the members are not each reported once, in order' % jobs)
            bad = [l for l in members if l.startswith('UNSAFE')]
            if len(bad) != 1 or ('m%06d.pkl' % (n - 7)) not in bad[0] or 'posix.system' not in bad[0]:
                fails.append('--jobs %d: the payload is not the one unsafe member: %r' % (jobs, bad[:3]))
            if any('c-same.tar.gz' in l for l in lines[:-3]) or '1 other name of a judged file' not in out:
                fails.append('--jobs %d: the hard link c-same.tar.gz is not skipped as another name: %r'
                             % (jobs, [l for l in lines if 'c-same' in l or 'skipped' in l][:3]))
            if sum('a-few.zip!' in l for l in lines) != 300:
                fails.append('--jobs %d: the zip\'s 300 members are not all reported' % jobs)
            if check_rss and rss > BOUND_KIB:
                fails.append('--jobs %d: peak RSS %s KiB, over %d KiB' % (jobs, rss, BOUND_KIB))
        if outs[1].splitlines()[:-1] != outs[3].splitlines()[:-1]:  # (the last line says how long it took)
            fails.append('the output differs between --jobs 1 and --jobs 3')
    for f in fails:
        print('FAIL: ' + f)
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()
