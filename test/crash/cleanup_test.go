package crash

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// cleanupFlags make retention and compaction run often and the WAL roll
// early, so segments close for real.
var cleanupFlags = []string{"--retention-check-interval", "200ms", "--wal-segment-bytes", "1048576", "--log-level", "info"}

const cleanupDeadline = 2 * time.Minute

func value(key string, round, size int) []byte {
	v := bytes.Repeat([]byte{byte('a' + round%26)}, size)
	copy(v, fmt.Sprintf("%s#%d|", key, round))
	return v
}

// produceAll produces recs synchronously and in order; the records get
// their acknowledged offsets.
func produceAll(t *testing.T, addr string, recs []*kgo.Record) {
	t.Helper()
	// Uncompressed, so that sizes on disk are the sizes produced: retention
	// by bytes and WAL rolls depend on them.
	cl := testbroker.NewClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := 0; i < len(recs); i += 200 {
		j := min(i+200, len(recs))
		if err := cl.ProduceSync(ctx, recs[i:j]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func startOffset(t *testing.T, adm *kadm.Client, topic string) (int64, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start, end, err := testbroker.Offsets(ctx, adm, topic)
	if err != nil {
		return 0, 0, err
	}
	return start[0], end[0], nil
}

// TestRetention: time- and size-based retention advance the log start
// offset once segments have rolled, and what remains reads back intact.
func TestRetention(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, cleanupFlags...)
	const recSize, n = 1024, 4000 // about 4 MiB: several WAL rolls

	cases := []struct {
		name    string
		configs map[string]string
		ts      time.Time
	}{
		{"retention.ms", map[string]string{"retention.ms": "2000", "segment.bytes": "1048576"}, time.Now().Add(-2 * time.Hour)},
		{"retention.bytes", map[string]string{"retention.bytes": "1048576", "segment.bytes": "1048576"}, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "retention-" + c.name
			testbroker.CreateTopic(t, p.Addr(), topic, 1, c.configs)
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Value: value("r", i, recSize), Timestamp: c.ts}
			}
			produceAll(t, p.Addr(), recs)
			adm := kadm.NewClient(testbroker.NewClient(t, p.Addr()))
			var start, end int64
			testbroker.Eventually(t, cleanupDeadline, c.name+": log start offset advances", func() error {
				var err error
				start, end, err = startOffset(t, adm, topic)
				if err != nil {
					return err
				}
				if start == 0 {
					return fmt.Errorf("log start offset still 0 (end %d)", end)
				}
				return nil
			})
			t.Logf("%s: log start offset %d, end %d", c.name, start, end)
			if end != n {
				t.Errorf("end offset %d after retention, want %d: retention must not move the end", end, n)
			}
			if c.name == "retention.bytes" {
				if kept := (end - start) * recSize; kept < 512<<10 {
					t.Errorf("retention.bytes=1MiB kept only %d records (~%d bytes)", end-start, kept)
				}
			}
			// Whatever remains is intact, from the new start to the end.
			got := testbroker.ReadAll(t, p.Addr(), topic)[0]
			if len(got) > 0 && got[0].Offset < start {
				t.Errorf("read offset %d below the log start %d", got[0].Offset, start)
			}
			for i, r := range got {
				want := value("r", int(r.Offset), recSize)
				if !bytes.Equal(r.Value, want) {
					t.Fatalf("record at offset %d after retention is not the one produced there", r.Offset)
				}
				if i > 0 && r.Offset != got[i-1].Offset+1 {
					t.Fatalf("gap after retention: offset %d follows %d", r.Offset, got[i-1].Offset)
				}
			}
			// And the start survives a restart.
			p.Restart()
			adm = kadm.NewClient(testbroker.NewClient(t, p.Addr()))
			s2, e2, err := startOffset(t, adm, topic)
			if err != nil {
				t.Fatal(err)
			}
			if s2 < start || e2 != end {
				t.Errorf("after restart offsets are [%d, %d), before [%d, %d)", s2, e2, start, end)
			}
		})
	}
}

// TestCompaction: a compacted topic keeps the latest value per key, drops
// overwritten values and (after delete.retention.ms) tombstones, keeps
// offsets, and a consumer replaying it from the start ends in the same state
// as one that read everything.
func TestCompaction(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	p := testbroker.StartProcess(t, bin, cleanupFlags...)
	const topic = "compacted"
	testbroker.CreateTopic(t, p.Addr(), topic, 1, map[string]string{
		"cleanup.policy":            "compact",
		"min.cleanable.dirty.ratio": "0.01",
		"segment.bytes":             "1048576",
		"segment.ms":                "1000",
		"delete.retention.ms":       "0",
		"min.compaction.lag.ms":     "0",
	})

	const keys, rounds, size = 50, 60, 1024 // ~3 MiB of overwrites
	var recs []*kgo.Record
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("key-%02d", k)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: value(key, r, size)})
		}
	}
	for k := 0; k < 10; k++ { // tombstones
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("key-%02d", k))})
	}
	for i := 0; i < 1200; i++ { // filler so the tombstones' segment rolls too
		key := fmt.Sprintf("filler-%d", i%5)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: value(key, i, size)})
	}
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("sentinel"), Value: []byte("last")})
	produceAll(t, p.Addr(), recs)

	produced := map[int64]*kgo.Record{}
	latest := map[string]keyLatest{}
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d acknowledged at offset %d", i, r.Offset)
		}
		produced[r.Offset] = r
		latest[string(r.Key)] = keyLatest{r.Offset, r.Value}
	}

	check := func(stage string, got []*kgo.Record) {
		t.Helper()
		checkCompacted(t, stage, got, produced, latest)
	}

	var got []*kgo.Record
	testbroker.Eventually(t, cleanupDeadline, "compaction removes overwritten records and tombstones", func() error {
		got = testbroker.ReadAll(t, p.Addr(), topic)[0]
		tombstones := 0
		perKey := map[string]int{}
		for _, r := range got {
			perKey[string(r.Key)]++
			if r.Value == nil {
				tombstones++
			}
		}
		if len(got) > len(recs)/4 {
			return fmt.Errorf("%d of %d records remain", len(got), len(recs))
		}
		if tombstones > 0 {
			return fmt.Errorf("%d tombstones remain with delete.retention.ms=0", tombstones)
		}
		return nil
	})
	t.Logf("after compaction %d of %d records remain", len(got), len(recs))
	check("after compaction", got)

	// The end offset is unchanged and new writes continue after it.
	adm := kadm.NewClient(testbroker.NewClient(t, p.Addr()))
	if _, end, err := startOffset(t, adm, topic); err != nil || end != int64(len(recs)) {
		t.Errorf("end offset after compaction %d (%v), want %d", end, err, len(recs))
	}

	p.Restart()
	check("after restart", testbroker.ReadAll(t, p.Addr(), topic)[0])
}

// keyLatest is a key's last record as produced: its offset and value (nil:
// a tombstone).
type keyLatest struct {
	offset int64
	value  []byte
}

// checkCompacted checks that got, a partition read from its start, is a
// compacted version of what was produced: each record is the one produced
// at its offset, offsets only grow, every key replays to its latest value
// at its latest offset, no deleted key replays to a value, and no key
// unknown to latest appears. It returns the replayed state.
func checkCompacted(t *testing.T, stage string, got []*kgo.Record, produced map[int64]*kgo.Record, latest map[string]keyLatest) map[string]keyLatest {
	t.Helper()
	state := map[string]keyLatest{}
	for i, r := range got {
		pr, ok := produced[r.Offset]
		if !ok || !bytes.Equal(pr.Key, r.Key) || !bytes.Equal(pr.Value, r.Value) || (pr.Value == nil) != (r.Value == nil) {
			t.Fatalf("%s: record at offset %d (key %q) is not the one produced at that offset", stage, r.Offset, r.Key)
		}
		if i > 0 && r.Offset <= got[i-1].Offset {
			t.Fatalf("%s: offset %d after %d", stage, r.Offset, got[i-1].Offset)
		}
		state[string(r.Key)] = keyLatest{r.Offset, r.Value}
	}
	for key, want := range latest {
		have, ok := state[key]
		if want.value == nil {
			if ok && have.value != nil {
				t.Errorf("%s: deleted key %s replays to a value from offset %d", stage, key, have.offset)
			}
			continue
		}
		if !ok || have.offset != want.offset {
			t.Errorf("%s: key %s replays to offset %d (present %v), want its latest at %d", stage, key, have.offset, ok, want.offset)
		}
	}
	for key := range state {
		if _, ok := latest[key]; !ok {
			t.Errorf("%s: unknown key %s", stage, key)
		}
	}
	return state
}
