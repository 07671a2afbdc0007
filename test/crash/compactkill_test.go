package crash

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestCompactionKilled: six rounds each write 40,000 keys again (with
// deletes and keys left at older values); after each, SIGKILL the real
// binary twice while it compacts (a 1 MiB key map, about 40,000 keys, so
// a rewrite of the whole log takes several passes, each registering
// several output objects of at most 4 MiB at a 256 MiB budget), restart
// it on the same data directory, and check that the log is a correct,
// partly compacted version of what was produced: every record is the one
// produced at its offset, offsets only grow (an offset served twice would
// be two registered copies of one range), every key replays to its latest
// value, no deleted key comes back, and the end offset is unchanged.
// Finally compaction is let finish: each live key is left once.
func TestCompactionKilled(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, "--retention-check-interval", "200ms", "--wal-segment-bytes", "1048576",
		"--memory-budget-mb", "256", "--cleaner-dedupe-buffer-bytes", "1048576", "--log-level", "info")
	const topic = "killed"
	testbroker.CreateTopic(t, p.Addr(), topic, 1, map[string]string{
		"cleanup.policy":            "compact",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "0",
		"min.compaction.lag.ms":     "0",
	})

	// The map must be the 1 MiB asked for, not the budget's share.
	if lg, err := os.ReadFile(p.LogPath()); err != nil || !strings.Contains(string(lg), "compact_map_mb=1\n") {
		t.Fatalf("the broker's start line does not name a 1 MiB key map (%v)", err)
	}

	const keys, rounds = 40_000, 6
	var all []*kgo.Record
	produced := map[int64]*kgo.Record{}
	latest := map[string]keyLatest{}

	// check reads the whole log and says how many records it holds.
	check := func(stage string) int {
		t.Helper()
		got := testbroker.ReadAll(t, p.Addr(), topic)[0]
		checkCompacted(t, stage, got, produced, latest)
		if t.Failed() {
			t.FailNow()
		}
		adm := kadm.NewClient(testbroker.NewClient(t, p.Addr()))
		if _, end, err := startOffset(t, adm, topic); err != nil || end != int64(len(all)) {
			t.Fatalf("%s: end offset %d (%v), want %d", stage, end, err, len(all))
		}
		return len(got)
	}

	seed := time.Now().UnixNano()
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for r := 0; r < rounds; r++ {
		// Each round writes every key again (~5 MB), except keys deleted
		// in round 3 (k%10 == 0: a tombstone, then nothing) and keys
		// left at an older value (k%3 == 0 after round 1).
		var recs []*kgo.Record
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key-%06d", k)
			var v []byte
			switch {
			case k%10 == 0 && r == 3:
				// tombstone
			case k%10 == 0 && r > 3, k%3 == 0 && r > 1:
				continue
			default:
				v = value(key, r, 100)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: v})
		}
		produceAll(t, p.Addr(), recs)
		for _, rec := range recs {
			if rec.Offset != int64(len(all)) {
				t.Fatalf("round %d: record acknowledged at offset %d, want %d", r, rec.Offset, len(all))
			}
			all = append(all, rec)
			produced[rec.Offset] = rec
			latest[string(rec.Key)] = keyLatest{rec.Offset, rec.Value}
		}
		// The cleaner runs every 200 ms and rewrites the whole log, new
		// round included, a pass at a time: kill it somewhere in there,
		// twice.
		for i := range 2 {
			time.Sleep(time.Duration(rng.IntN(1200)) * time.Millisecond)
			p.Kill()
			p.Restart()
			n := check(fmt.Sprintf("round %d, kill %d", r, i))
			t.Logf("round %d, after kill %d: %d of %d records", r, i, n, len(all))
		}
	}
	// Left alone, compaction finishes: one record per key, no tombstone
	// (delete.retention.ms=0).
	want := 0
	for _, e := range latest {
		if e.value != nil {
			want++
		}
	}
	testbroker.Eventually(t, cleanupDeadline, "compaction to finish", func() error {
		if n := check("compacting"); n != want {
			return fmt.Errorf("%d records, want %d", n, want)
		}
		return nil
	})
	p.Restart()
	check("after the last restart")
}
