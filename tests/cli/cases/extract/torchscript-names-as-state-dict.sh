# a TorchScript archive: its declared parameters and buffers, a non-persistent one too, no plain attribute
"$T" extract -q "$S/torchscript_scripted.pt" -o "$W/s.pt"
"$T" inspect "$W/s.pt" | awk 'NR > 2 && NF == 0 { exit } NR > 3 { print $1 }'
