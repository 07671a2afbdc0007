package protobuf

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// render writes a file descriptor as .proto source. The result is a deterministic function of
// the descriptor, so two texts that differ only in comments, layout, type-name spelling or option
// order render the same.
func render(fd protoreflect.FileDescriptor) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("rendering schema: %v", r)
		}
	}()
	w := &writer{}
	switch fd.Syntax() {
	case protoreflect.Editions:
		w.line(0, "edition = %q;", editionName(fd))
	default:
		w.line(0, "syntax = %q;", fd.Syntax().String())
	}
	if fd.Package() != "" {
		w.line(0, "package %s;", fd.Package())
	}
	imports := make([]string, 0, fd.Imports().Len())
	for i := 0; i < fd.Imports().Len(); i++ {
		imp := fd.Imports().Get(i)
		switch {
		case imp.IsPublic:
			imports = append(imports, fmt.Sprintf("import public %q;", imp.Path()))
		case imp.IsWeak:
			imports = append(imports, fmt.Sprintf("import weak %q;", imp.Path()))
		default:
			imports = append(imports, fmt.Sprintf("import %q;", imp.Path()))
		}
	}
	sort.Strings(imports)
	for _, imp := range imports {
		w.line(0, "%s", imp)
	}
	w.options(0, fd.Options())
	w.enums(0, fd.Enums())
	w.messages(0, fd.Messages())
	w.extensions(0, fd.Extensions())
	for i := 0; i < fd.Services().Len(); i++ {
		w.service(fd.Services().Get(i))
	}
	return w.b.String(), nil
}

func editionName(fd protoreflect.FileDescriptor) string {
	name := protodesc.ToFileDescriptorProto(fd).GetEdition().String()
	return strings.TrimPrefix(name, "EDITION_")
}

type writer struct{ b strings.Builder }

func (w *writer) line(indent int, format string, args ...any) {
	w.b.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

func (w *writer) messages(indent int, msgs protoreflect.MessageDescriptors) {
	for i := 0; i < msgs.Len(); i++ {
		if md := msgs.Get(i); !md.IsMapEntry() && !isGroupMessage(md) {
			w.message(indent, md)
		}
	}
}

// isGroupMessage reports whether md is the message of a proto2 group, rendered with its field.
func isGroupMessage(md protoreflect.MessageDescriptor) bool {
	return groupField(md) != nil
}

func groupField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	if md.ParentFile() == nil || md.ParentFile().Syntax() != protoreflect.Proto2 {
		return nil
	}
	parent, ok := md.Parent().(protoreflect.MessageDescriptor)
	if !ok {
		return nil
	}
	for i := 0; i < parent.Fields().Len(); i++ {
		f := parent.Fields().Get(i)
		if f.Kind() == protoreflect.GroupKind && f.Message() == md {
			return f
		}
	}
	return nil
}

func (w *writer) message(indent int, md protoreflect.MessageDescriptor) {
	w.line(indent, "message %s {", md.Name())
	w.messageBody(indent+1, md)
	w.line(indent, "}")
}

func (w *writer) messageBody(indent int, md protoreflect.MessageDescriptor) {
	w.options(indent, md.Options())
	oneofDone := map[protoreflect.Name]bool{}
	for i := 0; i < md.Fields().Len(); i++ {
		f := md.Fields().Get(i)
		if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if !oneofDone[o.Name()] {
				oneofDone[o.Name()] = true
				w.oneof(indent, o)
			}
			continue
		}
		w.field(indent, f, true)
	}
	w.enums(indent, md.Enums())
	w.messages(indent, md.Messages())
	w.extensions(indent, md.Extensions())
	w.ranges(indent, "extensions", md.ExtensionRanges())
	w.ranges(indent, "reserved", md.ReservedRanges())
	w.reservedNames(indent, md.ReservedNames())
}

func (w *writer) oneof(indent int, o protoreflect.OneofDescriptor) {
	w.line(indent, "oneof %s {", o.Name())
	w.options(indent+1, o.Options())
	for i := 0; i < o.Fields().Len(); i++ {
		w.field(indent+1, o.Fields().Get(i), false)
	}
	w.line(indent, "}")
}

func (w *writer) field(indent int, f protoreflect.FieldDescriptor, withLabel bool) {
	label := ""
	if withLabel {
		label = fieldLabel(f)
	}
	opts := optionList(f.Options())
	if f.HasDefault() {
		opts = append([]string{"default = " + defaultValue(f)}, opts...)
	}
	if !f.IsExtension() && f.HasJSONName() && f.JSONName() != defaultJSONName(string(f.Name())) {
		opts = append(opts, "json_name = "+quote(f.JSONName()))
	}
	suffix := ""
	if len(opts) > 0 {
		suffix = " [" + strings.Join(opts, ", ") + "]"
	}
	if f.Kind() == protoreflect.GroupKind && groupField(f.Message()) == f {
		w.line(indent, "%sgroup %s = %d%s {", label, f.Message().Name(), f.Number(), suffix)
		w.messageBody(indent+1, f.Message())
		w.line(indent, "}")
		return
	}
	w.line(indent, "%s%s %s = %d%s;", label, typeName(f), f.Name(), f.Number(), suffix)
}

func fieldLabel(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return ""
	case f.Cardinality() == protoreflect.Repeated:
		return "repeated "
	case f.Cardinality() == protoreflect.Required && f.ParentFile().Syntax() == protoreflect.Proto2:
		return "required "
	case f.HasOptionalKeyword():
		return "optional "
	case f.ParentFile().Syntax() == protoreflect.Proto2 && f.ContainingOneof() == nil:
		return "optional "
	}
	return ""
}

func typeName(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return fmt.Sprintf("map<%s, %s>", typeName(f.MapKey()), typeName(f.MapValue()))
	}
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "." + string(f.Message().FullName())
	case protoreflect.EnumKind:
		return "." + string(f.Enum().FullName())
	}
	return f.Kind().String()
}

func defaultJSONName(name string) string {
	var b strings.Builder
	upper := false
	for _, c := range name {
		if c == '_' {
			upper = true
			continue
		}
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		upper = false
		b.WriteRune(c)
	}
	return b.String()
}

func defaultValue(f protoreflect.FieldDescriptor) string {
	v := f.Default()
	switch f.Kind() {
	case protoreflect.EnumKind:
		return string(f.DefaultEnumValue().Name())
	case protoreflect.StringKind:
		return quote(v.String())
	case protoreflect.BytesKind:
		return quote(string(v.Bytes()))
	}
	return scalar(v.Interface())
}

func (w *writer) enums(indent int, enums protoreflect.EnumDescriptors) {
	for i := 0; i < enums.Len(); i++ {
		e := enums.Get(i)
		w.line(indent, "enum %s {", e.Name())
		w.options(indent+1, e.Options())
		for j := 0; j < e.Values().Len(); j++ {
			v := e.Values().Get(j)
			suffix := ""
			if opts := optionList(v.Options()); len(opts) > 0 {
				suffix = " [" + strings.Join(opts, ", ") + "]"
			}
			w.line(indent+1, "%s = %d%s;", v.Name(), v.Number(), suffix)
		}
		for j := 0; j < e.ReservedRanges().Len(); j++ {
			r := e.ReservedRanges().Get(j)
			w.line(indent+1, "reserved %s;", rangeText(int64(r[0]), int64(r[1]), math.MaxInt32))
		}
		w.reservedNames(indent+1, e.ReservedNames())
		w.line(indent, "}")
	}
}

func (w *writer) extensions(indent int, exts protoreflect.ExtensionDescriptors) {
	byExtendee := map[protoreflect.FullName][]protoreflect.FieldDescriptor{}
	var order []protoreflect.FullName
	for i := 0; i < exts.Len(); i++ {
		x := exts.Get(i)
		name := x.ContainingMessage().FullName()
		if _, ok := byExtendee[name]; !ok {
			order = append(order, name)
		}
		byExtendee[name] = append(byExtendee[name], x)
	}
	for _, name := range order {
		w.line(indent, "extend .%s {", name)
		for _, x := range byExtendee[name] {
			w.field(indent+1, x, true)
		}
		w.line(indent, "}")
	}
}

// rangeText renders a half-open field number range [start, end) the .proto way.
func rangeText(start, endInclusive, max int64) string {
	switch {
	case start == endInclusive:
		return strconv.FormatInt(start, 10)
	case endInclusive == max:
		return fmt.Sprintf("%d to max", start)
	}
	return fmt.Sprintf("%d to %d", start, endInclusive)
}

func (w *writer) ranges(indent int, keyword string, ranges protoreflect.FieldRanges) {
	for i := 0; i < ranges.Len(); i++ {
		r := ranges.Get(i)
		w.line(indent, "%s %s;", keyword, rangeText(int64(r[0]), int64(r[1])-1, 536870911))
	}
}

func (w *writer) reservedNames(indent int, names protoreflect.Names) {
	if names.Len() == 0 {
		return
	}
	quoted := make([]string, names.Len())
	for i := range quoted {
		quoted[i] = quote(string(names.Get(i)))
	}
	w.line(indent, "reserved %s;", strings.Join(quoted, ", "))
}

func (w *writer) service(s protoreflect.ServiceDescriptor) {
	w.line(0, "service %s {", s.Name())
	w.options(1, s.Options())
	for i := 0; i < s.Methods().Len(); i++ {
		m := s.Methods().Get(i)
		in, out := "", ""
		if m.IsStreamingClient() {
			in = "stream "
		}
		if m.IsStreamingServer() {
			out = "stream "
		}
		opts := optionList(m.Options())
		if len(opts) == 0 {
			w.line(1, "rpc %s(%s.%s) returns (%s.%s);", m.Name(), in, m.Input().FullName(), out, m.Output().FullName())
			continue
		}
		w.line(1, "rpc %s(%s.%s) returns (%s.%s) {", m.Name(), in, m.Input().FullName(), out, m.Output().FullName())
		for _, o := range opts {
			w.line(2, "option %s;", o)
		}
		w.line(1, "}")
	}
	w.line(0, "}")
}

// options writes "option name = value;" statements for the set fields of an options message.
func (w *writer) options(indent int, opts proto.Message) {
	for _, o := range optionList(opts) {
		w.line(indent, "option %s;", o)
	}
}

// optionList renders each set option as "name = value", sorted by field number with extensions
// (custom options) last by full name; a repeated option gives one entry per element.
func optionList(opts proto.Message) []string {
	if opts == nil {
		return nil
	}
	m := opts.ProtoReflect()
	if !m.IsValid() {
		return nil
	}
	var out []string
	for _, f := range setFields(m) {
		name := string(f.Name())
		if f.IsExtension() {
			name = "(." + string(f.FullName()) + ")"
		}
		v := m.Get(f)
		if f.IsList() {
			for i := 0; i < v.List().Len(); i++ {
				out = append(out, name+" = "+value(f, v.List().Get(i)))
			}
			continue
		}
		out = append(out, name+" = "+value(f, v))
	}
	return out
}

func setFields(m protoreflect.Message) []protoreflect.FieldDescriptor {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(f protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, f)
		return true
	})
	sort.Slice(fields, func(i, j int) bool {
		a, b := fields[i], fields[j]
		if a.IsExtension() != b.IsExtension() {
			return !a.IsExtension()
		}
		if a.IsExtension() {
			return a.FullName() < b.FullName()
		}
		return a.Number() < b.Number()
	})
	return fields
}

// value renders one option value; messages become text-format literals.
func value(f protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch f.Kind() {
	case protoreflect.EnumKind:
		if ev := f.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.FormatInt(int64(v.Enum()), 10)
	case protoreflect.StringKind:
		return quote(v.String())
	case protoreflect.BytesKind:
		return quote(string(v.Bytes()))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return literal(v.Message())
	}
	return scalar(v.Interface())
}

func literal(m protoreflect.Message) string {
	var parts []string
	for _, f := range setFields(m) {
		name := string(f.Name())
		if f.IsExtension() {
			name = "[" + string(f.FullName()) + "]"
		}
		v := m.Get(f)
		switch {
		case f.IsList():
			items := make([]string, v.List().Len())
			for i := range items {
				items[i] = value(f, v.List().Get(i))
			}
			parts = append(parts, name+": ["+strings.Join(items, ", ")+"]")
		case f.IsMap():
			var entries []string
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				entries = append(entries, "{key: "+value(f.MapKey(), k.Value())+" value: "+value(f.MapValue(), mv)+"}")
				return true
			})
			sort.Strings(entries)
			parts = append(parts, name+": ["+strings.Join(entries, ", ")+"]")
		default:
			parts = append(parts, name+": "+value(f, v))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func scalar(v any) string {
	switch x := v.(type) {
	case float32:
		return float(float64(x), 32)
	case float64:
		return float(x, 64)
	}
	return fmt.Sprint(v)
}

func float(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// quote renders a string or bytes literal: printable ASCII as is, everything else octal-escaped,
// which reads back to the same bytes.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
