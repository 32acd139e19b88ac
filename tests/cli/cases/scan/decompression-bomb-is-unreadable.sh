# a gzip of 128 MiB of one letter (130 KiB): past --max-inflate-ratio times its size (and 64 MiB), it is
# unreadable, not judged; with the ratio raised it is judged (no model file)
"$PY" -c '
import gzip
with gzip.open("bomb.pkl.gz", "wb", 9) as f:
    for _ in range(128): f.write(b"a" * (1 << 20))
'
"$T" scan -q bomb.pkl.gz || echo "exit $?"
"$T" scan --all --max-inflate-ratio 2000 bomb.pkl.gz
