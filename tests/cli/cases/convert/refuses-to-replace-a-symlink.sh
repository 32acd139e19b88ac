# -o naming a symbolic link: refused (only a regular file is replaced), the link and its target kept
printf 'precious' >"$W/target.safetensors"
ln -s target.safetensors "$W/link.safetensors"
before=$(sum "$W/target.safetensors")
rc=0
"$T" convert "$S/tiny_mlp_cuda0.pt" "$W/link.safetensors" --force || rc=$?
[ -L "$W/link.safetensors" ] || fail "the link was replaced"
unchanged "$W/target.safetensors" "$before"
exit "$rc"
