package retry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
)

// TestDLQReplayAPISIGKILL: the broker is SIGKILLed while it replays dead
// letters for POST /v1/dlq/{topic}/replay (once the first transactions
// have committed); after a restart a second replay finishes the job, and
// every dead letter is in the original topic exactly once (read
// committed): batches whose transaction committed before the kill are
// skipped by their markers, the open one was aborted.
func TestDLQReplayAPISIGKILL(t *testing.T) {
	p := testbroker.StartProcess(t, testbroker.BuildBinary(t), "--log-level", "warn")
	const n = 5000
	testbroker.CreateTopic(t, p.Addr(), "bills", 1, nil)
	testbroker.CreateTopic(t, p.Addr(), "bills.dlq", 1, nil)
	// The replay log exists up front (the replay would create it), so that
	// polling it below is quick.
	testbroker.CreateTopic(t, p.Addr(), "bills.dlq.replayed", 1, map[string]string{"cleanup.policy": "compact"})
	cl := testbroker.NewClient(t, p.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pad := strings.Repeat("x", 900)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "bills.dlq", Partition: 0, Value: []byte(strconv.Itoa(i) + " " + pad), Headers: []kgo.RecordHeader{
			{Key: consumer.HeaderOriginalTopic, Value: []byte("bills")}, {Key: consumer.HeaderOriginalPartition, Value: []byte("0")},
			{Key: consumer.HeaderError, Value: []byte("boom")}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	replay := func() (int, string, error) {
		resp, err := http.Post("http://"+p.AdminAddr()+"/v1/dlq/bills.dlq/replay", "application/json", strings.NewReader(`{}`))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	done := make(chan string, 1)
	go func() {
		code, body, err := replay()
		done <- fmt.Sprint(code, " ", body[:min(len(body), 80)], " ", err)
	}()
	// Kill once some of it is committed: the replay log has markers.
	adm := kadm.NewClient(cl)
	for {
		_, end, err := testbroker.Offsets(ctx, adm, "bills.dlq.replayed")
		if err == nil && end[0] > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no replay markers within the deadline")
		}
		time.Sleep(5 * time.Millisecond) // a poll: how soon the kill lands varies, the checks below do not
	}
	p.Kill()
	t.Logf("the first replay's answer: %s", <-done)
	p.Restart()
	var body string
	testbroker.Eventually(t, 2*time.Minute, "a replay after the restart", func() error {
		code, b, err := replay()
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("%d %s %v", code, b, err)
		}
		body = b
		return nil
	})
	var ans struct{ Replayed, Skipped int }
	if err := json.Unmarshal([]byte(body), &ans); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: %d replayed, %d skipped (replayed before the kill)", ans.Replayed, ans.Skipped)
	if ans.Replayed+ans.Skipped != n {
		t.Fatalf("replayed %d + skipped %d, want %d", ans.Replayed, ans.Skipped, n)
	}
	// Everything before a sentinel: each dead letter once.
	cl2 := testbroker.NewClient(t, p.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "bills", Partition: 0, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd := testbroker.NewClient(t, p.Addr(), kgo.ConsumeTopics("bills"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	for end := false; !end; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading bills: %d distinct so far", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "sentinel" {
				end = true
				return
			}
			id, _, _ := strings.Cut(string(r.Value), " ")
			seen[id]++
		})
	}
	if len(seen) != n {
		t.Fatalf("%d distinct dead letters in bills, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("dead letter %s is in bills %d times", id, c)
		}
	}
}
