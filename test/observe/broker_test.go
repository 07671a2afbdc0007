package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDiskRefusalsVisible: with less free space than min_free_bytes the
// broker refuses produce (KAFKA_STORAGE_ERROR); the refusal shows in
// /metrics and in the broker diagnosis.
func TestDiskRefusalsVisible(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	// Below min_free_bytes but above its half (the floor): produce is
	// refused, the broker's own writes are not.
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.MinFreeBytes = free + free/2
	}))
	testbroker.CreateTopic(t, b.Addr(), "full", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("full"), kgo.RecordRetries(2), kgo.RequestRetries(2),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce with the disk below min_free_bytes: %v, want KAFKA_STORAGE_ERROR", err)
	}
	resp, err := http.Get("http://" + b.AdminAddr() + "/v1/diagnose/broker")
	if err != nil {
		t.Fatal(err)
	}
	var d diagnose.BrokerDiagnosis
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d.Status != "critical" || d.Facts.Refusing != "produce" || d.Facts.RefusedProduce == 0 ||
		d.Findings[0].Area != "disk" || !strings.Contains(d.Findings[0].Summary, "refusing produce") {
		t.Fatalf("broker diagnosis: %+v", d)
	}
	resp, err = http.Get("http://" + b.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sluice_log_space_refusing 1", `sluice_log_space_refused_appends_total{writer="client"}`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), `sluice_log_space_refused_appends_total{writer="client"} 0`) {
		t.Fatal("refused produce appends not counted")
	}
}
