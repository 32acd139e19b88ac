"""python -m tensorctl ARGS...: the tensorctl binary, run with ARGS."""
import os
import sys

from tensorctl import binary

if __name__ == "__main__":
    path = binary()
    os.execv(path, [path] + sys.argv[1:])
