// Package limits holds the bounds every schema format package (avro, protobuf, jsonschema)
// shares, so that no set of references and no compatibility check takes unbounded memory or
// time: the number and total size of the references one schema brings, and the work budget of
// one compatibility check (a memo of the node pairs compared, with a count of comparisons).
//
// It knows no format: the size and nesting of schema text are each format's own (jsonlimit
// counts JSON nesting).
package limits

import "fmt"

const (
	// MaxRefs is the most references one schema may bring.
	MaxRefs = 256
	// MaxRefBytes bounds the total text of one schema's references: a parser may parse each
	// of them once per round while resolving their order.
	MaxRefBytes = 4 << 20
	// MaxComparisons bounds the work of one compatibility check: union or combined schemas are
	// compared branch against branch, and recursive schemas pair up many nodes.
	MaxComparisons = 100000
)

// TooComplex is the issue of a pair not compared because the budget ran out.
const TooComplex = "schemas too complex to compare"

// Exhausted is said first when a check ran out of budget: some pairs were counted as failures.
var Exhausted = fmt.Sprintf("schemas too complex to compare (more than %d comparisons); treated as incompatible", MaxComparisons)

// Refs returns an error (without ErrInvalid: the caller wraps it with its own) when refs are
// more than MaxRefs or their texts total more than MaxRefBytes.
func Refs(refs map[string]string) error {
	if len(refs) > MaxRefs {
		return fmt.Errorf("%d references, at most %d", len(refs), MaxRefs)
	}
	total := 0
	for _, text := range refs {
		total += len(text)
	}
	if total > MaxRefBytes {
		return fmt.Errorf("references total %d bytes, at most %d", total, MaxRefBytes)
	}
	return nil
}

// Memo memoises the issues found per (reader, writer) node pair K within one compatibility
// check, and counts the comparisons against MaxComparisons.
type Memo[K comparable, I any] struct {
	memo   map[K][]I
	budget int
}

// NewMemo returns an empty memo with the whole budget.
func NewMemo[K comparable, I any]() *Memo[K, I] {
	return &Memo[K, I]{memo: map[K][]I{}, budget: MaxComparisons}
}

// Check returns the issues of pair, computing them with compare the first time. A pair being
// compared counts as compatible when met again, which ends recursion through recursive types
// (the outer comparison of the same pair decides). Past the budget a new pair is the single
// issue tooComplex.
func (m *Memo[K, I]) Check(pair K, compare func() []I, tooComplex I) []I {
	if issues, ok := m.memo[pair]; ok {
		return issues
	}
	m.budget--
	if m.budget < 0 {
		return []I{tooComplex}
	}
	m.memo[pair] = nil
	issues := compare()
	m.memo[pair] = issues
	return issues
}

// Exhausted reports whether some comparisons were cut short and counted as failures.
func (m *Memo[K, I]) Exhausted() bool { return m.budget < 0 }
