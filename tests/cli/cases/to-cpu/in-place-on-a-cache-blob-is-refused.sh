# --in-place on a blob of a content-addressed store (the Hugging Face cache) itself: refused, the blob kept
mkdir -p "$W/models--x/blobs" "$W/models--x/snapshots/r1"
b=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
cp "$S/tiny_mlp_cuda0.pt" "$W/models--x/blobs/$b"
ln -s "../../blobs/$b" "$W/models--x/snapshots/r1/model.pt"
before=$(sum "$W/models--x/blobs/$b")
rc=0
"$T" to-cpu --in-place "$W/models--x/blobs/$b" || rc=$?
unchanged "$W/models--x/blobs/$b" "$before"
exit "$rc"
