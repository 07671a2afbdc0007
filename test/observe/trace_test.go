package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/trace"
)

func traceQuery(t testing.TB, admin string, q url.Values) trace.Result {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/v1/trace?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("trace %v: %s", q, resp.Status)
	}
	var r trace.Result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func one(t *testing.T, r trace.Result, what string) trace.Record {
	t.Helper()
	if len(r.Records) != 1 {
		t.Fatalf("%s: %d records, want 1: %+v", what, len(r.Records), r)
	}
	return r.Records[0]
}

// TestTrace finds records by key, header, offset and time, and shows the
// producer as the broker saw it, the transaction outcome, which groups are
// past the record, and its dead-letter hop.
func TestTrace(t *testing.T) {
	b := start(t, time.Hour)
	const topic = "orders"
	testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	api := b.Client(t, kgo.ClientID("billing-api"), kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := range 50 {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte("v")})
	}
	rs[7].Headers = []kgo.RecordHeader{{Key: "message-id", Value: []byte("m-7")}}
	if err := api.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	order7 := rs[7]

	txw := b.Client(t, kgo.ClientID("tx-writer"), kgo.TransactionalID("tx-1"), kgo.DefaultProduceTopic(topic))
	for _, c := range []struct {
		key    string
		commit kgo.TransactionEndTry
	}{{"order-100", kgo.TryCommit}, {"order-101", kgo.TryAbort}} {
		if err := txw.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txw.ProduceSync(ctx, &kgo.Record{Key: []byte(c.key), Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txw.EndTransaction(ctx, c.commit); err != nil {
			t.Fatal(err)
		}
	}
	plain := b.Client(t, kgo.ClientID("legacy"), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("order-200"), Value: []byte("p")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(api)
	var past, before kadm.Offsets
	past.AddOffset(topic, order7.Partition, order7.Offset+1, -1)
	before.AddOffset(topic, order7.Partition, order7.Offset, -1)
	for g, os := range map[string]kadm.Offsets{"readers": past, "laggards": before} {
		if r, err := adm.CommitOffsets(ctx, g, os); err != nil || r.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, r.Error())
		}
	}
	testbroker.CreateTopic(t, b.Addr(), topic+".dlq", 1, nil)
	dlq := &kgo.Record{Topic: topic + ".dlq", Key: order7.Key, Value: order7.Value, Headers: []kgo.RecordHeader{
		{Key: "sluice-original-topic", Value: []byte(topic)},
		{Key: "sluice-original-partition", Value: []byte(strconv.Itoa(int(order7.Partition)))},
		{Key: "sluice-original-offset", Value: []byte(strconv.FormatInt(order7.Offset, 10))},
		{Key: "sluice-retry-attempts", Value: []byte("3")},
		{Key: "sluice-error", Value: []byte("payment service down")},
		{Key: "sluice-group", Value: []byte("readers")},
	}}
	if err := api.ProduceSync(ctx, dlq).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-7"}}), "by key")
	if r.Partition != order7.Partition || r.Offset != order7.Offset || !r.Producer.Known || r.Producer.ClientID != "billing-api" ||
		r.Producer.ProducerID < 0 || r.Transaction != "none" {
		t.Fatalf("order-7: %+v", r)
	}
	if len(r.Groups) != 2 || r.Groups[0].Group != "laggards" || r.Groups[0].Past || r.Groups[1].Group != "readers" || !r.Groups[1].Past {
		t.Fatalf("order-7 groups: %+v", r.Groups)
	}
	if len(r.Hops) != 1 || r.Hops[0].Direction != "to" || r.Hops[0].Topic != topic+".dlq" || r.Hops[0].Error != "payment service down" {
		t.Fatalf("order-7 hops: %+v", r.Hops)
	}
	byHeader := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "header": {"message-id=m-7"}}), "by header")
	byOffset := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "partition": {strconv.Itoa(int(order7.Partition))},
		"offset": {strconv.FormatInt(order7.Offset, 10)}}), "by offset")
	if byHeader.Offset != r.Offset || byOffset.Offset != r.Offset || *byOffset.Key != "order-7" {
		t.Fatalf("by header %+v, by offset %+v", byHeader, byOffset)
	}
	back := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic + ".dlq"}, "key": {"order-7"}}), "the DLQ copy")
	if len(back.Hops) != 1 || back.Hops[0].Direction != "from" || back.Hops[0].Offset != order7.Offset || back.Hops[0].Attempts != "3" {
		t.Fatalf("DLQ copy hops: %+v", back.Hops)
	}

	committed := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-100"}}), "committed")
	aborted := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-101"}}), "aborted")
	if committed.Transaction != "committed" || aborted.Transaction != "aborted" || committed.Producer.TransactionalID != "tx-1" ||
		committed.Producer.ClientID != "tx-writer" {
		t.Fatalf("transactional: committed %+v, aborted %+v", committed, aborted)
	}
	legacy := one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-200"}}), "non-idempotent")
	if legacy.Producer.ProducerID != -1 || legacy.Producer.Known {
		t.Fatalf("non-idempotent producer: %+v", legacy.Producer)
	}

	// A time range after every record finds nothing; one around them
	// finds the key.
	later := time.Now().Add(time.Hour).UnixMilli()
	if r := traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-7"}, "from": {strconv.FormatInt(later, 10)}}); len(r.Records) != 0 {
		t.Fatalf("from the future: %+v", r.Records)
	}
	one(t, traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "key": {"order-7"}, "from": {"1h"}}), "within the last hour")
	if r := traceQuery(t, b.AdminAddr(), url.Values{"topic": {topic}, "from": {"1h"}, "limit": {"10"}}); len(r.Records) != 10 || r.Truncated == "" {
		t.Fatalf("limit 10: %d records, truncated %q", len(r.Records), r.Truncated)
	}
	for _, bad := range []url.Values{{"topic": {topic}}, {"key": {"x"}}, {"topic": {topic}, "offset": {"3"}}, {"topic": {topic}, "from": {"yesterday"}}} {
		resp, err := http.Get("http://" + b.AdminAddr() + "/v1/trace?" + bad.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%v: %s, want 400", bad, resp.Status)
		}
	}
}
