package topicconfig

import (
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		k, v string
		ok   bool
	}{
		{"retention.ms", "1000", true},
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"retention.ms", "soon", false},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", "archive", false},
		{"max.message.bytes", "99999999999", false},
		{"message.timestamp.type", "LogAppendTime", true},
		{"message.timestamp.type", "Whenever", false},
		{"min.cleanable.dirty.ratio", "1.5", false},
		{"no.such.config", "1", false},
		{"compression.gzip.level", "-1", true},
		{"compression.gzip.level", "9", true},
		{"compression.gzip.level", "0", false},
		{"compression.lz4.level", "17", true},
		{"compression.lz4.level", "18", false},
		{"compression.zstd.level", "-131072", true},
		{"compression.zstd.level", "23", false},
		{"remote.log.copy.disable", "true", true},
		{"remote.log.delete.on.disable", "maybe", false},
		{"message.format.version", "0.10.0.0", true},
		{"message.format.version", "2.8", true},
		{"message.format.version", "3.0-IV1", true},
		{"message.format.version", "latest", false},
	}
	for _, tc := range cases {
		err := ValidateValue(tc.k, tc.v)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%s: ok=%v, err=%v", tc.k, tc.v, tc.ok, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s=%s: error does not wrap ErrInvalid: %v", tc.k, tc.v, err)
		}
	}
}

func TestParseLayers(t *testing.T) {
	c := Parse(map[string]string{"retention.ms": "5000", "max.message.bytes": "2000"},
		map[string]string{"retention.ms": "7000", "cleanup.policy": "compact"})
	if c.RetentionMs != 7000 || c.MaxMessageBytes != 2000 || !c.Compact || c.Delete {
		t.Fatalf("unexpected %+v", c)
	}
	d := Parse(nil, nil)
	if d.RetentionMs != 604800000 || !d.Delete || d.RetentionBytes != -1 || d.MaxMessageBytes != 1048588 {
		t.Fatalf("unexpected defaults %+v", d)
	}
}
