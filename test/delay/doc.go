// Package delay tests delayed delivery end to end: real brokers (in
// process, or the real binary killed with SIGKILL) and real clients
// (franz-go, kcat, confluent-kafka-python), checking that each delayed
// record is seen no earlier than its time and exactly once.
package delay
