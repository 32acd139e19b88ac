#!/bin/sh
# valgrind_corpus.sh TENSORCTL DIR...: `inspect`, `inspect --json` and
# `to-cpu` under valgrind memcheck over every checkpoint in DIRs (and the
# hostile cases), `inspect --json --hash` and `consolidate` over every
# distributed checkpoint's or DeepSpeed ZeRO save folder in them: no invalid access, no
# uninitialised use, no leak.
# Exit status 0 only when every run is clean (valgrind --error-exitcode).
# Fails, never skips, when valgrind is missing, a DIR is missing or holds no
# checkpoint, or the hostile cases cannot be generated.
set -u
tc=$1; shift
command -v valgrind >/dev/null 2>&1 || { echo "FAIL: valgrind is needed (apt-get install valgrind)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
vg="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible"
here=$(dirname "$0")
if ! python3 "$here/hostile.py" gen "$tmp/hostile" >"$tmp/gen.log" 2>&1; then
    echo "FAIL: hostile.py gen failed:"; cat "$tmp/gen.log"; exit 1
fi
rm -f "$tmp/hostile/inflate_bomb_pickle.pt" "$tmp/hostile/shared_million.pt" "$tmp/hostile/shared_doubling.pt" # slow under valgrind
bad=0 n=0
for d in "$@" "$tmp/hostile"; do
  files=0
  for f in "$d"/*; do
    case $f in *.json|*.py|*.md|*.txt) continue ;; esac
    if [ -d "$f" ] && { [ -f "$f/.metadata" ] || [ -f "$f/latest" ]; }; then   # a distributed checkpoint, a ZeRO save folder
      cmds="inspect|inspect --json --hash|consolidate -q -f -o $tmp/out.pt|consolidate -q -f --dtype bfloat16 -o $tmp/out.pt"
    elif [ -f "$f" ]; then
      cmds="inspect|inspect --json|to-cpu -q -f -o $tmp/out.pt|to-cpu -q -f --dtype bfloat16 -o $tmp/out.pt"
    else
      continue
    fi
    files=$((files + 1))
    old_ifs=$IFS; IFS='|'
    for cmd in $cmds; do
      IFS=$old_ifs
      n=$((n + 1))
      # shellcheck disable=SC2086
      $vg "$tc" $cmd "$f" >/dev/null 2>"$tmp/err"
      if [ $? -eq 99 ] || grep -q "^==[0-9]*==" "$tmp/err"; then
        echo "valgrind: $cmd $f:"; cat "$tmp/err"; bad=$((bad + 1))
      fi
      rm -f "$tmp/out.pt"
    done
    IFS=$old_ifs
  done
  if [ $files -eq 0 ]; then
    echo "FAIL: $d is missing or holds no checkpoint"; bad=$((bad + 1))
  fi
done
echo "$n valgrind runs, $bad with errors"
[ $n -gt 0 ] && [ $bad -eq 0 ]
