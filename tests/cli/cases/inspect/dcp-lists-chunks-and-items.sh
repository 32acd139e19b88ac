# inspect of a distributed checkpoint's folder: global shapes, chunk counts, the pickled items
"$T" inspect "$S/dcp/ws2_sharded"
