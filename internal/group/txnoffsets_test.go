package group

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// marker appends a transaction marker for pid to partition p of the store,
// as the log's AppendControl does.
func (h *harness) marker(p int32, pid int64, epoch int16, commit bool) {
	h.t.Helper()
	typ := uint16(0)
	if commit {
		typ = 1
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
	val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 0)
	b, err := batch.Rebuild(batch.Header{Magic: 2, Attributes: attrTransactional | batch.AttrControl,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, LeaderEpoch: -1}, []kmsg.Record{{Key: key, Value: val}})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.store.Append(context.Background(), p, b); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) fetched(group string) map[int32]int64 {
	h.t.Helper()
	got, err := h.c.FetchOffsets(group, []TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, o := range got {
		out[o.Partition] = o.Offset
	}
	return out
}

func (h *harness) txnCommit(group string, pid int64, part int32, offset int64) {
	h.t.Helper()
	errs := <-h.c.TxnCommit(context.Background(), TxnCommitRequest{Group: group, PID: pid, Epoch: 0, Generation: -1,
		Partitions: []CommitPartition{{Topic: "t", Partition: part, Offset: offset, LeaderEpoch: -1}}})
	for _, err := range errs {
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestTxnOffsets: transactional offsets stay invisible until their
// transaction commits, are dropped on abort, and replay (before and after
// the marker) ends the same way.
func TestTxnOffsets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.txnCommit("g", 10, 0, 5)
	part := h.c.Partition("g")
	h.txnCommit("g", 10, 1, 7)
	h.txnCommit("g", 11, 0, 100)
	if got := h.fetched("g"); got[0] != -1 || got[1] != -1 {
		t.Fatalf("pending offsets visible: %v", got)
	}
	// Restart before any marker: still pending; the markers settle them.
	h.c.closed.Store(true)
	h.start()
	if got := h.fetched("g"); got[0] != -1 {
		t.Fatalf("pending offsets visible after restart: %v", got)
	}
	h.marker(part, 10, 0, true)
	h.marker(part, 11, 0, false)
	if err := h.c.CompleteTxn(ctx, part, 10, true); err != nil {
		t.Fatal(err)
	}
	if err := h.c.CompleteTxn(ctx, part, 11, false); err != nil {
		t.Fatal(err)
	}
	if got := h.fetched("g"); got[0] != 5 || got[1] != 7 {
		t.Fatalf("after commit of 10 and abort of 11: %v", got)
	}
	// Replay from the log gives the same answer.
	h.c.closed.Store(true)
	h.start()
	if got := h.fetched("g"); got[0] != 5 || got[1] != 7 {
		t.Fatalf("after replay: %v", got)
	}
	// A new transaction of the same producer continues its sequence.
	h.txnCommit("g", 10, 0, 9)
	h.marker(part, 10, 0, true)
	h.c.CompleteTxn(ctx, part, 10, true)
	if got := h.fetched("g"); got[0] != 9 {
		t.Fatalf("second transaction: %v", got)
	}
}
