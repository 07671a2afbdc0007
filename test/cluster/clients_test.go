package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// The tests in this file run clients other than franz-go against a
// three-broker cluster: each produces the first half of its records with
// acks=all, the broker leading the most partitions is SIGKILLed, the same
// client produces the second half while that broker is down, and the broker
// is restarted. The records are then read back with the same client
// and with franz-go: every record is there exactly once, each partition in
// produce order, at the offset the producer was told where it says so.

// clientRecords is how many records each client produces; the value of
// record i is "<client>-<i>" and its key "k<i>", so the client's own
// partitioner spreads the records over the partitions.
const clientRecords = 2000

// clientTimeout bounds one client process or call; the happy path takes a
// few seconds.
const clientTimeout = 3 * time.Minute

// clientRec is one record as a client read it back.
type clientRec struct {
	Partition int32
	Offset    int64
	Value     string
}

// clientAck is where a producer was told record seq went.
type clientAck struct {
	seq       int
	partition int32
	offset    int64
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// clientProc is a client process with stdin and stdout piped to the test.
// If the test fails, its stderr is logged; cleanup kills it if it is still
// running.
type clientProc struct {
	t      *testing.T
	desc   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr syncBuffer
	waited bool
	err    error
}

func startClientProc(t *testing.T, name string, args ...string) *clientProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	p := &clientProc{t: t, desc: name + " " + strings.Join(args, " ")}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReaderSize(out, 1<<20)
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", p.desc, err)
	}
	t.Cleanup(func() {
		cancel()
		p.wait()
		if t.Failed() {
			t.Logf("---- stderr of %s ----\n%s\n---- end ----", p.desc, clipText(p.stderr.String()))
		}
	})
	return p
}

// wait waits for the process to exit, once, and returns how it exited.
func (p *clientProc) wait() error {
	if !p.waited {
		p.waited = true
		p.err = p.cmd.Wait()
	}
	return p.err
}

// readLine reads one line of stdout; EOF (the process exited, or was
// killed at clientTimeout) fails the test.
func (p *clientProc) readLine() string {
	p.t.Helper()
	line, err := p.stdout.ReadString('\n')
	if err != nil {
		p.t.Fatalf("%s: reading stdout: %v (exit: %v)", p.desc, err, p.wait())
	}
	return strings.TrimSuffix(line, "\n")
}

// finish closes stdin, reads the rest of stdout and requires a clean exit.
func (p *clientProc) finish() []byte {
	p.t.Helper()
	p.stdin.Close()
	out, rerr := io.ReadAll(p.stdout)
	if err := p.wait(); err != nil || rerr != nil {
		p.t.Fatalf("%s: exit %v (reading stdout: %v)\nstderr:\n%s\nstdout:\n%s", p.desc, err, rerr, clipText(p.stderr.String()), clipText(string(out)))
	}
	return out
}

func clipText(s string) string {
	if len(s) > 8000 {
		return s[:4000] + "\n...\n" + s[len(s)-4000:]
	}
	return s
}

// clientCluster is a three-broker cluster with a topic for one client.
type clientCluster struct {
	c      *testcluster.Cluster
	seeds  []string // every broker, as given to the client
	topic  string
	victim int       // index of the broker killed
	killed time.Time // when it was killed
}

func startClientCluster(t *testing.T, topic string) *clientCluster {
	t.Helper()
	c := testcluster.Start(t, testcluster.Options{})
	cc := &clientCluster{c: c, seeds: c.Addrs(), topic: topic, victim: -1}
	createTopic(t, cc.seeds, topic)
	return cc
}

// kill SIGKILLs, between the two halves, the broker that leads the most
// partitions of the topic (which broker leads what is up to the cluster;
// broker 0 may lead nothing), so the client has to move to new leaders.
func (cc *clientCluster) kill(t *testing.T) {
	t.Helper()
	leaders := cc.leaders(t)
	count := map[int32]int{}
	for _, id := range leaders {
		count[id]++
	}
	for i := range cc.c.Len() {
		if cc.victim < 0 || count[testcluster.NodeID(i)] > count[testcluster.NodeID(cc.victim)] {
			cc.victim = i
		}
	}
	t.Logf("first half acknowledged; leaders by partition %v; SIGKILL broker %d (node %d, %s)",
		leaders, cc.victim, testcluster.NodeID(cc.victim), cc.c.Broker(cc.victim).Addr())
	cc.c.KillBroker(cc.victim)
	cc.killed = time.Now()
}

// leaders is the leader of each partition of the topic.
func (cc *clientCluster) leaders(t *testing.T) []int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cc.c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := make([]int32, partitions)
	testbroker.Eventually(t, time.Minute, "partition leaders", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, cc.topic)
		if err != nil {
			return err
		}
		td := md.Topics[cc.topic]
		if len(td.Partitions) != partitions {
			return fmt.Errorf("%d partitions", len(td.Partitions))
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d err %v", p.Partition, p.Leader, p.Err)
			}
			out[p.Partition] = p.Leader
		}
		return nil
	})
	return out
}

// restart restarts the killed broker after the second half; it listens
// where it did.
func (cc *clientCluster) restart(t *testing.T) {
	t.Helper()
	if cc.killed.IsZero() {
		t.Fatal("the producer never asked for the broker kill")
	}
	took := time.Since(cc.killed).Round(100 * time.Millisecond)
	cc.c.RestartBroker(cc.victim)
	if got := cc.c.Addrs(); !slices.Equal(got, cc.seeds) {
		t.Fatalf("brokers after the restart at %v, were at %v", got, cc.seeds)
	}
	t.Logf("second half acknowledged %v after the kill; broker %d restarted", took, cc.victim)
}

// checkFranz reads the topic back with franz-go and checks it. The
// restarted broker takes some partitions back right after it rejoins, and
// ListOffsets answers LEADER_NOT_AVAILABLE or NOT_LEADER_FOR_PARTITION for a
// partition in the middle of such a hand-off (both retriable), so the
// offsets are listed until every partition answers (testbroker.ReadAll
// lists them once and fails on any error).
func (cc *clientCluster) checkFranz(t *testing.T, prefix string, acks []clientAck) {
	t.Helper()
	seeds := cc.c.Addrs()
	// franz-go keeps metadata for 5 s by default, a partition seen without
	// a leader included.
	cl := testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond))
	adm := kadm.NewClient(cl)
	var start, end map[int32]int64
	began, tries, lastErr := time.Now(), 0, error(nil)
	testbroker.Eventually(t, time.Minute, "offsets of every partition", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		start, end, err = testbroker.Offsets(ctx, adm, cc.topic)
		if tries++; err != nil {
			lastErr = err
		}
		return err
	})
	if tries > 1 {
		t.Logf("franz-go: offsets listed after %d tries in %v; last error: %v", tries, time.Since(began).Round(100*time.Millisecond), lastErr)
	}
	var got []clientRec
	for p, rs := range testbroker.ReadRange(t, seeds[0], cc.topic, start, end, kgo.SeedBrokers(seeds...)) {
		for _, r := range rs {
			got = append(got, clientRec{p, r.Offset, string(r.Value)})
		}
	}
	checkClientRecords(t, "franz-go", prefix, got, acks)
}

// checkClientRecords checks what reader read back: record <prefix>-<i> for
// every i below clientRecords exactly once, nothing else, and each
// partition in offset order and in produce order (got may interleave
// partitions; within each it must be in the order read). Records in acks
// must be at the partition and offset the producer was told.
func checkClientRecords(t *testing.T, reader, prefix string, got []clientRec, acks []clientAck) {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	at := make(map[int]clientRec, len(got))
	lastOff, lastSeq := map[int32]int64{}, map[int32]int{}
	perPartition := map[int32]int{}
	for _, r := range got {
		s, err := strconv.Atoi(strings.TrimPrefix(r.Value, prefix+"-"))
		if !strings.HasPrefix(r.Value, prefix+"-") || err != nil || s < 0 || s >= clientRecords {
			bad("partition %d offset %d: unexpected value %q", r.Partition, r.Offset, r.Value)
			continue
		}
		if prev, ok := at[s]; ok {
			bad("record %d read twice: partition %d offset %d and partition %d offset %d", s, prev.Partition, prev.Offset, r.Partition, r.Offset)
			continue
		}
		at[s] = r
		perPartition[r.Partition]++
		if o, ok := lastOff[r.Partition]; ok && r.Offset <= o {
			bad("partition %d: offset %d read after offset %d", r.Partition, r.Offset, o)
		}
		if q, ok := lastSeq[r.Partition]; ok && s <= q {
			bad("partition %d offset %d: record %d after record %d (out of produce order)", r.Partition, r.Offset, s, q)
		}
		lastOff[r.Partition], lastSeq[r.Partition] = r.Offset, s
	}
	missing := 0
	for s := range clientRecords {
		if _, ok := at[s]; !ok {
			missing++
			bad("acknowledged record %d lost", s)
		}
	}
	misplaced := 0
	for _, a := range acks {
		if r, ok := at[a.seq]; ok && (r.Partition != a.partition || r.Offset != a.offset) {
			misplaced++
			bad("record %d acknowledged at partition %d offset %d, read at partition %d offset %d", a.seq, a.partition, a.offset, r.Partition, r.Offset)
		}
	}
	t.Logf("%s read %d records (per partition %v); %d missing, %d not where acknowledged", reader, len(got), perPartition, missing, misplaced)
	if len(perPartition) < 2 {
		bad("every record is in one partition: the keys did not spread them")
	}
	for i, p := range problems {
		if i == 20 {
			t.Errorf("%s: ... and %d more problems", reader, len(problems)-i)
			break
		}
		t.Errorf("%s: %s", reader, p)
	}
}

// TestClusterKcat: kcat (librdkafka), idempotent with acks=all, produces
// the first half in one process and the second in another started while a
// leading broker is dead (its address still in the bootstrap list); kcat
// then reads everything back.
//
// One kcat process across the kill is not used: librdkafka 2.0 may leave a
// partition's first batch unsent when the producer ID arrives after the
// batch was queued, until the application produces again or flushes, and
// kcat blocked on an idle stdin does neither; so the test could not know
// when the first half is acknowledged.
func TestClusterKcat(t *testing.T) {
	kcat := testbroker.NeedTool(t, "kcat")
	cc := startClientCluster(t, "kcat")
	produce := func(lo, hi int) {
		t.Helper()
		var in bytes.Buffer
		for i := lo; i < hi; i++ {
			fmt.Fprintf(&in, "k%d:kcat-%d\n", i, i)
		}
		// -vv: kcat reports every delivery ("Message delivered ...") and
		// every failure ("Delivery failed ...") on stderr. It exits once
		// stdin is at EOF and every record is delivered or failed, with
		// status 1 if any failed.
		p := startClientProc(t, kcat, "-P", "-b", strings.Join(cc.seeds, ","), "-t", cc.topic, "-K:", "-vv",
			"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "message.timeout.ms=60000",
			"-X", "retry.backoff.ms=200", "-X", "linger.ms=5")
		if _, err := p.stdin.Write(in.Bytes()); err != nil {
			t.Fatalf("writing to kcat: %v", err)
		}
		p.finish()
		stderr := p.stderr.String()
		delivered, failed := strings.Count(stderr, "Message delivered"), strings.Count(stderr, "Delivery failed")
		t.Logf("kcat records %d..%d: %d delivery reports, %d delivery failures", lo, hi-1, delivered, failed)
		var other []string
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if !strings.Contains(l, "Message delivered") && !strings.Contains(l, "Enable message offset reporting") &&
				!strings.Contains(l, "Setting producer input buffer") {
				other = append(other, l)
			}
		}
		if len(other) > 0 {
			t.Logf("kcat's other messages (%d):\n%s", len(other), clipText(strings.Join(other, "\n")))
		}
		if delivered != hi-lo || failed != 0 {
			t.Fatalf("kcat: %d of %d records delivered, %d failed\nstderr:\n%s", delivered, hi-lo, failed, clipText(stderr))
		}
	}
	produce(0, clientRecords/2)
	cc.kill(t)
	produce(clientRecords/2, clientRecords)
	cc.restart(t)
	cc.checkFranz(t, "kcat", nil)

	// kcat reads every partition from the start until it is at the end of
	// each (-e), one JSON object a line.
	began := time.Now()
	out := startClientProc(t, kcat, "-C", "-b", strings.Join(cc.c.Addrs(), ","), "-t", cc.topic,
		"-o", "beginning", "-e", "-J", "-q").finish()
	t.Logf("kcat consumer done in %v", time.Since(began).Round(100*time.Millisecond))
	var got []clientRec
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var j struct {
			Partition int32   `json:"partition"`
			Offset    int64   `json:"offset"`
			Payload   *string `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil || j.Payload == nil {
			t.Fatalf("kcat output line %q: %v", sc.Text(), err)
		}
		got = append(got, clientRec{j.Partition, j.Offset, *j.Payload})
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("kcat output: %v", err)
	}
	checkClientRecords(t, "kcat", "kcat", got, nil)
}

// TestClusterPython: confluent-kafka (librdkafka, idempotent) and
// kafka-python (pure Python; it has no idempotent producer, so acks=all
// with retries and one request in flight) each produce across a broker
// SIGKILL in one process, then read everything back as a consumer group
// member.
func TestClusterPython(t *testing.T) {
	clients := []struct{ name, module, pkg string }{
		{"confluent", "confluent_kafka", "python3-confluent-kafka"},
		{"kafka-python", "kafka", "python3-kafka"},
	}
	script := filepath.Join("testdata", "cluster_clients.py")
	for _, pc := range clients {
		t.Run(pc.name, func(t *testing.T) {
			testbroker.NeedPythonModule(t, pc.module, pc.pkg)
			cc := startClientCluster(t, "python")
			p := startClientProc(t, testbroker.Python, script, pc.name, "produce", strings.Join(cc.seeds, ","), cc.topic, strconv.Itoa(clientRecords))
			if line := p.readLine(); line != "half" {
				t.Fatalf("%s: %q from the script, want \"half\"", pc.name, line)
			}
			cc.kill(t)
			p.stdin.Write([]byte("go\n"))
			out := p.finish()
			if s := strings.TrimSpace(p.stderr.String()); s != "" {
				t.Logf("%s producer's messages on stderr:\n%s", pc.name, clipText(s))
			}
			var res struct {
				Acked  [][3]int64 `json:"acked"`
				Errors []string   `json:"errors"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%s produce output %q: %v", pc.name, out, err)
			}
			t.Logf("%s: %d records acknowledged, %d failed", pc.name, len(res.Acked), len(res.Errors))
			if len(res.Errors) > 0 {
				t.Fatalf("%s: %d records not delivered; first: %q", pc.name, len(res.Errors), res.Errors[:min(10, len(res.Errors))])
			}
			acks := make([]clientAck, len(res.Acked))
			for i, a := range res.Acked {
				acks[i] = clientAck{int(a[0]), int32(a[1]), a[2]}
			}
			if len(acks) != clientRecords {
				t.Fatalf("%s: %d records acknowledged, want %d", pc.name, len(acks), clientRecords)
			}
			cc.restart(t)
			cc.checkFranz(t, pc.name, acks)

			began := time.Now()
			out = startClientProc(t, testbroker.Python, script, pc.name, "consume", strings.Join(cc.c.Addrs(), ","), cc.topic,
				strconv.Itoa(clientRecords), "g-"+pc.name).finish()
			t.Logf("%s group consumer done in %v", pc.name, time.Since(began).Round(100*time.Millisecond))
			var recs [][3]json.RawMessage
			if err := json.Unmarshal(out, &recs); err != nil {
				t.Fatalf("%s consume output %q: %v", pc.name, clipText(string(out)), err)
			}
			got := make([]clientRec, len(recs))
			for i, r := range recs {
				if err := errors.Join(json.Unmarshal(r[0], &got[i].Partition), json.Unmarshal(r[1], &got[i].Offset),
					json.Unmarshal(r[2], &got[i].Value)); err != nil {
					t.Fatalf("%s consume output record %d: %v", pc.name, i, err)
				}
			}
			checkClientRecords(t, pc.name, pc.name, got, acks)
		})
	}
}

// saramaClusterConfig is sarama at its default protocol version, patient
// enough to wait out a leadership move (the lease TTL is 2 s).
func saramaClusterConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sluice-cluster-test"
	cfg.Version = sarama.DefaultVersion
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Metadata.Retry.Max = 20
	cfg.Metadata.Retry.Backoff = 250 * time.Millisecond
	cfg.Net.DialTimeout = 5 * time.Second
	return cfg
}

// saramaLog collects what sarama logs through its package-level logger (its
// retries and errors). The logger is set once and never put back: sarama
// closes broker connections in goroutines that may log after Close returns.
var (
	saramaLog     syncBuffer
	saramaLogOnce sync.Once
)

// saramaLogStart installs the logger if needed and returns how much has
// been logged so far.
func saramaLogStart() int {
	saramaLogOnce.Do(func() { sarama.Logger = log.New(&saramaLog, "sarama: ", log.Lmicroseconds) })
	return len(saramaLog.String())
}

// TestClusterSarama: sarama's idempotent sync producer (acks=all, one
// request in flight, as sarama requires) sends across a broker SIGKILL;
// everything is read back by a sarama consumer group member.
func TestClusterSarama(t *testing.T) {
	cc := startClientCluster(t, "sarama")
	logFrom := saramaLogStart()
	cfg := saramaClusterConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 200
	cfg.Producer.Retry.Backoff = 250 * time.Millisecond
	prod, err := sarama.NewSyncProducer(cc.seeds, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			prod.Close()
		}
	}()
	var acks []clientAck
	send := func(lo, hi int) {
		t.Helper()
		msgs := make([]*sarama.ProducerMessage, 0, hi-lo)
		for i := lo; i < hi; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: cc.topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)),
				Value: sarama.StringEncoder(fmt.Sprintf("sarama-%d", i)), Metadata: i})
		}
		if err := prod.SendMessages(msgs); err != nil {
			var pe sarama.ProducerErrors
			if errors.As(err, &pe) {
				t.Fatalf("sarama: %d of %d records not delivered; first: %v", len(pe), len(msgs), pe[0])
			}
			t.Fatalf("sarama: %v", err)
		}
		for _, m := range msgs {
			acks = append(acks, clientAck{m.Metadata.(int), m.Partition, m.Offset})
		}
	}
	send(0, clientRecords/2)
	cc.kill(t)
	send(clientRecords/2, clientRecords)
	closed = true
	if err := prod.Close(); err != nil {
		t.Errorf("closing the sarama producer: %v", err)
	}
	cc.restart(t)
	var notable []string
	for _, l := range strings.Split(saramaLog.String()[logFrom:], "\n") {
		if strings.Contains(l, "retrying") || strings.Contains(l, "rror") {
			notable = append(notable, l)
		}
	}
	t.Logf("sarama producer: %d log lines about retries or errors", len(notable))
	if len(notable) > 0 {
		t.Logf("%s", clipText(strings.Join(notable, "\n")))
	}
	cc.checkFranz(t, "sarama", acks)
	began := time.Now()
	got := saramaGroupRead(t, cc.c.Addrs(), cc.topic, clientRecords)
	t.Logf("sarama group consumer done in %v", time.Since(began).Round(100*time.Millisecond))
	checkClientRecords(t, "sarama consumer group", "sarama", got, acks)
}

// saramaGroupHandler hands every record it is given to recs.
type saramaGroupHandler struct{ recs chan<- clientRec }

func (saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaGroupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case h.recs <- clientRec{m.Partition, m.Offset, string(m.Value)}:
			case <-sess.Context().Done():
				return nil
			}
			sess.MarkMessage(m, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

// saramaGroupRead joins a fresh consumer group on topic and reads from the
// start until n records have arrived, or a minute passes without one.
func saramaGroupRead(t *testing.T, seeds []string, topic string, n int) []clientRec {
	t.Helper()
	cfg := saramaClusterConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	g, err := sarama.NewConsumerGroup(seeds, "g-sarama", cfg)
	if err != nil {
		t.Fatalf("sarama consumer group: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	recs := make(chan clientRec, 256)
	done := make(chan error, 1)
	go func() {
		var err error
		for ctx.Err() == nil && err == nil {
			err = g.Consume(ctx, []string{topic}, saramaGroupHandler{recs})
		}
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("sarama group Consume: %v", err)
		}
		if err := g.Close(); err != nil {
			t.Errorf("closing the sarama consumer group: %v", err)
		}
	}()
	var got []clientRec
	for len(got) < n {
		select {
		case r := <-recs:
			got = append(got, r)
		case err := <-g.Errors():
			t.Logf("sarama consumer group error: %v", err)
		case err := <-done:
			done <- err
			t.Fatalf("sarama group Consume returned %v with %d of %d records", err, len(got), n)
		case <-time.After(time.Minute):
			t.Fatalf("sarama consumer group: no record for a minute with %d of %d read", len(got), n)
		}
	}
	return got
}
