// Package compat checks that real Kafka clients work unchanged against a real
// sluice broker over TCP: franz-go, sarama, kafka-go, kcat (librdkafka),
// confluent-kafka-python and kafka-python. Error codes are checked exactly,
// through franz-go's kmsg, as a Kafka broker would return them.
//
// The package has no non-test code; the tests need kcat and the Debian
// python3-confluent-kafka and python3-kafka packages
// (scripts/install-test-deps.sh installs them).
package compat
