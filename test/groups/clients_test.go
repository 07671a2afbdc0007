package groups

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func runTool(t *testing.T, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestSaramaConsumerGroup: two sarama ConsumerGroup members split a topic,
// consume everything and commit the end.
func TestSaramaConsumerGroup(t *testing.T) {
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	produce(t, b.Addr(), topic, "v", 400)
	into := &consumed{seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		cfg := sarama.NewConfig()
		cfg.ClientID = "sarama-group"
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
		cfg.Consumer.Group.Session.Timeout = 6 * time.Second
		cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		cg, err := sarama.NewConsumerGroup([]string{b.Addr()}, grp, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cg.Close()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, saramaHandler{into}); err != nil && ctx.Err() == nil {
					t.Logf("sarama Consume: %v", err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
	cancel()
	wg.Wait()
	if miss := into.missing("v", 400); len(miss) > 0 {
		t.Errorf("%d records never consumed", len(miss))
	}
}

type saramaHandler struct{ into *consumed }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.into.add(string(m.Value))
		s.MarkMessage(m, "")
	}
	return nil
}

// TestKafkaGoReaderGroup: two segmentio/kafka-go Readers with a GroupID.
func TestKafkaGoReaderGroup(t *testing.T) {
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	produce(t, b.Addr(), topic, "v", 400)
	into := &consumed{seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers: []string{b.Addr()}, GroupID: grp, Topic: topic,
			StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond,
			CommitInterval: 200 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond,
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					return
				}
				into.add(string(m.Value))
				r.CommitMessages(ctx, m)
			}
		}()
	}
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
	cancel()
	wg.Wait()
	if miss := into.missing("v", 400); len(miss) > 0 {
		t.Errorf("%d records never consumed", len(miss))
	}
}

// TestKcatGroup: kcat -G (librdkafka's balanced consumer) consumes a topic
// and commits; a second run in the same group sees only newer records.
func TestKcatGroup(t *testing.T) {
	kcat := testbroker.NeedTool(t, "kcat")
	b := startBroker(t)
	topic, grp := name(t, "t"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	produce(t, b.Addr(), topic, "v", 150)
	read := func(n int) []string {
		out := runTool(t, 2*time.Minute, kcat, "-b", b.Addr(), "-G", grp, "-X", "auto.offset.reset=earliest", "-c", fmt.Sprint(n),
			"-f", "%s\n", "-X", "auto.commit.interval.ms=100", "-q", topic)
		return strings.Fields(string(out))
	}
	got := read(150)
	if len(got) != 150 {
		t.Fatalf("kcat -G read %d records, want 150", len(got))
	}
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
	produce(t, b.Addr(), topic, "w", 30)
	got = read(30)
	for _, v := range got {
		if !strings.HasPrefix(v, "w-") {
			t.Errorf("second kcat -G run read %q: committed offsets were not used", v)
		}
	}
	waitCommitted(t, b.Addr(), grp, topic, time.Minute)
}

// TestPythonGroups: confluent-kafka-python and kafka-python (Debian
// packages, run with /usr/bin/python3) consume in a group and commit.
func TestPythonGroups(t *testing.T) {
	const python = "/usr/bin/python3"
	testbroker.NeedTool(t, python)
	b := startBroker(t)
	for _, client := range []string{"confluent", "kafka-python"} {
		t.Run(client, func(t *testing.T) {
			mod := map[string]string{"confluent": "confluent_kafka", "kafka-python": "kafka"}[client]
			if err := exec.Command(python, "-c", "import "+mod).Run(); err != nil {
				if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
					t.Skipf("python module %s missing", mod)
				}
				t.Fatalf("python module %s missing: run scripts/install-test-deps.sh", mod)
			}
			topic, grp := name(t, "t"), name(t, "g")
			testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
			produce(t, b.Addr(), topic, "v", 120)
			out := runTool(t, 3*time.Minute, python, "testdata/group_consumer.py", client, b.Addr(), topic, grp, "120")
			var vals []string
			if err := json.Unmarshal(out, &vals); err != nil {
				t.Fatalf("script output %q: %v", out, err)
			}
			if len(vals) != 120 {
				t.Fatalf("read %d records, want 120", len(vals))
			}
			waitCommitted(t, b.Addr(), grp, topic, time.Minute)
			produce(t, b.Addr(), topic, "w", 15)
			out = runTool(t, 3*time.Minute, python, "testdata/group_consumer.py", client, b.Addr(), topic, grp, "15")
			vals = nil
			json.Unmarshal(out, &vals)
			for _, v := range vals {
				if !strings.HasPrefix(v, "w-") {
					t.Errorf("second run read %q: committed offsets were not used", v)
				}
			}
			waitCommitted(t, b.Addr(), grp, topic, time.Minute)
		})
	}
}
