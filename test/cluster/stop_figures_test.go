package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestClusterStopFigures measures a graceful stop (SIGTERM) of cluster
// brokers leading many partitions, each with data: SLUICE_STOP_TOPICS
// topics of 10 partitions (default 5,000: 50,000 partitions) over
// SLUICE_STOP_BROKERS brokers (default 1, which then leads them all), on
// etcd and the S3 server. It stops the brokers one after another and logs
// how long each took and the broker's own account of its stages (its
// "stopped" log line). It asserts only that each exits cleanly within
// testbroker's minute (issue 18; docs/benchmarks.md).
//
//	SLUICE_CLUSTER_FIGURES=1 go test ./test/cluster/ -run TestClusterStopFigures -v -timeout 30m
func TestClusterStopFigures(t *testing.T) {
	skipUnlessFigures(t)
	topics := envInt(t, "SLUICE_STOP_TOPICS", 5000)
	brokers := envInt(t, "SLUICE_STOP_BROKERS", 1)
	const per = 10
	c := testcluster.Start(t, testcluster.Options{Brokers: brokers, EtcdProcess: true, LeaseTTL: testcluster.BrokerDefaultLease})
	keepLogs(t, c)
	t.Logf("load average %s; %d topics x %d partitions over %d brokers", loadAvg(), topics, per, brokers)
	cl := testbroker.NewClient(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(5*time.Minute), kgo.MaxBufferedRecords(200000))
	adm := kadm.NewClient(cl)
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("stop-%d", i)
	}
	began := time.Now()
	for start := 0; start < topics; start += 1000 {
		chunk := names[start:min(start+1000, topics)]
		testbroker.Eventually(t, 10*time.Minute, "creating "+chunk[0], func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			resps, err := adm.CreateTopics(ctx, per, -1, nil, chunk...)
			if err != nil {
				return err
			}
			for _, r := range resps {
				if r.Err != nil && r.ErrMessage != "" && !bytes.Contains([]byte(r.Err.Error()), []byte("TOPIC_ALREADY_EXISTS")) {
					return fmt.Errorf("%s: %w", r.Topic, r.Err)
				}
			}
			return nil
		})
	}
	t.Logf("created %d partitions in %.1fs", topics*per, time.Since(began).Seconds())
	testbroker.Eventually(t, 10*time.Minute, "every partition led", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		md, err := adm.Metadata(ctx, names...)
		if err != nil {
			return err
		}
		for _, td := range md.Topics {
			if len(td.Partitions) != per {
				return fmt.Errorf("%s: %d partitions", td.Topic, len(td.Partitions))
			}
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					return fmt.Errorf("%s-%d: leader %d, %v", td.Topic, p.Partition, p.Leader, p.Err)
				}
			}
		}
		return nil
	})
	t.Logf("all led %.1fs after the first CreateTopics", time.Since(began).Seconds())
	recs := make([]*kgo.Record, 0, topics*per)
	for _, name := range names {
		for part := range int32(per) {
			recs = append(recs, &kgo.Record{Topic: name, Partition: part, Value: []byte("stop")})
		}
	}
	began = time.Now()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("writing a record to every partition: %v", err)
	}
	t.Logf("a record written to each partition in %.1fs; load average %s", time.Since(began).Seconds(), loadAvg())
	cl.Close()
	for i := range c.Len() {
		began := time.Now()
		if dir := os.Getenv("SLUICE_STOP_PROFILES"); dir != "" {
			// A CPU profile of the stop and, a second in, the goroutines:
			// the admin listener answers until the hand-off is over.
			admin := c.AdminAddr(i)
			go fetch(t, "http://"+admin+"/debug/pprof/profile?seconds=4", filepath.Join(dir, fmt.Sprintf("stop-%d.cpu", i)))
			go func() {
				time.Sleep(time.Second)
				fetch(t, "http://"+admin+"/debug/pprof/goroutine?debug=1", filepath.Join(dir, fmt.Sprintf("stop-%d.goroutines", i)))
			}()
			time.Sleep(100 * time.Millisecond)
		}
		c.Broker(i).Stop()
		t.Logf("broker %d stopped (SIGTERM) in %.2fs; its account: %s", testcluster.NodeID(i), time.Since(began).Seconds(),
			stoppedLine(c.Broker(i).LogPath()))
	}
}

// fetch saves url's body to path (SLUICE_STOP_PROFILES), logging failures.
func fetch(t *testing.T, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Logf("fetching %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Logf("saving %s: %v", path, err)
	}
}

// stoppedLine is the last "stopped" line of a broker's log (the stages of
// its Close), or "".
func stoppedLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i := bytes.LastIndex(b, []byte(`msg="left the cluster"`))
	if i < 0 {
		return ""
	}
	line := b[i:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return string(line)
}
