# --dtype as torch and common tools spell it (torch.half, fp16, BF16, safetensors' F16 and F8_E5M2, any
# case): each casts to the dtype torch names, as --dtype float16 and the rest do
for d in fp16 half torch.half f16 F16 bf16 BF16 torch.bfloat16 fp32 float FP32 double fp64 torch.double e4m3 F8_E4M3 fp8_e5m2 F8_E5M2; do
    "$T" to-cpu -q "$S/tiny_mlp_cuda0.pt" -o "$W/x.pt" -f --dtype "$d"
    printf '%s %s\n' "$d" "$("$T" inspect "$W/x.pt" | awk '$1 == "fc1.weight" { print $2 }')"
done
