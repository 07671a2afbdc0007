package fault

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCheckersCatchViolations shows that every checker can fail: after a
// short clean run (every checker passes), it forges what each must catch
// (a lost and a changed acknowledged record, a duplicate in the idempotent
// producer's log, an aborted transaction made visible and a committed one
// missing, a lost group commit, a broker over its memory bound, a panic in
// a broker's log) and checks each is reported.
func TestCheckersCatchViolations(t *testing.T) {
	s := loadSettings(t)
	s.soak = 0
	tg := startSingle(t, s)
	r := startRun(t, s, tg)
	r.waitProgress("a clean start")
	r.plain.finish()
	r.idem.finish()
	r.txn.finish()
	r.group.finish()
	r.mem.finish()

	clean := []*verdict{
		checkAcked(t, tg, r.plain),
		checkAcked(t, tg, r.idem),
		checkTxn(t, tg, r.txn),
		checkGroupOffsets(t, tg, r.group),
		r.mem.check(),
		tg.checkLogs(),
	}
	for _, v := range clean {
		if !v.report(t, "clean run, nothing forged") {
			t.Fatal("a checker failed a clean run")
		}
	}

	expect := func(v *verdict, marks ...string) {
		t.Helper()
		all := strings.Join(v.bad.list, "\n")
		for _, m := range marks {
			if !strings.Contains(all, m) {
				t.Errorf("%s: did not report %q; reported %d problem(s):\n\t%s", v.check, m, v.bad.total, &v.bad)
			}
		}
		if v.bad.total > 0 {
			t.Logf("caught, as it should: %s: %s", v.check, strings.ReplaceAll(v.bad.String(), "\n", " | "))
		}
	}

	// Acknowledged records lost and changed.
	r.plain.mu.Lock()
	r.plain.acks = append(r.plain.acks, ack{partition: 0, offset: 1 << 40, value: "forged"})
	r.plain.acks[0].value = "changed-" + r.plain.acks[0].value
	r.plain.mu.Unlock()
	expect(checkAcked(t, tg, r.plain), "LOST:", "CHANGED:")

	// A record of the idempotent producer written twice, and two written
	// out of order.
	dup := r.idem.snapshot()[0]
	cl := tg.client("forger", kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	for _, v := range []string{dup.value, fmt.Sprintf("i%d-1000002-x", dup.partition), fmt.Sprintf("i%d-1000001-x", dup.partition)} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: idemTopic, Partition: dup.partition, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	cl.Close()
	expect(checkAcked(t, tg, r.idem), "DUPLICATE:", "ORDER:")

	// A committed transaction taken for aborted, an aborted one for
	// committed.
	r.txn.mu.Lock()
	flipped := map[txnOutcome]bool{}
	for i, e := range r.txn.txns {
		if (e.outcome == txnCommitted || e.outcome == txnAborted) && !flipped[e.outcome] {
			flipped[e.outcome] = true
			r.txn.txns[i].outcome = map[txnOutcome]txnOutcome{txnCommitted: txnAborted, txnAborted: txnCommitted}[e.outcome]
		}
	}
	r.txn.mu.Unlock()
	if len(flipped) != 2 {
		t.Fatalf("the run had no committed or no aborted transaction to forge: %s", r.txn.summary())
	}
	expect(checkTxn(t, tg, r.txn), "ABORTED VISIBLE:", "COMMITTED MISSING:")

	// A commit acknowledged beyond what the coordinator returns.
	r.group.mu.Lock()
	r.group.committed[0] += 1000
	r.group.mu.Unlock()
	expect(checkGroupOffsets(t, tg, r.group), "LOST:")

	// A broker over its memory bound.
	r.mem.bound = 1 << 20
	expect(r.mem.check(), "over the bound")

	// A panic in a broker's log (stopped first, so it writes no more).
	tg.procs[0].Stop()
	f, err := os.OpenFile(tg.procs[0].LogPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("panic: forged by TestCheckersCatchViolations\n")
	f.Close()
	expect(tg.checkLogs(), "panic: forged")
}
