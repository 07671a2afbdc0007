package txn

import (
	"context"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

const sentinel = "__end__"

// readUntilSentinel writes a non-transactional sentinel record to every
// partition of topic, then reads each partition from the start until its
// sentinel, with the given isolation level. It returns the values read
// (sentinels excluded), per partition in order.
func readUntilSentinel(t *testing.T, addr, topic string, partitions int32, committed bool) map[int32][]string {
	t.Helper()
	pcl := testbroker.NewClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mark := fmt.Sprintf("%s%d", sentinel, time.Now().UnixNano())
	for p := range partitions {
		if err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(mark)}).FirstErr(); err != nil {
			t.Fatalf("producing sentinel to %s-%d: %v", topic, p, err)
		}
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := testbroker.NewClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	out := map[int32][]string{}
	seen := map[int32]bool{}
	for len(seen) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s (committed=%v): sentinels seen in %d of %d partitions; read %v", topic, committed, len(seen), partitions, out)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if seen[r.Partition] {
				return
			}
			if string(r.Value) == mark {
				seen[r.Partition] = true
				return
			}
			if strings.HasPrefix(string(r.Value), sentinel) {
				return
			}
			out[r.Partition] = append(out[r.Partition], string(r.Value))
		})
	}
	return out
}

func flatten(m map[int32][]string) map[string]int {
	out := map[string]int{}
	for _, vs := range m {
		for _, v := range vs {
			out[v]++
		}
	}
	return out
}

// txnDebug describes every transaction and the offsets of the topics, for
// failure messages.
func txnDebug(t *testing.T, addr string, topics ...string) string {
	cl := testbroker.NewClient(t, addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sb strings.Builder
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return err.Error()
	}
	ds, _ := adm.DescribeTransactions(ctx, ls.TransactionalIDs()...)
	for _, d := range ds.Sorted() {
		fmt.Fprintf(&sb, "txn %s %s pid %d epoch %d parts %v; ", d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, d.Topics)
	}
	for _, topic := range topics {
		end, _ := adm.ListEndOffsets(ctx, topic)
		cend, _ := adm.ListCommittedOffsets(ctx, topic)
		fmt.Fprintf(&sb, "%s end %v committed-end %v; ", topic, offs(end), offs(cend))
	}
	return sb.String()
}

func offs(l kadm.ListedOffsets) map[int32]int64 {
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
