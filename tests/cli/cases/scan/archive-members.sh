# an archive is judged member by member, each named ARCHIVE!MEMBER: a tar.gz and a zip inside a zip
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
cp "$S/tiny_mlp_cuda0.pt" model.pt
tar czf bundle.tar.gz model.pt job.pkl
"$PY" -c '
import zipfile
with zipfile.ZipFile("inner.zip", "w", zipfile.ZIP_DEFLATED) as z: z.write("job.pkl")
with zipfile.ZipFile("outer.zip", "w") as z: z.write("inner.zip"); z.write("model.pt")
'
rm job.pkl model.pt inner.zip
"$T" scan .
