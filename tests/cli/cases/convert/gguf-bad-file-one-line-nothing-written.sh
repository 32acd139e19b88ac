# a GGUF whose tensor offset leaves a gap (ggml refuses it): exit 3, one line with the byte, nothing written
rc=0; "$T" convert "$S/gguf/bad/offset-gap.gguf" "$W/out.safetensors" || rc=$?
absent "$W/out.safetensors"; no_temporaries "$W"; exit "$rc"
