# a pickle calling os.system exits 4 and names the global
"$T" inspect "$C/torch-2.14/malicious.pt"
