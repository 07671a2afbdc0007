package jsonschema

import (
	"fmt"
	"reflect"

	js "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Incompatibilities lists why data valid under writer would be rejected by reader, following
// Confluent's JSON Schema rules: one message per problem, each starting with the JSON pointer of
// the schema location ("#/properties/age"). An empty result means compatible.
func Incompatibilities(reader, writer *Schema) []string {
	c := &checker{memo: limits.NewMemo[pair, issue](), derived: map[[2]*js.Schema]*js.Schema{}}
	issues := c.check(reader.root, writer.root)
	if c.memo.Exhausted() {
		// Some comparisons were cut short and counted as failures: say so first.
		issues = append([]issue{{msg: limits.Exhausted}}, issues...)
	}
	out := make([]string, 0, len(issues))
	for _, is := range issues {
		out = append(out, "#"+is.path+": "+is.msg)
	}
	return out
}

type issue struct{ path, msg string }

func under(prefix string, issues []issue) []issue {
	out := make([]issue, len(issues))
	for i, is := range issues {
		out[i] = issue{path: prefix + is.path, msg: is.msg}
	}
	return out
}

type pair struct{ reader, writer *js.Schema }

// checker memoises per (reader, writer) node pair; a pair being compared counts as compatible
// when met again, which ends recursion through recursive $refs.
type checker struct {
	memo *limits.Memo[pair, issue]
	// derived caches schemas built for comparison (branches merged with their parent's keywords).
	derived map[[2]*js.Schema]*js.Schema
}

func (c *checker) check(r, w *js.Schema) []issue {
	r, w = deref(r), deref(w)
	return c.memo.Check(pair{r, w}, func() []issue { return c.compare(r, w) }, issue{msg: limits.TooComplex})
}

// compatible reports whether r reads everything w allows.
func (c *checker) compatible(r, w *js.Schema) bool { return len(c.check(r, w)) == 0 }

// deref follows $ref. Like draft-07, keywords next to a $ref are not compared.
func deref(s *js.Schema) *js.Schema {
	for i := 0; s != nil && s.Ref != nil && i < 64; i++ {
		s = s.Ref
	}
	return s
}

func isTrue(s *js.Schema) bool  { return s == nil || (s.Bool != nil && *s.Bool) || isEmpty(s) }
func isFalse(s *js.Schema) bool { return s != nil && s.Bool != nil && !*s.Bool }

// isEmpty reports a schema with no assertions: it accepts every value.
func isEmpty(s *js.Schema) bool {
	return s.Bool == nil && s.Ref == nil && s.RecursiveRef == nil && s.DynamicRef == nil &&
		s.Types == nil && s.Enum == nil && s.Const == nil && s.Not == nil && !hasCombined(s) && s.If == nil &&
		s.MaxProperties == nil && s.MinProperties == nil && len(s.Required) == 0 && s.PropertyNames == nil &&
		len(s.Properties) == 0 && len(s.PatternProperties) == 0 && s.AdditionalProperties == nil &&
		len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 &&
		s.UnevaluatedProperties == nil && s.MinItems == nil && s.MaxItems == nil && !s.UniqueItems &&
		s.Contains == nil && s.Items == nil && s.AdditionalItems == nil && len(s.PrefixItems) == 0 &&
		s.Items2020 == nil && s.UnevaluatedItems == nil && s.MinLength == nil && s.MaxLength == nil &&
		s.Pattern == nil && s.Maximum == nil && s.Minimum == nil && s.ExclusiveMaximum == nil &&
		s.ExclusiveMinimum == nil && s.MultipleOf == nil
}

func (c *checker) compare(r, w *js.Schema) []issue {
	switch {
	case isFalse(w):
		return nil // the writer writes nothing
	case isFalse(r):
		return []issue{{msg: "reader schema is false and rejects every value"}}
	case isTrue(r):
		return nil
	case hasCombined(r) || hasCombined(w):
		return c.combined(r, w)
	}
	var issues []issue
	issues = append(issues, types(r, w)...)
	issues = append(issues, enums(r, w)...)
	issues = append(issues, stringKeywords(r, w)...)
	issues = append(issues, numbers(r, w)...)
	issues = append(issues, c.objects(r, w)...)
	issues = append(issues, c.arrays(r, w)...)
	if r.Not != nil {
		if w.Not == nil {
			issues = append(issues, issue{"/not", "reader added \"not\""})
		} else {
			// Values the reader excludes must be excluded by the writer too.
			issues = append(issues, under("/not", c.check(w.Not, r.Not))...)
		}
	}
	return issues
}

func hasCombined(s *js.Schema) bool { return len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) > 0 }

// combined compares schemas with allOf, anyOf or oneOf. A branch is compared merged with the
// keywords next to it ({"type":"object","oneOf":[{"required":["a"]}]} branches are objects).
func (c *checker) combined(r, w *js.Schema) []issue {
	var issues []issue
	for i, rb := range r.AllOf {
		// The writer must satisfy every reader branch.
		issues = append(issues, under(fmt.Sprintf("/allOf/%d", i), c.check(c.merged(r, rb), w))...)
	}
	r = c.without(r, true)
	if len(w.AllOf) > 0 {
		// One writer branch the reader accepts is enough (product type narrowed).
		ws := c.without(w, true)
		if c.compatible(r, ws) {
			return issues
		}
		for _, wb := range w.AllOf {
			if c.compatible(r, c.merged(ws, wb)) {
				return issues
			}
		}
		return append(issues, c.check(r, ws)...)
	}
	rSum, wSum := sum(r), sum(w)
	switch {
	case rSum == nil && wSum == nil:
		return append(issues, c.check(r, w)...)
	case rSum == nil:
		// Every branch the writer may use must be readable.
		for i, wb := range wSum {
			issues = append(issues, under(fmt.Sprintf("/%s/%d", sumKeyword(w), i), c.check(r, c.merged(w, wb)))...)
		}
	case wSum == nil:
		if !c.readable(r, rSum, w) {
			issues = append(issues, issue{"/" + sumKeyword(r), "no reader branch accepts the writer schema"})
		}
	default:
		if len(w.OneOf) == 0 && len(r.OneOf) > 0 {
			issues = append(issues, issue{"", "combined type changed from anyOf (writer) to oneOf (reader)"})
		}
		for i, wb := range wSum {
			if !c.readable(r, rSum, c.merged(w, wb)) {
				issues = append(issues, issue{fmt.Sprintf("/%s/%d", sumKeyword(w), i), "writer branch has no compatible reader branch (sum type narrowed)"})
			}
		}
	}
	return issues
}

// readable reports whether one of the reader's branches accepts w.
func (c *checker) readable(r *js.Schema, branches []*js.Schema, w *js.Schema) bool {
	for _, rb := range branches {
		if c.compatible(c.merged(r, rb), w) {
			return true
		}
	}
	return false
}

// merged is branch with the assertions it lacks taken from parent (without parent's combined
// keywords). Results are cached so that memoisation by node pair keeps working.
func (c *checker) merged(parent, branch *js.Schema) *js.Schema {
	branch = deref(branch)
	key := [2]*js.Schema{parent, branch}
	if m, ok := c.derived[key]; ok {
		return m
	}
	own := c.without(parent, false)
	m := branch
	if branch.Bool == nil && !isTrue(own) {
		cp := *branch
		dst, src := reflect.ValueOf(&cp).Elem(), reflect.ValueOf(own).Elem()
		for i := 0; i < dst.NumField(); i++ {
			field := dst.Type().Field(i)
			if field.Name == "Ref" || field.Name == "RecursiveRef" || field.Name == "DynamicRef" {
				continue // a parent's $ref would replace the branch when followed
			}
			if field.IsExported() && dst.Field(i).IsZero() {
				dst.Field(i).Set(src.Field(i))
			}
		}
		m = &cp
	}
	c.derived[key] = m
	return m
}

// without returns s without allOf (allOfOnly) or without all combined keywords.
func (c *checker) without(s *js.Schema, allOfOnly bool) *js.Schema {
	if len(s.AllOf) == 0 && (allOfOnly || !hasCombined(s)) {
		return s
	}
	key := [2]*js.Schema{s, nil}
	if !allOfOnly {
		key[1] = s
	}
	if m, ok := c.derived[key]; ok {
		return m
	}
	cp := *s
	cp.AllOf = nil
	if !allOfOnly {
		cp.AnyOf, cp.OneOf = nil, nil
	}
	c.derived[key] = &cp
	return &cp
}

func sum(s *js.Schema) []*js.Schema {
	if len(s.OneOf) > 0 {
		return s.OneOf
	}
	return s.AnyOf
}

func sumKeyword(s *js.Schema) string {
	if len(s.OneOf) > 0 {
		return "oneOf"
	}
	return "anyOf"
}
