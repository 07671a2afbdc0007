package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testcluster"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// procCPU returns the user+system CPU time of pid (0 for this process),
// and with children the time of its waited-for children too (the bench
// processes; brokers are still running and not counted). Zero when
// /proc cannot tell.
func procCPU(pid int, children bool) time.Duration {
	name := "/proc/self/stat"
	if pid != 0 {
		name = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	n := 2                 // utime, stime: fields 14, 15
	if children {
		n = 4 // and cutime, cstime
	}
	if len(f) < 11+n {
		return 0
	}
	var ticks int64
	for _, x := range f[11 : 11+n] {
		v, _ := strconv.ParseInt(x, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// cpuSample is the CPU time of every process in a cluster figure.
type cpuSample struct {
	at      time.Time
	brokers []time.Duration
	s3      time.Duration
	test    time.Duration // this process: embedded etcd and the harness
	bench   time.Duration // waited-for children: the bench processes
}

func sampleCPU(c *testcluster.Cluster) cpuSample {
	s := cpuSample{at: time.Now(), s3: procCPU(c.S3().Pid(), false)}
	for i := 0; i < c.Len(); i++ {
		s.brokers = append(s.brokers, procCPU(c.Broker(i).Pid(), false))
	}
	self, all := procCPU(0, false), procCPU(0, true)
	s.test, s.bench = self, all-self
	return s
}

// logCPU logs each process's share of one core between two samples.
func logCPU(t *testing.T, label string, a, b cpuSample) {
	t.Helper()
	wall := b.at.Sub(a.at).Seconds()
	pct := func(d time.Duration) string { return fmt.Sprintf("%.0f%%", 100*d.Seconds()/wall) }
	var parts []string
	total := time.Duration(0)
	for i := range b.brokers {
		d := b.brokers[i] - a.brokers[i]
		total += d
		parts = append(parts, fmt.Sprintf("broker %d %s", testcluster.NodeID(i), pct(d)))
	}
	total += b.s3 - a.s3 + b.test - a.test + b.bench - a.bench
	parts = append(parts, "versitygw "+pct(b.s3-a.s3), "etcd+test "+pct(b.test-a.test), "bench "+pct(b.bench-a.bench), "total "+pct(total))
	t.Logf("cpu, %s (%% of one core over %.1fs): %s", label, wall, strings.Join(parts, ", "))
}
