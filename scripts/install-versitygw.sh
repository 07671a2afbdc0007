#!/usr/bin/env bash
# Installs versitygw, the S3-compatible server (Apache-2.0) the S3 object-store
# tests run against, built from source with `go install` at a pinned version
# into $(go env GOPATH)/bin (override with SLUICE_TOOLS_BIN). Idempotent and
# quiet: does nothing when that binary is already the pinned version. Needs no
# root, only Go and the module proxy; the first build takes a few minutes, so
# CI should cache the bin directory (and the Go build cache).
set -euo pipefail

# Pinned: bump together with docs/backends.md.
version=v1.8.0
module=github.com/versity/versitygw

bin=${SLUICE_TOOLS_BIN:-$(go env GOPATH)/bin}
exe="$bin/versitygw"

if [ -x "$exe" ] && go version -m "$exe" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|$)"; then
	exit 0
fi

echo "install-versitygw: building $module $version into $bin (takes a few minutes)" >&2
mkdir -p "$bin"
if ! out=$(GOBIN="$bin" GOFLAGS=-buildvcs=false go install "$module/cmd/versitygw@$version" 2>&1); then
	printf '%s\n' "$out" >&2
	echo "install-versitygw: go install failed" >&2
	exit 1
fi
