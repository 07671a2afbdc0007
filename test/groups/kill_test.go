package groups

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestMemberProcessesSIGKILLed: group members are separate processes
// (librdkafka through confluent-kafka-python) that print each record and
// then commit it. While a producer runs, members are SIGKILLed and new ones
// join. Every acknowledged record is printed by some member at least once,
// committed offsets never go backwards, and the group ends with the end of
// every partition committed.
func TestMemberProcessesSIGKILLed(t *testing.T) {
	const python = "/usr/bin/python3"
	testbroker.NeedTool(t, python)
	if err := exec.Command(python, "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
			t.Skip("python module confluent_kafka missing")
		}
		t.Fatal("python module confluent_kafka missing: run scripts/install-test-deps.sh")
	}
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 6, nil)
	stopWatch := watchCommits(t, b.Addr(), grp, topic)

	dir := t.TempDir()
	type member struct {
		cmd *exec.Cmd
		out string
	}
	var members []*member
	start := func() *member {
		m := &member{out: filepath.Join(dir, fmt.Sprintf("member-%d.out", len(members)))}
		f, err := os.Create(m.out)
		if err != nil {
			t.Fatal(err)
		}
		m.cmd = exec.Command(python, "testdata/streaming_member.py", b.Addr(), topic, grp)
		m.cmd.Stdout = f
		m.cmd.Stderr = f
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		members = append(members, m)
		t.Cleanup(func() { m.cmd.Process.Kill(); m.cmd.Wait() })
		return m
	}
	kill := func(m *member) {
		m.cmd.Process.Signal(syscall.SIGKILL)
		m.cmd.Wait()
	}

	// The producer: acknowledged values are the ones that must be seen.
	cl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	var (
		mu    sync.Mutex
		acked []string
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("r-%d", i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(v)}).FirstErr(); err == nil {
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	printed := func() map[string]bool {
		seen := map[string]bool{}
		for _, m := range members {
			b, _ := os.ReadFile(m.out)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "r-") {
					seen[l] = true
				}
			}
		}
		return seen
	}
	waitPrinted := func(n int, what string) {
		testbroker.Eventually(t, 2*time.Minute, what, func() error {
			if got := len(printed()); got < n {
				return fmt.Errorf("%d records printed, want %d", got, n)
			}
			return nil
		})
	}

	a, bm, _ := start(), start(), start()
	waitPrinted(100, "three members consuming")
	kill(a)
	start()
	waitPrinted(300, "consumption continuing after a SIGKILL and a join")
	kill(bm)
	waitPrinted(500, "consumption continuing after a second SIGKILL")
	cancel()
	wg.Wait()

	waitCommitted(t, b.Addr(), grp, topic, 2*time.Minute)
	seen := printed()
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for _, v := range acked {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged records never printed by any member, e.g. %v", len(missing), len(acked), missing[:min(5, len(missing))])
	}
	if err := stopWatch(); err != nil {
		t.Error(err)
	}
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	testbroker.Eventually(t, time.Minute, "the killed members' sessions expiring", func() error {
		if d := describe(t, adm, grp); len(d.Members) != 2 || d.State != "Stable" {
			return fmt.Errorf("group %s with %d members, want Stable with the 2 live ones", d.State, len(d.Members))
		}
		return nil
	})
	t.Logf("%d records acknowledged, %d distinct printed by %d member processes (2 SIGKILLed)", len(acked), len(seen), len(members))
}
