package streams

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble"
)

// Pebble key layout of a task's database, one database per task:
//
//	'd' store-name 0x00 key   the store's value for key
//	'c' store-name            the next changelog offset to restore from
//
// Store names cannot hold 0x00 (they become topic names).
const (
	dataTag       = 'd'
	checkpointTag = 'c'
)

// storeOptions are the Pebble options of a task's database. New databases
// use v1.1's newest format: Pebble v2 opens nothing older than
// FormatFlushableIngest, and v1.1's default is its oldest format.
func storeOptions() *pebble.Options {
	return &pebble.Options{FormatMajorVersion: pebble.FormatNewest}
}

// kvStore is a key-value state store: committed state in Pebble, this
// commit interval's writes in an overlay that commit applies and abort
// drops. Only the task's goroutine touches it (under App.mu).
type kvStore struct {
	name   string
	db     *pebble.DB
	prefix []byte
	dirty  map[string]*[]byte // nil pointer: deleted
}

func newKVStore(db *pebble.DB, name string) *kvStore {
	p := append([]byte{dataTag}, name...)
	return &kvStore{name: name, db: db, prefix: append(p, 0), dirty: map[string]*[]byte{}}
}

func (s *kvStore) dbKey(k []byte) []byte {
	return append(append([]byte(nil), s.prefix...), k...)
}

func (s *kvStore) get(k []byte) ([]byte, bool, error) {
	if v, ok := s.dirty[string(k)]; ok {
		if v == nil {
			return nil, false, nil
		}
		return *v, true, nil
	}
	v, closer, err := s.db.Get(s.dbKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store %s: %w", s.name, err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

func (s *kvStore) put(k, v []byte) {
	v = bytes.Clone(v)
	s.dirty[string(k)] = &v
}

func (s *kvStore) delete(k []byte) { s.dirty[string(k)] = nil }

// scan calls fn for every live key in [lo, hi) in key order, overlay
// included. fn may call put and delete.
func (s *kvStore) scan(lo, hi []byte, fn func(k, v []byte) error) error {
	merged := map[string][]byte{}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.dbKey(lo), UpperBound: s.dbKey(hi)})
	if err != nil {
		return fmt.Errorf("store %s: %w", s.name, err)
	}
	for it.First(); it.Valid(); it.Next() {
		merged[string(it.Key()[len(s.prefix):])] = bytes.Clone(it.Value())
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("store %s: %w", s.name, err)
	}
	for k, v := range s.dirty {
		if k < string(lo) || k >= string(hi) {
			continue
		}
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = *v
		}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn([]byte(k), merged[k]); err != nil {
			return err
		}
	}
	return nil
}

// dirtyKeys lists the overlay's keys in order, so changelog records are
// written in a deterministic order.
func (s *kvStore) dirtyKeys() []string {
	keys := make([]string, 0, len(s.dirty))
	for k := range s.dirty {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// apply moves the overlay into b; next >= 0 also records the checkpoint.
func (s *kvStore) apply(b *pebble.Batch, next int64) error {
	for k, v := range s.dirty {
		var err error
		if v == nil {
			err = b.Delete(s.dbKey([]byte(k)), nil)
		} else {
			err = b.Set(s.dbKey([]byte(k)), *v, nil)
		}
		if err != nil {
			return err
		}
	}
	s.dirty = map[string]*[]byte{}
	if next >= 0 {
		return b.Set(checkpointKey(s.name), binary.BigEndian.AppendUint64(nil, uint64(next)), nil)
	}
	return nil
}

func (s *kvStore) discard() { s.dirty = map[string]*[]byte{} }

func checkpointKey(store string) []byte { return append([]byte{checkpointTag}, store...) }

// checkpoint returns the changelog offset to restore from (0 without one).
func (s *kvStore) checkpoint() (int64, error) {
	v, closer, err := s.db.Get(checkpointKey(s.name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("store %s: checkpoint of %d bytes", s.name, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
