#!/bin/sh
# with_reference_corpus.sh DIR PROGRAM [ARGS...]: run PROGRAM with ARGS when DIR, the reference
# corpus (../shared/corpus beside the checkout: files of other torch releases, of DeepSpeed and of
# gguf-py), is there; otherwise say so and skip (77). The tests over it are extra coverage: a clone
# has no such folder, and the files the core tests judge are the repository's own
# (sample_models/corpus/, made by sample_models/make_corpus.py).
if [ $# -lt 2 ]; then
    echo "usage: $0 DIR PROGRAM [ARGS...]" >&2
    exit 2
fi
dir=$1
shift
if [ ! -d "$dir" ]; then
    echo "SKIP: the reference corpus $dir is not there (extra coverage: a clone has none; the core tests judge sample_models/corpus/)"
    exit 77
fi
exec "$@"
