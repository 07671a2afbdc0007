package retry

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

// readCommitted is every data record of topic a read_committed reader sees,
// per partition in offset order.
func readCommitted(t *testing.T, addr, topic string) map[int32][]*kgo.Record {
	t.Helper()
	out := map[int32][]*kgo.Record{}
	for p, rs := range testbroker.ReadAll(t, addr, topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()) {
		for _, r := range rs {
			if !r.Attrs.IsControl() {
				out[p] = append(out[p], r)
			}
		}
	}
	return out
}

// TestExactlyOnceSIGKILLMidRetry SIGKILLs an ExactlyOnce consumer process
// with retry rounds while records wait in blocking retries and in the retry
// topic, restarts it, and does so again. Read committed, in the end: every
// record's success was emitted exactly once and in key order, the permanent
// failure is in the dead-letter topic exactly once, and no retry, park, hold
// or done record is in the retry topic twice.
func TestExactlyOnceSIGKILLMidRetry(t *testing.T) {
	bin := helperBinary(t)
	b := testbroker.Start(t)
	topic, group, emitTo := unique("eoscrash"), unique("g"), unique("emitted")
	const keys, perKey = 12, 60
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	testbroker.CreateTopic(t, b.Addr(), emitTo, 4, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	dir := t.TempDir()
	out := filepath.Join(dir, "handled.txt")
	stderr, err := os.Create(filepath.Join(dir, "consumer.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			if len(b) > 30000 {
				b = b[len(b)-30000:]
			}
			t.Logf("consumer process log tail:\n%s", b)
		}
	})
	// Small polls make small transactions, so the kills land between
	// committed ones, with hold markers and records set aside pending.
	extra := []string{"-eos", unique("tx"), "-emit", emitTo, "-max-buffered", "40"}
	want := keys*perKey - 1
	committed := func() int { return len(all(readCommitted(t, b.Addr(), emitTo))) }
	kills := killMidRetry(t, bin, b.Addr(), topic, group, out, stderr, want, committed, extra...)
	t.Logf("%d SIGKILLs", kills)
	p := startConsumerProc(t, bin, b.Addr(), topic, group, out, stderr, extra...)
	testbroker.Eventually(t, 3*time.Minute, "every success emitted after the kills", func() error {
		if n := endOffsets(t, b.Addr(), emitTo); n < int64(want) {
			return fmt.Errorf("%d of %d emitted (committed or not)", n, want)
		}
		n := 0
		for _, rs := range readCommitted(t, b.Addr(), emitTo) {
			n += len(rs)
		}
		if n < want {
			return fmt.Errorf("%d of %d emitted and committed", n, want)
		}
		return nil
	})
	testbroker.Eventually(t, time.Minute, "the dead letter", func() error {
		if n := len(all(readCommitted(t, b.Addr(), topic+consumer.DLQSuffix))); n == 0 {
			return fmt.Errorf("no dead letter yet")
		}
		return nil
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("consumer process did not stop 30 s after SIGTERM")
	}
	if kills == 0 {
		t.Fatal("the consumer finished before any kill: the test did not test a crash")
	}

	kinds := checkExactlyOnce(t, b.Addr(), topic, emitTo, keys, perKey)
	_, lines := readHandled(t, out)
	t.Logf("retry topic, committed: %v; %d handler successes for %d records (%d run again after kills, their output aborted)",
		kinds, lines, want, lines-want)
}

// checkExactlyOnce reads emitTo, the dead-letter topic and the retry topic
// of the shared workload read_committed: each success emitted exactly once
// and in key order (a key's records share a partition of emitTo, so offset
// order is emit order), the permanent failure dead-lettered once, and no
// retry, park, hold or done record twice. It returns the retry topic's
// records by kind.
func checkExactlyOnce(t *testing.T, addr, topic, emitTo string, keys, perKey int) map[string]int {
	t.Helper()
	want := keys*perKey - 1
	// Each success once, in key order (a key's records share a partition
	// of the emitted topic, so offset order is emit order).
	var log handledLog
	count := map[string]int{}
	for _, rs := range readCommitted(t, addr, emitTo) {
		for _, r := range rs {
			log.add(r.Value)
			count[string(r.Value)]++
		}
	}
	handled, n := log.snapshot()
	for v, c := range count {
		if c != 1 {
			t.Errorf("%s emitted %d times, want once", v, c)
		}
	}
	if n != want {
		t.Errorf("%d emitted, want %d", n, want)
	}
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Error(err)
	}
	dead := all(readCommitted(t, addr, topic+consumer.DLQSuffix))
	if len(dead) != 1 || string(dead[0].Value) != load.Value(2, 10) {
		var vs []string
		for _, d := range dead {
			vs = append(vs, string(d.Value))
		}
		t.Errorf("dead letters %q, want exactly [%s]", vs, load.Value(2, 10))
	}
	seen := map[string]int64{}
	kinds := map[string]int{}
	for _, r := range all(readCommitted(t, addr, topic+consumer.RetrySuffix)) {
		info, err := consumer.DecodeRetryInfo(r)
		if err != nil {
			t.Errorf("retry topic record at %d/%d: %v", r.Partition, r.Offset, err)
			continue
		}
		kinds[info.Kind]++
		id := fmt.Sprintf("%s %s %d", info.Kind, info.Origin.ID(), info.Attempts)
		if info.Kind == consumer.KindDone {
			id = fmt.Sprintf("done %d/%d", r.Partition, info.DoneOffset)
		}
		if at, dup := seen[id]; dup {
			t.Errorf("retry topic holds %q twice (offsets %d and %d)", id, at, r.Offset)
		}
		seen[id] = r.Offset
	}
	return kinds
}
