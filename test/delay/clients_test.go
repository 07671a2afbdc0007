package delay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestKcatDelayed produces with kcat (librdkafka): one run with
// sluice-delay-ms on every record, one with sluice-deliver-at, one plain.
func TestKcatDelayed(t *testing.T) {
	kcat := testbroker.NeedTool(t, "kcat")
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
		testbroker.RunTool(t, in.Bytes(), time.Minute, kcat, args...)
	}
	check(t, c, want, 30*time.Second)
}

// TestConfluentPythonDelayed produces with confluent-kafka-python
// (idempotent): delayed and plain records mixed in the same batches. The
// offsets its delivery reports give are the ones held for the records.
func TestConfluentPythonDelayed(t *testing.T) {
	testbroker.NeedPythonModule(t, "confluent_kafka", "python3-confluent-kafka")
	py := testbroker.Python
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
	out := testbroker.RunTool(t, js, 2*time.Minute, py, filepath.Join("testdata", "confluent_delay.py"), b.Addr(), topic)
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
