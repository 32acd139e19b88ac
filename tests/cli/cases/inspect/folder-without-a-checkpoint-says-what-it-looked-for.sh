# a folder with no checkpoint inside: one line saying what a checkpoint folder holds
mkdir empty
echo "{}" >empty/config.json
"$T" inspect empty
