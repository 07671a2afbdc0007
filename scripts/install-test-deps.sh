#!/usr/bin/env bash
# Installs the external Kafka clients the integration tests drive:
#   kcat                     librdkafka's command-line client
#   python3-confluent-kafka  confluent-kafka-python (librdkafka)
#   python3-kafka            kafka-python
#   python3-requests         confluent-kafka-python's SchemaRegistryClient needs it
#   python3-snappy python3-lz4 python3-zstandard
#                            kafka-python's snappy, lz4 and zstd codecs
#   python3-xxhash           kafka-python's lz4 for message format 0 (it
#                            repairs the header checksum old Kafka wrote)
#   burrow zookeeper         LinkedIn's Burrow 1.2.1 (an old sarama: Fetch v2,
#                            ListOffsets v0) and the ZooKeeper it keeps its
#                            state in, for test/burrow
#   prometheus               promtool, which checks deploy/prometheus/alerts.yml,
#                            and the server test/metrics runs the dashboard's
#                            and the alerts' queries on
#   chromium                 the headless browser of the web console's tests
#   versitygw                the S3-compatible server of the object-store tests,
#                            built by install-versitygw.sh (go install; no root)
#   kafkajs                  the Node.js client of test/compat/kafkajs_test.go,
#                            pinned by test/compat/testdata/kafkajs/package-lock.json
#                            and installed there with npm ci (no root); Node.js
#                            and npm come from Debian's nodejs and npm when the
#                            machine has no node
# Idempotent and quiet when everything is present. Installs only as root
# (apt-get); otherwise it names what is missing and exits non-zero.
set -euo pipefail

"$(dirname "$0")/install-versitygw.sh"

# kafkajs first: it needs no root once node is there, and the Debian
# packages below may all be present already (the script then exits).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-test-deps: missing node and npm (Debian nodejs, npm); run this script as root" >&2
		exit 1
	fi
	echo "install-test-deps: installing nodejs npm" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
kafkajs_dir="$(cd "$(dirname "$0")/.." && pwd)/test/compat/testdata/kafkajs"
if [ ! -d "$kafkajs_dir/node_modules/kafkajs" ]; then
	echo "install-test-deps: installing kafkajs in $kafkajs_dir" >&2
	if [ -f "$kafkajs_dir/package-lock.json" ]; then
		(cd "$kafkajs_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	else
		(cd "$kafkajs_dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
	fi
fi

packages=(kcat python3-confluent-kafka python3-kafka python3-requests python3-snappy python3-lz4 python3-zstandard python3-xxhash burrow zookeeper chromium prometheus)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-test-deps: missing ${missing[*]}; run this script as root (or set SLUICE_SKIP_MISSING_TOOLS=1 to skip those tests)" >&2
	exit 1
fi
echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
