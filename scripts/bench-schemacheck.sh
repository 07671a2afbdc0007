#!/bin/bash
# bench-schemacheck.sh BIN [RECORDS] [ROUNDS] [COMPRESSION]: produce-only
# throughput and broker CPU per record into a topic without validation and
# into topics with sluice's broker-side schema checks, one broker, rounds of
# (plain, id check, Avro decode, Protobuf decode) in turn, each run a fresh
# topic of 8 partitions. Every value is the same 100 bytes: a registry wire
# header and a payload that decodes with the topic's schema (Avro: long,
# string, double, then 80 random bytes; Protobuf: an int64 field, then 92
# random bytes in a bytes field), so the runs differ only by the check.
# Prints one line per run and the medians of the ratios to the round's
# plain run (docs/benchmarks.md). KINDS picks the runs of a round (default
# "plain id avro proto"); SERVE_BIN runs another build's broker (e.g. an
# older one, with KINDS="plain id") under this build's bench driver.
set -e
bin=$1; n=${2:-1000000}; rounds=${3:-3}; comp=${4:-none}
kinds=${KINDS:-plain id avro proto}; serve=${SERVE_BIN:-$bin}
dir=$(mktemp -d); port=$((20000 + RANDOM % 10000))
$serve serve --listen 127.0.0.1:$port --admin-listen "" --schema-registry-listen 127.0.0.1:$((port+2)) \
  --data-dir $dir --log-level warn >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf $dir' EXIT
reg=http://127.0.0.1:$((port+2))
for i in $(seq 50); do curl -fs $reg/subjects >/dev/null 2>&1 && break; sleep 0.2; done
register() { # subject schema type -> id
  python3 -c 'import json,sys; print(json.dumps({"schema": sys.argv[1], "schemaType": sys.argv[2]}))' "$2" "$3" |
    curl -fs -X POST -H 'Content-Type: application/vnd.schemaregistry.v1+json' --data @- $reg/subjects/$1/versions |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
avro='{"type":"record","name":"Payment","namespace":"bench","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"amount","type":"double"},{"name":"payload","type":"bytes"}]}'
proto='syntax = "proto3"; package bench; message Payment { bytes payload = 1; int64 id = 2; }'
hexid() { printf '%08x' $1; }
want() { [[ " $kinds " == *" $1 "* ]]; }
run() { # name topic-config prefix [schema type]: a new topic, its value subject registered first
  topic=bench-$1-$RANDOM$RANDOM
  [ -n "$4" ] && register $topic-value "$4" $5 >/dev/null
  out=$($bin bench --brokers 127.0.0.1:$port --server-pid $pid --records $n --size 100 --partitions 8 \
    --compression $comp --produce-only --json --topic $topic ${2:+--topic-config $2} --value-prefix $3 2>/tmp/bench-schemacheck.err)
  echo "$out" | python3 -c '
import json,sys
d=json.load(sys.stdin); p=d["runs"][0]["produce"]
print("%-7s rps=%d srv_us=%.3f p99_ms=%.1f load=%s" % (sys.argv[1], p["records_per_sec"], p.get("server_cpu_us_per_record",-1), p["latency"]["p99_ms"], open("/proc/loadavg").read().split()[0]))' "$1"
}
aid=$(register ids-avro "$avro" AVRO)
pbid=$(register ids-proto "$proto" PROTOBUF)
# Avro: 00 id | long 1 | string "abc" | double 0 | bytes of 80 | 80 random bytes.
aprefix=00$(hexid $aid)0206616263$(printf '%016x' 0)a001
# Protobuf: 00 id | indexes [0] | field 2 = 1 | field 1 of 90 bytes | 90 random bytes.
pprefix=00$(hexid $pbid)0010010a5a
run plain "" $aprefix >/dev/null # warm-up, not counted
for r in $(seq $rounds); do
  want plain && run plain "" $aprefix
  want id && run id sluice.value.schema.validation=true $aprefix "$avro" AVRO
  want avro && run avro sluice.value.schema.validation.decode=true $aprefix "$avro" AVRO
  want proto && run proto sluice.value.schema.validation.decode=true $pprefix "$proto" PROTOBUF
done | tee /tmp/bench-schemacheck.last | python3 -c '
import sys,statistics as st
rows=[l.split() for l in sys.stdin if l.strip()]
val=lambda r,k: float([x for x in r if x.startswith(k+"=")][0].split("=")[1])
rounds=[]
for r in rows:
  if r[0]=="plain": rounds.append({})
  rounds[-1][r[0]]=r
print("plain  srv_us median %.3f  rps median %d" % (st.median([val(r["plain"],"srv_us") for r in rounds]), st.median([val(r["plain"],"rps") for r in rounds])))
for name in ["id","avro","proto"]:
  if name not in rounds[0]: continue
  rr=[val(r[name],"rps")/val(r["plain"],"rps") for r in rounds]
  cr=[val(r[name],"srv_us")/val(r["plain"],"srv_us") for r in rounds]
  print("%-6s srv_us median %.3f  throughput ratio median %.3f %s  broker CPU/record ratio median %.3f %s" % (name,
    st.median([val(r[name],"srv_us") for r in rounds]), st.median(rr), ["%.3f"%x for x in rr], st.median(cr), ["%.3f"%x for x in cr]))
'
