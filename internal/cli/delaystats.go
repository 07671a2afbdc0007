package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// delayStats is the broker's answer to GET /v1/delay/stats, and the merge
// of several brokers' answers.
type delayStats struct {
	Buckets         []string         `json:"buckets"`
	Topics          []delayTopicStat `json:"topics"`
	StorePartitions int32            `json:"store_partitions"`
	Partitions      []int32          `json:"partitions"`
	Loading         []int32          `json:"loading,omitempty"`
	// Missing and Twice are the merge's: store partitions no broker
	// answered for, and those two brokers did.
	Missing []int32 `json:"missing,omitempty"`
	Twice   []int32 `json:"twice,omitempty"`
}

type delayTopicStat struct {
	Topic    string  `json:"topic"`
	Pending  int64   `json:"pending"`
	FirstDue int64   `json:"first_due_ms"`
	LastDue  int64   `json:"last_due_ms"`
	DueIn    []int64 `json:"due_in"`
}

// gatherStats asks every broker and merges the answers: each broker
// answers for the store partitions it leads.
func gatherStats(cmd *cobra.Command, addrs []string, q url.Values) (delayStats, error) {
	var out delayStats
	by := map[string]*delayTopicStat{}
	seen := map[int32]int{}
	for _, a := range addrs {
		var st delayStats
		if _, err := adminCallTo(cmd, a, http.MethodGet, "/v1/delay/stats", q, &st); err != nil {
			return out, err
		}
		if out.Buckets == nil {
			out.Buckets = st.Buckets
		} else if !slices.Equal(out.Buckets, st.Buckets) {
			return out, fmt.Errorf("brokers %s and %s count in different buckets (%v, %v)", addrs[0], a, out.Buckets, st.Buckets)
		}
		out.StorePartitions = max(out.StorePartitions, st.StorePartitions)
		for _, p := range st.Partitions {
			seen[p]++
		}
		out.Loading = append(out.Loading, st.Loading...)
		for _, ts := range st.Topics {
			m := by[ts.Topic]
			if m == nil {
				c := ts
				c.DueIn = append([]int64(nil), ts.DueIn...)
				by[ts.Topic] = &c
				continue
			}
			m.Pending += ts.Pending
			m.FirstDue, m.LastDue = min(m.FirstDue, ts.FirstDue), max(m.LastDue, ts.LastDue)
			for i := range min(len(m.DueIn), len(ts.DueIn)) {
				m.DueIn[i] += ts.DueIn[i]
			}
		}
	}
	for p := range out.StorePartitions {
		switch seen[p] {
		case 0:
			out.Missing = append(out.Missing, p)
		case 1:
		default:
			out.Twice = append(out.Twice, p)
		}
	}
	out.Partitions = make([]int32, 0, len(seen))
	for p := range seen {
		out.Partitions = append(out.Partitions, p)
	}
	slices.Sort(out.Partitions)
	slices.Sort(out.Loading)
	out.Topics = make([]delayTopicStat, 0, len(by))
	for _, ts := range by {
		out.Topics = append(out.Topics, *ts)
	}
	sort.Slice(out.Topics, func(i, j int) bool { return out.Topics[i].Topic < out.Topics[j].Topic })
	return out, nil
}

// coverage says what the merged answer does not cover, or "".
func (st *delayStats) coverage() string {
	var parts []string
	if len(st.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("no broker answered for store partitions %v (give every broker's --admin address)", st.Missing))
	}
	if len(st.Twice) > 0 {
		parts = append(parts, fmt.Sprintf("store partitions %v were answered for twice (leadership moving): their records are counted twice", st.Twice))
	}
	if len(st.Loading) > 0 {
		parts = append(parts, fmt.Sprintf("store partitions %v are still loading: their counts are partial", st.Loading))
	}
	return strings.Join(parts, "; ")
}

type cancelled struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// cancelAll cancels on the brokers given: by message id on each (each
// reads the store partitions it leads), by offset on the first that leads
// the record's store partition (the others answer 421).
func cancelAll(cmd *cobra.Command, addrs []string, q url.Values, byID bool) ([]cancelled, error) {
	var all []cancelled
	var lastErr error
	for _, a := range addrs {
		var res struct {
			Cancelled []cancelled `json:"cancelled"`
		}
		code, err := adminCallTo(cmd, a, http.MethodPost, "/v1/delay/cancel", q, &res)
		switch {
		case err == nil && !byID:
			return res.Cancelled, nil
		case err == nil:
			all = append(all, res.Cancelled...)
		case code == http.StatusMisdirectedRequest && len(addrs) > 1:
			lastErr = err // led by another broker: ask the next
		default:
			return all, err
		}
	}
	if !byID {
		if lastErr == nil {
			lastErr = errors.New("no broker answered")
		}
		return nil, fmt.Errorf("no broker given leads the record's store partition: %w", lastErr)
	}
	return all, nil
}
