// Package governance_test checks topic governance policies against a real
// broker with real clients.
package governance_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

const pattern = `^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*\.v[0-9]+$`

// TestTopicNamePolicy: with governance.topic_name_pattern set, CreateTopics
// refuses names that do not match with POLICY_VIOLATION and a message
// naming the pattern; auto-creation and the admin API refuse them too;
// matching names and internal topics are created.
func TestTopicNamePolicy(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Governance.TopicNamePattern = pattern
		c.AutoCreateTopics = true
	}))
	cl := b.Client(t, kgo.RequestRetries(1))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// kadm returns a lone topic's error as the call's error too.
	res, err := adm.CreateTopic(ctx, 1, 1, nil, "orders")
	if !errors.Is(err, kerr.PolicyViolation) || !errors.Is(res.Err, kerr.PolicyViolation) || !strings.Contains(res.ErrMessage, pattern) {
		t.Fatalf("orders: %v / %v %q, want POLICY_VIOLATION naming the pattern", err, res.Err, res.ErrMessage)
	}
	if res, err := adm.CreateTopic(ctx, 3, 1, nil, "shop.order-paid.v1"); err != nil || res.Err != nil {
		t.Fatalf("shop.order-paid.v1: %v %v", err, res.Err)
	}

	// A producer writing to a name outside the policy does not create it.
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "scratch", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("auto-created a topic outside the naming policy")
	}
	if topics, err := adm.ListTopics(ctx, "scratch"); err != nil || topics.Has("scratch") && topics["scratch"].Err == nil {
		t.Fatalf("scratch exists: %v %+v", err, topics)
	}
	// Groups still work: __consumer_offsets is internal and exempt.
	var os kadm.Offsets
	os.AddOffset("shop.order-paid.v1", 0, 0, -1)
	if r, err := adm.CommitOffsets(ctx, "billing", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	resp, err := http.Post("http://"+b.AdminAddr()+"/v1/topics", "application/json", bytes.NewReader([]byte(`{"name": "Orders"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("admin API creating Orders: %s", resp.Status)
	}
}
