#!/usr/bin/env python3
"""Flip bytes inside one record of a zip (a torch checkpoint's storage), for the integrity cases.

    flip_bytes.py FILE SUFFIX N     invert N bytes in the middle of the record whose name ends with SUFFIX
    flip_bytes.py FILE @OFFSET N    invert N bytes of FILE at OFFSET (a format without records)
"""
import struct
import sys
import zipfile


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    path, where, n = argv[1], argv[2], int(argv[3])
    if where.startswith("@"):
        off = int(where[1:])
    else:
        with zipfile.ZipFile(path) as z:
            info = [i for i in z.infolist() if i.filename.endswith(where)]
        if len(info) != 1 or info[0].file_size < n:
            print("flip_bytes: %s: no one record ending with %s of %d bytes or more" % (path, where, n),
                  file=sys.stderr)
            return 1
        with open(path, "rb") as f:
            f.seek(info[0].header_offset)
            head = f.read(30)
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        off = info[0].header_offset + 30 + name_len + extra_len + (info[0].file_size - n) // 2
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(n)
        f.seek(off)
        f.write(bytes(x ^ 0xFF for x in b))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
