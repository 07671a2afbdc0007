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
	"fmt"
	"time"
)

// ErrNotFound is returned (wrapped) by Get when a key does not exist.
var ErrNotFound = errors.New("meta: key not found")

// ErrConflict is returned (wrapped) by Txn when a compare failed; nothing was
// written.
var ErrConflict = errors.New("meta: transaction compare failed")

// ConflictError is what Txn returns (wrapped) when a compare failed: the
// first failing compare's key, the version it has and the version the
// compare wanted. It unwraps to ErrConflict.
type ConflictError struct {
	Key           string
	Version, Want int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %q is at version %d, compare wants %d", ErrConflict, e.Key, e.Version, e.Want)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// ErrUnavailable is returned (wrapped) when the backend could not be reached
// or did not answer in time (etcd down, no quorum, a leader election). The
// call may be retried. A Txn that fails with it may or may not have been
// applied: retry it only if it is idempotent or guarded by compares (a retry
// of an applied compare-guarded Txn then fails with ErrConflict, so re-read
// before concluding it lost). The embedded backend never returns it.
var ErrUnavailable = errors.New("meta: backend unavailable")

// IsRetriable reports whether err means "try again later" (ErrUnavailable).
func IsRetriable(err error) bool { return errors.Is(err, ErrUnavailable) }

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
	// OpBump rewrites Key unchanged (same value; on etcd, same lease),
	// raising its version, so that every compare on its old version now
	// fails. If Key does not exist the whole transaction fails with
	// ErrNotFound and writes nothing.
	OpBump
	// OpPutDetached is OpPut that is never attached to a session, even
	// in Leaser.TxnWithSession: a key that must outlive the session whose
	// transaction creates it. In Txn it is OpPut.
	OpPutDetached
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

// PutDetached returns a put op that TxnWithSession does not attach to its
// session (OpPutDetached).
func PutDetached(key string, value []byte) Op { return Op{Kind: OpPutDetached, Key: key, Value: value} }

// Bump returns a bump op.
func Bump(key string) Op { return Op{Kind: OpBump, Key: key} }

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

// The interfaces below are optional: cluster mode needs them and the etcd
// backend implements them; the embedded backend does not (a single node has
// no one to share leases or watches with). Callers type-assert:
//
//	l, ok := store.(meta.Leaser)

// ErrSessionDone is returned (wrapped) by TxnWithSession when the session's
// lease has expired or the session was closed; every key it held is gone.
// Start a new session.
var ErrSessionDone = errors.New("meta: session expired or closed")

// Session is a lease on the backend kept alive in the background. Keys
// written with it disappear when it ends: on Close, or TTL after the holder
// stopped renewing it (crash, network partition, store closed).
type Session interface {
	// ID identifies the lease (the etcd lease ID), e.g. to record in a
	// membership value which session owns it.
	ID() int64
	// TTL is the lease time-to-live the backend granted; it may be longer
	// than requested (etcd rounds up to whole seconds and to its minimum).
	TTL() time.Duration
	// Done is closed once the session has ended for good: the backend says
	// it expired or was revoked, or it was closed. Its keys are gone. While
	// the backend cannot be reached Done stays open (the lease may outlive
	// the outage); ValidUntil says how long it certainly lives.
	Done() <-chan struct{}
	// ValidUntil is the moment, on this process's monotonic clock, before
	// which the lease is certainly still held in the backend: the send time
	// of its last acknowledged renewal plus its TTL, less a margin. A holder
	// of leadership must not act on it from then on until a renewal moves
	// ValidUntil forward again, or Done closes. It is checked where the
	// leadership is used, not by a timer: a process paused past it (a long
	// GC, a VM stall) sees it passed as soon as it runs again.
	ValidUntil() time.Time
	// Close revokes the lease, deleting its keys now rather than after TTL.
	// It is idempotent.
	Close() error
}

// Leaser is implemented by backends with leases (etcd).
type Leaser interface {
	// NewSession grants a lease of at least ttl and keeps it alive until
	// Close. ctx bounds the grant only, not the session's life.
	NewSession(ctx context.Context, ttl time.Duration) (Session, error)
	// TxnWithSession is Txn in which every OpPut is attached to s: the keys
	// it puts are deleted when s ends (OpPutDetached puts are not). Deletes behave as in Txn. It fails
	// with ErrSessionDone if s has already ended.
	TxnWithSession(ctx context.Context, s Session, cmps []Compare, ops ...Op) error
	// RevokeSession ends the session with this ID, whoever holds it, and
	// deletes its keys: a process that finds the session its previous
	// incarnation left (known from its own disk) ends it instead of waiting
	// for it to expire. A session already gone is not an error.
	RevokeSession(ctx context.Context, id int64) error
}

// PutWithSession puts key attached to s: it vanishes when s ends.
func PutWithSession(ctx context.Context, l Leaser, s Session, key string, value []byte) error {
	return l.TxnWithSession(ctx, s, nil, Put(key, value))
}

// WatchKind says what a WatchEvent reports.
type WatchKind uint8

const (
	WatchPut WatchKind = iota + 1
	WatchDelete
)

// WatchEvent is one change under a watched prefix. Revision is the store's
// global revision of the change (strictly increasing across events of one
// watch; several events of one Txn share it). Version and Value are the
// key's new version and value; both are zero for WatchDelete.
//
// An event with Err set is the last one before the channel closes: the
// watch broke (e.g. history it needed was compacted while etcd was
// unreachable, or quorum was lost). Call Watch again for a fresh snapshot;
// IsRetriable(Err) says whether backing off first is enough.
type WatchEvent struct {
	Kind     WatchKind
	Key      string
	Value    []byte
	Version  int64
	Revision int64
	Err      error
}

// MultiGetter is implemented by backends that read several keys in one
// round trip (etcd: a read-only transaction).
type MultiGetter interface {
	// GetMany returns the keys' values and versions, as of one revision,
	// in keys' order; a missing key has Version 0 and a nil Value. At
	// most MaxTxnOps keys.
	GetMany(ctx context.Context, keys []string) ([]KV, error)
}

// ChangeLister is implemented by backends that can list only what changed
// under a prefix since a revision (etcd): a reader that keeps the keys it
// listed before fetches the new and rewritten ones, not all of them.
type ChangeLister interface {
	// ListChanged returns every key under prefix created or rewritten
	// after revision since (every key for 0), sorted by key, as of one
	// revision, and that revision. Deleted keys are not reported.
	ListChanged(ctx context.Context, prefix string, since int64) ([]KV, int64, error)
}

// Watcher is implemented by backends that can stream changes (etcd).
type Watcher interface {
	// Watch returns every key under prefix as of one revision (the
	// snapshot, sorted by key, and that revision) and a channel carrying
	// every change under prefix after it, in order, with no gap and no
	// overlap: snapshot + events is always the current state. The channel is
	// closed when ctx ends (without an error event) or after an event with
	// Err set. Reading slowly is safe but holds the backend's watch buffer.
	Watch(ctx context.Context, prefix string) (snapshot []KV, rev int64, events <-chan WatchEvent, err error)
}
