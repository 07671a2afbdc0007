package crash

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// smallDisk mounts a tmpfs of size bytes for the test: a real file system
// that really fills up. It needs the privilege to mount (root in CI's
// container); without it the test is skipped, saying why.
func smallDisk(t *testing.T, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (%v): this test needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// ballast takes n bytes of the disk, like another tenant's files.
func ballast(t *testing.T, dir string, n int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawProduce sends one single-record acks=all produce request to partition
// 0 and returns the partition's error code and message: what any client
// sees, before its own retries.
func rawProduce(t *testing.T, cl *kgo.Client, topic string) (int16, string) {
	t.Helper()
	b, err := batch.Build(0, 1, []kmsg.Record{{Value: []byte("probe")}})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	sp := resp.Topics[0].Partitions[0]
	msg := ""
	if sp.ErrorMessage != nil {
		msg = *sp.ErrorMessage
	}
	return sp.ErrorCode, msg
}

// load produces incompressible ~1 KiB records to topic from one idempotent
// acks=all producer and collects what was acknowledged.
type load struct {
	mu     sync.Mutex
	acked  []ack
	failed []error
	wg     sync.WaitGroup
	cl     *kgo.Client
}

func startLoad(t *testing.T, addr, topic string, partitions int32, records int) *load {
	t.Helper()
	l := &load{cl: testbroker.NewClient(t, addr,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(5*time.Minute),
		kgo.MaxBufferedRecords(2000))}
	l.wg.Add(records)
	go func() { // Produce blocks while MaxBufferedRecords are unacknowledged
		for i := 0; i < records; i++ {
			l.produce(topic, int32(i)%partitions, i)
		}
	}()
	return l
}

func (l *load) produce(topic string, partition int32, i int) {
	v := make([]byte, 500)
	rand.Read(v)
	val := fmt.Sprintf("rec%07d-%x", i, v) // ~1 KiB, incompressible
	{
		l.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Value: []byte(val)},
			func(r *kgo.Record, err error) {
				defer l.wg.Done()
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.failed = append(l.failed, err)
					return
				}
				l.acked = append(l.acked, ack{r.Partition, r.Offset, string(r.Value)})
			})
	}
}

// wait waits for every record's outcome (the delivery timeout bounds it).
func (l *load) wait() ([]ack, []error) {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked, l.failed
}

// TestDiskFull fills a real file system under a running broker, twice:
//
//   - with the free-space guard off, until a WAL write fails with ENOSPC;
//   - with the guard on (min_free_bytes), until produce is refused first.
//
// Either way the broker must neither crash nor fail what it already took:
// new produce requests get KAFKA_STORAGE_ERROR (retriable), saying the disk
// is full; once space is freed (a ballast file deleted) appends resume on
// their own, every record the producer sent is acknowledged, and after a
// SIGKILL and restart every acknowledged record is there, offsets dense.
func TestDiskFull(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	for _, tc := range []struct {
		name         string
		minFreeBytes int64
	}{
		{"enospc", -1},
		{"min_free_bytes", 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 40 << 20
			disk := smallDisk(t, size)
			weight := ballast(t, disk, 16<<20)
			p := testbroker.StartProcess(t, bin, "--data-dir", filepath.Join(disk, "data"),
				"--min-free-bytes", fmt.Sprint(tc.minFreeBytes), "--auto-create-topics", "false", "--log-level", "info")
			const topic, partitions = "fill", 3
			testbroker.CreateTopic(t, p.Addr(), topic, partitions, nil)

			// 30 MiB of records into the ~24 MiB left: the disk fills.
			l := startLoad(t, p.Addr(), topic, partitions, 30_000)
			probe := testbroker.NewClient(t, p.Addr())
			var code int16
			var msg string
			testbroker.Eventually(t, 2*time.Minute, "produce refused for want of space", func() error {
				code, msg = rawProduce(t, probe, topic)
				switch code {
				case 0, kerr.RequestTimedOut.Code: // taken just before the disk filled
					return fmt.Errorf("produce answered %v with %d bytes free", kerr.ErrorForCode(code), freeBytes(t, disk))
				}
				return nil
			})
			if code != kerr.KafkaStorageError.Code || !strings.Contains(msg, "disk full") {
				t.Fatalf("produce on a full disk: error %v %q, want KAFKA_STORAGE_ERROR saying the disk is full", kerr.ErrorForCode(code), msg)
			}
			t.Logf("refused with %d bytes free: %s", freeBytes(t, disk), msg)
			if exited, err := p.Exited(); exited {
				t.Fatalf("broker exited on a full disk: %v", err)
			}
			// Reads go on meanwhile.
			if got := testbroker.ReadAll(t, p.Addr(), topic); len(got[0]) == 0 {
				t.Fatal("nothing readable from partition 0 while the disk is full")
			}

			if err := os.Remove(weight); err != nil {
				t.Fatal(err)
			}
			acked, failed := l.wait()
			if len(failed) > 0 {
				t.Fatalf("%d records failed after space was freed; first: %v", len(failed), failed[0])
			}
			if len(acked) != 30_000 {
				t.Fatalf("%d records acknowledged, want 30000", len(acked))
			}
			if code, msg := rawProduce(t, probe, topic); code != 0 {
				t.Fatalf("produce after space was freed: %v %s", kerr.ErrorForCode(code), msg)
			}
			probe.Close()
			l.cl.Close()

			p.Kill()
			p.Restart()
			verify(t, p.Addr(), topic, partitions, acked)
		})
	}
}
