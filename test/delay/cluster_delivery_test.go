package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// storeLeaders maps each partition of topic to the broker leading its
// delay store partition, and says how many brokers lead the topic's
// partitions and store partitions.
func storeLeaders(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32) (byStore map[int32]int32, targetLeaders map[int32]bool) {
	t.Helper()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, delay.Topic, topic)
	if err != nil {
		t.Fatal(err)
	}
	sd := md.Topics[delay.Topic]
	n := int32(len(sd.Partitions))
	if n == 0 {
		t.Fatalf("no %s partitions in metadata", delay.Topic)
	}
	byStore, targetLeaders = map[int32]int32{}, map[int32]bool{}
	for p := range partitions {
		byStore[p] = sd.Partitions[delay.StorePartition(delay.Target{Topic: topic, Partition: p}, n)].Leader
		targetLeaders[md.Topics[topic].Partitions[p].Leader] = true
	}
	return byStore, targetLeaders
}

// delayCluster starts three brokers on etcd and S3, creates topic and
// the delay store (its first delayed record), and returns the cluster, its
// Kafka addresses and a client over all of them.
func delayCluster(t *testing.T, ctx context.Context, topic string, partitions int32, opts ...kgo.Opt) (*testcluster.Cluster, []string, *kgo.Client) {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{})
	seeds := c.Addrs()
	testbroker.CreateTopic(t, seeds[0], topic, partitions, nil)
	cl := testbroker.NewClient(t, seeds[0], append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	// The store is created by the first delayed record; the first record
	// of each test is due at once.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(topic + "-first"),
		Headers: []kgo.RecordHeader{{Key: "sluice-delay-ms", Value: []byte("1")}}}).FirstErr(); err != nil {
		t.Fatalf("first produce: %v", err)
	}
	return c, seeds, cl
}

// storeVictim is the broker leading the most of topic's store partitions:
// its index in c, its node id, and the partitions of topic whose records
// it holds.
func storeVictim(t *testing.T, ctx context.Context, c *testcluster.Cluster, cl *kgo.Client, topic string, partitions int32) (idx int, victim int32, held []int32) {
	t.Helper()
	byStore, _ := storeLeaders(t, ctx, cl, topic, partitions)
	count := map[int32]int{}
	for _, b := range byStore {
		count[b]++
	}
	most := 0
	for b, k := range count {
		if k > most {
			victim, most = b, k
		}
	}
	idx = -1
	for i := range c.Len() {
		if testcluster.NodeID(i) == victim {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("store leader %d is not one of the brokers", victim)
	}
	for p, b := range byStore {
		if b == victim {
			held = append(held, p)
		}
	}
	slices.Sort(held)
	return idx, victim, held
}

// produceDue produces n records prefix-i to the partitions of topic in
// turn, record i with sluice-deliver-at at(i), and adds them to want.
func produceDue(t *testing.T, ctx context.Context, cl *kgo.Client, topic, prefix string, partitions int32, n int, want []expect, at func(i int) time.Time) []expect {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		due := time.UnixMilli(at(i).UnixMilli())
		v := fmt.Sprintf("%s-%d", prefix, i)
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))}}})
		want = append(want, expect{v, due})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return want
}

// lateness logs the percentiles of how long after its due time each
// expected record was seen (the test's consumer, polling every 100 ms).
func lateness(t *testing.T, c *consumer, want []expect) {
	var ls []time.Duration
	for _, w := range want {
		if got := c.get(w.value); len(got) > 0 {
			ls = append(ls, got[0].at.Sub(w.notBefore))
		}
	}
	if len(ls) == 0 {
		return
	}
	slices.Sort(ls)
	q := func(f float64) time.Duration {
		return ls[min(len(ls)-1, int(f*float64(len(ls))))].Round(time.Millisecond)
	}
	t.Logf("lateness over %d records (seen by the consumer minus due): p50 %v, p90 %v, p99 %v, max %v", len(ls), q(.5), q(.9), q(.99), ls[len(ls)-1].Round(time.Millisecond))
}

// TestClusterLateness holds records on three brokers on etcd and S3, due
// at times spread over a few seconds on every partition of a topic whose
// partitions and store partitions are led by different brokers (held
// records are forwarded to the store partition's leader, due records sent
// to the target's leader). Each record arrives once and no earlier than
// due; `sluice delay stats` asked of every broker counts them all before
// they are due, and nothing after.
func TestClusterLateness(t *testing.T) {
	const topic, partitions = "cluster-lateness", 6
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, seeds, cl := delayCluster(t, ctx, topic, partitions)
	byStore, targets := storeLeaders(t, ctx, cl, topic, partitions)
	holders := map[int32]bool{}
	for _, b := range byStore {
		holders[b] = true
	}
	t.Logf("store partitions of the topic led by %d brokers, its partitions by %d", len(holders), len(targets))
	if len(holders) < 2 || len(targets) < 2 {
		t.Logf("leadership is not spread: the test covers less than it should")
	}

	const n = 600
	start := time.Now()
	want := []expect{{topic + "-first", start.Add(-time.Minute)}}
	want = produceDue(t, ctx, cl, topic, "lat", partitions, n, want, func(i int) time.Time {
		return start.Add(3*time.Second + time.Duration(i%40)*100*time.Millisecond)
	})
	cons := consume(t, seeds[0], topic, kgo.SeedBrokers(seeds...))
	if time.Since(start) < 2500*time.Millisecond {
		st := clusterStats(t, c, topic)
		if len(st.Missing) > 0 || len(st.Twice) > 0 {
			t.Errorf("stats cover store partitions %v, missing %v, twice %v", st.Partitions, st.Missing, st.Twice)
		}
		if len(st.Topics) != 1 || st.Topics[0].Pending != n {
			t.Errorf("stats of every broker before any is due: %+v, want %d pending", st.Topics, n)
		}
	} else {
		t.Logf("producing took %v: stats before due not checked", time.Since(start))
	}
	check(t, cons, want, 60*time.Second)
	lateness(t, cons, want[1:])
	if st := clusterStats(t, c, topic); len(st.Topics) != 0 {
		t.Errorf("stats after delivery: %+v", st.Topics)
	}
}

// clusterStats runs `sluice delay stats --json` against every broker's
// admin listener.
func clusterStats(t *testing.T, c *testcluster.Cluster, topic string) (st struct {
	Topics []struct {
		Topic   string `json:"topic"`
		Pending int64  `json:"pending"`
	} `json:"topics"`
	Partitions, Missing, Twice []int32
}) {
	t.Helper()
	var admins []string
	for i := range c.Len() {
		admins = append(admins, c.AdminAddr(i))
	}
	out := testbroker.RunTool(t, nil, time.Minute, testbroker.BuildBinary(t), "delay", "stats", topic, "--json", "--admin", joinComma(admins))
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("stats %q: %v", out, err)
	}
	return st
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// TestClusterKillMidDelivery holds a few thousand records on three
// brokers, due over several seconds, and SIGKILLs the broker leading the
// most of the topic's store partitions once deliveries are under way:
// every acknowledged record is still delivered exactly once, none before
// its time, after another broker takes the store partitions over (and
// resends, with the same sequences, the batch a marker names).
func TestClusterKillMidDelivery(t *testing.T) {
	const topic, partitions = "cluster-mid-delivery", 6
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, seeds, cl := delayCluster(t, ctx, topic, partitions)
	idx, victim, held := storeVictim(t, ctx, c, cl, topic, partitions)

	const n = 3000
	const spread = 6 * time.Second
	start := time.Now()
	want := []expect{{topic + "-first", start.Add(-time.Minute)}}
	want = produceDue(t, ctx, cl, topic, "mid", partitions, n, want, func(i int) time.Time {
		return start.Add(3*time.Second + time.Duration(i)*spread/n)
	})
	cons := consume(t, seeds[0], topic, kgo.SeedBrokers(seeds...))

	// Kill once some of the victim's records were delivered, well before
	// the last of them is due.
	testbroker.Eventually(t, 30*time.Second, "deliveries from the victim under way", func() error {
		seen := 0
		for i := range n {
			if slices.Contains(held, int32(i%partitions)) && len(cons.get(fmt.Sprintf("mid-%d", i))) > 0 {
				seen++
			}
		}
		if seen < 50 {
			return fmt.Errorf("%d of the victim's records delivered", seen)
		}
		return nil
	})
	delivered := cons.count()
	c.KillBroker(idx)
	t.Logf("killed broker %d (store leader for partitions %v) after %d of %d records were seen, %v after the first was due",
		victim, held, delivered, n+1, time.Since(start.Add(3*time.Second)).Round(time.Millisecond))
	if delivered >= n {
		t.Logf("every record was delivered before the kill: the test covers less than it should")
	}
	var live []string
	for i, a := range seeds {
		if i != idx {
			live = append(live, a)
		}
	}
	after := consume(t, live[0], topic, kgo.SeedBrokers(live...))
	check(t, after, want, 2*time.Minute)
	// The consumer that was reading across the kill saw nothing early
	// either (check above judges by when the new consumer saw them).
	for _, w := range want {
		if got := cons.get(w.value); len(got) > 0 && got[0].at.Before(w.notBefore) {
			t.Errorf("record %q seen %v before its time", w.value, w.notBefore.Sub(got[0].at))
		}
	}
	lateness(t, after, want[1:])
}

// TestClusterTxnDelayed runs transactions holding delayed records on three
// brokers: the transaction's coordinator, the target partitions' leaders
// and the store partitions' leaders are in general different brokers, so
// the store partition joins the transaction through AddPartitionsToTxn
// sent to the coordinator, and the held entries are forwarded to the
// store partition's leader as a transactional batch. Committed records are
// delivered once, no earlier than due; aborted ones never.
func TestClusterTxnDelayed(t *testing.T) {
	const topic, partitions = "cluster-txn-delayed", 6
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, seeds, _ := delayCluster(t, ctx, topic, partitions)
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.TransactionalID("cluster-txn-delayed"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	committed := consume(t, seeds[0], topic, kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	const d = 2 * time.Second
	start := time.Now()
	cd, cp := txnRecords(topic, "ctx-c", 24, partitions, d)
	ad, ap := txnRecords(topic, "ctx-a", 24, partitions, d)
	runTxn(t, ctx, cl, true, append(cd, cp...)...)
	runTxn(t, ctx, cl, false, append(ad, ap...)...)
	want := []expect{{topic + "-first", start.Add(-time.Minute)}}
	for _, r := range cd {
		want = append(want, expect{string(r.Value), start.Add(d)})
	}
	for _, r := range cp {
		want = append(want, expect{string(r.Value), start})
	}
	check(t, committed, want, 60*time.Second)
	time.Sleep(time.Second)
	for _, r := range append(ad, ap...) {
		if got := committed.get(string(r.Value)); len(got) > 0 {
			t.Errorf("aborted record %q delivered: %+v", r.Value, got)
		}
	}
}
