package protobuf

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Incompatibilities lists why data written with writer cannot be read with reader: Confluent's
// Protobuf rules plus renumbering, syntax changes and closed-enum value removals (see
// docs/schema-compatibility.md). Each message starts with a path "#/Message/field-number".
func Incompatibilities(reader, writer *Schema) []string {
	c := &checker{done: map[[2]protoreflect.FullName]bool{}}
	c.file(reader.file, writer.file)
	return c.out
}

type checker struct {
	out []string
	// done holds the (reader, writer) message and enum pairs already compared, so a type
	// reached both by name and through a field type, or recursively, is compared once.
	done map[[2]protoreflect.FullName]bool
}

func (c *checker) add(path, format string, args ...any) {
	c.out = append(c.out, path+": "+fmt.Sprintf(format, args...))
}

func (c *checker) file(r, w protoreflect.FileDescriptor) {
	if rs, ws := syntaxName(r), syntaxName(w); rs != ws {
		c.add("#/", "syntax changed from %s (writer) to %s (reader)", ws, rs)
	}
	if r.Package() != w.Package() {
		c.add("#/", "package changed from %q (writer) to %q (reader)", w.Package(), r.Package())
	}
	rMsgs, wMsgs := messagesByName(r), messagesByName(w)
	for _, name := range wMsgs.order {
		rm, ok := rMsgs.byName[name]
		if !ok {
			what := "message"
			if w.Messages().Len() > 0 && relName(w.Messages().Get(0)) == name {
				what = "first message (the schema's default message type)"
			}
			c.add("#/"+name, "%s %s removed", what, name)
			continue
		}
		c.message(rm, wMsgs.byName[name])
	}
	rEnums, wEnums := enumsByName(r), enumsByName(w)
	for _, name := range wEnums.order {
		if re, ok := rEnums.byName[name]; ok {
			c.enum(re, wEnums.byName[name])
		}
	}
}

func syntaxName(f protoreflect.FileDescriptor) string {
	if f.Syntax() == protoreflect.Editions {
		return "edition " + editionName(f)
	}
	return f.Syntax().String()
}

// relName is a type's full name without its file's package: the name Confluent matches on, so a
// type keeps its identity when the package changes.
func relName(d protoreflect.Descriptor) string {
	pkg := string(d.ParentFile().Package())
	name := string(d.FullName())
	if pkg != "" {
		return strings.TrimPrefix(name, pkg+".")
	}
	return name
}

type named[T protoreflect.Descriptor] struct {
	order  []string
	byName map[string]T
}

func messagesByName(f protoreflect.FileDescriptor) named[protoreflect.MessageDescriptor] {
	n := named[protoreflect.MessageDescriptor]{byName: map[string]protoreflect.MessageDescriptor{}}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			md := msgs.Get(i)
			if md.IsMapEntry() {
				continue
			}
			n.order = append(n.order, relName(md))
			n.byName[relName(md)] = md
			walk(md.Messages())
		}
	}
	walk(f.Messages())
	return n
}

func enumsByName(f protoreflect.FileDescriptor) named[protoreflect.EnumDescriptor] {
	n := named[protoreflect.EnumDescriptor]{byName: map[string]protoreflect.EnumDescriptor{}}
	addAll := func(enums protoreflect.EnumDescriptors) {
		for i := 0; i < enums.Len(); i++ {
			e := enums.Get(i)
			n.order = append(n.order, relName(e))
			n.byName[relName(e)] = e
		}
	}
	addAll(f.Enums())
	var walk func(protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			addAll(msgs.Get(i).Enums())
			walk(msgs.Get(i).Messages())
		}
	}
	walk(f.Messages())
	return n
}

// enum checks closed enums (proto2, or editions with closed enums): a value the writer can send
// that the reader lacks is not read as that value but moved to unknown fields. Open enums keep
// unknown numbers, so removing their values is compatible, as in Confluent.
func (c *checker) enum(r, w protoreflect.EnumDescriptor) {
	key := [2]protoreflect.FullName{r.FullName(), w.FullName()}
	if !r.IsClosed() || c.done[key] {
		return
	}
	c.done[key] = true
	path := "#/" + relName(w)
	for i := 0; i < w.Values().Len(); i++ {
		v := w.Values().Get(i)
		if r.Values().ByNumber(v.Number()) == nil {
			c.add(path, "closed enum value %s = %d removed", v.Name(), v.Number())
		}
	}
}

// message compares two messages field by field (by number) and reports whether they are
// compatible. Each pair is compared once; a pair met again counts as compatible.
func (c *checker) message(r, w protoreflect.MessageDescriptor) bool {
	key := [2]protoreflect.FullName{r.FullName(), w.FullName()}
	if c.done[key] {
		return true
	}
	c.done[key] = true
	before := len(c.out)
	path := "#/" + relName(w)
	rf, wf := r.Fields(), w.Fields()
	for i := 0; i < wf.Len(); i++ {
		f := wf.Get(i)
		fp := fmt.Sprintf("%s/%d", path, f.Number())
		if moved := rf.ByName(f.Name()); moved != nil && moved.Number() != f.Number() {
			c.add(fp, "field %s renumbered from %d (writer) to %d (reader)", f.Name(), f.Number(), moved.Number())
		}
		g := rf.ByNumber(f.Number())
		if g == nil {
			if f.Cardinality() == protoreflect.Required {
				c.add(fp, "required field %s removed", f.Name())
			}
			continue
		}
		c.field(fp, g, f)
	}
	for i := 0; i < rf.Len(); i++ {
		g := rf.Get(i)
		if wf.ByNumber(g.Number()) == nil && g.Cardinality() == protoreflect.Required {
			c.add(fmt.Sprintf("%s/%d", path, g.Number()), "required field %s added", g.Name())
		}
	}
	c.oneofs(path, r, w)
	return len(c.out) == before
}

// realOneof is the oneof a field belongs to, ignoring the synthetic oneofs of proto3 optional.
func realOneof(f protoreflect.FieldDescriptor) protoreflect.OneofDescriptor {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return o
	}
	return nil
}

func (c *checker) oneofs(path string, r, w protoreflect.MessageDescriptor) {
	for i := 0; i < r.Oneofs().Len(); i++ {
		ro := r.Oneofs().Get(i)
		if ro.IsSynthetic() {
			continue
		}
		moved, existing := 0, 0
		for j := 0; j < ro.Fields().Len(); j++ {
			wfield := w.Fields().ByNumber(ro.Fields().Get(j).Number())
			switch {
			case wfield == nil:
			case realOneof(wfield) == nil:
				moved++
			default:
				existing++
			}
		}
		op := path + "/" + string(ro.Name())
		if moved > 1 {
			c.add(op, "%d fields moved into oneof %s: they were independent, now only one is kept", moved, ro.Name())
		} else if moved == 1 && existing > 0 {
			c.add(op, "a field moved into the existing oneof %s", ro.Name())
		}
	}
	for i := 0; i < w.Oneofs().Len(); i++ {
		wo := w.Oneofs().Get(i)
		ro := r.Oneofs().ByName(wo.Name())
		if wo.IsSynthetic() || ro == nil {
			continue
		}
		for j := 0; j < wo.Fields().Len(); j++ {
			f := wo.Fields().Get(j)
			if ro.Fields().ByNumber(f.Number()) == nil {
				c.add(fmt.Sprintf("%s/%s/%d", path, wo.Name(), f.Number()), "field %s removed from oneof %s", f.Name(), wo.Name())
			}
		}
	}
}

type kind int

const (
	scalarKind kind = iota
	messageKind
	mapKind
)

func (k kind) String() string {
	return [...]string{"scalar", "message", "map"}[k]
}

func fieldKind(f protoreflect.FieldDescriptor) kind {
	switch {
	case f.IsMap():
		return mapKind
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return messageKind
	}
	return scalarKind
}

// field compares the reader and writer fields with one number.
func (c *checker) field(path string, r, w protoreflect.FieldDescriptor) {
	if r.Cardinality() == protoreflect.Required && w.Cardinality() != protoreflect.Required {
		c.add(path, "field %s became required", r.Name())
	}
	c.types(path, r, w, true)
}

func (c *checker) types(path string, r, w protoreflect.FieldDescriptor, checkLabel bool) {
	rk, wk := fieldKind(r), fieldKind(w)
	if rk != wk {
		c.add(path, "field %s changed kind from %s %s (writer) to %s %s (reader)", w.Name(), wk, typeName(w), rk, typeName(r))
		return
	}
	switch rk {
	case scalarKind:
		rg, wg := scalarGroup(r), scalarGroup(w)
		if rg != wg {
			c.add(path, "field %s changed type from %s (writer) to %s (reader), which is not wire-compatible", w.Name(), typeName(w), typeName(r))
			return
		}
		if checkLabel && r.IsList() != w.IsList() && wg != stringOrBytes {
			c.add(path, "numeric field %s changed between repeated and singular", w.Name())
		}
		if r.Enum() != nil && w.Enum() != nil && relName(r.Enum()) == relName(w.Enum()) {
			c.enum(r.Enum(), w.Enum()) // reaches enums of imported files too
		}
	case messageKind:
		if relName(r.Message()) != relName(w.Message()) {
			c.add(path, "field %s changed message type from %s (writer) to %s (reader)", w.Name(), typeName(w), typeName(r))
			return
		}
		c.message(r.Message(), w.Message())
	case mapKind:
		c.types(path+"/key", r.MapKey(), w.MapKey(), false)
		c.types(path+"/value", r.MapValue(), w.MapValue(), false)
	}
}

type group int

const (
	varint group = iota // int32, int64, uint32, uint64, bool, enums
	zigzag              // sint32, sint64
	stringOrBytes
	fixed32 // fixed32, sfixed32
	fixed64 // fixed64, sfixed64
	float32Group
	float64Group
)

// scalarGroup groups the scalar types whose values a reader of one type decodes from a writer
// of another, as Confluent does (from the Protobuf guide on updating messages).
func scalarGroup(f protoreflect.FieldDescriptor) group {
	switch f.Kind() {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return zigzag
	case protoreflect.StringKind, protoreflect.BytesKind:
		return stringOrBytes
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return fixed32
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return fixed64
	case protoreflect.FloatKind:
		return float32Group
	case protoreflect.DoubleKind:
		return float64Group
	}
	return varint
}
