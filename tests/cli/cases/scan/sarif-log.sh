# --sarif: one SARIF 2.1.0 log; the unsafe file a result of rule unsafe-model-file, the safe one none
printf "cposix\nsystem\n(S'true'\ntR." >job.pkl
cp "$S/tiny_mlp_cuda0.pt" model.pt
"$T" scan --sarif job.pkl model.pt >log.sarif || rc=$?
"$PY" -c '
import json, sys
log = json.load(open("log.sarif"))
run = log["runs"][0]
assert log["version"] == "2.1.0", log["version"]
r, = run["results"]
print(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
print(r["message"]["text"])
print(run["invocations"][0]["exitCode"], run["properties"]["tensorctl"]["unsafe"], run["properties"]["tensorctl"]["safe"])
'
exit "$rc"
