// Package group is the consumer group coordinator: the classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup with Kafka's states,
// session and rebalance timeouts, member-id-required joins and static
// membership), the KIP-848 consumer protocol (ConsumerGroupHeartbeat with
// server-side uniform and range assignors, member epochs and incremental
// reconciliation; consumer.go, assign.go, crecords.go) and committed offsets
// (commit, fetch, delete, expiry), including transactional offsets
// (TxnOffsetCommit, pending until the transaction's marker; txnoffsets.go).
//
// State is kept the way Kafka keeps it: every change that must survive a
// restart is a record in the internal compacted topic __consumer_offsets,
// keyed and encoded in Kafka's own formats (OffsetCommitKey/Value,
// GroupMetadataKey/Value and KIP-848's ConsumerGroup* records), in the
// partition abs(javaHashCode(group)) % partitions. On start the coordinator replays those partitions; until it is
// done it answers COORDINATOR_LOAD_IN_PROGRESS. Because a group lives wholly
// in one partition, cluster mode (Config.ExplicitOwnership) moves a
// coordinator by moving the partition's leadership: the new leader replays
// the partition (OwnPartition), the old one drops its groups
// (DisownPartition), and requests for groups of partitions not owned here
// answer NOT_COORDINATOR (ownership.go). See docs/groups.md.
//
// It does not own the wire protocol (internal/kafka translates requests and
// the sentinel errors below into Kafka messages and codes), the log itself
// (internal/log), or transactions themselves (internal/txn decides them and
// calls CompleteTxn after writing a marker to the offsets topic).
//
// Locks: Coordinator.mu (the group map and the owned partitions) is taken
// before group.mu, never the other way round; txnState.mu comes after
// either. No lock but txnState.mu (which serialises transactional
// sequences) is held while waiting for the log.
package group
