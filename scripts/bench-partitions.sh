#!/bin/bash
# bench-partitions.sh BIN: issue 18's many-partitions figure on one fresh broker:
# 2M records over 10 partitions, 500k over 10,000 topics x 10 (a random
# partition per record, linger 5 ms, idempotent, acks=all), 10 partitions
# twice more beside them, then RSS after 70 s idle. Broker CPU per record
# from /proc. Compare with kfake: sluice bench --target kfake-process ...
BIN=$1; dir=$(mktemp -d); rm -rf $dir; mkdir -p $dir
port=$((20000 + RANDOM % 10000)); admin=$((port+1))
$BIN serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --schema-registry-listen "" --data-dir $dir --log-level warn >/dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS|VmHWM/{printf "%s %d MiB ", $1, $2/1024}' /proc/$pid/status; echo; }
run() { # name args...
  n=$1; shift
  $BIN bench --brokers 127.0.0.1:$port --server-pid $pid --size 100 --partitioner random --linger 5ms --produce-only --json "$@" 2>/dev/null |
   python3 -c '
import json,sys
d=json.load(sys.stdin); p=d["runs"][0]["produce"]
print("%-14s %9d rec/s  broker %.2f us/rec  client %.2f us/rec  load %s" % (sys.argv[1], p["records_per_sec"], p.get("server_cpu_us_per_record",-1), p.get("client_cpu_us_per_record",-1), open("/proc/loadavg").read().split()[0]))' "$n"
  rss
}
run ten --records 2000000 --partitions 10 --topic ten-a
run 100k --records 500000 --topics 10000 --partitions 10 --topic wide
run ten-after --records 2000000 --partitions 10 --topic ten-b
run ten-again --records 2000000 --partitions 10 --topic ten-c
sleep 70; echo -n "after 70 s idle: "; rss
kill $pid; wait $pid 2>/dev/null; rm -rf $dir
