package group

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// memStore is an in-memory offsets topic: batches per partition, offsets
// assigned on append, everything durable at once.
type memStore struct {
	mu    sync.Mutex
	parts [][][]byte // partition -> batches
	next  []int64
	fail  error // when set, Append fails with it

	topics []TopicMeta // what ListTopics answers (consumer groups)
}

func (s *memStore) ListTopics() []TopicMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TopicMeta(nil), s.topics...)
}

func (s *memStore) Partitions() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int32(len(s.parts))
}

func (s *memStore) Create(_ context.Context, n int32) (int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.parts) == 0 {
		s.parts = make([][][]byte, n)
		s.next = make([]int64, n)
	}
	return int32(len(s.parts)), nil
}

func (s *memStore) Append(_ context.Context, p int32, b []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	if int(p) >= len(s.parts) {
		return 0, fmt.Errorf("no partition %d", p)
	}
	if !batch.CheckCRC(b) {
		return 0, fmt.Errorf("bad crc")
	}
	c := append([]byte(nil), b...)
	base := s.next[p]
	batch.SetBaseOffset(c, base)
	s.next[p] += int64(binary.BigEndian.Uint32(c[23:])) + 1
	s.parts[p] = append(s.parts[p], c)
	return base, nil
}

func (s *memStore) Read(_ context.Context, p int32, offset int64) ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []byte
	for _, b := range s.parts[p] {
		if batch.LastOffset(b) >= offset {
			out = append(out, b...)
		}
	}
	return out, s.next[p], nil
}
