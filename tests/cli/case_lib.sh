# Sourced by run_case.py before every case of tests/cli/cases/ (sh -eu, in $W).
# Checks about files print one line naming what went wrong and exit 100, a
# status no case expects, so the runner's diff shows them.

# fail MESSAGE: the case's own check failed
fail() {
    printf 'case check failed: %s\n' "$*" >&2
    exit 100
}

# absent PATH: nothing was written at PATH
absent() {
    [ ! -e "$1" ] || fail "$1 exists"
}

# sum PATH: a checksum of PATH, for unchanged
sum() {
    cksum <"$1"
}

# unchanged PATH SUM: PATH still has the checksum SUM taken before
unchanged() {
    [ "$(sum "$1")" = "$2" ] || fail "$1 changed"
}

# no_temporaries DIR: no .NAME.tensorctl-XXXXXX temporary left in DIR
no_temporaries() {
    for f in "$1"/.*.tensorctl-*; do
        [ ! -e "$f" ] || fail "temporary file left behind: $f"
    done
}

# bin_set DIR: a two-shard safetensors set in DIR/st (made by make_shards.py), converted
# by tensorctl to .bin shards tagged cuda:0 in DIR/bin (one shard per tensor pair)
bin_set() {
    mkdir -p "$1/st" "$1/bin"
    "$PY" "$H/make_shards.py" "$1/st"
    "$T" convert -q "$1/st/model.safetensors.index.json" "$1/bin/pytorch_model.bin.index.json" \
        --device cuda:0 --max-shard-size 16
}
