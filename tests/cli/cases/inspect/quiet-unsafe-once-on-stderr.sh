# inspect -q of an unsafe file: nothing on stdout, the UNSAFE line once on stderr, exit 4
"$T" inspect -q "$S/corpus/torch-2.15/malicious.pt"
