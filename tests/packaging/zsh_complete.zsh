#!/bin/zsh -f
# zsh_complete.zsh DIR LINE...: the words zsh's own completion offers for each
# LINE (a command line, completed at its end) with DIR in fpath: one a line,
# each LINE's followed by a line "__end__". An interactive zsh on a
# pseudo-terminal (zsh/zpty) runs compinit, is typed each LINE and a TAB, and
# records what the completion functions hand to compadd.
emulate -L zsh
zmodload zsh/zpty || { print -u2 "zsh_complete: no zsh/zpty module"; exit 77 }
dir=$1
shift
out=$(mktemp) || exit 1
# zsh drops what was typed before its prompt (it sets the terminal up anew), so
# each command is typed once the prompt after the last one is there: the prompt
# carries the history number, which each command moves on (a prompt redrawn
# under a list of matches keeps it)
n=
ready() {
    zpty -r z echoed "*<ready ${n:-[0-9]*}> " || { print -u2 "zsh_complete: the shell ended"; rm -f $out; exit 1 }
    [[ -z $n && $echoed =~ '<ready ([0-9]+)> ' ]] && n=$match[1]
    n=$((n + 1))
}
zpty z zsh -f -i
zpty -w z "PS1='<ready %!> '; fpath=(${(q)dir} \$fpath); autoload -Uz compinit; compinit -u -D"
ready
# compadd -O, -A and -D only ask; the other calls add matches: record those
zpty -w z "compadd() { if (( \${argv[(I)-[OAD]*]} )); then builtin compadd \"\$@\"; return; fi;" \
    "local -a m; builtin compadd -O m \"\$@\"; (( \$#m )) && print -rl -- \$m >>| ${(q)out}; builtin compadd \"\$@\"; }"
ready
zpty -w z "zstyle ':completion:*' list-prompt ''; zstyle ':completion:*' menu no; LISTMAX=10000"
ready
for line in "$@"; do
    zpty -w -n z "$line"$'\t'
    zpty -w z $'\C-u'"print -r -- __end__ >>| ${(q)out}"
    ready
done
zpty -w z "exit"
zpty -d z
cat $out
rm -f $out
