// Package objstore is the object-store boundary of sluice: the one place data
// objects (rolled WAL contents, packed partitions, compacted segments) are
// written and read. Implementations: localfs (single node, the default) and,
// in cluster mode, an S3-compatible store. Every implementation passes the
// shared suite in objstoretest.
//
// Objects are immutable once Put: a key is written once and never rewritten
// in place (compaction writes new keys and deletes old ones). That is what lets
// any broker read any object without coordination.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) when a key does not exist.
var ErrNotFound = errors.New("objstore: object not found")

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Storage is the small interface every backend implements.
type Storage interface {
	// Put stores size bytes read from r under key, durably: when Put returns
	// nil the object survives a crash of this process and of the machine.
	// Put of an existing key replaces it atomically (readers see old or new,
	// never a mix), though sluice itself never reuses keys.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// ReadAt reads len(p) bytes at offset off. It returns io.ErrUnexpectedEOF
	// (wrapped) if the object is shorter, ErrNotFound if it does not exist.
	ReadAt(ctx context.Context, key string, p []byte, off int64) error
	// Size returns the object's size, or ErrNotFound.
	Size(ctx context.Context, key string) (int64, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Close releases resources (open file handles, connections).
	Close() error
}

// Shrinker is an optional capability of a Storage that can cut an object
// short in place (localfs: truncate). The log engine frees large dead
// objects through it a piece at a time, paced, before deleting them:
// freeing gigabytes at once on a file system with online discard stalls
// every fsync behind it. Shrink may do nothing (an object whose storage is
// shared must not change); Delete still removes the object.
type Shrinker interface {
	Shrink(ctx context.Context, key string, size int64) error
}

// Linker is an optional capability of a Storage that can take a local file
// as an object without copying its bytes (localfs: a hard link into the
// store). The log engine uses it to adopt closed WAL segments as data
// objects, so a local disk writes every byte once. Stores without it (S3)
// get objects through Put.
type Linker interface {
	// PutFile stores the contents of the file at path under key with the
	// guarantees of Put (durable when it returns nil; atomic replace).
	// The object may share the file's storage: the caller must never
	// modify the file afterwards, though it may remove its own name for it.
	PutFile(ctx context.Context, key, path string) error
}

// Mapper is an optional capability of a Storage whose objects are local
// files: Map maps an object read-only into memory, so a caller that reads
// much of an object (the log's merge of small extents, picking the batches
// of thousands of partitions out of a WAL segment) reads the page cache in
// place instead of copying it out. The mapping stays valid until unmap is
// called, even if the object is deleted meanwhile, but the caller must
// make sure nothing shrinks it (Shrinker) while it is mapped: reading past
// a file's end through a mapping kills the process.
type Mapper interface {
	Map(ctx context.Context, key string) (data []byte, unmap func(), err error)
}
