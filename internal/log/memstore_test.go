package log

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// memStore is an in-memory objstore.Storage for tests.
type memStore struct {
	mu   sync.Mutex
	objs map[string][]byte
	puts int
}

func newMemStore() *memStore { return &memStore{objs: map[string][]byte{}} }

func (m *memStore) Put(_ context.Context, key string, r io.Reader, size int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("size mismatch")
	}
	m.mu.Lock()
	m.objs[key] = b
	m.puts++
	m.mu.Unlock()
	return nil
}

func (m *memStore) ReadAt(_ context.Context, key string, p []byte, off int64) error {
	m.mu.Lock()
	b, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", objstore.ErrNotFound, key)
	}
	if off+int64(len(p)) > int64(len(b)) {
		return io.ErrUnexpectedEOF
	}
	copy(p, b[off:])
	return nil
}

func (m *memStore) Size(_ context.Context, key string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return 0, objstore.ErrNotFound
	}
	return int64(len(b)), nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

func (m *memStore) List(_ context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []objstore.ObjectInfo
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objstore.ObjectInfo{Key: k, Size: int64(len(b)), ModTime: time.Now()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memStore) Close() error { return nil }

// memMeta is an in-memory meta.Store for tests.
type memMeta struct {
	mu  sync.Mutex
	kvs map[string]meta.KV
}

func newMemMeta() *memMeta { return &memMeta{kvs: map[string]meta.KV{}} }

func (m *memMeta) Get(_ context.Context, key string) (meta.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kv, ok := m.kvs[key]
	if !ok {
		return meta.KV{}, fmt.Errorf("%w: %s", meta.ErrNotFound, key)
	}
	return kv, nil
}

func (m *memMeta) List(_ context.Context, prefix string) ([]meta.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []meta.KV
	for k, kv := range m.kvs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memMeta) Txn(_ context.Context, cmps []meta.Compare, ops ...meta.Op) error {
	if len(ops) > meta.MaxTxnOps {
		return fmt.Errorf("txn of %d ops exceeds MaxTxnOps", len(ops))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cmps {
		if m.kvs[c.Key].Version != c.Version {
			return meta.ErrConflict
		}
	}
	for _, op := range ops {
		switch op.Kind {
		case meta.OpPut:
			kv := m.kvs[op.Key]
			m.kvs[op.Key] = meta.KV{Key: op.Key, Value: append([]byte(nil), op.Value...), Version: kv.Version + 1}
		case meta.OpDelete:
			delete(m.kvs, op.Key)
		case meta.OpDeletePrefix:
			for k := range m.kvs {
				if strings.HasPrefix(k, op.Key) {
					delete(m.kvs, k)
				}
			}
		}
	}
	return nil
}

func (m *memMeta) Close() error { return nil }
