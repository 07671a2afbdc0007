// Package burrow runs LinkedIn's Burrow (Debian's burrow 1.2.1, which keeps
// its own state in ZooKeeper) against a real sluice broker: Burrow is built
// on an old sarama pinned to Kafka 0.10, so it reads __consumer_offsets with
// Fetch v2 (message format 1, down-converted) and asks for end offsets with
// ListOffsets v0, versions Kafka 4 dropped and Kafka 3.9 served.
//
// The test starts a private ZooKeeper (Debian's zookeeper package, run with
// the system java) and Burrow with a generated configuration, both on
// ephemeral ports, and skips with a message naming the packages when they
// are missing (scripts/install-test-deps.sh installs them for make test).
package burrow
