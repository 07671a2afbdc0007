package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// TestClusterDLQReplayAPI: POST /v1/dlq/{topic}/replay on one broker of a
// cluster replays dead letters into original partitions led by every
// broker (through the inter-broker listener), each once: a second call
// writes nothing.
func TestClusterDLQReplayAPI(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Brokers: 2})
	seeds := c.Addrs()
	createTopic(t, seeds, "orders")
	createTopic(t, seeds, "orders.dlq")
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dead []*kgo.Record
	for p := range partitions {
		dead = append(dead, &kgo.Record{Topic: "orders.dlq", Partition: 0, Key: []byte("k" + strconv.Itoa(p)), Value: []byte("order " + strconv.Itoa(p)),
			Headers: []kgo.RecordHeader{
				{Key: consumer.HeaderOriginalTopic, Value: []byte("orders")},
				{Key: consumer.HeaderOriginalPartition, Value: []byte(strconv.Itoa(p))},
				{Key: consumer.HeaderOriginalOffset, Value: []byte("0")},
				{Key: consumer.HeaderError, Value: []byte("boom")},
			}})
	}
	if err := cl.ProduceSync(ctx, dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	replay := func() (replayed, skipped int) {
		t.Helper()
		resp, err := http.Post("http://"+c.AdminAddr(0)+"/v1/dlq/orders.dlq/replay", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("replay: %s %s", resp.Status, body)
		}
		var ans struct{ Replayed, Skipped int }
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatal(err)
		}
		return ans.Replayed, ans.Skipped
	}
	if r, s := replay(); r != partitions || s != 0 {
		t.Fatalf("first replay: %d replayed, %d skipped", r, s)
	}
	if r, s := replay(); r != 0 || s != partitions {
		t.Fatalf("second replay: %d replayed, %d skipped", r, s)
	}
	// Every partition of orders holds its record once, before a sentinel.
	for p := range partitions {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: int32(p), Value: []byte("sentinel")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rd := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[int32][]string{}
	for sentinels := 0; sentinels < partitions; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading orders: %v", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			if string(r.Value) == "sentinel" {
				sentinels++
			}
		})
	}
	for p := range partitions {
		want := []string{"order " + strconv.Itoa(p), "sentinel"}
		if g := got[int32(p)]; len(g) != 2 || g[0] != want[0] || g[1] != want[1] {
			t.Errorf("partition %d holds %q, want %q", p, g, want)
		}
	}
}
