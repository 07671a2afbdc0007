// Package embedded is the default meta.Store: one bbolt file in the data
// directory, used by single-node sluice.
//
// It owns the file's layout (two buckets, values prefixed with their version;
// see docs/backends.md), the exclusive file lock that keeps a second sluice
// process off the same data directory, and the transaction rules it shares
// with the etcd backend: compares are checked and ops applied in one bbolt
// write transaction that is fsynced before Txn returns, and a transaction may
// not put the same key twice or put a key it also deletes.
//
// It does not own what keys mean; domain packages define their schemas on top.
// Unlike etcd it does not cap the op count: meta.MaxTxnOps is a guideline for
// callers so their code also runs on etcd, and this store accepts larger
// transactions.
package embedded
