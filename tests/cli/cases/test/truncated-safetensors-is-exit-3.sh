# a safetensors file cut short (an interrupted download): test says where, exit 3, and goes on to the next file
head -c 5000 "$S/sharded/model-00001-of-00002.safetensors" >cut.safetensors
rc=0; "$T" test -q cut.safetensors "$S/tiny_mlp_cuda0.pt" || rc=$?
exit "$rc"
