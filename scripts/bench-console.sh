#!/bin/bash
# bench-console.sh BIN RECORDS PAIRS: produce-only throughput with two headless browsers on the overview, against none
bin=$1; n=$2; pairs=${3:-3}
run() {
  dir=$(mktemp -d); port=$((20000 + RANDOM % 10000)); admin=$((port+1))
  $bin serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --schema-registry-listen "" --data-dir $dir --log-level warn >/dev/null 2>&1 &
  pid=$!; sleep 1.5
  bpids=""
  if [ "$1" = "ui" ]; then
    for k in 1 2; do
      chromium --headless --no-sandbox --disable-gpu --remote-debugging-port=0 --user-data-dir=$(mktemp -d) "http://127.0.0.1:$admin/ui/" >/dev/null 2>&1 &
      bpids="$bpids $!"
    done
    sleep 3
  fi
  $bin bench --brokers 127.0.0.1:$port --server-pid $pid --records $n --size 100 --partitions 8 --produce-only --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); p=d["runs"][0]["produce"]
print("%-4s rps=%d srv_us=%.3f load=%s" % (sys.argv[1], p["records_per_sec"], p.get("server_cpu_us_per_record",-1), open("/proc/loadavg").read().split()[0]))' "$1"
  [ -n "$bpids" ] && kill $bpids 2>/dev/null
  kill $pid; wait $pid 2>/dev/null; rm -rf $dir
}
for i in $(seq $pairs); do run ui; run none; done
