// Package compat checks that real Kafka clients work unchanged against a real
// sluice broker over TCP: franz-go, sarama, kafka-go, kcat (librdkafka),
// confluent-kafka-python, kafka-python and KafkaJS (Node.js, driven
// through the scripts in testdata/kafkajs). Error codes are checked
// exactly, through franz-go's kmsg, as a Kafka broker would return them.
//
// The package has no non-test code; the tests need kcat, the Debian
// python3-confluent-kafka and python3-kafka packages, and node with the
// kafkajs that testdata/kafkajs/package-lock.json pins
// (scripts/install-test-deps.sh installs them all).
package compat
