// Package testcluster starts a real sluice cluster for tests: an embedded
// etcd (internal/meta/etcd/etcdtest), a versitygw S3 server with the bucket
// created (internal/objstore/s3/s3test), and N brokers, each the real binary
// in a child process (internal/testbroker) in cluster mode against both.
// Everything listens on 127.0.0.1 with ephemeral ports and lives in the
// test's temporary directory; t.Cleanup tears it down, brokers first.
//
// Failure tests kill, stop and restart brokers by index; Etcd and S3 give
// the services for tests that stop or pause them. A test binary using it
// should remove the built broker at exit:
//
//	func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }
//
// It owns no broker logic and fakes nothing: tests talk to the brokers with
// real Kafka clients over TCP.
package testcluster
