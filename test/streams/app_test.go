package streams_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/pkg/streams"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	os.Exit(testbroker.Main(m))
}

func produceWords(t *testing.T, addr string, from, to int) {
	t.Helper()
	cl := testbroker.NewClient(t, addr)
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: "words", Key: fmt.Appendf(nil, "w%d", i%7)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runUntilCaughtUp runs an streams.App until the group has committed every record
// of words, then stops it gracefully, and returns how many changelog
// records it restored.
func runUntilCaughtUp(t *testing.T, addr, stateDir string, g streams.Guarantee) float64 {
	t.Helper()
	b := streams.NewBuilder()
	streams.Count(streams.GroupByKey(streams.Stream(b, "words", streams.String(), streams.Bytes()), streams.String(), streams.Bytes()), "counts").ToStream().To("counts", streams.String(), streams.Int64())
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	app, err := streams.New(topo, streams.Brokers(addr), streams.ApplicationID("wordcount"), streams.StateDir(stateDir), streams.ProcessingGuarantee(g), streams.Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	adm := kadm.NewClient(testbroker.NewClient(t, addr))
	testbroker.Eventually(t, 2*time.Minute, "words committed", func() error {
		_, end, err := testbroker.Offsets(context.Background(), adm, "words")
		if err != nil {
			return err
		}
		got, err := adm.FetchOffsets(context.Background(), "wordcount")
		if err != nil {
			return err
		}
		for p, e := range end {
			if c, _ := got.Lookup("words", p); c.At < e {
				return fmt.Errorf("words/%d: committed %d of %d", p, c.At, e)
			}
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return restoredRecords(t, reg, "counts")
}

// restoredRecords reads streams_restored_records_total for store from the
// app's Prometheus registry.
func restoredRecords(t *testing.T, reg *prometheus.Registry, store string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "streams_restored_records_total") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == store {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// latestCounts reads the counts topic with read_committed and returns each
// word's last count, failing if a word's counts do not go up by one.
func latestCounts(t *testing.T, addr string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, rs := range testbroker.ReadAll(t, addr, "counts", kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			if r.Attrs.IsControl() {
				continue
			}
			n, err := streams.Int64().Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if n != out[string(r.Key)]+1 {
				t.Fatalf("count of %s went from %d to %d", r.Key, out[string(r.Key)], n)
			}
			out[string(r.Key)] = n
		}
	}
	return out
}

// TestRestoreFromCheckpointAndChangelog stops an streams.App gracefully and starts
// it again on the same state directory (nothing to restore: the local
// checkpoint is the changelog's end), then on an empty one (everything is
// restored from the changelog); counts continue from the state either way.
func TestRestoreFromCheckpointAndChangelog(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.ExactlyOnce, streams.AtLeastOnce} {
		t.Run(fmt.Sprint(g), func(t *testing.T) {
			b := testbroker.Start(t)
			testbroker.CreateTopic(t, b.Addr(), "words", 2, nil)
			testbroker.CreateTopic(t, b.Addr(), "counts", 2, nil)
			dir := t.TempDir()

			produceWords(t, b.Addr(), 0, 70)
			if n := runUntilCaughtUp(t, b.Addr(), filepath.Join(dir, "a"), g); n != 0 {
				t.Fatalf("first run restored %v records, want 0", n)
			}
			produceWords(t, b.Addr(), 70, 140)
			if n := runUntilCaughtUp(t, b.Addr(), filepath.Join(dir, "a"), g); n != 0 {
				t.Fatalf("restart on the same state restored %v records, want 0 (checkpoint)", n)
			}
			produceWords(t, b.Addr(), 140, 210)
			if n := runUntilCaughtUp(t, b.Addr(), filepath.Join(dir, "b"), g); n < 7 {
				t.Fatalf("run on an empty state dir restored %v records, want at least one per word (7)", n)
			}
			got := latestCounts(t, b.Addr())
			for i := range 7 {
				if w := fmt.Sprintf("w%d", i); got[w] != 30 {
					t.Errorf("count of %s is %d, want 30", w, got[w])
				}
			}
		})
	}
}
