package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

var instanceBin struct {
	once sync.Once
	path string
	err  error
}

// buildInstance builds this example once per test binary. The binary is
// not named "revenue": a stray pkill on a shared machine must not hit it.
func buildInstance(t *testing.T) string {
	t.Helper()
	instanceBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "streams-instance-")
		if err != nil {
			instanceBin.err = err
			return
		}
		instanceBin.path = filepath.Join(dir, "streams-instance-under-test")
		out, err := exec.Command("go", "build", "-o", instanceBin.path, ".").CombinedOutput()
		if err != nil {
			instanceBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if instanceBin.err != nil {
		t.Fatal(instanceBin.err)
	}
	return instanceBin.path
}

type instance struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startInstance runs one instance of the example as a child process with
// its own state directory.
func startInstance(t *testing.T, bin, addr, app, name string) *instance {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "instance.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-brokers", addr, "-app", app, "-instance", name,
		"-state-dir", filepath.Join(dir, "state"), "-grace", grace.String(), "-session-timeout", "6s", "-commit-interval", "1s")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(in.done) }()
	t.Cleanup(func() {
		select {
		case <-in.done:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-in.done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-in.done
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("---- instance %s log ----\n%s", name, testbroker.Clip(string(b)))
		}
	})
	return in
}

func (in *instance) kill(t *testing.T) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-in.done
}

// TestKillInstanceExactlyOnce runs three instances of the example, kills
// one with SIGKILL once the group has committed work, adds a fresh one, and
// checks with read_committed that (1) the repartition topic holds every
// PAID order exactly once, (2) the windows written equal the reference
// computed from the repartition topic in the order its partitions hold
// them, and (3) the window store's changelog, read as a restoring
// instance reads it, holds exactly the windows the reference leaves open.
func TestKillInstanceExactlyOnce(t *testing.T) {
	bin := buildInstance(t)
	b := testbroker.Start(t)
	const app = "revenue-kill"
	testbroker.CreateTopic(t, b.Addr(), OrdersTopic, 6, nil)
	testbroker.CreateTopic(t, b.Addr(), SummaryTopic, 3, keepForever)
	orders := generate(3000, 7)
	produceOrders(t, b.Addr(), orders[:300], -1)
	var ins []*instance
	for i := range 3 {
		ins = append(ins, startInstance(t, bin, b.Addr(), app, fmt.Sprintf("i%d", i)))
	}
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	testbroker.Eventually(t, 2*time.Minute, "three members and committed progress", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, app)
		if err != nil {
			return err
		}
		if n := len(gs[app].Members); n != 3 {
			return fmt.Errorf("%d members", n)
		}
		offs, err := adm.FetchOffsets(ctx, app)
		if err != nil {
			return err
		}
		n := 0
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == OrdersTopic && o.At > 0 {
				n++
			}
		})
		if n == 0 {
			return fmt.Errorf("nothing committed on %s yet", OrdersTopic)
		}
		return nil
	})
	// The rest keep arriving in small batches while one instance dies and
	// another joins, so the kill lands while work is in flight.
	halfway := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for i := 300; i < len(orders); i += 20 {
			if i == 1500 {
				close(halfway)
			}
			if err := writeOrders(b.Addr(), orders[i:min(i+20, len(orders))], -1); err != nil {
				if i < 1500 {
					close(halfway)
				}
				produced <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		produced <- nil
	}()
	<-halfway
	ins[0].kill(t)
	startInstance(t, bin, b.Addr(), app, "fresh")
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, b.Addr(), app)

	// (1) exactly once through the repartition topic.
	repart := map[int32][]Order{}
	var ids []string
	for p, rs := range readCommitted(t, b.Addr(), app+"-"+Repartition+"-repartition") {
		for _, r := range rs {
			var o Order
			if err := json.Unmarshal(r.Value, &o); err != nil {
				t.Fatal(err)
			}
			repart[p] = append(repart[p], o)
			ids = append(ids, o.ID)
		}
	}
	var wantIDs []string
	for _, o := range orders {
		if o.Status == "PAID" {
			wantIDs = append(wantIDs, o.ID)
		}
	}
	sort.Strings(ids)
	sort.Strings(wantIDs)
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Fatalf("repartition topic holds %d orders, want the %d PAID orders once each", len(ids), len(wantIDs))
	}

	// (2) the output equals the reference.
	ref := simulate(repart, grace)
	if want, got := sortedWindows(ref.emitted), summaries(t, b.Addr()); !reflect.DeepEqual(got, want) {
		t.Fatalf("windows differ from the reference:\n got %d: %v\nwant %d: %v", len(got), got, len(want), want)
	}

	// (3) the changelog restores the open windows exactly.
	state := map[string][]byte{}
	for _, rs := range readCommitted(t, b.Addr(), app+"-"+Store+"-changelog") {
		for _, r := range rs {
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = r.Value
			}
		}
	}
	restored := map[window]int64{}
	for k, v := range state {
		if k[0] == 0xff {
			continue // stream time
		}
		start := int64(binary.BigEndian.Uint64([]byte(k[:8])) ^ 1<<63)
		restored[window{k[8:], start}] = int64(binary.BigEndian.Uint64(v))
	}
	if got, want := sortedWindows(restored), sortedWindows(ref.open); !reflect.DeepEqual(got, want) {
		t.Fatalf("changelog state differs from the reference's open windows:\n got %v\nwant %v", got, want)
	}
	aborted := 0
	for _, rs := range testbroker.ReadAll(t, b.Addr(), app+"-"+Repartition+"-repartition", kgo.KeepControlRecords()) {
		for _, r := range rs {
			if !r.Attrs.IsControl() {
				aborted++
			}
		}
	}
	aborted -= len(ids)
	t.Logf("%d orders, %d windows written, %d open, %d late dropped; %d repartition records hidden from read_committed", len(orders), len(ref.emitted), len(ref.open), ref.late, aborted)
}
