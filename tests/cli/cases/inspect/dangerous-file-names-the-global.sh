# a pickle calling os.system exits 4 and names the global: in the report (stdout) and in one line on stderr
"$T" inspect "$S/corpus/torch-2.15/malicious.pt"
