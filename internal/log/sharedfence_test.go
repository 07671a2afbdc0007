package log

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/meta"
)

func TestCompareSet(t *testing.T) {
	var s compareSet
	shared := []meta.Compare{{Key: "fence", Version: 3}}
	for range 5000 {
		if !s.add(shared) {
			t.Fatal("a compare repeated by every partition does not fit")
		}
	}
	if len(s.list) != 1 {
		t.Fatalf("%d compares, want 1", len(s.list))
	}
	if s.add([]meta.Compare{{Key: "fence", Version: 4}}) {
		t.Fatal("a compare on another version of a key in the set was added")
	}
	var many []meta.Compare
	for i := range meta.MaxTxnOps {
		many = append(many, meta.Compare{Key: string(rune('a'+i%26)) + string(rune('a'+i/26)), Version: 1})
	}
	if s.add(many) {
		t.Fatal("more than MaxTxnOps distinct compares were added")
	}
	if len(s.list) != 1 {
		t.Fatalf("a refused add left %d compares", len(s.list))
	}
	if !s.add(many[:meta.MaxTxnOps-1]) {
		t.Fatal("MaxTxnOps distinct compares in all do not fit")
	}
}
