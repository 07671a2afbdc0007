package jsonschema

import (
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"
)

// typeSet is the set of JSON types a schema allows; nil means any type.
func typeSet(s *js.Schema) []string {
	if s.Types != nil {
		types := s.Types.ToStrings()
		if slices.Contains(types, "number") && !slices.Contains(types, "integer") {
			types = append(types, "integer")
		}
		return types
	}
	if s.Enum != nil || s.Const != nil {
		var types []string
		values := enumValues(s)
		for _, v := range values {
			types = append(types, jsonType(v))
		}
		return types
	}
	return nil
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		if s := fmt.Sprint(v); !strings.ContainsAny(s, ".eE") {
			return "integer"
		}
		return "number"
	}
}

func types(r, w *js.Schema) []issue {
	rt := typeSet(r)
	if rt == nil {
		return nil
	}
	wt := typeSet(w)
	if wt == nil {
		if hasCombined(w) {
			return nil
		}
		return []issue{{"/type", fmt.Sprintf("writer allows any type, reader only %s", strings.Join(rt, ", "))}}
	}
	var missing []string
	for _, t := range wt {
		if !slices.Contains(rt, t) && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return []issue{{"/type", fmt.Sprintf("type narrowed: writer allows %s, reader does not", strings.Join(missing, ", "))}}
	}
	return nil
}

// allows reports whether the schema may accept values of JSON type t.
func allows(s *js.Schema, t string) bool {
	types := typeSet(s)
	return types == nil || slices.Contains(types, t)
}

func enumValues(s *js.Schema) []any {
	if s.Const != nil {
		return []any{*s.Const}
	}
	if s.Enum != nil {
		return s.Enum.Values
	}
	return nil
}

func enums(r, w *js.Schema) []issue {
	if r.Enum == nil && r.Const == nil {
		return nil
	}
	rv := enumValues(r)
	if w.Enum == nil && w.Const == nil {
		return []issue{{"/enum", "reader restricts values to an enum, writer does not"}}
	}
	var missing []string
	for _, v := range enumValues(w) {
		if !slices.ContainsFunc(rv, func(x any) bool { return equalJSON(x, v) }) {
			missing = append(missing, fmt.Sprint(v))
		}
	}
	if len(missing) > 0 {
		return []issue{{"/enum", fmt.Sprintf("enum narrowed: reader lacks %s", strings.Join(missing, ", "))}}
	}
	return nil
}

func equalJSON(a, b any) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) || reflect.DeepEqual(a, b)
}

func stringKeywords(r, w *js.Schema) []issue {
	if !allows(w, "string") || !allows(r, "string") {
		return nil
	}
	issues := limit("/maxLength", r.MaxLength, w.MaxLength, true)
	issues = append(issues, limit("/minLength", r.MinLength, w.MinLength, false)...)
	if r.Pattern != nil && (w.Pattern == nil || r.Pattern.String() != w.Pattern.String()) {
		issues = append(issues, issue{"/pattern", fmt.Sprintf("reader pattern %q added or changed", r.Pattern.String())})
	}
	return issues
}

// limit compares an upper (max) or lower bound: the reader's may only be absent or looser.
func limit(path string, r, w *int, upper bool) []issue {
	switch {
	case r == nil:
		return nil
	case w == nil:
		return []issue{{path, fmt.Sprintf("reader added %s %d", path[1:], *r)}}
	case upper && *r < *w:
		return []issue{{path, fmt.Sprintf("%s decreased from %d to %d", path[1:], *w, *r)}}
	case !upper && *r > *w:
		return []issue{{path, fmt.Sprintf("%s increased from %d to %d", path[1:], *w, *r)}}
	}
	return nil
}

func numbers(r, w *js.Schema) []issue {
	if !allows(w, "number") && !allows(w, "integer") {
		return nil
	}
	var issues []issue
	bound := func(name string, rv, wv *big.Rat, upper bool) {
		switch {
		case rv == nil:
		case wv == nil:
			issues = append(issues, issue{"/" + name, fmt.Sprintf("reader added %s %s", name, rv.RatString())})
		case upper && rv.Cmp(wv) < 0:
			issues = append(issues, issue{"/" + name, fmt.Sprintf("%s decreased from %s to %s", name, wv.RatString(), rv.RatString())})
		case !upper && rv.Cmp(wv) > 0:
			issues = append(issues, issue{"/" + name, fmt.Sprintf("%s increased from %s to %s", name, wv.RatString(), rv.RatString())})
		}
	}
	bound("maximum", r.Maximum, w.Maximum, true)
	bound("minimum", r.Minimum, w.Minimum, false)
	bound("exclusiveMaximum", r.ExclusiveMaximum, w.ExclusiveMaximum, true)
	bound("exclusiveMinimum", r.ExclusiveMinimum, w.ExclusiveMinimum, false)
	if r.MultipleOf != nil {
		// Every multiple of the writer's step must be a multiple of the reader's.
		ok := false
		if w.MultipleOf != nil && r.MultipleOf.Sign() != 0 {
			q := new(big.Rat).Quo(w.MultipleOf, r.MultipleOf)
			ok = q.IsInt()
		}
		if !ok {
			issues = append(issues, issue{"/multipleOf", fmt.Sprintf("reader multipleOf %s does not divide the writer's", r.MultipleOf.RatString())})
		}
	}
	return issues
}

// contentModel is what an object schema says about properties it does not list: nil extra means
// any value (open), a false schema means none (closed), another schema partially open.
type contentModel struct {
	patterns map[js.Regexp]*js.Schema
	extra    *js.Schema
}

func objectModel(s *js.Schema) contentModel {
	m := contentModel{patterns: s.PatternProperties}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		if !a {
			m.extra = &js.Schema{Bool: &a}
		}
	case *js.Schema:
		m.extra = a
	}
	if m.extra == nil && s.UnevaluatedProperties != nil {
		m.extra = s.UnevaluatedProperties
	}
	return m
}

// schemaFor returns the schema the model applies to an unlisted property; nil means any value.
func (m contentModel) schemaFor(name string) *js.Schema {
	var match js.Regexp
	for re := range m.patterns {
		if re.MatchString(name) && (match == nil || re.String() < match.String()) {
			match = re
		}
	}
	if match != nil {
		return m.patterns[match]
	}
	return m.extra
}

func (c *checker) objects(r, w *js.Schema) []issue {
	if !allows(w, "object") || !allows(r, "object") {
		return nil
	}
	rm, wm := objectModel(r), objectModel(w)
	var issues []issue
	for _, name := range sortedKeys(w.Properties) {
		path := "/properties/" + escape(name)
		if rp, ok := r.Properties[name]; ok {
			issues = append(issues, under(path, c.check(rp, w.Properties[name]))...)
			continue
		}
		switch extra := rm.schemaFor(name); {
		case extra == nil:
		case isFalse(extra):
			issues = append(issues, issue{path, fmt.Sprintf("property %q removed from a closed content model", name)})
		case !c.compatible(extra, w.Properties[name]):
			issues = append(issues, issue{path, fmt.Sprintf("property %q removed and not covered by the reader's additional or pattern properties", name)})
		}
	}
	for _, name := range sortedKeys(r.Properties) {
		if _, ok := w.Properties[name]; ok {
			continue
		}
		path := "/properties/" + escape(name)
		switch extra := wm.schemaFor(name); {
		case extra == nil:
			if !isTrue(deref(r.Properties[name])) {
				issues = append(issues, issue{path, fmt.Sprintf("property %q added to an open content model: the writer may already send it with any value", name)})
			}
		case isFalse(extra):
		case !c.compatible(r.Properties[name], extra):
			issues = append(issues, issue{path, fmt.Sprintf("property %q added and the writer's additional or pattern properties allow other values", name)})
		}
	}
	for _, name := range r.Required {
		if slices.Contains(w.Required, name) {
			continue
		}
		if p, ok := r.Properties[name]; ok && deref(p).Default != nil {
			continue
		}
		issues = append(issues, issue{"/required/" + escape(name), fmt.Sprintf("property %q is required by the reader but not by the writer, and has no default", name)})
	}
	issues = append(issues, c.additional("/additionalProperties", rm.extra, wm.extra)...)
	issues = append(issues, limit("/maxProperties", r.MaxProperties, w.MaxProperties, true)...)
	issues = append(issues, limit("/minProperties", r.MinProperties, w.MinProperties, false)...)
	for _, name := range sortedKeys(r.DependentRequired) {
		for _, dep := range r.DependentRequired[name] {
			if !slices.Contains(w.DependentRequired[name], dep) && !slices.Contains(w.Required, dep) {
				issues = append(issues, issue{"/dependentRequired/" + escape(name), fmt.Sprintf("reader requires %q with %q, writer does not", dep, name)})
			}
		}
	}
	return issues
}

// additional compares the schemas for unlisted properties or items (nil: any value).
func (c *checker) additional(path string, r, w *js.Schema) []issue {
	switch {
	case r == nil || isFalse(w):
		return nil
	case isFalse(r):
		return []issue{{path, "reader closes the content model the writer leaves open"}}
	case w == nil:
		if isTrue(r) {
			return nil
		}
		return []issue{{path, "reader narrows the content model the writer leaves open"}}
	}
	return under(path, c.check(r, w))
}

// itemsModel normalises the array keywords of every draft: per-position schemas, then the schema
// of the remaining items (nil: any value).
func itemsModel(s *js.Schema) (prefix []*js.Schema, rest *js.Schema) {
	if s.PrefixItems != nil || s.Items2020 != nil {
		return s.PrefixItems, s.Items2020
	}
	switch items := s.Items.(type) {
	case *js.Schema:
		return nil, items
	case []*js.Schema:
		prefix = items
		switch a := s.AdditionalItems.(type) {
		case bool:
			if !a {
				rest = &js.Schema{Bool: &a}
			}
		case *js.Schema:
			rest = a
		}
	}
	return prefix, rest
}

func (c *checker) arrays(r, w *js.Schema) []issue {
	if !allows(w, "array") || !allows(r, "array") {
		return nil
	}
	rp, rr := itemsModel(r)
	wp, wr := itemsModel(w)
	var issues []issue
	for i := 0; i < max(len(rp), len(wp)); i++ {
		path := fmt.Sprintf("/items/%d", i)
		switch {
		case i < len(rp) && i < len(wp):
			issues = append(issues, under(path, c.check(rp[i], wp[i]))...)
		case i < len(wp):
			issues = append(issues, c.additional(path, rr, wp[i])...)
		default:
			issues = append(issues, c.additional(path, rp[i], wr)...)
		}
	}
	issues = append(issues, c.additional("/items", rr, wr)...)
	issues = append(issues, limit("/maxItems", r.MaxItems, w.MaxItems, true)...)
	issues = append(issues, limit("/minItems", r.MinItems, w.MinItems, false)...)
	if r.UniqueItems && !w.UniqueItems {
		issues = append(issues, issue{"/uniqueItems", "reader added uniqueItems"})
	}
	return issues
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escape writes a property name as a JSON pointer token.
func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
