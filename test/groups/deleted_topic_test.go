package groups

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestDeletedTopicOffsets: deleting a topic removes the offsets groups
// committed for it, as Kafka's coordinator does, so a topic created again
// under the name starts with none; offsets of other topics stay, also
// across a restart.
func TestDeletedTopicOffsets(t *testing.T) {
	b := startBroker(t)
	ctx := ctxFor(t, time.Minute)
	gone, kept, grp := name(t, "gone"), name(t, "kept"), name(t, "g")
	testbroker.CreateTopic(t, b.Addr(), gone, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), kept, 1, nil)
	produce(t, b.Addr(), gone, "v", 10)
	produce(t, b.Addr(), kept, "v", 10)
	adm := kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: gone, Partition: 0, At: 3, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: gone, Partition: 1, At: 4, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: kept, Partition: 0, At: 5, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, grp, commit); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopic(ctx, gone); err != nil {
		t.Fatal(err)
	}
	committed := func() (map[string]map[int32]int64, error) {
		fetched, err := adm.FetchOffsets(ctx, grp)
		if err != nil {
			return nil, err
		}
		out := map[string]map[int32]int64{}
		fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil {
				if out[o.Topic] == nil {
					out[o.Topic] = map[int32]int64{}
				}
				out[o.Topic][o.Partition] = o.At
			}
		})
		return out, nil
	}
	check := func(when string) {
		t.Helper()
		testbroker.Eventually(t, 10*time.Second, when, func() error {
			got, err := committed()
			if err != nil {
				return err
			}
			if len(got[gone]) != 0 || got[kept][0] != 5 {
				return fmt.Errorf("committed offsets %v, want only %s partition 0 at 5", got, kept)
			}
			return nil
		})
	}
	check("offsets of the deleted topic removed")
	testbroker.CreateTopic(t, b.Addr(), gone, 2, nil)
	check("the recreated topic starts without offsets")
	b.Restart()
	adm = kadm.NewClient(testbroker.NewClient(t, b.Addr()))
	check("still after a restart")
}
