package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/catalog"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

func call(t *testing.T, method, url string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestTopicsAPI: create, list (paged, searched), describe, add
// partitions and delete topics through /v1/topics, with the broker's own
// validation; groups through /v1/groups.
func TestTopicsAPI(t *testing.T) {
	b := start(t, time.Hour)
	api := "http://" + b.AdminAddr()
	for i := range 25 {
		if code := call(t, "POST", api+"/v1/topics", map[string]any{"name": fmt.Sprintf("orders-%02d", i), "partitions": 2}, nil); code != 201 {
			t.Fatalf("create orders-%02d: %d", i, code)
		}
	}
	call(t, "POST", api+"/v1/topics", map[string]any{"name": "payments", "configs": map[string]string{"retention.ms": "60000"}}, nil)
	for _, c := range []struct {
		body any
		want int
	}{
		{map[string]any{"name": "orders-00"}, 409},
		{map[string]any{"name": "bad name!"}, 400},
		{map[string]any{"name": "x", "configs": map[string]string{"retention.ms": "soon"}}, 400},
		{"not an object", 400},
	} {
		if code := call(t, "POST", api+"/v1/topics", c.body, nil); code != c.want {
			t.Errorf("create %v: %d, want %d", c.body, code, c.want)
		}
	}
	var list struct {
		Total  int             `json:"total"`
		Topics []catalog.Topic `json:"topics"`
	}
	call(t, "GET", api+"/v1/topics?search=ORDERS&offset=20&limit=10", nil, &list)
	if list.Total != 25 || len(list.Topics) != 5 || list.Topics[0].Name != "orders-20" {
		t.Fatalf("page 3 of orders: %+v", list)
	}
	call(t, "GET", api+"/v1/topics", nil, &list)
	if list.Total != 26 {
		t.Fatalf("all user topics: %d", list.Total)
	}
	testbroker.CreateTopic(t, b.Addr(), "filled", 1, nil)
	cl := b.Client(t)
	produce(t, cl, "filled", 30, time.Now())
	var d catalog.TopicDetail
	if code := call(t, "GET", api+"/v1/topics/filled", nil, &d); code != 200 || d.Records != 30 || d.SizeBytes == 0 || len(d.PartitionList) != 1 || d.PartitionList[0].End != 30 {
		t.Fatalf("describe filled: %d %+v", code, d)
	}
	var p catalog.Topic
	if code := call(t, "POST", api+"/v1/topics/payments/partitions", map[string]any{"count": 4}, &p); code != 200 || p.Partitions != 4 {
		t.Fatalf("add partitions: %d %+v", code, p)
	}
	if code := call(t, "POST", api+"/v1/topics/payments/partitions", map[string]any{"count": 2}, nil); code != 400 {
		t.Fatalf("shrinking partitions: %d", code)
	}
	var altered catalog.Topic
	if code := call(t, "POST", api+"/v1/topics/payments/configs", map[string]any{"set": map[string]string{"cleanup.policy": "compact"}, "delete": []string{"retention.ms"}}, &altered); code != 200 ||
		altered.Configs["cleanup.policy"] != "compact" || altered.Configs["retention.ms"] != "" {
		t.Fatalf("alter configs: %d %+v", code, altered)
	}
	for _, bad := range []map[string]any{{"set": map[string]string{"retention.ms": "soon"}}, {"set": map[string]string{"no.such.config": "1"}}} {
		if code := call(t, "POST", api+"/v1/topics/payments/configs", bad, nil); code != 400 {
			t.Fatalf("alter configs %v: %d", bad, code)
		}
	}
	if code := call(t, "DELETE", api+"/v1/topics/payments", nil, nil); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	if code := call(t, "GET", api+"/v1/topics/payments", nil, nil); code != 404 {
		t.Fatalf("describe deleted: %d", code)
	}
	if code := call(t, "DELETE", api+"/v1/topics/__consumer_offsets", nil, nil); code != 400 {
		t.Fatalf("delete internal: %d", code)
	}

	var groups struct {
		Total  int             `json:"total"`
		Groups []catalog.Group `json:"groups"`
	}
	commit(t, b.Admin(t), "watchers", "filled", 10)
	call(t, "GET", api+"/v1/groups", nil, &groups)
	if groups.Total != 1 || groups.Groups[0].Group != "watchers" || groups.Groups[0].TotalLag != 20 {
		t.Fatalf("groups: %+v", groups)
	}

	// Reset offsets: a dry run plans, a real run commits.
	var plan struct {
		DryRun bool            `json:"dry_run"`
		Resets []catalog.Reset `json:"resets"`
	}
	if code := call(t, "POST", api+"/v1/groups/watchers/reset", map[string]any{"topic": "filled", "to": "earliest", "dry_run": true}, &plan); code != 200 ||
		!plan.DryRun || len(plan.Resets) != 1 || plan.Resets[0].From != 10 || plan.Resets[0].To != 0 {
		t.Fatalf("dry run: %d %+v", code, plan)
	}
	if g := lagOf(t, b, "watchers"); g != 20 {
		t.Fatalf("a dry run moved the group: lag %d", g)
	}
	if code := call(t, "POST", api+"/v1/groups/watchers/reset", map[string]any{"topic": "filled", "to": "offset", "offset": 25}, &plan); code != 200 || plan.Resets[0].To != 25 {
		t.Fatalf("reset to 25: %d %+v", code, plan)
	}
	if g := lagOf(t, b, "watchers"); g != 5 {
		t.Fatalf("after resetting to 25: lag %d, want 5", g)
	}
	if code := call(t, "POST", api+"/v1/groups/watchers/reset", map[string]any{"topic": "filled", "to": "sideways"}, nil); code != 400 {
		t.Fatalf("bad target: %d", code)
	}
	// A group with an active member cannot be reset.
	member := b.Client(t, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("filled"))
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	member.PollFetches(pctx)
	testbroker.Eventually(t, 30*time.Second, "busy is refused a reset", func() error {
		if code := call(t, "POST", api+"/v1/groups/busy/reset", map[string]any{"topic": "filled", "to": "earliest"}, nil); code != 409 {
			return fmt.Errorf("reset of a group with a member: %d", code)
		}
		return nil
	})
}

func lagOf(t *testing.T, b *testbroker.Broker, group string) int64 {
	t.Helper()
	g, err := groupLag(t, b, group)
	if err != nil {
		t.Fatal(err)
	}
	return g.TotalLag
}
