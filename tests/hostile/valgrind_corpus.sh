#!/bin/sh
# valgrind_corpus.sh CLI_BATCH DIR...: `inspect`, `inspect --json` and
# `to-cpu` under valgrind memcheck over every checkpoint in DIRs (and the
# hostile cases), `inspect --json --hash` and `consolidate` over every
# distributed checkpoint's or DeepSpeed ZeRO save folder in them: no invalid access, no
# uninitialised use, no leak. The commands run in one process, through CLI_BATCH
# (cli_batch.c: tensorctl's commands in-process, each announced on stderr before
# it runs), so valgrind starts once, not once a command; its reports are shown
# under the command that made them (leaks, found at the end, under all).
# Exit status 0 only when every command ran and the run is clean (valgrind --error-exitcode).
# Fails, never skips, when valgrind is missing, a DIR is missing or holds no
# checkpoint, or the hostile cases cannot be generated.
set -u
batch=$1; shift
command -v valgrind >/dev/null 2>&1 || { echo "FAIL: valgrind is needed (apt-get install valgrind)"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
vg="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible"
here=$(dirname "$0")
if ! python3 "$here/hostile.py" gen "$tmp/hostile" >"$tmp/gen.log" 2>&1; then
    echo "FAIL: hostile.py gen failed:"; cat "$tmp/gen.log"; exit 1
fi
rm -f "$tmp/hostile/inflate_bomb_pickle.pt" "$tmp/hostile/shared_million.pt" "$tmp/hostile/shared_doubling.pt" # slow under valgrind
tab=$(printf '\t')
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
      set -- $cmd "$f"
      line=$1; shift
      for a in "$@"; do line="$line$tab$a"; done
      printf '%s\n' "$line" >>"$tmp/list"
    done
    IFS=$old_ifs
  done
  if [ $files -eq 0 ]; then
    echo "FAIL: $d is missing or holds no checkpoint"; bad=$((bad + 1))
  fi
done
$vg "$batch" "$tmp/list" >/dev/null 2>"$tmp/err"
st=$?
ran=$(sed -n 's/^cli_batch: DONE \([0-9]*\)$/\1/p' "$tmp/err")
if [ "$ran" != "$n" ]; then
    echo "FAIL: cli_batch ran ${ran:-not all of the} $n commands (exit $st); the end of its output:"
    grep '^cli_batch: RUN\|^==[0-9]*==' "$tmp/err" | tail -n 40
    bad=$((bad + 1))
fi
# each command's valgrind reports, under its announcement
errs=$(awk '/^cli_batch: RUN / { run = $0; shown = 0; next }
            /^cli_batch: DONE / { run = "at the end (leaks of any command)"; shown = 0; next }
            /^==[0-9]+==/ { if (!shown) { print "valgrind: " run; shown = 1; k++ } print }
            END { exit k ? 1 : 0 }' "$tmp/err") || { echo "$errs"; bad=$((bad + $(echo "$errs" | grep -c '^valgrind: '))); }
[ $st -eq 99 ] && [ $bad -eq 0 ] && { echo "FAIL: valgrind exit 99 without a report"; bad=1; }
echo "$n commands under valgrind, $bad with errors"
[ $n -gt 0 ] && [ $bad -eq 0 ]
