// Package txn is the transaction coordinator: transactional producer ids
// and epochs (InitProducerId with a transactional id, fencing, KIP-360
// recovery), the partitions and groups of each ongoing transaction
// (AddPartitionsToTxn, AddOffsetsToTxn), two-phase completion (EndTxn:
// PrepareCommit/PrepareAbort made durable, then a commit or abort marker in
// every partition of the transaction, then CompleteCommit/CompleteAbort),
// the transaction timeout with automatic abort, and the views behind
// DescribeTransactions and ListTransactions.
//
// State is kept as Kafka keeps it: one TxnMetadataKey/TxnMetadataValue
// record per change in the compacted internal topic __transaction_state,
// in partition abs(javaHashCode(transactionalID)) % partitions, appended
// with acks=all before a request is answered. On start the coordinator
// replays the topic (COORDINATOR_LOAD_IN_PROGRESS until done) and finishes
// every transaction it finds in PrepareCommit or PrepareAbort, so a crash
// mid-commit ends with every marker written. In cluster mode
// (Config.ExplicitOwnership) the same happens per partition as this broker
// becomes its leader (OwnPartition), ids of partitions led elsewhere answer
// NOT_COORDINATOR, and markers for partitions led by other brokers are sent
// to them as WriteTxnMarkers (NewRemoteMarkers); see ownership.go and
// remote.go. See docs/transactions.md.
//
// It does not own the wire protocol (internal/kafka), the markers'
// encoding in the log (internal/log, behind MarkerWriter), or transactional
// offsets (internal/group, behind Groups).
//
// Locks: Coordinator.mu (the transaction map and the owned partitions)
// before txn.mu, never the other way round. txn.mu is held while that
// transaction's records and markers are written: requests for one
// transactional id are serialised (clients send them one at a time
// anyway), other ids are not affected.
package txn
