#!/bin/sh
# valgrind_corpus.sh TENSORCTL DIR...: `inspect`, `inspect --json` and
# `to-cpu` under valgrind memcheck over every checkpoint in DIRs (and the
# hostile cases): no invalid access, no uninitialised use, no leak.
# Exit status 0 only when every run is clean (valgrind --error-exitcode).
set -u
tc=$1; shift
command -v valgrind >/dev/null 2>&1 || { echo "valgrind not installed"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
vg="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible"
here=$(dirname "$0")
python3 "$here/hostile.py" gen "$tmp/hostile" 2>/dev/null
rm -f "$tmp/hostile/inflate_bomb_pickle.pt" "$tmp/hostile/shared_million.pt" "$tmp/hostile/shared_doubling.pt" # slow under valgrind
bad=0 n=0
for d in "$@" "$tmp/hostile"; do
  for f in "$d"/*; do
    case $f in *.json|*.py|*.md|*.txt) continue ;; esac
    [ -f "$f" ] || continue
    for cmd in "inspect" "inspect --json" "to-cpu -q -f -o $tmp/out.pt" "to-cpu -q -f --dtype bfloat16 -o $tmp/out.pt"; do
      n=$((n + 1))
      # shellcheck disable=SC2086
      $vg "$tc" $cmd "$f" >/dev/null 2>"$tmp/err"
      if [ $? -eq 99 ] || grep -q "^==[0-9]*==" "$tmp/err"; then
        echo "valgrind: $cmd $f:"; cat "$tmp/err"; bad=$((bad + 1))
      fi
      rm -f "$tmp/out.pt"
    done
  done
done
echo "$n valgrind runs, $bad with errors"
[ $bad -eq 0 ]
