# an archive nested deeper than --max-archive-depth is not judged: unreadable, exit 3
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
"$PY" -c '
import zipfile
with zipfile.ZipFile("inner.zip", "w") as z: z.write("job.pkl")
with zipfile.ZipFile("outer.zip", "w") as z: z.write("inner.zip")
'
"$T" scan -q --max-archive-depth 1 outer.zip
