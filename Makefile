# sluice: build and test entry points. `make test` is what CI runs.
GO ?= go

.PHONY: all build test test-deps vet unit bench

all: build

build:
	$(GO) build ./...

# Installs kcat, the Debian Python Kafka clients, Burrow and ZooKeeper when
# missing (as root).
test-deps:
	./scripts/install-test-deps.sh

vet:
	$(GO) vet ./...

# Everything: unit tests, fuzz seed corpora, the compat suite against real
# clients, and crash/retention/compaction tests against the real binary.
test: test-deps vet
	$(GO) test ./... -timeout 15m

# Benchmarks, and the longer variants of the crash tests (more SIGKILL
# iterations).
bench: test-deps
	SLUICE_LONG=1 $(GO) test ./test/... -run . -timeout 60m
	$(GO) test ./... -run '^$$' -bench . -benchmem -timeout 60m
