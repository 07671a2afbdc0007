package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOwnerSpread(t *testing.T) {
	brokers := []int32{1, 2, 3}
	counts := map[int32]int{}
	var tps []TopicPartition
	for i := range 3000 {
		tp := TopicPartition{Topic: fmt.Sprintf("topic-%d", i%7), Partition: int32(i)}
		tps = append(tps, tp)
		counts[owner(tp, brokers)]++
	}
	for _, b := range brokers {
		if c := counts[b]; c < 900 || c > 1100 {
			t.Errorf("broker %d owns %d of 3000", b, c)
		}
	}
	// Rendezvous: a new broker only takes partitions, it never causes
	// moves between the others; and it takes about its share.
	moved := 0
	for _, tp := range tps {
		before, after := owner(tp, brokers), owner(tp, []int32{3, 1, 4, 2}) // order does not matter
		if before != after {
			moved++
			if after != 4 {
				t.Fatalf("%v moved from %d to %d", tp, before, after)
			}
		}
	}
	if moved < 600 || moved > 900 {
		t.Errorf("%d of 3000 moved to the fourth broker, want about 750", moved)
	}
	if owner(tps[0], nil) != -1 {
		t.Error("owner among no brokers")
	}
}

// TestAssignBalanced: the bounded-load assignment spreads each topic's
// partitions evenly (counts differ by at most one), does not depend on the
// order brokers are listed in, and a fourth broker moves only part of the
// partitions.
func TestAssignBalanced(t *testing.T) {
	tps := map[TopicPartition]struct{}{}
	sizes := map[string]int{"one": 1, "six": 6, "seven": 7, "fifty": 50, "wide": 1000}
	for topic, n := range sizes {
		for p := range n {
			tps[TopicPartition{topic, int32(p)}] = struct{}{}
		}
	}
	for _, brokers := range [][]int32{{1}, {1, 2}, {1, 2, 3}, {5, 9, 2, 7}} {
		a := assign(tps, nil, brokers)
		if len(a) != len(tps) {
			t.Fatalf("%v: %d of %d partitions assigned", brokers, len(a), len(tps))
		}
		for topic, n := range sizes {
			counts := map[int32]int{}
			for p := range n {
				counts[a[TopicPartition{topic, int32(p)}]]++
			}
			lo, hi := n, 0
			for _, b := range brokers {
				lo, hi = min(lo, counts[b]), max(hi, counts[b])
			}
			if hi-lo > 1 {
				t.Errorf("%v: topic %s (%d partitions) spread %v", brokers, topic, n, counts)
			}
		}
	}
	a, b := assign(tps, nil, []int32{1, 2, 3}), assign(tps, nil, []int32{3, 1, 2})
	for tp := range tps {
		if a[tp] != b[tp] {
			t.Fatalf("%v: %d or %d depending on broker order", tp, a[tp], b[tp])
		}
	}
	four := assign(tps, nil, []int32{1, 2, 3, 4})
	moved := 0
	for tp := range tps {
		if a[tp] != four[tp] {
			moved++
		}
	}
	// A quarter must move to the new broker; bounded loads move some more.
	if total := len(tps); moved < total/4 || moved > total/2 {
		t.Errorf("%d of %d partitions moved when a fourth broker joined", moved, total)
	}
	if len(assign(tps, nil, nil)) != 0 {
		t.Error("partitions assigned to no brokers")
	}
}

// TestAssignPreferred: a partition with a preferred replica list goes to
// the first of its replicas that is a live broker, whatever the load; the
// topic's other partitions are still spread over every broker.
func TestAssignPreferred(t *testing.T) {
	tps := map[TopicPartition]struct{}{}
	for p := range 12 {
		tps[TopicPartition{"t", int32(p)}] = struct{}{}
	}
	prefer := map[TopicPartition][]int32{
		{"t", 0}: {3, 1},
		{"t", 1}: {3},
		{"t", 2}: {3, 2},
		{"t", 3}: {9, 2}, // broker 9 is not live: the next one
		{"t", 4}: {9},    // none live: balanced like the others
	}
	brokers := []int32{1, 2, 3}
	a := assign(tps, prefer, brokers)
	for tp, want := range map[TopicPartition]int32{{"t", 0}: 3, {"t", 1}: 3, {"t", 2}: 3, {"t", 3}: 2} {
		if a[tp] != want {
			t.Errorf("%v with preferred replicas %v: led by %d, want %d", tp, prefer[tp], a[tp], want)
		}
	}
	counts := map[int32]int{}
	for tp := range tps {
		if !slices.Contains(brokers, a[tp]) {
			t.Fatalf("%v assigned to %d, not a live broker", tp, a[tp])
		}
		counts[a[tp]]++
	}
	// 12 over 3 brokers is 4 each; three pinned to broker 3 leave it
	// room for one more.
	for _, b := range brokers {
		if counts[b] != 4 {
			t.Errorf("12 partitions, 4 pinned: spread %v, want 4 each", counts)
			break
		}
	}
	// Without preferences the assignment is what it was.
	plain := assign(tps, nil, brokers)
	if again := assign(tps, map[TopicPartition][]int32{}, brokers); !maps.Equal(plain, again) {
		t.Fatalf("an empty preference map changed the assignment")
	}
}

func TestKeys(t *testing.T) {
	for _, tp := range []TopicPartition{{"orders", 0}, {"a.b-c_d", 2147483647}, {"__consumer_offsets", 49}} {
		k := leaderKey(tp)
		got, ok := parseLeaderKey(k)
		if !ok || got != tp {
			t.Errorf("parseLeaderKey(%q) = %v, %v", k, got, ok)
		}
	}
	if k := leaderKey(TopicPartition{"t", 7}); k != "cluster/leaders/t/0000000007" {
		t.Errorf("leader key %q", k)
	}
	if k := epochKey(TopicPartition{"t", 7}); k != "cluster/epochs/t/0000000007" {
		t.Errorf("epoch key %q", k)
	}
	if k := brokerKey(12); k != "cluster/brokers/0000000012" {
		t.Errorf("broker key %q", k)
	}
	if id, ok := parseBrokerKey(brokerKey(12)); !ok || id != 12 {
		t.Errorf("parseBrokerKey = %d, %v", id, ok)
	}
	for _, bad := range []string{"cluster/leaders/t", "cluster/leaders//1", "cluster/leaders/t/x", "cluster/leaders/t/-1", "other/t/1"} {
		if tp, ok := parseLeaderKey(bad); ok {
			t.Errorf("parseLeaderKey(%q) = %v", bad, tp)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := func() Config {
		c := DefaultConfig()
		c.BrokerID, c.Host, c.Port = 1, "h", 9092
		return c
	}
	tests := []struct {
		name string
		edit func(*Config)
		key  string // "" = valid
	}{
		{"good", func(*Config) {}, ""},
		{"zero TTL takes the default", func(c *Config) { c.LeaseTTL = 0 }, ""},
		{"negative id", func(c *Config) { c.BrokerID = -1 }, "BrokerID"},
		{"no host", func(c *Config) { c.Host = "" }, "Host"},
		{"no port", func(c *Config) { c.Port = 0 }, "Port"},
		{"port too big", func(c *Config) { c.Port = 70000 }, "Port"},
		{"negative TTL", func(c *Config) { c.LeaseTTL = -time.Second }, "LeaseTTL"},
		{"negative delay", func(c *Config) { c.RebalanceDelay = -time.Second }, "RebalanceDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.edit(&c)
			err := c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.key+":") {
				t.Fatalf("Validate = %v, want an ErrConfig naming %s", err, tt.key)
			}
		})
	}
}

// offsetClock runs with real time plus an offset the test can advance.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// TestRebalanceDelay: leaders hand nothing to a new broker until it has
// been a member for RebalanceDelay (by their clock); a leaderless partition
// goes to it at once.
func TestRebalanceDelay(t *testing.T) {
	c := newCluster(t, 2*time.Second, 30)
	clock := &offsetClock{}
	delayed := func(cfg *Config) {
		cfg.RebalanceDelay = time.Hour
		cfg.Now = clock.Now
	}
	start := func(id int32) *testNode {
		tn, err := c.tryStart(id, delayed)
		if err != nil {
			t.Fatal(err)
		}
		return tn
	}
	nodes := []*testNode{start(1)}
	eventually(t, settle, "every partition on broker 1", func() error { return c.check(nodes) })
	nodes = append(nodes, start(2)) // new to broker 1, which keeps everything
	eventually(t, settle, "broker 1 sees broker 2", func() error {
		if len(nodes[0].node.Brokers()) != 2 {
			return errors.New("not yet")
		}
		return c.check(nodes)
	})
	if n := nodes[1].rec.count(); n != 0 {
		t.Fatalf("broker 2 leads %d partitions before its RebalanceDelay", n)
	}
	// A leaderless partition goes to its desired owner, new or not.
	var tp TopicPartition
	desired := assign(c.partSet(), nil, []int32{1, 2})
	for _, x := range c.parts {
		if desired[x] == 2 {
			tp = x
			break
		}
	}
	nodes[0].node.Relinquish(tp)
	eventually(t, settle, "the relinquished partition on broker 2", func() error {
		if err := c.check(nodes); err != nil {
			return err
		}
		if _, ok := nodes[1].node.IsLeader(tp); !ok {
			return fmt.Errorf("%v not on broker 2", tp)
		}
		return nil
	})
	if n := nodes[1].rec.count(); n != 1 {
		t.Fatalf("broker 2 leads %d partitions before its RebalanceDelay, want 1", n)
	}
	clock.Advance(time.Hour)
	eventually(t, settle, "balanced after the delay", func() error { return c.settled(nodes) })
}
