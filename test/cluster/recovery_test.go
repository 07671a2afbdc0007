package cluster

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// The recovery figures (issue 17, item 4) measure, with the brokers'
// default settings and under load, how long produce stalls when a broker
// is SIGKILLed or paused, when etcd restarts or pauses, and how soon a
// cluster restarted as a whole serves reads again. They assert that
// nothing acknowledged is lost and log the figures; they assert no speed.
// They run only with SLUICE_CLUSTER_FIGURES=1:
//
//	SLUICE_CLUSTER_FIGURES=1 go test ./test/cluster/ -run TestClusterRecovery -v -timeout 60m
//
// SLUICE_RECOVERY_RUNS sets the runs per figure (default 3) and
// SLUICE_RECOVERY_BYTES the data size of the full restart (default 1.3e9).

// recoveryPartitions is the probed topic's size, as in the tester's runs.
const recoveryPartitions = 12

func recoveryRuns() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_RECOVERY_RUNS")); err == nil && n > 0 {
		return n
	}
	return figRuns
}

// probe is a light idempotent acks=all load on every partition of a
// topic (one record per partition every 20 ms) that notes when each
// record was sent and acknowledged, so a stall shows up per partition as
// the gap between consecutive acknowledgements.
type probe struct {
	partitions int32
	mu         sync.Mutex
	acks       map[int32][]ackTimes
	errs       map[string]int
}

type ackTimes struct{ sent, acked time.Time }

func startProbe(t *testing.T, seeds []string, topic string, partitions int32) (*probe, func()) {
	pr := &probe{partitions: partitions, acks: map[int32][]ackTimes{}, errs: map[string]int{}}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(2*time.Minute),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.MetadataMinAge(100*time.Millisecond))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				if err := cl.Flush(ctx); err != nil {
					t.Errorf("probe: flush: %v", err)
				}
				cancel()
				return
			case <-tick.C:
			}
			for p := int32(0); p < partitions; p++ {
				sent := time.Now()
				cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte("x")}, func(_ *kgo.Record, err error) {
					now := time.Now()
					pr.mu.Lock()
					defer pr.mu.Unlock()
					if err != nil {
						pr.errs[err.Error()]++
						return
					}
					pr.acks[p] = append(pr.acks[p], ackTimes{sent, now})
				})
			}
		}
	}()
	testbroker.Eventually(t, time.Minute, "every partition acknowledging", func() error {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if int32(len(pr.acks)) < partitions {
			return fmt.Errorf("%d partitions acknowledged so far", len(pr.acks))
		}
		return nil
	})
	var once sync.Once
	return pr, func() {
		once.Do(func() {
			close(stop)
			<-done
			pr.mu.Lock()
			defer pr.mu.Unlock()
			for e, n := range pr.errs {
				t.Errorf("the probe saw a final produce error %d times: %s", n, e)
			}
		})
	}
}

// servedAfter is how long after from every partition had acknowledged a
// record sent at or after from; false if one has not yet.
func (pr *probe) servedAfter(from time.Time) (time.Duration, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var last time.Time
	for p := int32(0); p < pr.partitions; p++ {
		found := false
		for _, a := range pr.acks[p] {
			if !a.sent.Before(from) {
				found = true
				last = latest(last, a.acked)
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return last.Sub(from), true
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitServed waits until every partition acknowledged a record sent at or
// after from, and returns how long after from that was.
func (pr *probe) waitServed(t *testing.T, from time.Time, what string) time.Duration {
	t.Helper()
	var d time.Duration
	testbroker.Eventually(t, 3*time.Minute, what, func() error {
		var ok bool
		if d, ok = pr.servedAfter(from); !ok {
			return errors.New("not every partition acknowledges again yet")
		}
		return nil
	})
	return d
}

// ackTimes returns, per partition, the acknowledgement times in order.
func (pr *probe) ackTimes() [][]time.Time {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := make([][]time.Time, pr.partitions)
	for p := range out {
		for _, a := range pr.acks[int32(p)] {
			out[p] = append(out[p], a.acked)
		}
		slices.SortFunc(out[p], func(a, b time.Time) int { return a.Compare(b) })
	}
	return out
}

// stalls returns, per partition, the longest time without an
// acknowledgement within [from, to], counting from the last one before
// from: how long produce to it stalled.
func (pr *probe) stalls(from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, times := range pr.ackTimes() {
		var worst time.Duration
		prev := time.Time{}
		for _, at := range times {
			if at.After(to) {
				if !prev.IsZero() && prev.Before(to) {
					worst = max(worst, at.Sub(prev))
				}
				break
			}
			if !prev.IsZero() && at.After(from) {
				worst = max(worst, at.Sub(prev))
			}
			prev = at
		}
		out = append(out, worst)
	}
	return out
}

// recoveryCluster is a three-broker cluster with the brokers' default
// settings, the probe on a 12-partition topic and a steady background
// producer on a 6-partition one.
type recoveryCluster struct {
	c        *testcluster.Cluster
	seeds    []string
	pr       *probe
	stopPr   func()
	bg       *loadLog
	stopBg   chan struct{}
	bgDone   chan struct{}
	cl       *kgo.Client
	adm      *kadm.Client
	finished bool
}

func startRecoveryCluster(t *testing.T, opts testcluster.Options) *recoveryCluster {
	t.Helper()
	opts.LeaseTTL = testcluster.BrokerDefaultLease
	c := testcluster.Start(t, opts)
	keepLogs(t, c)
	rc := &recoveryCluster{c: c, seeds: c.Addrs()}
	rc.cl = testbroker.NewClient(t, rc.seeds[0], kgo.SeedBrokers(rc.seeds...))
	rc.adm = kadm.NewClient(rc.cl)
	ensureTopic(t, rc.adm, "probe", recoveryPartitions)
	createTopic(t, rc.seeds, "background")
	rc.pr, rc.stopPr = startProbe(t, rc.seeds, "probe", recoveryPartitions)
	rc.bg, rc.stopBg, rc.bgDone = newLoadLog(), make(chan struct{}), make(chan struct{})
	go func() { defer close(rc.bgDone); produceUntil(t, rc.seeds, "background", rc.stopBg, rc.bg) }()
	waitProgress(t, rc.bg, "background produce")
	t.Cleanup(rc.finish(t))
	time.Sleep(2 * time.Second) // steady load before the fault
	return rc
}

// finish stops the load and checks that every acknowledged record of the
// background producer is in the log once, in order.
func (rc *recoveryCluster) finish(t *testing.T) func() {
	return func() {
		if rc.finished {
			return
		}
		rc.finished = true
		rc.stopPr()
		close(rc.stopBg)
		<-rc.bgDone
		if !t.Failed() {
			checkLog(t, rc.c.Addrs(), "background", rc.bg)
			checkRetriable(t, rc.bg)
		}
	}
}

// leaders is the probe topic's leader of each partition.
func (rc *recoveryCluster) leaders(t *testing.T) map[int32]int32 {
	t.Helper()
	var ls map[int32]int32
	testbroker.Eventually(t, time.Minute, "probe leaders", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		ls, err = leadersFrom(ctx, rc.cl, -1, "probe", recoveryPartitions)
		return err
	})
	return ls
}

// busiest is the index of the broker leading the most probe partitions,
// and how many it leads.
func (rc *recoveryCluster) busiest(t *testing.T) (int, int) {
	count := map[int32]int{}
	for _, l := range rc.leaders(t) {
		count[l]++
	}
	best := 0
	for i := 0; i < rc.c.Len(); i++ {
		if count[testcluster.NodeID(i)] > count[testcluster.NodeID(best)] {
			best = i
		}
	}
	return best, count[testcluster.NodeID(best)]
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// figureTable logs one figure's runs and their median.
func figureTable(t *testing.T, title string, cols []string, rows [][]time.Duration, notes []string) {
	lines := []string{title, "| run | " + strings.Join(cols, " | ") + " |", "|----:|" + strings.Repeat("---:|", len(cols))}
	for i, r := range rows {
		var cells []string
		for _, d := range r {
			cells = append(cells, secs(d))
		}
		note := ""
		if i < len(notes) && notes[i] != "" {
			note = " " + notes[i]
		}
		lines = append(lines, fmt.Sprintf("| %d | %s |%s", i+1, strings.Join(cells, " | "), note))
	}
	var med []string
	for c := range cols {
		var col []time.Duration
		for _, r := range rows {
			col = append(col, r[c])
		}
		med = append(med, secs(median(col)))
	}
	lines = append(lines, "| median | "+strings.Join(med, " | ")+" |")
	t.Log("\n" + strings.Join(lines, "\n"))
}

// TestClusterRecoveryKill: the broker leading the most probe partitions is
// SIGKILLed; the figure is the time from the kill until every partition
// acknowledges a record sent after it.
func TestClusterRecoveryKill(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	var rows [][]time.Duration
	var notes []string
	for run := range recoveryRuns() {
		t.Run(fmt.Sprint(run+1), func(t *testing.T) {
			rc := startRecoveryCluster(t, testcluster.Options{})
			victim, led := rc.busiest(t)
			killed := time.Now()
			rc.c.KillBroker(victim)
			served := rc.pr.waitServed(t, killed, "produce after the kill")
			stall := maxDur(rc.pr.stalls(killed, time.Now()))
			t.Logf("kill of broker %d (led %d of %d): every partition served after %v; longest stall %v",
				testcluster.NodeID(victim), led, recoveryPartitions, served, stall)
			rows = append(rows, []time.Duration{served, stall})
			notes = append(notes, fmt.Sprintf("(%d partitions moved)", led))
			rc.finish(t)()
		})
	}
	figureTable(t, "SIGKILL of the broker leading the most of 12 partitions, default lease:",
		[]string{"kill to produce on every partition", "longest produce stall"}, rows, notes)
	t.Logf("load average at end: %s", loadAvg())
}

func recoveryBytes() int64 {
	if n, err := strconv.ParseFloat(os.Getenv("SLUICE_RECOVERY_BYTES"), 64); err == nil && n > 0 {
		return int64(n)
	}
	return 1.3e9
}

// fill produces n bytes of 1 KiB records to topic as fast as the cluster
// takes them (acks=all, idempotent) and returns the end offsets.
func fill(t *testing.T, seeds []string, topic string, n int64) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MaxBufferedRecords(20000),
		kgo.RecordDeliveryTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Random bytes, so that no layer can compress them away.
	pool := make([]byte, 1<<20)
	crand.Read(pool)
	var mu sync.Mutex
	var firstErr error
	began := time.Now()
	const size = 1024
	for sent := int64(0); sent < n; sent += size {
		off := (sent / size * 4099) % int64(len(pool)-size)
		val := pool[off : off+size]
		cl.Produce(context.Background(), &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmp(firstErr, err)
				mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("fill: %v", err)
	}
	if firstErr != nil {
		t.Fatalf("fill: %v", firstErr)
	}
	_, end, err := testbroker.Offsets(ctx, kadm.NewClient(cl), topic)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	t.Logf("filled %s with %.2f GB in %v", topic, float64(n)/1e9, time.Since(began).Round(time.Millisecond))
	return end
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// readableAfter waits until the last record before end of every
// partition of topic can be fetched, through a new client, and returns
// how long after from that was.
func readableAfter(t *testing.T, seeds []string, topic string, end map[int32]int64, from time.Time) time.Duration {
	t.Helper()
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	for p, e := range end {
		offs[topic][p] = kgo.NewOffset().At(e - 1)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offs), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	got := map[int32]bool{}
	for len(got) < len(end) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back after the restart: %d of %d partitions readable", len(got), len(end))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == end[r.Partition]-1 {
				got[r.Partition] = true
			}
		})
	}
	return time.Since(from)
}

// TestClusterRecoveryFullRestart: 1.3 GB (SLUICE_RECOVERY_BYTES) in 12
// partitions, every broker SIGKILLed under the probe's load, then all
// started again at once; the figures are the times from the start until
// the last record of every partition is readable and until every probe
// partition acknowledges produce.
func TestClusterRecoveryFullRestart(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	var rows [][]time.Duration
	for run := range recoveryRuns() {
		t.Run(fmt.Sprint(run+1), func(t *testing.T) {
			rc := startRecoveryCluster(t, testcluster.Options{})
			ensureTopic(t, rc.adm, "data", recoveryPartitions)
			end := fill(t, rc.seeds, "data", recoveryBytes())
			for i := 0; i < rc.c.Len(); i++ {
				rc.c.KillBroker(i)
			}
			began := time.Now()
			rc.c.StartAll()
			ready := time.Since(began)
			seeds := rc.c.Addrs()
			readable := readableAfter(t, seeds, "data", end, began)
			served := rc.pr.waitServed(t, began, "produce after the restart")
			t.Logf("full restart with %.2f GB: brokers ready after %v, every partition readable after %v, produce to every partition after %v",
				float64(recoveryBytes())/1e9, ready, readable, served)
			rows = append(rows, []time.Duration{ready, readable, served})
		})
	}
	figureTable(t, fmt.Sprintf("Full-cluster restart (every broker SIGKILLed, then started at once), %.2f GB in 12 partitions:", float64(recoveryBytes())/1e9),
		[]string{"brokers ready", "every partition readable", "produce to every partition"}, rows, nil)
	t.Logf("load average at end: %s", loadAvg())
}

// stallsFrom is stalls counting only gaps that began at or after from:
// what happened to produce once from had passed.
func (pr *probe) stallsFrom(from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, times := range pr.ackTimes() {
		var worst time.Duration
		for i := 1; i < len(times); i++ {
			if !times[i-1].Before(from) && !times[i-1].After(to) {
				worst = max(worst, times[i].Sub(times[i-1]))
			}
		}
		out = append(out, worst)
	}
	return out
}

// TestClusterRecoveryBrokerPause: the broker leading the most probe
// partitions is paused (SIGSTOP) for 6 s and for 12 s, as by a long GC
// or a VM stall, then resumed. Figures: pause until another broker leads
// each of its partitions (Metadata from a live broker), pause until every
// partition acknowledges a record sent after the pause (the client keeps
// waiting for the requests it sent to the paused broker, so this is at
// least the pause), and after the resume how long until the broker leads
// its share again, over what spread its partitions came back, and the
// longest stall that began after the resume (the hand-back).
func TestClusterRecoveryBrokerPause(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	for _, pause := range []time.Duration{6 * time.Second, 12 * time.Second} {
		var rows [][]time.Duration
		for run := range recoveryRuns() {
			t.Run(fmt.Sprintf("pause=%v/%d", pause, run+1), func(t *testing.T) {
				rc := startRecoveryCluster(t, testcluster.Options{})
				victim, led := rc.busiest(t)
				id := testcluster.NodeID(victim)
				other := testcluster.NodeID((victim + 1) % rc.c.Len())
				paused := time.Now()
				rc.c.Broker(victim).Pause()
				var moved time.Duration
				for time.Since(paused) < pause {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					ls, err := leadersFrom(ctx, rc.cl, other, "probe", recoveryPartitions)
					cancel()
					if moved == 0 && err == nil && !slices.Contains(slices.Collect(maps.Values(ls)), id) {
						moved = time.Since(paused)
					}
					time.Sleep(20 * time.Millisecond)
				}
				resumed := time.Now()
				rc.c.Broker(victim).Resume()
				served := rc.pr.waitServed(t, paused, "produce after the pause")
				// Poll the leaders until the broker leads its share again.
				var first, back time.Duration
				deadline := resumed.Add(time.Minute)
				for back == 0 && time.Now().Before(deadline) {
					n := 0
					for _, l := range rc.leaders(t) {
						if l == id {
							n++
						}
					}
					if n > 0 && first == 0 {
						first = time.Since(resumed)
					}
					if n >= led {
						back = time.Since(resumed)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if back == 0 {
					t.Fatalf("broker %d did not lead %d partitions again within a minute of the resume", id, led)
				}
				time.Sleep(3 * time.Second)
				stall := maxDur(rc.pr.stalls(paused, time.Now()))
				after := maxDur(rc.pr.stallsFrom(resumed.Add(time.Millisecond), time.Now()))
				t.Logf("broker %d (led %d) paused %v: its partitions led elsewhere after %v, every partition served after %v; longest stall %v; after the resume: first partition back %v, all back %v, longest stall %v",
					id, led, pause, moved, served, stall, first, back, after)
				rows = append(rows, []time.Duration{moved, served, stall, back, back - first, after})
				rc.finish(t)()
			})
		}
		figureTable(t, fmt.Sprintf("A broker paused for %v (SIGSTOP), default lease:", pause),
			[]string{"pause to its partitions led elsewhere", "pause to produce on every partition", "longest produce stall", "resume to its share back", "spread of the hand-back", "longest stall after the resume"}, rows, nil)
	}
	t.Logf("load average at end: %s", loadAvg())
}

// TestClusterRecoveryEtcdOutage: etcd (a process of its own) is
// restarted gracefully (SIGTERM, which drains client streams for up to
// about 5 s, then 1 s down), restarted after a crash (SIGKILL, 3 s down),
// and paused (SIGSTOP) for 8 s. The outage is from the moment etcd stops
// answering (the signal) until it answers again; the figure is the
// longest produce stall on any probe partition, against that outage.
func TestClusterRecoveryEtcdOutage(t *testing.T) {
	skipUnlessFigures(t)
	t.Logf("load average at start: %s", loadAvg())
	type fault struct {
		name string
		run  func(rc *recoveryCluster)
	}
	faults := []fault{
		{"graceful restart, 1 s down", func(rc *recoveryCluster) {
			rc.c.Etcd().Stop()
			time.Sleep(time.Second)
			rc.c.Etcd().Start(t)
		}},
		{"crash restart, 3 s down", func(rc *recoveryCluster) {
			rc.c.Etcd().Kill(t)
			time.Sleep(3 * time.Second)
			rc.c.Etcd().Start(t)
		}},
		{"paused 8 s", func(rc *recoveryCluster) {
			rc.c.Etcd().Pause(t)
			time.Sleep(8 * time.Second)
			rc.c.Etcd().Resume(t)
		}},
	}
	for _, f := range faults {
		var rows [][]time.Duration
		for run := range recoveryRuns() {
			t.Run(fmt.Sprintf("%s/%d", strings.ReplaceAll(f.name, " ", "_"), run+1), func(t *testing.T) {
				rc := startRecoveryCluster(t, testcluster.Options{EtcdProcess: true})
				began := time.Now()
				f.run(rc)
				outage := time.Since(began)
				served := rc.pr.waitServed(t, began.Add(outage), "produce after the outage")
				time.Sleep(3 * time.Second)
				stall := maxDur(rc.pr.stalls(began, time.Now()))
				t.Logf("etcd %s: outage %v; every partition served %v after it; longest stall %v (%+v beyond the outage)",
					f.name, outage, served, stall, stall-outage)
				rows = append(rows, []time.Duration{outage, served, stall, stall - outage})
				rc.finish(t)()
			})
		}
		figureTable(t, fmt.Sprintf("etcd %s, default lease:", f.name),
			[]string{"outage", "end of outage to produce on every partition", "longest produce stall", "stall beyond the outage"}, rows, nil)
	}
	t.Logf("load average at end: %s", loadAvg())
}
