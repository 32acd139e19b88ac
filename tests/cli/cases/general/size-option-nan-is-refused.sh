# a size of "nan" (which strtod reads) is no size: refused as any malformed size, never converted
"$T" inspect --max-pickle-size=nan "$S/tiny_mlp_cuda0.pt"
