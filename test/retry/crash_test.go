package retry

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/pkg/consumer"
	"github.com/sluice-mq/sluice/test/retry/load"
)

var helper struct {
	once sync.Once
	bin  string
	err  error
}

// helperBinary builds ./crashconsumer once per test binary.
func helperBinary(t *testing.T) string {
	t.Helper()
	helper.once.Do(func() {
		dir, err := os.MkdirTemp("", "crashconsumer-bin-")
		if err != nil {
			helper.err = err
			return
		}
		bin := filepath.Join(dir, "crashconsumer")
		out, err := exec.Command("go", "build", "-o", bin, "./crashconsumer").CombinedOutput()
		if err != nil {
			helper.err = fmt.Errorf("go build ./crashconsumer: %v\n%s", err, out)
			return
		}
		helper.bin = bin
	})
	if helper.err != nil {
		t.Fatal(helper.err)
	}
	return helper.bin
}

// consumerProc is one run of the helper process.
type consumerProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func startConsumerProc(t *testing.T, bin, addr, topic, group, out string, stderr *os.File, extra ...string) *consumerProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-brokers", addr, "-topic", topic, "-group", group, "-out", out}, extra...)...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the consumer process: %v", err)
	}
	p := &consumerProc{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	})
	return p
}

func (p *consumerProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// endOffsets is the sum of topic's end offsets, 0 while it does not exist.
func endOffsets(t *testing.T, addr, topic string) int64 {
	cl := testbroker.NewClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

func distinct(handled map[string][]int) int {
	n := 0
	for _, ss := range handled {
		seen := map[int]bool{}
		for _, s := range ss {
			if !seen[s] {
				seen[s] = true
				n++
			}
		}
	}
	return n
}

// killMidRetry runs the helper process up to three times, each time
// SIGKILLing it once progress (records handled) grew by 60 and new records
// were written to the retry topic (a kill mid-retry), unless it finished
// first (progress reached want). It returns how many kills there were.
func killMidRetry(t *testing.T, bin, addr, topic, group, out string, stderr *os.File, want int, progress func() int, extra ...string) int {
	t.Helper()
	kills := 0
	for i := 0; i < 3; i++ {
		p := startConsumerProc(t, bin, addr, topic, group, out, stderr, extra...)
		// Kill once more records were handled and records are waiting in
		// the retry topic: a kill mid-retry.
		before := progress()
		retryEnd := func() int64 { return endOffsets(t, addr, topic+consumer.RetrySuffix) }
		r0 := retryEnd()
		testbroker.Eventually(t, time.Minute, "progress before the kill", func() error {
			n := progress()
			if n < before+60 || n >= want {
				if n >= want {
					return nil
				}
				return fmt.Errorf("%d handled (%d before this run)", n, before)
			}
			if retryEnd() <= r0 {
				return fmt.Errorf("no new retry record yet")
			}
			return nil
		})
		if progress() >= want {
			break
		}
		fmt.Fprintf(stderr, "=== test: SIGKILL pid %d\n", p.cmd.Process.Pid)
		p.kill()
		kills++
	}
	return kills
}

// readHandled parses the helper's output file.
func readHandled(t *testing.T, path string) (map[string][]int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	by := map[string][]int{}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue // a line cut by the kill is not possible with one write, but be lenient
		}
		s, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		by[f[0]] = append(by[f[0]], s)
		n++
	}
	return by, n
}

// TestConsumerSIGKILLMidRetry SIGKILLs a consumer process while records
// are waiting in blocking retries and in the retry topic, restarts it, and
// does so again; in the end every record was handled, each key's first
// handlings are in produce order, and the permanent failure is a dead
// letter.
func TestConsumerSIGKILLMidRetry(t *testing.T) {
	bin := helperBinary(t)
	b := testbroker.Start(t)
	topic, group := unique("crash"), unique("g")
	const keys, perKey = 12, 60
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	produceLoad(t, b.Addr(), topic, keys, perKey)
	dir := t.TempDir()
	out := filepath.Join(dir, "handled.txt")
	stderr, err := os.Create(filepath.Join(dir, "consumer.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stderr.Name())
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("consumer process log tail:\n%s", b)
		}
	})

	want := keys*perKey - 1
	handledLines := func() int { _, n := readHandled(t, out); return n }
	kills := killMidRetry(t, bin, b.Addr(), topic, group, out, stderr, want, handledLines)
	t.Logf("%d SIGKILLs", kills)
	p := startConsumerProc(t, bin, b.Addr(), topic, group, out, stderr)
	testbroker.Eventually(t, 2*time.Minute, "every record handled after the kills", func() error {
		handled, _ := readHandled(t, out)
		if n := distinct(handled); n < want {
			return fmt.Errorf("%d of %d records handled", n, want)
		}
		return nil
	})
	handled, _ := readHandled(t, out)
	if err := load.CheckOrder(handled, keys, perKey); err != nil {
		t.Fatal(err)
	}
	testbroker.Eventually(t, time.Minute, "the dead letter", func() error {
		dead := all(testbroker.ReadAll(t, b.Addr(), topic+consumer.DLQSuffix))
		if len(dead) == 0 {
			return fmt.Errorf("no dead letter")
		}
		for _, d := range dead {
			if string(d.Value) != load.Value(2, 10) {
				return fmt.Errorf("unexpected dead letter %q", d.Value)
			}
		}
		return nil
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("consumer process did not stop 30 s after SIGTERM")
	}
	if kills == 0 {
		t.Fatal("the consumer finished before any kill: the test did not test a crash")
	}
	_, n := readHandled(t, out)
	t.Logf("%d handlings for %d records (%d repeated after kills)", n, want, n-want)
}
