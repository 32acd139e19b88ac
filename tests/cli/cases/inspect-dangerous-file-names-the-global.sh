# a pickle calling os.system exits 4 and names the global, once: in the report (stdout), not again on stderr
"$T" inspect "$S/corpus/torch-2.15/malicious.pt"
