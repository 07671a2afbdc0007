package txn

import "errors"

// Sentinel errors. internal/kafka maps each to the Kafka error code named in
// its comment.
var (
	ErrLoading                = errors.New("txn: coordinator is loading")                          // COORDINATOR_LOAD_IN_PROGRESS
	ErrNotAvailable           = errors.New("txn: coordinator not available")                       // COORDINATOR_NOT_AVAILABLE
	ErrStore                  = errors.New("txn: writing to the transaction log failed")           // COORDINATOR_NOT_AVAILABLE (retriable)
	ErrNotCoordinator         = errors.New("txn: not the coordinator of this transactional id")    // NOT_COORDINATOR
	ErrConcurrentTransactions = errors.New("txn: a previous transaction is still completing")      // CONCURRENT_TRANSACTIONS
	ErrProducerFenced         = errors.New("txn: producer fenced by a newer epoch")                // PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for old versions)
	ErrInvalidProducerEpoch   = errors.New("txn: invalid producer epoch")                          // INVALID_PRODUCER_EPOCH
	ErrInvalidMapping         = errors.New("txn: producer id does not match the transactional id") // INVALID_PRODUCER_ID_MAPPING
	ErrInvalidState           = errors.New("txn: invalid transaction state")                       // INVALID_TXN_STATE
	ErrInvalidTimeout         = errors.New("txn: invalid transaction timeout")                     // INVALID_TRANSACTION_TIMEOUT
	ErrNotFound               = errors.New("txn: transactional id not found")                      // TRANSACTIONAL_ID_NOT_FOUND
	ErrInvalidRequest         = errors.New("txn: invalid request")                                 // INVALID_REQUEST
)
