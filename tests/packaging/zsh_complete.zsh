#!/bin/zsh -f
# zsh_complete.zsh DIR LINE: the words zsh's own completion offers for LINE (a
# command line, completed at its end) with DIR in fpath, one a line. An
# interactive zsh on a pseudo-terminal (zsh/zpty) runs compinit, is typed LINE
# and a TAB, and records what the completion functions hand to compadd.
emulate -L zsh
zmodload zsh/zpty || { print -u2 "zsh_complete: no zsh/zpty module"; exit 77 }
dir=$1 line=$2
out=$(mktemp) || exit 1
# zsh drops what was typed before its prompt (it sets the terminal up anew): each
# line is typed once the prompt is there, "<ready> " from the first command on
ready() {
    zpty -r z echoed '*<ready> ' || { print -u2 "zsh_complete: the shell ended"; rm -f $out; exit 1 }
}
zpty z zsh -f -i
zpty -w z "PS1='<ready> '; fpath=(${(q)dir} \$fpath); autoload -Uz compinit; compinit -u -D"
ready
# compadd -O, -A and -D only ask; the other calls add matches: record those
zpty -w z "compadd() { if (( \${argv[(I)-[OAD]*]} )); then builtin compadd \"\$@\"; return; fi;" \
    "local -a m; builtin compadd -O m \"\$@\"; (( \$#m )) && print -rl -- \$m >>| ${(q)out}; builtin compadd \"\$@\"; }"
ready
zpty -w z "zstyle ':completion:*' list-prompt ''; zstyle ':completion:*' menu no; LISTMAX=10000"
ready
zpty -w -n z "$line"$'\t'
zpty -w z $'\C-u'"print -r -- __done__ >>| ${(q)out}; exit"
# the rest of what it echoes is read and dropped, or it stops once the terminal's buffer is full
for i in {1..600}; do
    while zpty -r -t z echoed; do :; done
    grep -q '^__done__$' $out && break
    sleep 0.1
done
zpty -d z
grep -q '^__done__$' $out || { print -u2 "zsh_complete: the completion did not finish in 60 s"; rm -f $out; exit 1 }
grep -v '^__done__$' $out | sort -u
rm -f $out
