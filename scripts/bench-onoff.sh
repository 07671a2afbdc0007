#!/bin/bash
# bench-onoff.sh BIN RECORDS "FLAGS_ON" "FLAGS_OFF" PAIRS: produce-only, one broker per run, alternating
bin=$1; n=$2; on=$3; off=$4; pairs=${5:-3}
run() {
  dir=$(mktemp -d); port=$((20000 + RANDOM % 10000)); admin=$((port+1))
  $bin serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --data-dir $dir --log-level warn $2 >/dev/null 2>&1 &
  pid=$!; sleep 1.5
  $bin bench --brokers 127.0.0.1:$port --server-pid $pid --records $n --size 100 --partitions 8 --produce-only --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); p=d["runs"][0]["produce"]
print("%-4s rps=%d srv_us=%.3f p99_ms=%.1f load=%s" % (sys.argv[1], p["records_per_sec"], p.get("server_cpu_us_per_record",-1), p["latency"]["p99_ms"], open("/proc/loadavg").read().split()[0]))' "$1"
  kill $pid; wait $pid 2>/dev/null; rm -rf $dir
}
for i in $(seq $pairs); do run on "$on"; run off "$off"; done
