# an array of arrays: gguf-py flattens it, ggml refuses the file: a hazard, so convert refuses without --allow-unsafe
rc=0; "$T" convert "$S/gguf/meta-nested.gguf" "$W/out.safetensors" || rc=$?
absent "$W/out.safetensors"; exit "$rc"
