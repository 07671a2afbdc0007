#!/bin/bash
# bench-console-refresh.sh BIN [GETS]: the broker CPU one overview refresh
# costs. A fresh broker with one topic of 8 partitions and 30 groups with
# committed offsets is asked GETS (default 500) times, one after another,
# for /healthz (the HTTP floor), the whole overview (/ui/) and its live part
# (/ui/?live=1, what an open overview fetches every 5 s); each line is the
# broker's CPU (from /proc) per GET. Run it against two binaries and
# compare.
bin=$1; gets=${2:-500}
dir=$(mktemp -d); port=$((20000 + RANDOM % 10000)); admin=$((port+1))
$bin serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --schema-registry-listen "" --data-dir $dir/data --log-level warn >/dev/null 2>&1 &
pid=$!; sleep 1.5; B="-b 127.0.0.1:$port"
$bin topic create t1 --partitions 8 $B >/dev/null; seq 1 5000 | $bin produce t1 $B >/dev/null 2>&1
for g in $(seq 1 30); do $bin group reset-offsets g$g --topic t1 --to-offset $((g*10)) --execute $B >/dev/null 2>&1; done
sleep 1
for path in /healthz / "/?live=1"; do
  [ "$path" = /healthz ] || path=/ui$path
  a=$(awk '{print $14+$15}' /proc/$pid/stat)
  python3 - "http://127.0.0.1:$admin$path" $gets <<'PY'
import sys, urllib.request
for _ in range(int(sys.argv[2])): urllib.request.urlopen(sys.argv[1]).read()
PY
  b=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "$path: $(( (b-a)*10000/gets )) µs broker CPU per GET (load $(cut -d' ' -f1 /proc/loadavg))"
done
kill $pid; wait $pid 2>/dev/null; rm -rf $dir
