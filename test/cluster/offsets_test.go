package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// checkDeletedTopicOffsets: groups whose coordinators sit on any broker
// lose the offsets they committed for a topic once it is deleted through
// one broker, and keep the rest.
func checkDeletedTopicOffsets(t *testing.T, seeds []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(testbroker.NewClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	const gone, kept = "offsets-gone", "offsets-kept"
	for _, topic := range []string{gone, kept} {
		createTopic(t, seeds, topic)
	}
	// Enough groups that their coordinators land on every broker.
	groups := make([]string, 12)
	for i := range groups {
		groups[i] = fmt.Sprintf("deleted-topic-group-%d", i)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: gone, Partition: 0, At: 1, LeaderEpoch: -1})
		os.Add(kadm.Offset{Topic: kept, Partition: 0, At: 2, LeaderEpoch: -1})
		testbroker.Eventually(t, 30*time.Second, "commit for "+groups[i], func() error {
			return adm.CommitAllOffsets(ctx, groups[i], os)
		})
	}
	if _, err := adm.DeleteTopic(ctx, gone); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		testbroker.Eventually(t, 30*time.Second, g+" loses the deleted topic's offsets", func() error {
			fetched, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				return err
			}
			if o, ok := fetched.Lookup(gone, 0); ok && o.Err == nil {
				return fmt.Errorf("%s/0 still at %d", gone, o.At)
			}
			if o, ok := fetched.Lookup(kept, 0); !ok || o.Err != nil || o.At != 2 {
				return fmt.Errorf("%s/0: %+v, want 2", kept, o)
			}
			return nil
		})
	}
}
