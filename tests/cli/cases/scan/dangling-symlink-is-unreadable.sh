# a symlink to nothing: unreadable, saying where it points
ln -s gone.pt model.pt
"$T" scan -q model.pt
