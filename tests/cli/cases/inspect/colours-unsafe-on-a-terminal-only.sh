# on a terminal, inspect shows DANGEROUS and UNSAFE in red; not with NO_COLOR set, and never into a
# file or pipe (the other cases' exact outputs)
"$PY" -c '
import os, pty, sys
def run(env):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.argv[1], [sys.argv[1], "inspect", sys.argv[2]], env)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out
red = b"\x1b[1;31m"
env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
plain = run(dict(env, NO_COLOR="1"))
coloured = run(env)
print("terminal:", coloured.count(red + b"DANGEROUS"), coloured.count(red + b"UNSAFE"))
print("NO_COLOR:", plain.count(b"\x1b["))
' "$T" "$S/corpus/torch-2.15/malicious.pt"
"$T" inspect "$S/corpus/torch-2.15/malicious.pt" | grep -c "$(printf '\033')" || true
