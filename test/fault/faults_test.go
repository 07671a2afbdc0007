package fault

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestFaultsSingleNode runs the workloads against one broker process
// (data dir on a tmpfs) and applies, in turn: SIGKILL and restart, SIGSTOP
// for a few seconds, a full disk, and hostile input; see doc.go.
func TestFaultsSingleNode(t *testing.T) {
	s := loadSettings(t)
	tg := startSingle(t, s)
	r := startRun(t, s, tg)
	r.rotate(singleNodeFaults)
	r.finish()
}

// TestFaultsCluster runs the workloads against three brokers over etcd and
// the S3 server and applies, in turn: SIGKILL of a broker, SIGSTOP of a
// broker past its lease, the object store stopped and paused, etcd down
// past every lease, and hostile input; see doc.go.
func TestFaultsCluster(t *testing.T) {
	s := loadSettings(t)
	tg := startCluster(t)
	r := startRun(t, s, tg)
	r.rotate(clusterFaults)
	r.finish()
}

// jitter is d in a short run, and between d/2 and 2d in a soak.
func (r *run) jitter(d time.Duration) time.Duration {
	if r.s.soak == 0 {
		return d
	}
	return d/2 + time.Duration(r.rng.Int64N(int64(3*d/2)))
}

var singleNodeFaults = []fault{
	{name: "SIGKILL the broker mid-load, then restart it", apply: func(r *run, _ int) *verdict {
		time.Sleep(r.jitter(500 * time.Millisecond))
		r.tg.kill(0)
		began := time.Now()
		r.tg.restart(0)
		return note("restarted (recovery included) in %v", time.Since(began).Round(10*time.Millisecond))
	}},
	{name: "SIGKILL the broker twice, the second time just after it restarted", apply: func(r *run, _ int) *verdict {
		time.Sleep(r.jitter(300 * time.Millisecond))
		r.tg.kill(0)
		r.tg.restart(0)
		time.Sleep(r.jitter(100 * time.Millisecond)) // clients reconnecting, producers retrying
		r.tg.kill(0)
		r.tg.restart(0)
		return note("killed, restarted, killed again, restarted")
	}},
	{name: "SIGSTOP the broker, SIGCONT a few seconds later", apply: func(r *run, _ int) *verdict {
		d := r.jitter(4 * time.Second)
		r.tg.procs[0].Pause()
		time.Sleep(d)
		r.tg.procs[0].Resume()
		return note("stopped for %v", d.Round(100*time.Millisecond))
	}},
	{name: "fill the disk, then free it", apply: fullDisk},
	{name: "SIGKILL the broker on a full disk, restart it there, then free the disk", apply: killOnFullDisk},
	{name: "hostile frames and batches", apply: func(r *run, _ int) *verdict {
		return r.hostile.run(r, 0)
	}},
	{name: "graceful restart", soakOnly: true, apply: func(r *run, _ int) *verdict {
		r.tg.restart(0)
		return note("restarted")
	}},
}

// fullDisk fills the tmpfs under the data dir until a write fails with
// ENOSPC, checks that produce is refused cleanly (KAFKA_STORAGE_ERROR,
// retriable) while the broker keeps running, holds it full for a while,
// then frees the space. The runner then checks that the workloads resume
// by themselves and nothing acknowledged was lost.
func fullDisk(r *run, _ int) *verdict {
	t, tg := r.t, r.tg
	if tg.disk == "" {
		return note("SKIPPED: no tmpfs could be mounted (see the NOTE at the start)")
	}
	v := &verdict{check: "a full disk refuses produce with KAFKA_STORAGE_ERROR and the broker keeps running"}
	before := freeBytes(tg.disk)
	ballast := fillDisk(t, tg.disk)
	filled := time.Now()
	code, msg := refusedForSpace(t, tg, &v.bad)
	refused := time.Since(filled)
	// Hold it full: the workloads keep retrying; commits and transaction
	// markers meet the full disk too.
	hold := r.jitter(4 * time.Second)
	acked := r.idem.progress()
	time.Sleep(hold)
	tg.checkAlive("with the disk full")
	during := r.idem.progress() - acked
	if err := os.Remove(ballast); err != nil {
		t.Fatalf("removing the ballast: %v", err)
	}
	v.ok = fmt.Sprintf("disk filled (%d MiB free before); produce refused %v later with %v: %q; held full for %v (%d idempotent records acknowledged meanwhile); ballast removed",
		before>>20, refused.Round(10*time.Millisecond), kerr.ErrorForCode(code), msg, hold.Round(100*time.Millisecond), during)
	return v
}

// refusedForSpace waits until a produce is refused on the full disk and
// checks how: KAFKA_STORAGE_ERROR, the retriable error Kafka gives when
// it cannot write.
func refusedForSpace(t *testing.T, tg *target, bad *problems) (int16, string) {
	t.Helper()
	var code int16
	var msg string
	testbroker.Eventually(t, time.Minute, "produce refused on the full disk", func() error {
		var err error
		code, msg, err = probeProduce(tg)
		switch {
		case err != nil:
			return err
		case code == 0 || code == kerr.RequestTimedOut.Code: // taken, or waiting, as the disk filled
			return fmt.Errorf("produce answered %v with %d bytes free", kerr.ErrorForCode(code), freeBytes(tg.disk))
		}
		return nil
	})
	if code != kerr.KafkaStorageError.Code {
		bad.add("produce on a full disk answered %v (%s), want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code), msg)
	}
	return code, msg
}

// probeProduce sends one acks=all single-record produce to the plain
// topic's partition 0 on a raw connection to the single broker and returns
// the partition's error: what any client sees before its own retries.
func probeProduce(tg *target) (int16, string, error) {
	b, err := batch.Build(0, time.Now().UnixMilli(), []kmsg.Record{{Value: []byte("probe")}})
	if err != nil {
		return 0, "", err
	}
	rc, err := dialRaw(tg.seeds[0])
	if err != nil {
		return 0, "", err
	}
	defer rc.Close()
	resp, err := rc.roundTrip(produceRequest(plainTopic, b))
	if err != nil {
		return 0, "", err
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	return p.ErrorCode, msg, nil
}

var clusterFaults = []fault{
	{name: "SIGKILL a broker mid-load, then restart it", apply: func(r *run, round int) *verdict {
		i := round % r.tg.cluster.Len()
		time.Sleep(r.jitter(500 * time.Millisecond))
		r.tg.kill(i)
		time.Sleep(r.jitter(time.Second))
		r.tg.restart(i)
		return note("broker %d killed and restarted", i)
	}},
	{name: "SIGKILL two of the three brokers at once, then restart them", apply: func(r *run, round int) *verdict {
		i, j := (round+1)%r.tg.cluster.Len(), (round+2)%r.tg.cluster.Len()
		time.Sleep(r.jitter(500 * time.Millisecond))
		r.tg.kill(i)
		r.tg.kill(j)
		d := r.jitter(2 * testcluster.DefaultLeaseTTL)
		time.Sleep(d) // the survivor takes every partition
		r.tg.restart(i)
		r.tg.restart(j)
		return note("brokers %d and %d killed; restarted %v later", i, j, d.Round(100*time.Millisecond))
	}},
	{name: "SIGSTOP a broker past its lease, then SIGCONT", apply: func(r *run, round int) *verdict {
		i := (round + 1) % r.tg.cluster.Len()
		d := r.jitter(3 * testcluster.DefaultLeaseTTL)
		r.tg.procs[i].Pause()
		time.Sleep(d)
		r.tg.procs[i].Resume()
		return note("broker %d stopped for %v (lease TTL %v)", i, d.Round(100*time.Millisecond), testcluster.DefaultLeaseTTL)
	}},
	{name: "object store down (SIGKILL), then restarted", apply: func(r *run, _ int) *verdict {
		d := r.jitter(6 * time.Second)
		r.tg.cluster.S3().Stop()
		time.Sleep(d)
		r.tg.cluster.S3().Restart()
		return note("down for %v", d.Round(100*time.Millisecond))
	}},
	{name: "object store hung (SIGSTOP), then resumed", apply: func(r *run, _ int) *verdict {
		d := r.jitter(4 * time.Second)
		r.tg.cluster.S3().Pause()
		time.Sleep(d)
		r.tg.cluster.S3().Resume()
		return note("hung for %v", d.Round(100*time.Millisecond))
	}},
	{name: "etcd down past every lease, then started again", apply: func(r *run, _ int) *verdict {
		d := r.jitter(2 * testcluster.DefaultLeaseTTL)
		r.tg.cluster.Etcd().Stop()
		time.Sleep(d)
		r.tg.cluster.Etcd().Start(r.t)
		return note("down for %v (lease TTL %v)", d.Round(100*time.Millisecond), testcluster.DefaultLeaseTTL)
	}},
	{name: "hostile frames and batches", apply: func(r *run, round int) *verdict {
		i := round % r.tg.cluster.Len()
		return r.hostile.run(r, i)
	}},
	{name: "etcd restarted", soakOnly: true, apply: func(r *run, _ int) *verdict {
		r.tg.cluster.Etcd().Restart(r.t)
		return note("restarted")
	}},
	{name: "graceful restart of a broker", soakOnly: true, apply: func(r *run, round int) *verdict {
		i := (round + 2) % r.tg.cluster.Len()
		r.tg.restart(i)
		return note("broker %d", i)
	}},
}

// killOnFullDisk SIGKILLs the broker while its disk is full and restarts
// it on the full disk: it must come up (recovery needing no free space),
// refuse produce cleanly, and, once space is freed, resume with nothing
// acknowledged lost or changed (the runner checks that).
func killOnFullDisk(r *run, _ int) *verdict {
	t, tg := r.t, r.tg
	if tg.disk == "" {
		return note("SKIPPED: no tmpfs could be mounted (see the NOTE at the start)")
	}
	v := &verdict{check: "a broker SIGKILLed on a full disk restarts there and refuses produce with KAFKA_STORAGE_ERROR"}
	ballast := fillDisk(t, tg.disk)
	time.Sleep(r.jitter(time.Second))
	tg.kill(0)
	began := time.Now()
	tg.restart(0)
	up := time.Since(began)
	free := freeBytes(tg.disk)
	code, msg := refusedForSpace(t, tg, &v.bad)
	if err := os.Remove(ballast); err != nil {
		t.Fatalf("removing the ballast: %v", err)
	}
	v.ok = fmt.Sprintf("restarted on the full disk (%d KiB free) in %v; produce refused with %v %q; ballast removed",
		free>>10, up.Round(10*time.Millisecond), kerr.ErrorForCode(code), msg)
	return v
}
