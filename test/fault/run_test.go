package fault

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Workload rates (records a second at most): enough to keep every
// partition busy through each fault, little enough to share two cores.
const (
	plainRate = 300
	idemRate  = 300
)

// recoveryDeadline bounds how long the workloads may take to make progress
// again after a fault. It is generous: the checker asserts recovery, not
// its speed (which is logged).
const recoveryDeadline = 3 * time.Minute

// run is one checker run: the target, its workloads and the memory
// sampler.
type run struct {
	t       *testing.T
	s       settings
	tg      *target
	rng     *rand.Rand
	plain   *producer
	idem    *producer
	txn     *txnProducer
	group   *groupConsumer
	mem     *memSampler
	hostile hostile
	began   time.Time
}

// fault is one step of the rotation. apply returns once the fault is
// over (the component is back), with what it checked while the fault
// lasted (or just a note of what it did).
type fault struct {
	name     string
	soakOnly bool
	apply    func(r *run, round int) *verdict
}

// note is the verdict of a fault that checks nothing itself.
func note(format string, args ...any) *verdict {
	return &verdict{check: "fault applied", ok: fmt.Sprintf(format, args...)}
}

func startRun(t *testing.T, s settings, tg *target) *run {
	t.Helper()
	r := &run{t: t, s: s, tg: tg, rng: s.rng(), began: time.Now()}
	tg.createTopic(plainTopic, partitions, nil)
	tg.createTopic(idemTopic, partitions, nil)
	tg.createTopic(txnTopic, partitions, nil)
	tg.createTopic(hostileTopic, 1, map[string]string{"max.message.bytes": fmt.Sprint(hostileMaxMessageBytes)})
	r.mem = startMemSampler(tg, memoryBound)
	r.plain = startProducer(t, tg, "plain", plainTopic, "p", false, plainRate, r.rng.Uint64())
	r.idem = startProducer(t, tg, "idempotent", idemTopic, "i", true, idemRate, r.rng.Uint64())
	r.txn = startTxnProducer(t, tg, r.rng.Uint64())
	r.group = startGroupConsumer(t, tg)
	r.waitProgress("before any fault")
	t.Logf("%s: workloads running %v after start", tg.name, time.Since(r.began).Round(100*time.Millisecond))
	return r
}

// waitProgress waits until every workload has moved on: each producer has
// more records acknowledged, the transactional producer more transactions
// committed, the group more commits acknowledged.
func (r *run) waitProgress(after string) {
	r.t.Helper()
	type gauge struct {
		name string
		now  func() int64
		need int64
	}
	gauges := []gauge{
		{"plain producer acknowledgements", r.plain.progress, 50},
		{"idempotent producer acknowledgements", r.idem.progress, 50},
		{"committed transactions", r.txn.progress, 3},
		{"acknowledged group commits", r.group.progress, 2},
	}
	began := time.Now()
	for _, g := range gauges {
		from := g.now()
		testbroker.Eventually(r.t, recoveryDeadline, fmt.Sprintf("%s resume after %s", g.name, after), func() error {
			if n := g.now(); n < from+g.need {
				return fmt.Errorf("%d, was %d when the fault ended", n, from)
			}
			return nil
		})
	}
	r.t.Logf("  every workload progressing again %v after the fault ended", time.Since(began).Round(100*time.Millisecond))
}

// checkpoint runs the checkers that are cheap enough to run after every
// fault: everything but the group's catching up.
func (r *run) checkpoint(when string) {
	r.t.Helper()
	r.tg.checkAlive(when)
	for _, v := range []*verdict{
		checkGroupOffsets(r.t, r.tg, r.group),
		checkAcked(r.t, r.tg, r.plain),
		checkAcked(r.t, r.tg, r.idem),
		checkTxn(r.t, r.tg, r.txn),
		r.mem.check(),
	} {
		v.report(r.t, when)
	}
}

// rotate applies the faults once each (short run) or in rotation until the
// soak duration has passed, checking after each.
func (r *run) rotate(faults []fault) {
	r.t.Helper()
	var active []fault
	for _, f := range faults {
		if !f.soakOnly || r.s.soak > 0 {
			active = append(active, f)
		}
	}
	deadline := time.Now().Add(r.s.soak)
	for step := 0; ; step++ {
		if r.s.soak == 0 && step == len(active) {
			return
		}
		if r.s.soak > 0 && (time.Now().After(deadline) || r.t.Failed()) {
			return
		}
		f := active[step%len(active)]
		round := step / len(active)
		began := time.Now()
		r.t.Logf("step %d (%v into the run): %s", step, time.Since(r.began).Round(time.Second), f.name)
		v := f.apply(r, round)
		r.t.Logf("  fault over after %v", time.Since(began).Round(100*time.Millisecond))
		v.report(r.t, "during "+f.name)
		r.waitProgress(f.name)
		r.checkpoint("after " + f.name)
		if r.t.Failed() && r.s.soak == 0 {
			r.t.Logf("  a check failed after %s; going on with the remaining faults", f.name)
		}
	}
}

// finish stops the producers, lets the group consume and commit
// everything, and runs every checker on the whole run.
func (r *run) finish() {
	r.t.Helper()
	r.tg.checkAlive("end of run")
	began := time.Now()
	r.plain.finish()
	r.idem.finish()
	r.txn.finish()
	r.t.Logf("producers stopped and flushed in %v", time.Since(began).Round(100*time.Millisecond))
	end := endOffsets(r.t, r.tg, idemTopic)
	testbroker.Eventually(r.t, recoveryDeadline, "group committed through the end of its topic", func() error {
		got := r.group.snapshot()
		for p, e := range end {
			if got[p] < e {
				return fmt.Errorf("committed %v, end offsets %v", got, end)
			}
		}
		return nil
	})
	r.group.finish()
	r.checkpoint("end of run")
	checkConsumed(r.group, r.idem).report(r.t, "end of run")
	r.mem.finish()
	r.tg.checkLogs().report(r.t, "end of run")
	r.t.Logf("summary after %v:\n\t%s\n\t%s\n\t%s\n\t%s\n\tmemory: %s", time.Since(r.began).Round(time.Second),
		r.plain.summary(), r.idem.summary(), r.txn.summary(), r.group.summary(), r.mem.peaks())
}

func (m *memSampler) peaks() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peaksLocked()
}
