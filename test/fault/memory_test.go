package fault

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// memSampler reads every running broker's memory from /proc four times a
// second for the whole run and keeps each broker's peaks. VmHWM is the
// kernel's own peak of the resident set, so a spike between two samples is
// still seen (for the process then running; a killed process takes its
// peak with it, which the last sample before the kill caught most of).
type memSampler struct {
	tg    *target
	bound int64

	mu      sync.Mutex
	peakRSS map[int]int64
	peakHWM map[int]int64
	peakAno map[int]int64
	over    problems
	samples int

	stop chan struct{}
	done chan struct{}
}

func startMemSampler(tg *target, bound int64) *memSampler {
	m := &memSampler{tg: tg, bound: bound, peakRSS: map[int]int64{}, peakHWM: map[int]int64{}, peakAno: map[int]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			m.sample()
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memSampler) sample() {
	for i, pid := range m.tg.pidSnapshot() {
		mem, err := testbroker.ReadMemory(pid)
		if err != nil {
			continue // killed between the snapshot and the read
		}
		m.mu.Lock()
		m.samples++
		m.peakRSS[i] = max(m.peakRSS[i], mem.RSS)
		m.peakHWM[i] = max(m.peakHWM[i], mem.HWM)
		m.peakAno[i] = max(m.peakAno[i], mem.Anon)
		if mem.HWM > m.bound {
			m.over.add("broker %d (pid %d) at %s: VmRSS %s, VmHWM %s, RssAnon %s, over the bound %s",
				i, pid, time.Now().Format("15:04:05.000"), mib(mem.RSS), mib(mem.HWM), mib(mem.Anon), mib(m.bound))
		}
		m.mu.Unlock()
	}
}

func (m *memSampler) finish() {
	close(m.stop)
	<-m.done
}

// check reports the peaks and whether any broker went over the bound
// since the last check.
func (m *memSampler) check() *verdict {
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	v := &verdict{check: fmt.Sprintf("memory: every broker's resident set within %s (--memory-budget-mb %d + 10 %%)", mib(m.bound), memoryBudgetMB)}
	v.bad = m.over
	m.over = problems{} // each excess is reported once
	if m.samples == 0 {
		v.bad.add("no sample could be read from /proc")
	}
	v.ok = m.peaksLocked()
	return v
}

func (m *memSampler) peaksLocked() string {
	var ids []int
	for i := range m.peakHWM {
		ids = append(ids, i)
	}
	sort.Ints(ids)
	var parts []string
	for _, i := range ids {
		parts = append(parts, fmt.Sprintf("broker %d peak VmRSS %s VmHWM %s RssAnon %s", i, mib(m.peakRSS[i]), mib(m.peakHWM[i]), mib(m.peakAno[i])))
	}
	return fmt.Sprintf("%s (%d samples, bound %s)", strings.Join(parts, "; "), m.samples, mib(m.bound))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
