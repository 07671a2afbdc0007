package compat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// kcatHeaders are set on every record kcat produces (kcat's -H applies to
// all of them).
var kcatHeaders = []hdr{{"h1", "kcat"}, {"trace", "abc"}}

// kcatRecords is the sample set in the shapes kcat can express: with -Z an
// empty key or value is sent as null, so there are no empty values.
func kcatRecords(n int) []rec {
	recs := sampleRecords(n, sampleOpts{nullKeys: true, nullValues: true})
	for i := range recs {
		recs[i].Headers = kcatHeaders
	}
	return recs
}

// TestKcatRoundTrip produces with kcat (librdkafka) using each codec, reads
// back with franz-go and with kcat's JSON output.
func TestKcatRoundTrip(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
			want := kcatRecords(50)
			var in bytes.Buffer
			for _, r := range want {
				fmt.Fprintf(&in, "%s::%s\n", r.Key, r.Value)
			}
			args := []string{"-P", "-b", b.Addr(), "-t", topic, "-p", "0", "-K", "::", "-Z",
				"-z", codec, "-X", "linger.ms=50", "-X", "acks=all", "-X", "message.timeout.ms=60000"}
			for _, h := range kcatHeaders {
				args = append(args, "-H", h.Key+"="+h.Value)
			}
			run(t, in.Bytes(), 2*time.Minute, kcat, args...)
			t.Run("stored-as-"+codec, func(t *testing.T) {
				checkStoredCodec(t, b.Addr(), topic, codec)
			})
			checkSame(t, "franz-go reading kcat's", want, readKgo(t, b.Addr(), topic, 0, len(want)))
			checkSame(t, "kcat reading kcat's", want, kcatConsume(t, kcat, b.Addr(), topic, "beginning", len(want)))
		})
	}
}

type kcatJSON struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Ts        int64    `json:"ts"`
	Headers   []string `json:"headers"`
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
}

// kcatConsume reads n records of partition 0 from from with kcat's JSON
// output; extra are more kcat arguments (-X settings).
func kcatConsume(t testing.TB, kcat, addr, topic, from string, n int, extra ...string) []rec {
	t.Helper()
	out := run(t, nil, 2*time.Minute, kcat, append([]string{"-C", "-b", addr, "-t", topic, "-p", "0", "-o", from,
		"-c", fmt.Sprint(n), "-e", "-J", "-q"}, extra...)...)
	var recs []rec
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var j kcatJSON
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("kcat output line %q: %v", sc.Text(), err)
		}
		r := rec{Partition: j.Partition, Offset: j.Offset, Timestamp: time.UnixMilli(j.Ts)}
		if j.Key != nil {
			r.Key = []byte(*j.Key)
		}
		if j.Payload != nil {
			r.Value = []byte(*j.Payload)
		}
		for i := 0; i+1 < len(j.Headers); i += 2 {
			r.Headers = append(r.Headers, hdr{j.Headers[i], j.Headers[i+1]})
		}
		recs = append(recs, r)
	}
	return recs
}

// TestKcatOffsetsByTime starts kcat consumers at a timestamp (-o s@ts) and
// queries offsets by time (-Q).
func TestKcatOffsetsByTime(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []rec
	for i := 0; i < 20; i++ {
		recs = append(recs, rec{Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	for i := 0; i < len(recs); i += 4 {
		produceKgo(t, b.Addr(), topic, recs[i:i+4])
	}
	for _, c := range []struct {
		at     time.Time
		offset int64
	}{
		{base.Add(-time.Minute), 0},
		{base.Add(9 * time.Second), 9},
		{base.Add(9*time.Second + time.Millisecond), 10},
	} {
		got := kcatConsume(t, kcat, b.Addr(), topic, fmt.Sprintf("s@%d", c.at.UnixMilli()), 1)
		if len(got) != 1 || got[0].Offset != c.offset || string(got[0].Value) != fmt.Sprint(c.offset) {
			t.Errorf("kcat -o s@%d: got %v, want the record at offset %d", c.at.UnixMilli(), got, c.offset)
		}
	}
	out := run(t, nil, time.Minute, kcat, "-Q", "-b", b.Addr(), "-t", fmt.Sprintf("%s:0:%d", topic, base.Add(15*time.Second).UnixMilli()))
	if !strings.Contains(string(out), "offset 15") {
		t.Errorf("kcat -Q at record 15's timestamp: %q, want offset 15", out)
	}
}

// TestKcatMetadata lists metadata with kcat -L.
func TestKcatMetadata(t *testing.T) {
	kcat := needTool(t, "kcat")
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 7, nil)
	out := run(t, nil, time.Minute, kcat, "-L", "-J", "-b", b.Addr(), "-t", topic)
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J output %q: %v", out, err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].Name != b.Addr() {
		t.Errorf("kcat sees brokers %+v, want one at %s", md.Brokers, b.Addr())
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) != 7 {
		t.Fatalf("kcat sees topics %+v, want %s with 7 partitions", md.Topics, topic)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != md.Brokers[0].ID {
			t.Errorf("partition %d leader %d, want %d", p.Partition, p.Leader, md.Brokers[0].ID)
		}
	}
}
