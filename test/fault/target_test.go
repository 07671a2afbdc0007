package fault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// memoryBudgetMB is every broker's --memory-budget-mb, the one number a
// broker sizes its heap limit, request and decompression budgets, WAL
// segments and caches to (docs/memory.md). Its promise is that resident
// memory stays within the budget plus 10 % under any load: the bound the
// memory checker holds each broker to for the whole run. 256 MiB is the
// least budget a broker takes, so the run is as tight as it can be.
const memoryBudgetMB = 256

// memoryBound is the budget plus 10 %.
const memoryBound = memoryBudgetMB << 20 * 11 / 10

// Single-node disk: the data dir lives on a tmpfs of this size, so the
// full-disk fault fills a real file system; the free-space guard refuses
// produce below minFreeBytes.
const (
	diskBytes     = 384 << 20
	soakDiskBytes = 1 << 30
	minFreeBytes  = 16 << 20
)

// target is the system under test: one broker, or three over etcd and an
// S3 server, at Kafka addresses that stay the same across restarts, so
// clients started at the beginning find every broker again.
type target struct {
	t       *testing.T
	name    string
	seeds   []string
	procs   []*testbroker.Proc
	cluster *testcluster.Cluster // nil: single node
	disk    string               // single node: tmpfs under the data dir ("" when mounting is not permitted)

	mu   sync.Mutex
	pids map[int]int // broker index -> pid of its running process, for the memory sampler
}

// startSingle starts one broker process on a fixed port with its data dir
// on a small tmpfs (when this process may mount one).
func startSingle(t *testing.T, s settings) *target {
	t.Helper()
	size := int64(diskBytes)
	if s.soak > 0 {
		size = soakDiskBytes
	}
	tg := &target{t: t, name: "single node", disk: smallDisk(t, size), pids: map[int]int{}}
	addr := testbroker.FreeAddr(t)
	args := []string{
		"--listen", addr, // fixed, so clients find the broker after a restart
		"--auto-create-topics", "false",
		"--memory-budget-mb", fmt.Sprint(memoryBudgetMB),
		"--min-free-bytes", fmt.Sprint(minFreeBytes),
		"--log-level", "info",
	}
	if tg.disk != "" {
		args = append(args, "--data-dir", filepath.Join(tg.disk, "data"))
	}
	p := testbroker.StartProcess(t, testbroker.BuildBinary(t), args...)
	tg.procs = []*testbroker.Proc{p}
	tg.seeds = []string{p.Addr()}
	tg.refreshPids()
	return tg
}

// startCluster starts etcd, the S3 server and three brokers.
func startCluster(t *testing.T) *target {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{ExtraArgs: []string{
		"--auto-create-topics", "false",
		"--memory-budget-mb", fmt.Sprint(memoryBudgetMB),
		"--log-level", "info",
	}})
	tg := &target{t: t, name: "cluster", cluster: c, seeds: c.Addrs(), pids: map[int]int{}}
	for i := range c.Len() {
		tg.procs = append(tg.procs, c.Broker(i))
	}
	tg.refreshPids()
	return tg
}

// refreshPids records the running brokers' pids for the memory sampler.
// Only the test goroutine touches the Procs; the sampler reads the map.
func (tg *target) refreshPids() {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for i, p := range tg.procs {
		if exited, _ := p.Exited(); exited {
			delete(tg.pids, i)
		} else {
			tg.pids[i] = p.Pid()
		}
	}
}

func (tg *target) pidSnapshot() map[int]int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	out := make(map[int]int, len(tg.pids))
	for i, pid := range tg.pids {
		out[i] = pid
	}
	return out
}

// kill SIGKILLs broker i.
func (tg *target) kill(i int) {
	tg.procs[i].Kill()
	tg.refreshPids()
}

// restart starts broker i again on its data dir, at its address.
func (tg *target) restart(i int) {
	tg.procs[i].Restart()
	if got := tg.procs[i].Addr(); got != tg.seeds[i] && tg.cluster == nil {
		tg.t.Fatalf("broker restarted at %s, not at its fixed address %s", got, tg.seeds[i])
	}
	tg.refreshPids()
}

// checkAlive fails the test if a broker process exited without being told
// to: a crash. It is called between faults, when all should be running.
func (tg *target) checkAlive(when string) {
	tg.t.Helper()
	for i, p := range tg.procs {
		if exited, err := p.Exited(); exited {
			tg.t.Fatalf("CHECK FAILED: broker %d is not running (%s): it exited with %v; see its log below", i, when, err)
		}
	}
}

// crashMarks are what a Go program prints when it dies of itself.
var crashMarks = []string{"panic:", "fatal error:", "goroutine stack exceeds", "SIGSEGV"}

// checkLogs looks through every broker's output for a panic or a runtime
// fatal error, including ones a restart hid from checkAlive.
func (tg *target) checkLogs() *verdict {
	v := &verdict{check: "no broker panicked or died of a runtime error"}
	p := &v.bad
	for i, pr := range tg.procs {
		b, err := os.ReadFile(pr.LogPath())
		if err != nil {
			p.add("broker %d: reading its log: %v", i, err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, m := range crashMarks {
				if strings.Contains(line, m) {
					p.add("broker %d log (%s): %.300s", i, pr.LogPath(), line)
				}
			}
		}
	}
	v.ok = fmt.Sprintf("%d broker logs read", len(tg.procs))
	return v
}

// clientOpts are the options every workload's client starts from: all
// brokers as seeds, quick retries and metadata refreshes so that clients
// find moved leaders soon after a fault.
func (tg *target) clientOpts(id string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(tg.seeds...),
		kgo.ClientID("fault-" + id),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RequestTimeoutOverhead(5 * time.Second),
	}, extra...)
}

func (tg *target) client(id string, extra ...kgo.Opt) *kgo.Client {
	tg.t.Helper()
	cl, err := kgo.NewClient(tg.clientOpts(id, extra...)...)
	if err != nil {
		tg.t.Fatalf("new client %s: %v", id, err)
	}
	return cl
}

// createTopic creates topic, retrying while the cluster cannot yet take it,
// and waits until every partition has a leader.
func (tg *target) createTopic(topic string, partitions int32, configs map[string]string) {
	tg.t.Helper()
	cl := tg.client("admin")
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = map[string]*string{}
		for k, v := range configs {
			cfg[k] = kadm.StringPtr(v)
		}
	}
	testbroker.Eventually(tg.t, 2*time.Minute, "create topic "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := adm.CreateTopic(ctx, partitions, -1, cfg, topic)
		if err == nil && r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
		}
		return err
	})
	testbroker.Eventually(tg.t, 2*time.Minute, "every partition of "+topic+" led", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td := md.Topics[topic]
		if int32(len(td.Partitions)) != partitions {
			return fmt.Errorf("%d partitions", len(td.Partitions))
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d err %v", p.Partition, p.Leader, p.Err)
			}
		}
		return nil
	})
}

// smallDisk mounts a tmpfs of size bytes for the test: a real file system
// that really fills up. Without the privilege to mount it returns "" and
// says why; the full-disk fault is then skipped.
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Logf("NOTE: cannot mount a tmpfs to fill (%v): the full-disk fault is skipped; it needs CAP_SYS_ADMIN (root in CI's container)", err)
		return ""
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// fillDisk writes a ballast file until the file system under dir has no
// space left, like another tenant's files would. It returns the file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("creating ballast: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n := len(chunk); n >= 4096; {
		_, err := f.Write(chunk[:n])
		switch {
		case err == nil:
		case errors.Is(err, syscall.ENOSPC):
			n /= 2 // top up the last partial megabyte
		default:
			t.Fatalf("writing ballast: %v", err)
		}
	}
	return path
}
