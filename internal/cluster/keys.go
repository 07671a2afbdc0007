package cluster

import (
	"cmp"
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

// fenceKey is the fence of one holding: data registered under its
// leaderships compares its version, every claim of a partition the
// holding led bumps it, and deleting it deposes the holding for good
// (docs/cluster-keys.md, "Fencing").
func fenceKey(holder int64) string { return fmt.Sprintf("%s%016x", fencesPrefix, uint64(holder)) }

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
// another process with the same id is refused. Session is the liveness
// lease the key hangs on; Holder is the holding whose leaderships the
// broker's liveness vouches for (a holding outlives sessions). Leaving is
// set by a graceful Close: the broker takes no partitions any more, but
// its holding is alive until it deletes its fence.
type brokerValue struct {
	ID          int32      `json:"id"`
	Host        string     `json:"host"`
	Port        int32      `json:"port"`
	Rack        string     `json:"rack,omitempty"`
	Endpoints   []Endpoint `json:"endpoints,omitempty"`
	Session     int64      `json:"session"`
	Holder      int64      `json:"holder,omitempty"`
	Leaving     bool       `json:"leaving,omitempty"`
	Incarnation string     `json:"incarnation"`
}

// holder is the holding the broker key vouches for (the session itself in
// keys written before holdings).
func (bv brokerValue) holder() int64 { return cmp.Or(bv.Holder, bv.Session) }

// leaderValue is the value of a leader key. Holder names the holding
// whose fence guards the leadership; Session is only read, from keys
// written before holdings (the key then hung on that session's lease).
type leaderValue struct {
	Broker  int32 `json:"broker"`
	Epoch   int32 `json:"epoch"`
	Holder  int64 `json:"holder,omitempty"`
	Session int64 `json:"session,omitempty"`
}

func (lv leaderValue) holder() int64 { return cmp.Or(lv.Holder, lv.Session) }

// encodeFence is a fence key's value: the broker id of the holding, so
// that others know whose liveness key vouches for it.
func encodeFence(broker int32) []byte { return strconv.AppendInt(nil, int64(broker), 10) }

// decodeFence reads a fence key's value: the broker id, -1 if the key
// names none (fence keys written before holdings were empty).
func decodeFence(v []byte) int32 {
	id, err := strconv.ParseInt(string(v), 10, 32)
	if err != nil || id < 0 {
		return -1
	}
	return int32(id)
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

// encodeEpoch is an epoch key's value: the epoch and the holding that
// claimed it, "17 6a4f2c01d3b5e7a9".
func encodeEpoch(epoch int32, holder int64) []byte {
	return fmt.Appendf(nil, "%d %x", epoch, uint64(holder))
}

// decodeEpoch reads an epoch key: the epoch, and the holding that claimed
// it (0 in keys written before holdings were recorded, "17").
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
