# --kv is parsed when the command line is: a value without '=' is one line (exit 2) before the
# input is opened (here it does not exist), and nothing is written
rc=0
"$T" convert --kv general.name "$W/absent.pt" "$W/out.gguf" || rc=$?
absent "$W/out.gguf"
exit "$rc"
