package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/diagnose"
	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/testbroker"
	"github.com/sluice-mq/sluice/internal/testcluster"
)

// TestLagCluster: groups coordinated by different brokers of a 3-broker
// cluster; every broker lists all of them and answers for each, lag and
// diagnosis, whichever broker coordinates it.
func TestLagCluster(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{})
	testbroker.CreateTopic(t, c.Addrs()[0], "events", 3, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := range 30 {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	const groups = 12 // spread over the offsets topic's partitions, so over the brokers
	for i := range groups {
		var os kadm.Offsets
		for p := range int32(3) {
			os.AddOffset("events", p, 1, -1)
		}
		if r, err := adm.CommitOffsets(ctx, fmt.Sprintf("g%d", i), os); err != nil || r.Error() != nil {
			t.Fatalf("commit g%d: %v %v", i, err, r.Error())
		}
	}
	for b := range c.Len() {
		admin := c.AdminAddr(b)
		testbroker.Eventually(t, time.Minute, fmt.Sprintf("broker %d lists every group", b), func() error {
			resp, err := http.Get("http://" + admin + "/v1/lag")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var all struct {
				Groups      []lag.GroupLag `json:"groups"`
				Unreachable []string       `json:"unreachable_brokers"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
				return err
			}
			if len(all.Groups) != groups || len(all.Unreachable) > 0 {
				return fmt.Errorf("%d groups, unreachable %v", len(all.Groups), all.Unreachable)
			}
			return nil
		})
		for i := range groups {
			g := fmt.Sprintf("g%d", i)
			resp, err := http.Get("http://" + admin + "/v1/lag/" + g)
			if err != nil {
				t.Fatal(err)
			}
			var gl lag.GroupLag
			err = json.NewDecoder(resp.Body).Decode(&gl)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || gl.Group != g || gl.TotalLag == 0 {
				t.Fatalf("broker %d, group %s: %s %+v %v", b, g, resp.Status, gl, err)
			}
		}
		resp, err := http.Get("http://" + admin + "/v1/diagnose/group/g0?sample=0s")
		if err != nil {
			t.Fatal(err)
		}
		var d diagnose.Diagnosis
		err = json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
		if err != nil || d.Group != "g0" || d.Verdict != diagnose.SickConsumer {
			t.Fatalf("broker %d diagnosing g0: %+v %v", b, d, err)
		}
	}
	// Every broker lists every broker (itself first), and between them
	// they lead every partition and took the 30 records.
	for b := range c.Len() {
		resp, err := http.Get("http://" + c.AdminAddr(b) + "/v1/brokers")
		if err != nil {
			t.Fatal(err)
		}
		var brokers []diagnose.BrokerDiagnosis
		err = json.NewDecoder(resp.Body).Decode(&brokers)
		resp.Body.Close()
		if err != nil || len(brokers) != c.Len() {
			t.Fatalf("broker %d lists %d brokers: %+v %v", b, len(brokers), brokers, err)
		}
		seen, led, produced := map[int32]bool{}, 0, int64(0)
		for _, d := range brokers {
			seen[d.Facts.NodeID] = true
			led += d.Facts.Partitions
			produced += d.Facts.ProducedRecords
		}
		if len(seen) != c.Len() || produced < 30 || led < 3 {
			t.Fatalf("broker %d: nodes %v, %d partitions led, %d records produced", b, seen, led, produced)
		}
	}
}
