# a pickle calling os.system exits 4 and names the global
"$T" inspect "$S/corpus/torch-2.15/malicious.pt"
