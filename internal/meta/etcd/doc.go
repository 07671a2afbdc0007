// Package etcd is the cluster-mode meta.Store: every key lives in an etcd
// cluster under a per-cluster prefix, reached with the official client
// (go.etcd.io/etcd/client/v3).
//
// It owns the mapping of meta's semantics onto etcd: Version is etcd's
// per-key version (1 on create, +1 per put, reset by delete; a missing key
// compares as version 0), Txn is one etcd Txn whose If holds the compares, a
// failed compare is meta.ErrConflict, List is a paginated range read at one
// revision, and unreachable etcd is meta.ErrUnavailable (retriable). It also
// implements meta.Leaser (sessions on etcd leases with keepalive, keys that
// vanish with their session) and meta.Watcher (snapshot plus gap-free change
// stream), which cluster mode builds broker membership and partition
// leadership on.
//
// It refuses, with ErrInvalidTxn and never meta.ErrConflict, the same
// transactions the embedded backend refuses (etcd answers "duplicate key
// given in txn request"), and transactions over etcd's op or request size
// limits with ErrTxnTooLarge, before anything is sent.
//
// It does not own what keys mean (domain packages do), run or configure the
// etcd servers, or compact etcd's history (configure etcd's
// --auto-compaction-*).
package etcd
