# inspect of a named pipe: refused at once (never waiting for a writer), saying a seekable file is needed
mkfifo p
"$T" inspect p
