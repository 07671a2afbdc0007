// Package broker is the compute side of a sluice node: it knows which topics
// exist and who leads each partition, applies broker policy (topic
// auto-creation, name rules, default partition counts, broker-level configs)
// and hands the protocol front-end the partitions it reads and writes. In
// single-node mode this node leads every partition at epoch 0; cluster mode
// replaces the leadership part with leases, not the callers.
//
// It does not own bytes on disk (internal/log does) nor the wire protocol
// (internal/kafka does).
package broker
