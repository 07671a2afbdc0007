package consumer

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Store remembers which messages were handled, for Dedup. Implementations
// may forget old ids (a bounded store), which lets a very late duplicate
// through.
type Store interface {
	// Seen reports whether id was marked.
	Seen(ctx context.Context, id string) (bool, error)
	// Mark records id as handled.
	Mark(ctx context.Context, id string) error
}

// IDFunc returns the id a record is deduplicated by, or "" for a record
// that must not be deduplicated.
type IDFunc func(r *kgo.Record) string

// ByMessageID deduplicates by the HeaderMessageID header.
func ByMessageID(r *kgo.Record) string {
	v, _ := HeaderValue(r, HeaderMessageID)
	return v
}

// ByKeyAndSequence deduplicates by the key plus the value of the sequence
// header seqHeader (for producers that number each key's messages).
func ByKeyAndSequence(seqHeader string) IDFunc {
	return func(r *kgo.Record) string {
		seq, ok := HeaderValue(r, seqHeader)
		if !ok || r.Key == nil {
			return ""
		}
		return fmt.Sprintf("%d:%s/%s", len(r.Key), r.Key, seq)
	}
}

// Dedup wraps h so that a record whose id is in store is skipped, and a
// record h handles without error is marked. Marking after success, not
// before, keeps at-least-once: a crash between the two repeats the record
// once more rather than losing it; make h itself idempotent where that
// matters. Two records with the same id never run at once (records of
// different keys run concurrently): the second waits for the first and then
// finds it marked.
func Dedup(store Store, id IDFunc, h Handler) Handler {
	var mu sync.Mutex
	running := map[string]chan struct{}{}
	return func(ctx context.Context, r *kgo.Record) error {
		k := id(r)
		if k == "" {
			return h(ctx, r)
		}
		for {
			mu.Lock()
			wait, busy := running[k]
			if !busy {
				running[k] = make(chan struct{})
			}
			mu.Unlock()
			if !busy {
				break
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		defer func() {
			mu.Lock()
			close(running[k])
			delete(running, k)
			mu.Unlock()
		}()
		seen, err := store.Seen(ctx, k)
		if err != nil {
			return fmt.Errorf("dedup store: %w", err)
		}
		if seen {
			return nil
		}
		if err := h(ctx, r); err != nil {
			return err
		}
		if err := store.Mark(ctx, k); err != nil {
			return fmt.Errorf("dedup store: %w", err)
		}
		return nil
	}
}

// MemoryStore is a Store that keeps the most recent ids, up to a capacity,
// evicting the least recently marked. It is safe for concurrent use.
type MemoryStore struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: newest
	ids   map[string]*list.Element
}

// NewMemoryStore returns a store of at most capacity ids (at least 1).
func NewMemoryStore(capacity int) *MemoryStore {
	return &MemoryStore{max: max(capacity, 1), order: list.New(), ids: map[string]*list.Element{}}
}

// Seen implements Store.
func (s *MemoryStore) Seen(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok, nil
}

// Mark implements Store.
func (s *MemoryStore) Mark(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.ids[id]; ok {
		s.order.MoveToFront(e)
		return nil
	}
	s.ids[id] = s.order.PushFront(id)
	for s.order.Len() > s.max {
		e := s.order.Back()
		s.order.Remove(e)
		delete(s.ids, e.Value.(string))
	}
	return nil
}

// Len is the number of ids held.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}
