// Package registry tests the schema registry end to end: real brokers (in
// process, the real binary killed with SIGKILL, a 3-broker cluster on etcd
// and S3) and real clients (franz-go's pkg/sr, confluent-kafka-python's
// SchemaRegistryClient, plain HTTP for Confluent's error codes).
package registry
