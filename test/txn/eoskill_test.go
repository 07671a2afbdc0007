package txn

import (
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestEOSMemberProcess is not a test: it is a GroupTransactSession member
// run in a child process by TestGroupTransactSessionKill, which SIGKILLs it.
func TestEOSMemberProcess(t *testing.T) {
	addr := os.Getenv("SLUICE_EOS_ADDR")
	if addr == "" {
		t.Skip("helper process for TestGroupTransactSessionKill")
	}
	var processed atomic.Int64
	tr := startTransformer(t, addr, "eoskill", os.Getenv("SLUICE_EOS_TXNID"), "kill-in", "kill-out", &processed)
	<-tr.done // runs until killed
}

func startMemberProcess(t *testing.T, addr, txnID string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEOSMemberProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_EOS_ADDR="+addr, "SLUICE_EOS_TXNID="+txnID)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestGroupTransactSessionKill: consume-transform-produce members in child
// processes, one SIGKILLed mid-stream (its open transaction is aborted by
// the timeout sweep, its partitions move to the others), then a new member
// joins; the output holds every input record exactly once.
func TestGroupTransactSessionKill(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Transactions.AbortCheckInterval = 200 * time.Millisecond
	}))
	const in, out, parts, total = "kill-in", "kill-out", 4, 3000
	testbroker.CreateTopic(t, b.Addr(), in, parts, nil)
	testbroker.CreateTopic(t, b.Addr(), out, parts, nil)
	m1 := startMemberProcess(t, b.Addr(), "kill-1")
	startMemberProcess(t, b.Addr(), "kill-2")

	pcl := b.Client(t, kgo.ProducerLinger(0))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			pcl.Produce(t.Context(), &kgo.Record{Topic: in, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}, nil)
		}
		if err := pcl.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, total/3)
	testbroker.Eventually(t, 2*time.Minute, "output started", func() error {
		if n := len(flatten(readUntilSentinel(t, b.Addr(), out, parts, true))); n < total/6 {
			return fmt.Errorf("%d outputs", n)
		}
		return nil
	})
	produce(total/3, 2*total/3)
	m1.Process.Signal(syscall.SIGKILL)
	m1.Wait()
	startMemberProcess(t, b.Addr(), "kill-3")
	produce(2*total/3, total)

	testbroker.Eventually(t, 3*time.Minute, "everything processed", func() error {
		if n := len(flatten(readUntilSentinel(t, b.Addr(), out, parts, true))); n < total {
			return fmt.Errorf("%d of %d outputs; %s", n, total, txnDebug(t, b.Addr(), in, out))
		}
		return nil
	})
	// Give in-flight transactions time to end, then check exactly once.
	time.Sleep(2 * time.Second)
	got := flatten(readUntilSentinel(t, b.Addr(), out, parts, true))
	for i := range total {
		if v := fmt.Sprintf("out:v%d", i); got[v] != 1 {
			t.Errorf("%s in the output %d times, want exactly once", v, got[v])
		}
	}
	if len(got) != total {
		t.Errorf("output has %d distinct records, want %d", len(got), total)
	}
}
