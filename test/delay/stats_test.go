package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/delay"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

type statsAnswer struct {
	Topics          []delay.TopicStats `json:"topics"`
	StorePartitions int32              `json:"store_partitions"`
	Partitions      []int32            `json:"partitions"`
	Loading         []int32            `json:"loading"`
}

func adminDo(t *testing.T, method, admin, path string, q url.Values, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestStatsFromMemory holds records due in 3 minutes (within the
// in-memory horizon), in 50 minutes and in 2 days (beyond it), cancels
// some of each kind by offset and by message id, and checks the pending
// counts and due-time histogram `sluice delay stats` answers: before and
// after a restart, whose replay rebuilds the summary (a tombstone of an
// entry beyond the horizon carries its due time, so the replay takes it
// out without holding every key).
func TestStatsFromMemory(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) { c.AdminListen = "127.0.0.1:0" }))
	const topic = "stats-delayed"
	testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	var recs []*kgo.Record
	for i, d := range []time.Duration{3 * time.Minute, 50 * time.Minute, 48 * time.Hour} {
		for j := range 6 {
			hs := []kgo.RecordHeader{{Key: "sluice-deliver-at", Value: []byte(strconv.FormatInt(now.Add(d).UnixMilli(), 10))}}
			if j%3 == 0 {
				hs = append(hs, kgo.RecordHeader{Key: "sluice-message-id", Value: []byte("cancel-me")})
			}
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(j % 3), Value: []byte(fmt.Sprintf("s-%d-%d", i, j)), Headers: hs})
		}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin := b.Server().AdminAddr()
	// One of each delay by offset (j == 1), two of each by message id
	// (j == 0 and 3): 9 of 18 records, 3 left of each delay.
	byValue := map[string]*kgo.Record{}
	for _, r := range res {
		byValue[string(r.Record.Value)] = r.Record
	}
	for i := range 3 {
		r := byValue[fmt.Sprintf("s-%d-1", i)]
		q := url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(r.Partition))}, "offset": {strconv.FormatInt(r.Offset, 10)}}
		if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", q, nil); code != http.StatusOK {
			t.Fatalf("cancel %s at %d: HTTP %d", r.Value, r.Offset, code)
		}
	}
	var cres struct{ Cancelled []delay.Cancelled }
	if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", url.Values{"message-id": {"cancel-me"}}, &cres); code != http.StatusOK || len(cres.Cancelled) != 6 {
		t.Fatalf("cancel by message id: HTTP %d, %+v", code, cres)
	}

	want := func(when string, pending int64) {
		t.Helper()
		var st statsAnswer
		testbroker.Eventually(t, 30*time.Second, "stats answered for every store partition", func() error {
			st = statsAnswer{}
			if code := adminDo(t, http.MethodGet, admin, "/v1/delay/stats", url.Values{"topic": {topic}}, &st); code != http.StatusOK {
				return fmt.Errorf("HTTP %d", code)
			}
			if len(st.Loading) > 0 || int32(len(st.Partitions)) != st.StorePartitions || st.StorePartitions == 0 {
				return fmt.Errorf("partitions %v of %d, loading %v", st.Partitions, st.StorePartitions, st.Loading)
			}
			return nil
		})
		if len(st.Topics) != 1 || st.Topics[0].Topic != topic {
			t.Fatalf("%s: stats %+v", when, st)
		}
		ts := st.Topics[0]
		idx := map[string]int{}
		for i, b := range delay.StatsBuckets {
			idx[b.Name] = i
		}
		wantIn := make([]int64, len(delay.StatsBuckets))
		wantIn[idx["10m"]], wantIn[idx["1h"]], wantIn[idx["7d"]] = 3, 3, pending-6
		if ts.Pending != pending || fmt.Sprint(ts.DueIn) != fmt.Sprint(wantIn) {
			t.Errorf("%s: pending %d, due in %v; want %d, %v", when, ts.Pending, ts.DueIn, pending, wantIn)
		}
		first, last := now.Add(3*time.Minute).UnixMilli(), now.Add(48*time.Hour).UnixMilli()
		if ts.FirstDue > first || ts.FirstDue < first-60_000 || ts.LastDue < last || ts.LastDue > last+60_000 {
			t.Errorf("%s: first due %d, last due %d; want the minutes of %d and %d", when, ts.FirstDue, ts.LastDue, first, last)
		}
	}
	want("before the restart", 9)
	b.Restart()
	admin = b.Server().AdminAddr()
	want("after the restart", 9)
	// Cancel by offset of a record beyond the horizon after the restart
	// (found through the spans the replay rebuilt), once.
	r := byValue["s-2-2"]
	q := url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(r.Partition))}, "offset": {strconv.FormatInt(r.Offset, 10)}}
	if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", q, nil); code != http.StatusOK {
		t.Fatalf("cancel %s at %d after the restart: HTTP %d", r.Value, r.Offset, code)
	}
	if code := adminDo(t, http.MethodPost, admin, "/v1/delay/cancel", q, nil); code != http.StatusNotFound {
		t.Fatalf("second cancel of %s: HTTP %d, want 404", r.Value, code)
	}
	want("after a cancel", 8)
}
