# a folder of the kernel's own file systems (proc, sysfs) is not entered when the walk reaches it
# (here through symlinks), only when it is named (then its files are listed: not model files)
"$T" scan --all /proc/self/fdinfo >named.txt 2>&1 || true
grep -q '^skipped     not a model file  /proc/self/fdinfo/0: ' named.txt
! grep -q 'kernel folder' named.txt
mkdir m
cp "$S/tiny_mlp_cuda0.pt" m/
ln -s /proc/self m/proc
ln -s /sys/kernel m/sys
"$T" scan --all m
