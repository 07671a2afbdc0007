package avro

import (
	"fmt"
	"slices"
	"strings"

	hamba "github.com/hamba/avro/v2"

	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Incompatibilities lists why data written with writer cannot be read with reader, following
// Avro schema resolution: one message per problem, each starting with the path of the field or
// type concerned. An empty result means compatible.
func Incompatibilities(reader, writer *Schema) []string {
	c := &checker{memo: limits.NewMemo[pair, issue]()}
	issues := c.check(reader.root, writer.root)
	if c.memo.Exhausted() {
		// Some comparisons were cut short and counted as failures: say so first.
		issues = append([]issue{{msg: limits.Exhausted}}, issues...)
	}
	out := make([]string, 0, len(issues))
	for _, is := range issues {
		out = append(out, is.String())
	}
	return out
}

// issue is one problem; path is relative to the schema pair that produced it.
type issue struct {
	path []string
	msg  string
}

func (is issue) String() string {
	if len(is.path) == 0 {
		return "/: " + is.msg
	}
	return "/" + strings.Join(is.path, "/") + ": " + is.msg
}

func prefixed(prefix string, issues []issue) []issue {
	out := make([]issue, len(issues))
	for i, is := range issues {
		out[i] = issue{path: append([]string{prefix}, is.path...), msg: is.msg}
	}
	return out
}

type pair struct{ reader, writer hamba.Schema }

// checker memoises the result per (reader, writer) node pair. A pair being checked counts as
// compatible when met again, which ends recursion through recursive named types (the result is
// then decided by the outer check of the same pair).
type checker struct {
	memo *limits.Memo[pair, issue]
}

func deref(s hamba.Schema) hamba.Schema {
	if r, ok := s.(*hamba.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func (c *checker) check(reader, writer hamba.Schema) []issue {
	reader, writer = deref(reader), deref(writer)
	return c.memo.Check(pair{reader, writer}, func() []issue { return c.match(reader, writer) }, issue{msg: limits.TooComplex})
}

func (c *checker) match(reader, writer hamba.Schema) []issue {
	if wu, ok := writer.(*hamba.UnionSchema); ok {
		// Every branch the writer may have used must be readable.
		var issues []issue
		for i, branch := range wu.Types() {
			if _, ru := reader.(*hamba.UnionSchema); ru {
				if !c.readableByUnion(reader.(*hamba.UnionSchema), branch) {
					issues = append(issues, issue{path: []string{fmt.Sprintf("union[%d]", i)},
						msg: fmt.Sprintf("writer union branch %s has no compatible branch in the reader union", describe(branch))})
				}
				continue
			}
			issues = append(issues, prefixed(fmt.Sprintf("union[%d]", i), c.check(reader, branch))...)
		}
		return issues
	}
	if ru, ok := reader.(*hamba.UnionSchema); ok {
		if c.readableByUnion(ru, writer) {
			return nil
		}
		return []issue{{msg: fmt.Sprintf("writer type %s is not readable by any branch of the reader union %s", describe(writer), describe(reader))}}
	}
	if reader.Type() != writer.Type() {
		if promotable(writer.Type(), reader.Type()) {
			return nil
		}
		return []issue{{msg: fmt.Sprintf("type mismatch: reader %s, writer %s", describe(reader), describe(writer))}}
	}
	switch r := reader.(type) {
	case *hamba.ArraySchema:
		return prefixed("items", c.check(r.Items(), writer.(*hamba.ArraySchema).Items()))
	case *hamba.MapSchema:
		return prefixed("values", c.check(r.Values(), writer.(*hamba.MapSchema).Values()))
	case *hamba.FixedSchema:
		w := writer.(*hamba.FixedSchema)
		issues := nameIssues(r, w)
		if r.Size() != w.Size() {
			issues = append(issues, issue{msg: fmt.Sprintf("fixed %s size changed from %d (writer) to %d (reader)", r.FullName(), w.Size(), r.Size())})
		}
		return issues
	case *hamba.EnumSchema:
		w := writer.(*hamba.EnumSchema)
		issues := nameIssues(r, w)
		if r.HasDefault() {
			return issues
		}
		var missing []string
		for _, sym := range w.Symbols() {
			if !slices.Contains(r.Symbols(), sym) {
				missing = append(missing, sym)
			}
		}
		if len(missing) > 0 {
			issues = append(issues, issue{msg: fmt.Sprintf("enum %s: reader lacks writer symbols %s and has no default", r.FullName(), strings.Join(missing, ", "))})
		}
		return issues
	case *hamba.RecordSchema:
		w := writer.(*hamba.RecordSchema)
		return append(nameIssues(r, w), c.fields(r, w)...)
	}
	return nil
}

// readableByUnion reports whether some branch of the reader union can read data of writer.
func (c *checker) readableByUnion(reader *hamba.UnionSchema, writer hamba.Schema) bool {
	for _, branch := range reader.Types() {
		if len(c.check(branch, writer)) == 0 {
			return true
		}
	}
	return false
}

func (c *checker) fields(reader, writer *hamba.RecordSchema) []issue {
	var issues []issue
	for _, rf := range reader.Fields() {
		wf := writerField(writer, rf)
		if wf == nil {
			if !rf.HasDefault() {
				issues = append(issues, issue{path: []string{rf.Name()},
					msg: fmt.Sprintf("reader field %q of %s is missing from the writer and has no default", rf.Name(), reader.FullName())})
			}
			continue
		}
		issues = append(issues, prefixed(rf.Name(), c.check(rf.Type(), wf.Type()))...)
	}
	return issues
}

// writerField finds the writer field a reader field reads: same name, else one of the reader
// field's aliases.
func writerField(writer *hamba.RecordSchema, rf *hamba.Field) *hamba.Field {
	for _, wf := range writer.Fields() {
		if wf.Name() == rf.Name() {
			return wf
		}
	}
	for _, wf := range writer.Fields() {
		if slices.Contains(rf.Aliases(), wf.Name()) {
			return wf
		}
	}
	return nil
}

// nameIssues applies the Avro rule for named types: the unqualified names match, or one of the
// reader's aliases is the writer's full name.
func nameIssues(reader, writer hamba.NamedSchema) []issue {
	if reader.Name() == writer.Name() || slices.Contains(reader.Aliases(), writer.FullName()) {
		return nil
	}
	return []issue{{msg: fmt.Sprintf("name mismatch: reader %s, writer %s (and no reader alias matches)", reader.FullName(), writer.FullName())}}
}

// promotable lists the Avro type promotions: int to long, float or double; long to float or
// double; float to double; string to bytes and bytes to string.
func promotable(writer, reader hamba.Type) bool {
	switch writer {
	case hamba.Int:
		return reader == hamba.Long || reader == hamba.Float || reader == hamba.Double
	case hamba.Long:
		return reader == hamba.Float || reader == hamba.Double
	case hamba.Float:
		return reader == hamba.Double
	case hamba.String:
		return reader == hamba.Bytes
	case hamba.Bytes:
		return reader == hamba.String
	}
	return false
}

func describe(s hamba.Schema) string {
	s = deref(s)
	switch t := s.(type) {
	case hamba.NamedSchema:
		return fmt.Sprintf("%s %s", t.Type(), t.FullName())
	case *hamba.UnionSchema:
		parts := make([]string, 0, len(t.Types()))
		for _, b := range t.Types() {
			parts = append(parts, describe(b))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *hamba.ArraySchema:
		return "array<" + describe(t.Items()) + ">"
	case *hamba.MapSchema:
		return "map<" + describe(t.Values()) + ">"
	}
	return string(s.Type())
}
