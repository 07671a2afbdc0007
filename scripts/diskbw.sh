#!/usr/bin/env bash
# diskbw.sh DIR [MIB]: write bandwidth of the disk holding DIR, measured with dd.
#
# Writes MIB MiB (default 1024) in 1 MiB blocks to a temporary file in DIR in
# three ways and prints MB/s (10^6 bytes/s) for each:
#   direct        oflag=direct        page cache bypassed: the device's streaming rate
#   direct+dsync  oflag=direct,dsync  every 1 MiB write durable before the next
#   fdatasync     conv=fdatasync      buffered writes, one fdatasync inside the timing
# `sluice bench --disk-bw DIR` measures the same three modes in Go (with random
# data rather than zeros) so its figure can sit next to a broker run.
set -euo pipefail

usage() { echo "usage: $0 DIR [MIB]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
dir=$1
mib=${2:-1024}
[[ -d $dir ]] || { echo "diskbw: $dir is not a directory" >&2; exit 2; }
[[ $mib =~ ^[1-9][0-9]*$ ]] || usage

file=$(mktemp -p "$dir" .sluice-diskbw.XXXXXX)
trap 'rm -f "$file"' EXIT

# run NAME DD-ARGS...: time one dd and print its rate from our own clock, so
# the figure does not depend on dd's locale or unit choice.
run() {
	local name=$1; shift
	rm -f "$file"
	local start end out
	start=$(date +%s%N)
	if ! out=$(LC_ALL=C dd if=/dev/zero of="$file" bs=1M count="$mib" "$@" 2>&1); then
		printf '%-13s error: %s\n' "$name" "$(tail -n1 <<<"$out")"
		return 0
	fi
	end=$(date +%s%N)
	awk -v n="$name" -v b=$((mib * 1048576)) -v ns=$((end - start)) -v a="$*" \
		'BEGIN { printf "%-13s %8.1f MB/s  in %.3fs  (dd bs=1M %s)\n", n, b / (ns / 1e9) / 1e6, ns / 1e9, a }'
}

echo "disk $dir  ($mib MiB, 1 MiB writes, data from /dev/zero)"
run direct oflag=direct
run direct+dsync oflag=direct,dsync
run fdatasync conv=fdatasync
