package cluster

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Key layout; see doc.go and docs/cluster-keys.md.
const (
	clusterPrefix = "cluster/"
	brokersPrefix = "cluster/brokers/"
	leadersPrefix = "cluster/leaders/"
	epochsPrefix  = "cluster/epochs/"
	fencesPrefix  = "cluster/fences/"
	controllerKey = "cluster/controller"
)

// leaderKeyVersion is the version of a leader key as our acquisition writes
// it: created (compare version 0) and never updated in place.
const leaderKeyVersion = 1

func brokerKey(id int32) string { return fmt.Sprintf("%s%010d", brokersPrefix, id) }

func leaderKey(tp TopicPartition) string {
	return fmt.Sprintf("%s%s/%010d", leadersPrefix, tp.Topic, tp.Partition)
}

func epochKey(tp TopicPartition) string {
	return fmt.Sprintf("%s%s/%010d", epochsPrefix, tp.Topic, tp.Partition)
}

// fenceKey is the fence of one session: data registered under its
// leaderships compares its version, and every claim of a partition the
// session led bumps it (docs/cluster-keys.md, "Fencing").
func fenceKey(session int64) string { return fmt.Sprintf("%s%016x", fencesPrefix, uint64(session)) }

func parseFenceKey(k string) (int64, bool) {
	s, ok := strings.CutPrefix(k, fencesPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 16, 64)
	return int64(id), err == nil
}

func parseBrokerKey(k string) (int32, bool) {
	s, ok := strings.CutPrefix(k, brokersPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 32)
	return int32(id), err == nil && id >= 0
}

// parseLeaderKey splits at the last '/': Kafka topic names have none.
func parseLeaderKey(k string) (TopicPartition, bool) { return parsePartitionKey(leadersPrefix, k) }

// parseEpochKey is parseLeaderKey for epoch keys.
func parseEpochKey(k string) (TopicPartition, bool) { return parsePartitionKey(epochsPrefix, k) }

func parsePartitionKey(prefix, k string) (TopicPartition, bool) {
	s, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: s[:i], Partition: int32(p)}, true
}

// brokerValue is the value of a broker key: the advertised Broker plus who
// wrote it. Incarnation is random per Node, so a node recognises its own
// key left by a session that ended (and may delete it), while a key of
// another process with the same id is refused.
type brokerValue struct {
	ID          int32      `json:"id"`
	Host        string     `json:"host"`
	Port        int32      `json:"port"`
	Rack        string     `json:"rack,omitempty"`
	Endpoints   []Endpoint `json:"endpoints,omitempty"`
	Session     int64      `json:"session"`
	Incarnation string     `json:"incarnation"`
}

// leaderValue is the value of a leader key.
type leaderValue struct {
	Broker  int32 `json:"broker"`
	Epoch   int32 `json:"epoch"`
	Session int64 `json:"session"`
}

// controllerValue is the value of the controller key.
type controllerValue struct {
	Broker  int32 `json:"broker"`
	Session int64 `json:"session"`
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cluster: encoding %T: %v", v, err)) // plain structs always encode
	}
	return b
}

// encodeEpoch is an epoch key's value: the epoch and the session of the
// broker that claimed it, "17 6a4f2c01d3b5e7a9".
func encodeEpoch(epoch int32, session int64) []byte {
	return fmt.Appendf(nil, "%d %x", epoch, uint64(session))
}

// decodeEpoch reads an epoch key: the epoch, and the session that claimed
// it (0 in keys written before sessions were recorded, "17").
func decodeEpoch(kv meta.KV) (int32, int64, error) {
	es, ss, hasSession := strings.Cut(string(kv.Value), " ")
	e, err := strconv.ParseInt(es, 10, 32)
	if err != nil || e < 0 {
		return 0, 0, fmt.Errorf("cluster: epoch key %q holds %q, not an epoch", kv.Key, kv.Value)
	}
	var session uint64
	if hasSession {
		if session, err = strconv.ParseUint(ss, 16, 64); err != nil {
			return 0, 0, fmt.Errorf("cluster: epoch key %q holds %q, not an epoch and a session", kv.Key, kv.Value)
		}
	}
	return int32(e), int64(session), nil
}
