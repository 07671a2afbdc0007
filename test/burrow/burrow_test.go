package burrow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// Where Debian's packages put Burrow and ZooKeeper.
const (
	burrowBin    = "/usr/bin/Burrow"
	zookeeperJar = "/usr/share/java/zookeeper.jar"
	javaBin      = "/usr/bin/java"
)

// need skips the test when Burrow or ZooKeeper is not installed.
func need(t *testing.T) {
	t.Helper()
	for _, p := range []string{burrowBin, zookeeperJar, javaBin} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is missing: install the Debian packages burrow and zookeeper (scripts/install-test-deps.sh does, as root)", p)
		}
	}
}

// freePort returns a port nothing listens on now on 127.0.0.1, for servers
// that cannot be told to pick their own (ZooKeeper, Burrow's HTTP server).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess starts cmd with its output in logPath, and kills it (by
// its own pid) when the test ends; a failed test prints the log's tail.
// The returned function fails the test if the process has exited.
func startProcess(t *testing.T, what, logPath string, cmd *exec.Cmd) (alive func()) {
	t.Helper()
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 16<<10 {
				b = b[len(b)-16<<10:]
			}
			t.Logf("---- %s log (%s), tail ----\n%s", what, logPath, b)
		}
	})
	return func() {
		t.Helper()
		select {
		case <-exited:
			t.Fatalf("%s exited: %v", what, waitErr)
		default:
		}
	}
}

// startZooKeeper runs a standalone ZooKeeper on an ephemeral port with a
// private data directory and returns its address once it answers "imok".
func startZooKeeper(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	cfg := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=ruok\n", filepath.Join(dir, "data"), port)
	cfgPath := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(javaBin, "-cp", zookeeperJar, "-Dzookeeper.log.dir="+dir,
		"org.apache.zookeeper.server.ZooKeeperServerMain", cfgPath)
	alive := startProcess(t, "zookeeper", filepath.Join(dir, "zookeeper.log"), cmd)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	testbroker.Eventually(t, time.Minute, "zookeeper answers ruok", func() error {
		alive()
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ruok")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		n, _ := c.Read(buf)
		if string(buf[:n]) != "imok" {
			return fmt.Errorf("answered %q", buf[:n])
		}
		return nil
	})
	return addr
}

// burrowConfig is Burrow 1.2's TOML configuration (the layout of Debian's
// /etc/burrow/burrow.toml): one cluster and its consumer module on the
// broker, sarama pinned to kafkaVersion, state in zk.
func burrowConfig(dir, zk, broker, httpAddr, kafkaVersion string) string {
	return fmt.Sprintf(`[general]
pidfile=%q

[logging]
level="info"

[zookeeper]
servers=[%q]
timeout=6
root-path="/burrow"

[client-profile.old]
client-id="burrow-test"
kafka-version=%q

[cluster.sluice]
class-name="kafka"
servers=[%q]
client-profile="old"
topic-refresh=2
offset-refresh=1

[consumer.sluice]
class-name="kafka"
cluster="sluice"
servers=[%q]
client-profile="old"
start-latest=false

[httpserver.default]
address=%q

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
`, filepath.Join(dir, "burrow.pid"), zk, kafkaVersion, broker, broker, httpAddr)
}

// lagPartition is one partition of Burrow's /v3 consumer lag answer.
type lagPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Status    string `json:"status"`
	End       struct {
		Offset int64 `json:"offset"`
		Lag    int64 `json:"lag"`
	} `json:"end"`
	CurrentLag int64 `json:"current_lag"`
}

type lagAnswer struct {
	Error   bool   `json:"error"`
	Message string `json:"message"`
	Status  struct {
		Status     string         `json:"status"`
		Partitions []lagPartition `json:"partitions"`
		TotalLag   int64          `json:"totallag"`
	} `json:"status"`
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(buf.String()))
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		return fmt.Errorf("GET %s: %v: %s", url, err, buf.String())
	}
	return nil
}

// TestBurrowLag: Burrow, pinned to Kafka 0.10.0 as Debian ships it and to
// 0.8.2, reports a group's committed offsets, the partitions' end offsets
// and the lag between them, and a status for the group.
func TestBurrowLag(t *testing.T) {
	need(t)
	zk := startZooKeeper(t)
	b := testbroker.StartProcess(t, testbroker.BuildBinary(t))

	// Partition 0 gets 20 records, partition 1 gets 10; the group commits
	// 15 and 10: lag 5 and 0.
	const topic, group = "burrow-lag", "burrow-group"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3 / 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 15, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 10, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	wantEnd := map[int32]int64{0: 20, 1: 10}
	wantCommit := map[int32]int64{0: 15, 1: 10}

	for _, kafkaVersion := range []string{"0.10.0", "0.8.2"} {
		t.Run(kafkaVersion, func(t *testing.T) {
			dir := t.TempDir()
			httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			if err := os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(burrowConfig(dir, zk, b.Addr(), httpAddr, kafkaVersion)), 0o644); err != nil {
				t.Fatal(err)
			}
			// Burrow exits when its cluster or consumer module cannot start
			// (a broker closing the connection on ListOffsets v0 did that).
			alive := startProcess(t, "burrow", filepath.Join(dir, "burrow.log"), exec.Command(burrowBin, "-config-dir", dir))
			base := "http://" + httpAddr + "/v3/kafka/sluice"

			// End offsets: what ListOffsets v0 answered Burrow.
			testbroker.Eventually(t, 2*time.Minute, "Burrow knows the topic's end offsets", func() error {
				alive()
				var a struct {
					Offsets []int64 `json:"offsets"`
				}
				if err := getJSON(base+"/topic/"+topic, &a); err != nil {
					return err
				}
				if fmt.Sprint(a.Offsets) != "[20 10]" {
					return fmt.Errorf("offsets %v, want [20 10]", a.Offsets)
				}
				return nil
			})
			// The group's lag: commits read from __consumer_offsets.
			var last lagAnswer
			testbroker.Eventually(t, 2*time.Minute, "Burrow reports the group's lag", func() error {
				alive()
				last = lagAnswer{}
				if err := getJSON(base+"/consumer/"+group+"/lag", &last); err != nil {
					return err
				}
				if len(last.Status.Partitions) != 2 {
					return fmt.Errorf("%d partitions: %+v", len(last.Status.Partitions), last)
				}
				for _, p := range last.Status.Partitions {
					if p.Topic != topic || p.End.Offset != wantCommit[p.Partition] ||
						p.CurrentLag != wantEnd[p.Partition]-wantCommit[p.Partition] {
						return fmt.Errorf("partition %d: %+v, want committed %d, lag %d", p.Partition, p,
							wantCommit[p.Partition], wantEnd[p.Partition]-wantCommit[p.Partition])
					}
				}
				return nil
			})
			if last.Error || last.Status.TotalLag != 5 {
				t.Errorf("total lag %d (error %v: %s), want 5", last.Status.TotalLag, last.Error, last.Message)
			}
			switch last.Status.Status {
			case "OK", "WARN", "ERR", "STOP", "STALL", "REWIND":
			default:
				t.Errorf("group status %q", last.Status.Status)
			}
			for _, p := range last.Status.Partitions {
				if p.Status == "" {
					t.Errorf("partition %d has no status", p.Partition)
				}
			}
			t.Logf("Burrow at %s: group status %s, partitions %+v", kafkaVersion, last.Status.Status, last.Status.Partitions)
		})
	}
}
