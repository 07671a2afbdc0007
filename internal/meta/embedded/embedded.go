package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Sentinel errors, always wrapped.
var (
	// ErrLocked: another process holds the file lock.
	ErrLocked = errors.New("data dir is in use by another sluice process")
	// ErrInvalidTxn: the transaction is malformed (empty key, unknown op kind,
	// the same key put twice, or a key both put and deleted). Nothing was
	// written. etcd refuses the same transactions.
	ErrInvalidTxn = errors.New("meta/embedded: invalid transaction")
	// ErrInvalidKey: an empty key or one longer than bbolt allows.
	ErrInvalidKey = errors.New("meta/embedded: invalid key")
	// ErrCorrupt: a stored value is not in the expected format.
	ErrCorrupt = errors.New("meta/embedded: corrupt value")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("meta/embedded: store closed")
)

// DefaultLockTimeout is how long Open waits for the file lock.
const DefaultLockTimeout = time.Second

// formatVersion is written to the info bucket; Open refuses any other.
const formatVersion = 1

var (
	bucketKV   = []byte("kv")
	bucketInfo = []byte("info")
	keyFormat  = []byte("format")
)

// versionLen is the size of the version prefix of every stored value.
const versionLen = 8

// Option configures Open.
type Option func(*options)

type options struct {
	lockTimeout time.Duration
}

// WithLockTimeout sets how long Open waits for another process to release
// the file lock before failing with ErrLocked.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

// Store is a meta.Store on one bbolt file. It is safe for concurrent use:
// reads run in parallel, writes are serialized by bbolt.
type Store struct {
	db   *bolt.DB
	path string
}

var _ meta.Store = (*Store)(nil)

// initialMmapSize is the address space the store maps up front.
const initialMmapSize = 1 << 30

// Open opens or creates the store at path, creating its directory if needed.
// It fails with ErrLocked if another process has the file open.
func Open(path string, opts ...Option) (*Store, error) {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("meta/embedded: create directory for %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      o.lockTimeout,
		FreelistType: bolt.FreelistMapType,
		// Address space only, not memory: bbolt remaps (and copies every
		// node a write transaction holds) each time the file outgrows
		// its map, which a single node rolling 100,000 partitions' object
		// records did every few rolls while the file grew.
		InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("meta/embedded: open %s: %w (waited %s for its lock)", path, ErrLocked, o.lockTimeout)
		}
		return nil, fmt.Errorf("meta/embedded: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketKV); err != nil {
			return err
		}
		info, err := tx.CreateBucketIfNotExists(bucketInfo)
		if err != nil {
			return err
		}
		if v := info.Get(keyFormat); v != nil {
			if len(v) != 8 || binary.BigEndian.Uint64(v) != formatVersion {
				return fmt.Errorf("meta/embedded: %s has unsupported format %x (this build reads %d)", path, v, formatVersion)
			}
			return nil
		}
		return info.Put(keyFormat, binary.BigEndian.AppendUint64(nil, formatVersion))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("meta/embedded: initialize %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Get returns the key's value and version.
func (s *Store) Get(ctx context.Context, key string) (meta.KV, error) {
	if err := ctx.Err(); err != nil {
		return meta.KV{}, fmt.Errorf("meta/embedded: get %q: %w", key, err)
	}
	if err := checkKey(key); err != nil {
		return meta.KV{}, err
	}
	var kv meta.KV
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketKV).Get([]byte(key))
		if v == nil {
			return fmt.Errorf("meta/embedded: %q: %w", key, meta.ErrNotFound)
		}
		var err error
		kv, err = decode(key, v)
		return err
	})
	if err != nil {
		return meta.KV{}, s.wrap(err)
	}
	return kv, nil
}

// List returns every key with the prefix, sorted, via one cursor scan.
func (s *Store) List(ctx context.Context, prefix string) ([]meta.KV, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("meta/embedded: list %q: %w", prefix, err)
	}
	var out []meta.KV
	err := s.db.View(func(tx *bolt.Tx) error {
		p := []byte(prefix)
		c := tx.Bucket(bucketKV).Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			kv, err := decode(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, kv)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap(err)
	}
	return out, nil
}

// Txn checks every compare and applies every op in one bbolt write
// transaction, fsynced before it returns. A failed compare returns a wrapped
// meta.ErrConflict naming the key; nothing is written.
func (s *Store) Txn(ctx context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("meta/embedded: txn: %w", err)
	}
	if err := validate(cmps, ops); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		for _, c := range cmps {
			cur, err := version(c.Key, b.Get([]byte(c.Key)))
			if err != nil {
				return err
			}
			if cur != c.Version {
				return fmt.Errorf("meta/embedded: %w", &meta.ConflictError{Key: c.Key, Version: cur, Want: c.Version})
			}
		}
		for _, op := range ops {
			if err := apply(b, op); err != nil {
				return err
			}
		}
		return nil
	})
	return s.wrap(err)
}

func apply(b *bolt.Bucket, op meta.Op) error {
	key := []byte(op.Key)
	switch op.Kind {
	case meta.OpPut, meta.OpPutDetached:
		cur, err := version(op.Key, b.Get(key))
		if err != nil {
			return err
		}
		// bbolt keeps the slice until commit, so it must be ours.
		v := make([]byte, versionLen+len(op.Value))
		binary.BigEndian.PutUint64(v, uint64(cur+1))
		copy(v[versionLen:], op.Value)
		if err := b.Put(key, v); err != nil {
			return fmt.Errorf("meta/embedded: put %q: %w", op.Key, err)
		}
	case meta.OpDelete:
		if err := b.Delete(key); err != nil {
			return fmt.Errorf("meta/embedded: delete %q: %w", op.Key, err)
		}
	case meta.OpBump:
		old := b.Get(key)
		if old == nil {
			return fmt.Errorf("meta/embedded: bump %q: %w", op.Key, meta.ErrNotFound)
		}
		cur, err := version(op.Key, old)
		if err != nil {
			return err
		}
		v := bytes.Clone(old)
		binary.BigEndian.PutUint64(v, uint64(cur+1))
		if err := b.Put(key, v); err != nil {
			return fmt.Errorf("meta/embedded: bump %q: %w", op.Key, err)
		}
	case meta.OpDeletePrefix:
		// Collect first: deleting under a live cursor can skip keys.
		var doomed [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(key); k != nil && bytes.HasPrefix(k, key); k, _ = c.Next() {
			doomed = append(doomed, bytes.Clone(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("meta/embedded: delete prefix %q at %q: %w", op.Key, k, err)
			}
		}
	}
	return nil
}

// validate refuses what etcd refuses, before anything is locked: empty or
// oversized keys, unknown kinds, a key put twice, and a put of a key that a
// delete in the same transaction also removes.
func validate(cmps []meta.Compare, ops []meta.Op) error {
	for _, c := range cmps {
		if err := checkKey(c.Key); err != nil {
			return fmt.Errorf("%w: compare: %w", ErrInvalidTxn, err)
		}
	}
	puts := make(map[string]struct{})
	dels := make(map[string]struct{})
	var prefixes []string
	for i, op := range ops {
		switch op.Kind {
		case meta.OpPut, meta.OpPutDetached, meta.OpDelete, meta.OpBump:
			if err := checkKey(op.Key); err != nil {
				return fmt.Errorf("%w: op %d: %w", ErrInvalidTxn, i, err)
			}
		case meta.OpDeletePrefix:
			// An empty prefix deletes every key, as it does on etcd.
		default:
			return fmt.Errorf("%w: op %d has unknown kind %d", ErrInvalidTxn, i, op.Kind)
		}
		switch op.Kind {
		case meta.OpPut, meta.OpPutDetached, meta.OpBump:
			if _, dup := puts[op.Key]; dup {
				return fmt.Errorf("%w: key %q is put twice", ErrInvalidTxn, op.Key)
			}
			puts[op.Key] = struct{}{}
		case meta.OpDelete:
			dels[op.Key] = struct{}{}
		case meta.OpDeletePrefix:
			prefixes = append(prefixes, op.Key)
		}
	}
	for k := range puts {
		if _, ok := dels[k]; ok {
			return fmt.Errorf("%w: key %q is both put and deleted", ErrInvalidTxn, k)
		}
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				return fmt.Errorf("%w: key %q is put and deleted by prefix %q", ErrInvalidTxn, k, p)
			}
		}
	}
	return nil
}

func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > bolt.MaxKeySize:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), bolt.MaxKeySize)
	}
	return nil
}

// version returns the version stored in v, or 0 for a missing key.
func version(key string, v []byte) (int64, error) {
	if v == nil {
		return 0, nil
	}
	if len(v) < versionLen {
		return 0, fmt.Errorf("%w: %q holds %d bytes, shorter than its version prefix", ErrCorrupt, key, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// decode copies a stored value out of bbolt's memory map, which is only
// valid inside the transaction.
func decode(key string, v []byte) (meta.KV, error) {
	ver, err := version(key, v)
	if err != nil {
		return meta.KV{}, err
	}
	return meta.KV{Key: key, Value: bytes.Clone(v[versionLen:]), Version: ver}, nil
}

func (s *Store) wrap(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s", ErrClosed, s.path)
	}
	return err
}

// Close releases the file and its lock, waiting for running transactions.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("meta/embedded: close %s: %w", s.path, err)
	}
	return nil
}
