# sluice: build and test entry points. `make test` is what CI runs.
GO ?= go

.PHONY: all build test test-deps vet rules unit bench screenshots

all: build

build:
	$(GO) build ./...

# Installs kcat, the Debian Python Kafka clients, Burrow and ZooKeeper,
# chromium and Prometheus (promtool) when missing (as root), and KafkaJS
# with npm ci in test/compat/testdata/kafkajs (Node.js and npm from Debian
# when node is missing).
test-deps:
	./scripts/install-test-deps.sh

vet:
	$(GO) vet ./...

# The Prometheus alert rules: syntax, and their unit tests (each alert
# fires when it should). test/metrics runs them in a real Prometheus too.
rules: test-deps
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

# Everything: unit tests, fuzz seed corpora, the compat suite against real
# clients, crash/retention/compaction tests against the real binary, and
# the alert rules.
test: test-deps vet rules
	$(GO) test ./... -timeout 15m

# Benchmarks, and the longer variants of the crash tests (more SIGKILL
# iterations).
bench: test-deps
	SLUICE_LONG=1 $(GO) test ./test/... -run . -timeout 60m
	$(GO) test ./... -run '^$$' -bench . -benchmem -timeout 60m

# Screenshots of the web console's pages (docs/images/), taken by the
# console's browser test in headless chromium.
screenshots: test-deps
	SLUICE_SCREENSHOTS=$(CURDIR)/docs/images $(GO) test ./test/console/ -run 'TestConsole' -count=1
