package cluster

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// FuzzParseKeys: keys and values read back from etcd (any writer could have
// put anything under the prefix) never panic the parsers or the view that
// applies them, and what parses maps back to the same key.
func FuzzParseKeys(f *testing.F) {
	f.Add(leaderKey(TopicPartition{Topic: "orders", Partition: 7}), []byte(`{"broker":3,"epoch":17,"session":1}`))
	f.Add(leaderKey(TopicPartition{Topic: "orders", Partition: 7}), []byte(`{"broker":3,"epoch":17,"holder":99}`))
	f.Add(brokerKey(12), []byte(`{"id":12,"host":"h","port":9092,"session":5,"incarnation":"x"}`))
	f.Add(brokerKey(12), []byte(`{"id":12,"host":"h","port":9092,"session":5,"holder":4,"leaving":true,"incarnation":"x"}`))
	f.Add(fenceKey(4), []byte(`12`))
	f.Add(fenceKey(-1), []byte(`-7`))
	f.Add(fencesPrefix+"zz", []byte(``))
	f.Add(epochKey(TopicPartition{Topic: "t", Partition: 0}), []byte(`17 694bf3a2c01d7e05`))
	f.Add(leadersPrefix+"/1", []byte(`{`))
	f.Add(brokersPrefix+"-1", []byte(`null`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		if tp, ok := parseLeaderKey(key); ok {
			if tp.Partition < 0 || tp.Topic == "" {
				t.Fatalf("parsed %q into %+v", key, tp)
			}
			var lv leaderValue
			_ = json.Unmarshal(value, &lv)
		}
		if id, ok := parseBrokerKey(key); ok {
			if id < 0 {
				t.Fatalf("parsed %q into broker %d", key, id)
			}
			if brokerKey(id) == key {
				var bv brokerValue
				_ = json.Unmarshal(value, &bv)
			}
		}
		if h, ok := parseFenceKey(key); ok && fenceKey(h) == key {
			if b := decodeFence(value); b < -1 {
				t.Fatalf("fence value %q decoded as broker %d", value, b)
			}
		}
		// The view applies whatever the watch delivers, then its delete.
		n := &Node{log: slog.New(slog.DiscardHandler), view: newView(), owned: map[TopicPartition]*tenure{},
			lastLeader: map[TopicPartition]int32{}, hold: &holding{id: 4, seen: true}}
		n.applyPutLocked(key, value, 1, time.Unix(0, 0), nil, false)
		n.view.holderLive(4)
		for tp := range n.view.leaders {
			n.view.liveLeader(tp)
		}
		n.applyDeleteLocked(key)
	})
}
