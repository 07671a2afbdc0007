package testcluster

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-mq/sluice/internal/objstore/s3"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

func testS3Config() s3.Config {
	c := s3.DefaultConfig()
	c.Endpoint, c.Bucket, c.Region = "127.0.0.1:7070", "b", "us-east-1"
	c.AccessKey, c.SecretKey, c.Addressing = "ak", "sk", s3.AddressingPath
	return c
}

func TestBrokerArgs(t *testing.T) {
	s3c := testS3Config()
	cases := []struct {
		name string
		i    int
		opts Options
		want string
	}{
		{"first", 0, Options{LeaseTTL: 2 * time.Second},
			"--listen 127.0.0.1:9092 --admin-listen 127.0.0.1:9644 --node-id 1 --etcd-endpoints http://127.0.0.1:2379 --etcd-prefix /sluice-test/ " +
				"--lease-ttl 2s --etcd-compaction-interval 3s --s3-endpoint 127.0.0.1:7070 --s3-bucket b --s3-access-key ak --s3-secret-key sk " +
				"--s3-region us-east-1 --s3-addressing path"},
		{"third with extra", 2, Options{LeaseTTL: 1500 * time.Millisecond, ExtraArgs: []string{"--log-level", "debug"}},
			"--listen 127.0.0.1:9092 --admin-listen 127.0.0.1:9644 --node-id 3 --etcd-endpoints http://127.0.0.1:2379 --etcd-prefix /sluice-test/ " +
				"--lease-ttl 1.5s --etcd-compaction-interval 3s --s3-endpoint 127.0.0.1:7070 --s3-bucket b --s3-access-key ak --s3-secret-key sk " +
				"--s3-region us-east-1 --s3-addressing path --log-level debug"},
		{"broker default lease", 0, Options{LeaseTTL: BrokerDefaultLease},
			"--listen 127.0.0.1:9092 --admin-listen 127.0.0.1:9644 --node-id 1 --etcd-endpoints http://127.0.0.1:2379 --etcd-prefix /sluice-test/ " +
				"--etcd-compaction-interval 3s --s3-endpoint 127.0.0.1:7070 --s3-bucket b --s3-access-key ak --s3-secret-key sk " +
				"--s3-region us-east-1 --s3-addressing path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := brokerArgs(tc.i, "127.0.0.1:9092", "127.0.0.1:9644", "http://127.0.0.1:2379", s3c, tc.opts)
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("args\n got %s\nwant %s", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestBrokerArgsParse runs the real binary's serve with the harness's flags
// and --help: flag parsing fails on any flag serve does not know, and
// --help stops before the broker starts.
func TestBrokerArgsParse(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--ready-file", "r"},
		brokerArgs(0, "127.0.0.1:0", "127.0.0.1:0", "http://127.0.0.1:2379", testS3Config(), Options{LeaseTTL: DefaultLeaseTTL})...)
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("serve %s --help: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestServices starts what Start starts before the brokers, and checks the
// failure controls tests will use on them.
func TestServices(t *testing.T) {
	c := startServices(t, false)

	// The bucket exists: a store that may not create it opens.
	bucketExists := func() error {
		cfg := c.S3().Config(Bucket)
		cfg.CreateBucket = false
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := s3.New(ctx, cfg)
		if err == nil {
			st.Close()
		}
		return err
	}
	if err := bucketExists(); err != nil {
		t.Fatalf("bucket %s: %v", Bucket, err)
	}
	c.S3().Stop()
	if err := bucketExists(); err == nil {
		t.Fatal("S3 answers after Stop")
	}
	c.S3().Restart()
	if err := bucketExists(); err != nil {
		t.Fatalf("bucket %s after S3 restart: %v", Bucket, err)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Etcd().Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	op := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f(ctx)
	}
	if err := op(func(ctx context.Context) error { _, err := cli.Put(ctx, EtcdPrefix+"k", "v"); return err }); err != nil {
		t.Fatal(err)
	}
	c.Etcd().Restart(t)
	var got []string
	if err := op(func(ctx context.Context) error {
		resp, err := cli.Get(ctx, EtcdPrefix, clientv3.WithPrefix())
		for _, kv := range resp.Kvs {
			got = append(got, string(kv.Key)+"="+string(kv.Value))
		}
		return err
	}); err != nil {
		t.Fatalf("get after etcd restart: %v", err)
	}
	if !slices.Equal(got, []string{EtcdPrefix + "k=v"}) {
		t.Fatalf("after etcd restart: %q", got)
	}
	if len(c.Addrs()) != 0 || c.Len() != 0 {
		t.Fatalf("brokers without Start: %v", c.Addrs())
	}
}
