package cluster

import (
	"encoding/json"
	"testing"
)

// FuzzParseKeys: keys and values read back from etcd (any writer could have
// put anything under the prefix) never panic the parsers, and what parses
// maps back to the same key.
func FuzzParseKeys(f *testing.F) {
	f.Add(leaderKey(TopicPartition{Topic: "orders", Partition: 7}), []byte(`{"broker":3,"epoch":17,"session":1}`))
	f.Add(brokerKey(12), []byte(`{"id":12,"host":"h","port":9092,"session":5,"incarnation":"x"}`))
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
	})
}
