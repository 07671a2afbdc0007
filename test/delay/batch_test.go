package delay

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

func buildBatch(t testing.TB, recs []kmsg.Record) []byte {
	t.Helper()
	b, err := batch.Build(0, time.Now().UnixMilli(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
