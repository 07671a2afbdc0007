package delay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestKcatDelayed produces with kcat (librdkafka): one run with
// sluice-delay-ms on every record, one with sluice-deliver-at, one plain.
func TestKcatDelayed(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := testbroker.Start(t)
	const topic = "kcat-delayed"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	c := consume(t, b.Addr(), topic)
	var want []expect
	start := time.Now()
	at := start.Add(2500 * time.Millisecond)
	for i, hdr := range []string{"sluice-delay-ms=1500", "sluice-deliver-at=" + strconv.FormatInt(at.UnixMilli(), 10), ""} {
		var in bytes.Buffer
		nb := []time.Time{start.Add(1500 * time.Millisecond), time.UnixMilli(at.UnixMilli()), start}[i]
		for j := range 20 {
			v := fmt.Sprintf("kcat-%d-%d", i, j)
			fmt.Fprintln(&in, v)
			want = append(want, expect{v, nb})
		}
		args := []string{"-P", "-b", b.Addr(), "-t", topic, "-p", strconv.Itoa(i % 2), "-X", "acks=all", "-X", "linger.ms=20"}
		if hdr != "" {
			args = append(args, "-H", hdr)
		}
		run(t, in.Bytes(), time.Minute, kcat, args...)
	}
	check(t, c, want, 30*time.Second)
}

// TestConfluentPythonDelayed produces with confluent-kafka-python
// (idempotent): delayed and plain records mixed in the same batches. The
// offsets its delivery reports give are the ones held for the records.
func TestConfluentPythonDelayed(t *testing.T) {
	py := needTool(t, "/usr/bin/python3")
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		missing(t, "python3-confluent-kafka is not installed")
	}
	b := testbroker.Start(t)
	const topic = "python-delayed"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	c := consume(t, b.Addr(), topic)
	type pyRec struct {
		Partition int32       `json:"partition"`
		Value     string      `json:"value"`
		Headers   [][2]string `json:"headers,omitempty"`
	}
	var in []pyRec
	var want []expect
	start := time.Now()
	at := start.Add(2 * time.Second)
	for i := range 40 {
		r := pyRec{Partition: int32(i % 2), Value: fmt.Sprintf("py-%d", i)}
		nb := start
		switch i % 3 {
		case 0:
			r.Headers = [][2]string{{"sluice-delay-ms", "1500"}, {"other", "x"}}
			nb = start.Add(1500 * time.Millisecond)
		case 1:
			r.Headers = [][2]string{{"sluice-deliver-at", strconv.FormatInt(at.UnixMilli(), 10)}}
			nb = time.UnixMilli(at.UnixMilli())
		}
		in = append(in, r)
		want = append(want, expect{r.Value, nb})
	}
	js, _ := json.Marshal(in)
	out := run(t, js, 2*time.Minute, py, filepath.Join("testdata", "confluent_delay.py"), b.Addr(), topic)
	var reports []struct {
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(out, &reports); err != nil {
		t.Fatalf("reports %q: %v", out, err)
	}
	if len(reports) != len(in) {
		t.Fatalf("%d reports for %d records", len(reports), len(in))
	}
	for i, r := range reports {
		if r.Error != "" || r.Offset < 0 {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	check(t, c, want, 30*time.Second)
}

func needTool(t testing.TB, name string) string {
	t.Helper()
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			missing(t, name+" is not installed")
		}
		return name
	}
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name+" is not installed")
	}
	return p
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
		t.Skipf("%s (SLUICE_SKIP_MISSING_TOOLS=1)", what)
	}
	t.Fatalf("%s: run scripts/install-test-deps.sh as root (or set SLUICE_SKIP_MISSING_TOOLS=1 to skip)", what)
}

func run(t testing.TB, stdin []byte, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}
