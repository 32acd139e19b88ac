# a distributed checkpoint folder is still read through its .metadata (not taken for a model folder)
"$T" inspect --json "$S/dcp/ws1_plain" >out.json
grep -q "\"format\":\"dcp\"" out.json || fail "not read as a DCP folder"
