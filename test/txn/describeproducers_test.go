package txn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDescribeProducers: DescribeProducers lists an idempotent producer
// with its last sequence and no open transaction, and a transactional
// producer with the first offset of its open transaction until it commits.
func TestDescribeProducers(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "txn-describe-producers"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	idem := b.Client(t, kgo.DefaultProduceTopic(topic))
	for i := range 10 {
		if err := idem.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "i-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tx := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tx-describe"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("t-0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	adm := b.Admin(t)
	describe := func() map[int64]kadm.DescribedProducer {
		t.Helper()
		ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		p := ds[topic].Partitions[0]
		if p.Err != nil {
			t.Fatalf("describe producers: %v", p.Err)
		}
		out := map[int64]kadm.DescribedProducer{}
		for _, ap := range p.ActiveProducers {
			out[ap.ProducerID] = ap
		}
		return out
	}
	idemID, _, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txID, _, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := describe()
	if len(got) != 2 {
		t.Fatalf("%d active producers, want 2: %+v", len(got), got)
	}
	if p := got[idemID]; p.LastSequence != 9 || p.CurrentTxnStartOffset != -1 || p.LastTimestamp <= 0 {
		t.Errorf("idempotent producer: %+v; want last sequence 9, no transaction, a timestamp", p)
	}
	if p := got[txID]; p.LastSequence != 0 || p.CurrentTxnStartOffset != 10 {
		t.Errorf("transactional producer: %+v; want last sequence 0, transaction from offset 10", p)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, 30*time.Second, "transaction closed", func() error {
		if p := describe()[txID]; p.CurrentTxnStartOffset != -1 {
			return fmt.Errorf("transactional producer after commit: %+v", p)
		}
		return nil
	})

	// kadm looks the partition's leader up first and may fail there.
	ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"no-such-topic": {0: {}}})
	if err == nil {
		err = ds["no-such-topic"].Partitions[0].Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
