# an .npy whose array holds Python objects: numpy.load(allow_pickle=True) unpickles it; -v lists
# every global and the hazard
"$PY" -c '
import struct
h = b"{'"'"'descr'"'"': '"'"'|O'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (1,), }"
h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
pk = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
open("a.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + pk)
'
"$T" scan -v a.npy
