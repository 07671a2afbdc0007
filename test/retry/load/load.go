// Package load is the workload the retry tests share with their helper
// process: which records there are, which of them fail and how often, and
// the check that each key's records were handled in produce order.
package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrInjected is what a failing record's handler returns.
var ErrInjected = errors.New("injected failure")

// Key is the key of key index k.
func Key(k int) string { return fmt.Sprintf("key-%02d", k) }

// Value of the seq-th record of key k.
func Value(k, seq int) string { return fmt.Sprintf("%s:%d", Key(k), seq) }

// Parse splits a value into key and sequence number.
func Parse(v []byte) (string, int, error) {
	k, s, ok := strings.Cut(string(v), ":")
	n, err := strconv.Atoi(s)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("bad value %q", v)
	}
	return k, n, nil
}

// Permanent reports whether the record always fails (a dead letter).
func Permanent(k, seq int) bool { return k == 2 && seq == 10 }

// FailsUpTo is how many runs of the record fail: 3 for some (two blocking
// attempts, then one from the retry topic), 1 for others (one blocking
// retry), 0 for most.
func FailsUpTo(k, seq int) int {
	switch {
	case k%3 == 0 && seq%7 == 2:
		return 3
	case k%3 == 1 && seq%5 == 1:
		return 1
	}
	return 0
}

// Fail decides whether the run number attempt of a record fails.
func Fail(v []byte, attempt int) error {
	key, seq, err := Parse(v)
	if err != nil {
		return err
	}
	k, _ := strconv.Atoi(strings.TrimPrefix(key, "key-"))
	if Permanent(k, seq) || attempt <= FailsUpTo(k, seq) {
		return fmt.Errorf("%w: %s attempt %d", ErrInjected, v, attempt)
	}
	return nil
}

// Produce writes perKey records for each of keys keys, interleaved, and
// waits for them all.
func Produce(ctx context.Context, cl *kgo.Client, topic string, keys, perKey int) error {
	var recs []*kgo.Record
	for s := 0; s < perKey; s++ {
		for k := 0; k < keys; k++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(Key(k)), Value: []byte(Value(k, s))})
		}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// CheckOrder checks handled (values in the order a key's records were
// handled successfully, per key) against produce order: the first handling
// of each record comes in sequence order, none is missing but the permanent
// failures, and no permanent failure was handled. Handling a record again
// (after a crash) is allowed.
func CheckOrder(handled map[string][]int, keys, perKey int) error {
	for k := 0; k < keys; k++ {
		seen := map[int]bool{}
		var first []int
		for _, s := range handled[Key(k)] {
			if !seen[s] {
				seen[s] = true
				first = append(first, s)
			}
		}
		var want []int
		for s := 0; s < perKey; s++ {
			if !Permanent(k, s) {
				want = append(want, s)
			}
		}
		if fmt.Sprint(first) != fmt.Sprint(want) {
			return fmt.Errorf("%s: first handlings in order %v, want %v", Key(k), first, want)
		}
	}
	return nil
}
