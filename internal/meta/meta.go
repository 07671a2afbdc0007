// Package meta is the metadata boundary of sluice: topics, configs, the index
// of which object holds which offsets, producer-id blocks, and (in cluster
// mode, later) broker leases and partition epochs. Implementations: embedded
// (a bbolt file in the data directory, the default) and etcd. Every
// implementation passes the shared suite in metatest.
//
// The interface is a deliberately small ordered key-value store with atomic
// multi-key transactions guarded by compares, which is what etcd offers
// natively and what bbolt offers trivially. Domain packages build their own
// schemas on top (see docs/formats.md for the key layout).
package meta

import (
	"context"
	"errors"
)

// ErrNotFound is returned (wrapped) by Get when a key does not exist.
var ErrNotFound = errors.New("meta: key not found")

// ErrConflict is returned (wrapped) by Txn when a compare failed; nothing was
// written.
var ErrConflict = errors.New("meta: transaction compare failed")

// KV is one key and its value. Version counts modifications of the key since
// its creation (1 after the first Put); it is what compares check.
type KV struct {
	Key     string
	Value   []byte
	Version int64
}

// OpKind says what an Op does.
type OpKind uint8

const (
	OpPut OpKind = iota + 1
	OpDelete
	// OpDeletePrefix deletes every key starting with Key.
	OpDeletePrefix
)

// Op is one write inside a transaction.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte
}

// Put returns a put op.
func Put(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// Delete returns a delete op.
func Delete(key string) Op { return Op{Kind: OpDelete, Key: key} }

// DeletePrefix returns a delete-prefix op.
func DeletePrefix(prefix string) Op { return Op{Kind: OpDeletePrefix, Key: prefix} }

// Compare guards a transaction: the key's current Version must equal Version
// (0 means "the key must not exist").
type Compare struct {
	Key     string
	Version int64
}

// Store is the interface every metadata backend implements. All writes are
// durable when the call returns nil.
type Store interface {
	Get(ctx context.Context, key string) (KV, error)
	// List returns every key with the prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]KV, error)
	// Txn applies ops atomically if every compare holds; otherwise it writes
	// nothing and returns ErrConflict. Backends may cap the op count
	// (MaxTxnOps); callers split larger work into idempotent steps.
	Txn(ctx context.Context, cmps []Compare, ops ...Op) error
	Close() error
}

// MaxTxnOps is the largest number of ops callers put in one Txn, chosen to
// fit etcd's default --max-txn-ops (128).
const MaxTxnOps = 128
