package batch

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReplay: batches are read from the start up to the first read's high
// watermark, a read that starts mid-batch does not repeat it, and a
// corrupt batch is an error naming the partition.
func TestReplay(t *testing.T) {
	var log []byte
	for base := int64(0); base < 9; base += 3 { // three batches of 3 records
		b, err := Build(0, 1, []kmsg.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint64(b[OffBaseOffset:], uint64(base))
		log = append(log, b...)
	}
	size, _ := Size(log)
	hw := int64(6) // the third batch was appended after the first read
	var reads []int64
	read := func(_ context.Context, offset int64) ([]byte, int64, error) {
		reads = append(reads, offset)
		defer func() { hw = 9 }()
		if offset == 0 {
			return log[:2*size], hw, nil // the second batch again on the next read
		}
		return log[size:], hw, nil
	}
	var bases []int64
	err := Replay(context.Background(), "p-0", read, func(h *Header, recs []kmsg.Record, end int64) error {
		if end != 6 || len(recs) != 3 {
			t.Fatalf("end %d, %d records", end, len(recs))
		}
		bases = append(bases, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) != 2 || bases[0] != 0 || bases[1] != 3 || len(reads) != 1 {
		t.Fatalf("batches at %v after reads at %v; want [0 3] after one read", bases, reads)
	}

	bad := append([]byte(nil), log[:size]...)
	binary.BigEndian.PutUint32(bad[OffLength:], uint32(len(bad))) // longer than what is there
	err = Replay(context.Background(), "p-1", func(context.Context, int64) ([]byte, int64, error) { return bad, 3, nil },
		func(*Header, []kmsg.Record, int64) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a corrupt batch replayed: %v", err)
	}
}
