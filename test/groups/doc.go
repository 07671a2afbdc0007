// Package groups tests consumer groups end to end: real clients (franz-go,
// sarama, kafka-go, kcat, confluent-kafka-python, kafka-python) consuming in
// groups against a real sluice broker, with members joining, leaving and
// dying under load, static members restarting, and the broker restarting.
//
// The package has no non-test code. kcat and the Debian Python packages are
// needed for their tests, which skip when the tools are missing.
package groups
