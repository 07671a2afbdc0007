#!/bin/bash
# bench-console.sh BIN RECORDS PAIRS: produce-only throughput of a fresh
# broker with two headless chromiums keeping the overview (/ui/) open,
# against none, in alternating pairs. The browsers are given time to start
# and settle (their CPU under 0.1 core for 2 s, at most 30 s) before the
# load begins, so the figure is the steady state with the page open, not
# chromium's start-up. Prints each run (records/s, broker CPU µs per record,
# the browsers' CPU during the run, load average) and the medians. Give
# enough RECORDS for a run to last well over the 5 s refresh (10M: ~20 s).
bin=$1; n=$2; pairs=${3:-3}
desc() { local p=$1; echo $p; for c in $(cat /proc/$p/task/*/children 2>/dev/null); do desc $c; done; }
ticks() { local t=0 s; for r in $bpids; do for p in $(desc $r); do s=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); t=$((t+${s:-0})); done; done; echo $t; }
out=$(mktemp)
run() {
  dir=$(mktemp -d); port=$((20000 + RANDOM % 10000)); admin=$((port+1))
  $bin serve --listen 127.0.0.1:$port --admin-listen 127.0.0.1:$admin --schema-registry-listen "" --data-dir $dir --log-level warn >/dev/null 2>&1 &
  pid=$!; sleep 1.5
  bpids=""
  if [ "$1" = "ui" ]; then
    for k in 1 2; do
      chromium --headless --no-sandbox --disable-gpu --remote-debugging-port=0 --user-data-dir=$dir/chromium-$k "http://127.0.0.1:$admin/ui/" >/dev/null 2>&1 &
      bpids="$bpids $!"
    done
    sleep 2; quiet=0
    for _ in $(seq 30); do
      a=$(ticks); sleep 1; b=$(ticks)
      if [ $((b-a)) -lt 10 ]; then quiet=$((quiet+1)); else quiet=0; fi
      [ $quiet -ge 2 ] && break
    done
  fi
  b0=$(ticks)
  $bin bench --brokers 127.0.0.1:$port --server-pid $pid --records $n --size 100 --partitions 8 --produce-only --json 2>/dev/null > $dir/bench.json
  b1=$(ticks)
  for b in $bpids; do kill -0 $b 2>/dev/null || echo "warning: a browser died during the run" >&2; done
  python3 -c '
import json,sys
d=json.load(open(sys.argv[2])); p=d["runs"][0]["produce"]
print("%-4s rps=%d srv_us=%.3f browsers_cpu_s=%.2f load=%s" % (sys.argv[1], p["records_per_sec"], p.get("server_cpu_us_per_record",-1), int(sys.argv[3])/100, open("/proc/loadavg").read().split()[0]))' "$1" $dir/bench.json $((b1-b0)) | tee -a $out
  [ -n "$bpids" ] && kill $bpids 2>/dev/null
  kill $pid; wait $pid 2>/dev/null; sleep 0.5; rm -rf $dir
}
for i in $(seq $pairs); do run ui; run none; done
python3 - "$out" <<'PY'
import re,sys,statistics as st
runs=[dict(k=l.split()[0], **{m[0]:float(m[1]) for m in re.findall(r"(\w+)=([\d.]+)", l)}) for l in open(sys.argv[1])]
ui=[r for r in runs if r["k"]=="ui"]; no=[r for r in runs if r["k"]=="none"]
ratios=[u["rps"]/n["rps"] for u,n in zip(ui,no)]
cpu=[u["srv_us"]/n["srv_us"] for u,n in zip(ui,no)]
print("pair ratios (rps ui/none): %s  median %.3f" % (" ".join("%.3f"%r for r in ratios), st.median(ratios)))
print("broker CPU/record ratios: %s  median %.3f" % (" ".join("%.3f"%r for r in cpu), st.median(cpu)))
print("median rps ui %d none %d; load %s-%s" % (st.median(r["rps"] for r in ui), st.median(r["rps"] for r in no), min(r["load"] for r in runs), max(r["load"] for r in runs)))
PY
rm -f $out
