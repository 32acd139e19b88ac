# inspect /dev/stdin redirected from a regular file: seekable, so it is read
"$T" inspect --json /dev/stdin <"$S/tiny_mlp_cuda0.pt" >out.json
grep -q "\"format\":\"torch-zip\"" out.json || fail "not read"
