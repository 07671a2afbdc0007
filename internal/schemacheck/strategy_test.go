package schemacheck

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// TestStrategyValues: topicconfig takes exactly the strategy values the
// check parses, for both configs, and each check config is defined there.
func TestStrategyValues(t *testing.T) {
	for _, key := range []string{ValueStrategyConfig, KeyStrategyConfig} {
		for _, v := range StrategyValues {
			if err := topicconfig.ValidateValue(key, v); err != nil {
				t.Errorf("topicconfig refuses %s=%s: %v", key, v, err)
			}
			if _, err := ParseStrategy(v); err != nil {
				t.Errorf("ParseStrategy(%s): %v", v, err)
			}
		}
		for _, v := range []string{"com.example.MyStrategy", "topicnamestrategy", "io.confluent.kafka.serializers.subject.Nope"} {
			if topicconfig.ValidateValue(key, v) == nil {
				t.Errorf("topicconfig takes %s=%s", key, v)
			}
			if _, err := ParseStrategy(v); err == nil {
				t.Errorf("ParseStrategy takes %s", v)
			}
		}
	}
	for _, key := range []string{ValueConfig, KeyConfig, ValueDecodeConfig, KeyDecodeConfig} {
		if err := topicconfig.ValidateValue(key, "true"); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	for want, vs := range map[Strategy][]string{TopicName: {"", "TopicNameStrategy"}, RecordName: {strategyPrefix + "RecordNameStrategy"},
		TopicRecordName: {"TopicRecordNameStrategy"}} {
		for _, v := range vs {
			if got, _ := ParseStrategy(v); got != want {
				t.Errorf("ParseStrategy(%q) = %s, want %s", v, got, want)
			}
		}
	}
}
