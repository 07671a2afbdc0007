package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// TestDedupAgainstBroker: 300 distinct messages, a third of them sent two
// or three times with different keys (so copies land on different
// partitions of events), through the example on a real broker with two
// instances; events-unique, read committed, holds each message once.
func TestDedupAgainstBroker(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "events", 3, nil)
	testbroker.CreateTopic(t, b.Addr(), "events-unique", 3, nil)
	topo, err := Topology(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var dones []chan error
	for i := range 2 {
		a, err := streams.New(topo, streams.Brokers(b.Addr()), streams.ApplicationID("dedup"), streams.InstanceID(fmt.Sprint(i)),
			streams.StateDir(filepath.Join(t.TempDir(), "state")), streams.ClientOpts(kgo.SessionTimeout(6*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		dones = append(dones, done)
	}
	t.Cleanup(func() {
		cancel()
		for _, d := range dones {
			if err := <-d; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})

	now := time.Now()
	var rs []*kgo.Record
	var want []string
	for i := range 300 {
		e := Event{ID: fmt.Sprintf("m%d", i), Payload: fmt.Sprintf("p%d", i)}
		want = append(want, e.ID+"="+e.Payload)
		v, _ := json.Marshal(e)
		copies := 1 + (i%3)*(i%2) // 1, 2 or 3 copies
		for c := range copies {
			rs = append(rs, &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "k%d-%d", i, c), Value: v,
				Timestamp: now.Add(time.Duration(i+c*50) * time.Millisecond)})
		}
	}
	cl := testbroker.NewClient(t, b.Addr())
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	testbroker.Eventually(t, 2*time.Minute, "dedup caught up", func() error {
		got, err := adm.FetchOffsets(context.Background(), "dedup")
		if err != nil {
			return err
		}
		// events first: once committed, the repartition topic holds all
		// it will hold; its last offsets are transaction markers, so the
		// target is its last record.
		for _, topic := range []string{"events", "dedup-events-by-id-repartition"} {
			for p, prs := range testbroker.ReadAll(t, b.Addr(), topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
				last := int64(-1)
				for _, r := range prs {
					if !r.Attrs.IsControl() {
						last = r.Offset
					}
				}
				if c, _ := got.Lookup(topic, p); last >= 0 && c.At <= last {
					return fmt.Errorf("%s/%d: committed %d, last record %d", topic, p, c.At, last)
				}
			}
		}
		return nil
	})

	var got []string
	for _, prs := range testbroker.ReadAll(t, b.Addr(), "events-unique", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range prs {
			if r.Attrs.IsControl() {
				continue
			}
			var e Event
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			if string(r.Key) != e.ID {
				t.Errorf("record keyed %q holds message %q", r.Key, e.ID)
			}
			got = append(got, e.ID+"="+e.Payload)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if len(rs) <= len(want) {
		t.Fatalf("only %d records for %d messages: no copies", len(rs), len(want))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events-unique holds %d records, want the %d messages once each:\n got %v\nwant %v", len(got), len(want), got, want)
	}
}
