#!/bin/bash
# bench-ab.sh BIN_A BIN_B [PAIRS] [RECORDS] [SIZE]: produce-only CPU per record
# of two broker builds and of franz-go's kfake in its own process, in the same
# run: one fresh broker per run, A, B and kfake-process alternating, PAIRS
# rounds (default 3). Prints one line per run (broker CPU us per record from
# /proc, records/s, 1-minute load average) and the medians.
# Example: scripts/bench-ab.sh /tmp/sluice.main /tmp/sluice.new 3 3000000 100
set -u
a=$1; b=$2; pairs=${3:-3}; n=${4:-3000000}; size=${5:-100}
parts=${PARTITIONS:-8}
out=$(mktemp)
line() { # name json
  python3 -c '
import json,sys
d=json.load(sys.stdin); p=d["runs"][0]["produce"]
print("%s %.3f %d %s" % (sys.argv[1], p.get("server_cpu_us_per_record",-1), p["records_per_sec"], open("/proc/loadavg").read().split()[0]))' "$1"
}
broker() { # name bin
  dir=$(mktemp -d); port=$((20000 + RANDOM % 10000)); admin=$((port+1))
  $2 serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --schema-registry-listen "" \
    --data-dir $dir --log-level warn >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  $2 bench --brokers 127.0.0.1:$port --server-pid $pid --records $n --size $size --partitions $parts \
    --produce-only --json 2>/dev/null | line "$1" | tee -a $out
  kill $pid; wait $pid 2>/dev/null; rm -rf $dir
}
for i in $(seq $pairs); do
  broker A $a
  broker B $b
  $b bench --target kfake-process --records $n --size $size --partitions $parts --produce-only --json 2>/dev/null |
    line kfake | tee -a $out
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1])]
by={}
for r in rows: by.setdefault(r[0],[]).append(float(r[1]))
for k,v in by.items(): print("median %-6s %.3f us/record over %d runs (%s)" % (k, st.median(v), len(v), " ".join("%.3f"%x for x in v)))
if "kfake" in by:
  for k in ("A","B"):
    if k in by: print("ratio %s/kfake %.2f" % (k, st.median(by[k])/st.median(by["kfake"])))
PY
rm -f $out
