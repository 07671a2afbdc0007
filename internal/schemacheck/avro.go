package schemacheck

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	hamba "github.com/hamba/avro/v2"
)

// Avro payloads are checked by walking Avro's binary encoding with the
// writer's schema as hamba/avro parsed it: every value is read and
// bounds-checked (union branches, enum symbols, int ranges, UTF-8 strings,
// array and map blocks), and nothing is built, so a check allocates
// nothing. Decoding into Go values with hamba's Unmarshal would check the
// same and allocate a map or a slice per record and field.

// Bounds of one payload's walk: the schema nests at most maxAvroDepth
// deep while walking (a recursive type is walked as deep as the data
// goes), and a walk does at most 1024 + 8 per payload byte steps (each
// value is a step; a value takes at least one byte except null, an empty
// record and a zero-size fixed, so only degenerate data hits it).
const maxAvroDepth = 256

var errAvroWork = errors.New("too deeply nested or too many empty values")

type avroWalk struct {
	b    []byte
	work int
}

// checkAvro reports whether payload is exactly one value of s.
func checkAvro(s hamba.Schema, payload []byte) error {
	w := avroWalk{b: payload, work: 1024 + 8*len(payload)}
	if err := w.value(s, 0); err != nil {
		return err
	}
	if len(w.b) != 0 {
		return fmt.Errorf("%d bytes after the value", len(w.b))
	}
	return nil
}

var errAvroShort = errors.New("the data ends inside a value")

func (w *avroWalk) long() (int64, error) {
	v, n := binary.Varint(w.b)
	if n <= 0 {
		if n == 0 {
			return 0, errAvroShort
		}
		return 0, errors.New("a long longer than 10 bytes")
	}
	w.b = w.b[n:]
	return v, nil
}

func (w *avroWalk) int32() (int64, error) {
	v, err := w.long()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		return 0, fmt.Errorf("int %d out of range", v)
	}
	return v, err
}

func (w *avroWalk) skip(n int64) error {
	if n < 0 {
		return fmt.Errorf("negative length %d", n)
	}
	if n > int64(len(w.b)) {
		return errAvroShort
	}
	w.b = w.b[n:]
	return nil
}

func (w *avroWalk) value(s hamba.Schema, depth int) error {
	if w.work--; w.work < 0 || depth > maxAvroDepth {
		return errAvroWork
	}
	switch t := s.(type) {
	case *hamba.RefSchema:
		return w.value(t.Schema(), depth+1)
	case *hamba.NullSchema:
		return nil
	case *hamba.PrimitiveSchema:
		return w.primitive(t.Type())
	case *hamba.RecordSchema:
		for _, f := range t.Fields() {
			if err := w.value(f.Type(), depth+1); err != nil {
				return fmt.Errorf("field %s: %w", f.Name(), err)
			}
		}
		return nil
	case *hamba.EnumSchema:
		i, err := w.int32()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(t.Symbols())) {
			return fmt.Errorf("enum %s has no symbol %d", t.FullName(), i)
		}
		return nil
	case *hamba.FixedSchema:
		return w.skip(int64(t.Size()))
	case *hamba.UnionSchema:
		i, err := w.int32()
		if err != nil {
			return err
		}
		ts := t.Types()
		if i < 0 || i >= int64(len(ts)) {
			return fmt.Errorf("union branch %d of %d", i, len(ts))
		}
		return w.value(ts[i], depth+1)
	case *hamba.ArraySchema:
		return w.blocks(depth, func() error { return w.value(t.Items(), depth+1) })
	case *hamba.MapSchema:
		return w.blocks(depth, func() error {
			if err := w.primitive(hamba.String); err != nil {
				return fmt.Errorf("map key: %w", err)
			}
			return w.value(t.Values(), depth+1)
		})
	}
	return fmt.Errorf("unsupported schema type %s", s.Type())
}

// blocks walks an array's or a map's blocks: a count, negative when a
// byte size follows, each block's items, and a zero count at the end.
func (w *avroWalk) blocks(depth int, item func() error) error {
	for {
		n, err := w.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("bad block count")
			}
			n = -n
			if _, err := w.long(); err != nil { // the block's size in bytes
				return err
			}
		}
		if n > int64(w.work) {
			return errAvroWork
		}
		for ; n > 0; n-- {
			if err := item(); err != nil {
				return err
			}
		}
	}
}

func (w *avroWalk) primitive(t hamba.Type) error {
	switch t {
	case hamba.Null:
		return nil
	case hamba.Boolean:
		if len(w.b) < 1 {
			return errAvroShort
		}
		if w.b[0] > 1 {
			return fmt.Errorf("boolean byte %d", w.b[0])
		}
		w.b = w.b[1:]
		return nil
	case hamba.Int:
		_, err := w.int32()
		return err
	case hamba.Long:
		_, err := w.long()
		return err
	case hamba.Float:
		return w.skip(4)
	case hamba.Double:
		return w.skip(8)
	case hamba.Bytes, hamba.String:
		n, err := w.long()
		if err != nil {
			return err
		}
		if n < 0 || n > int64(len(w.b)) {
			return fmt.Errorf("a %s of %d bytes where %d remain", t, n, len(w.b))
		}
		if t == hamba.String && !utf8.Valid(w.b[:n]) {
			return errors.New("a string that is not UTF-8")
		}
		w.b = w.b[n:]
		return nil
	}
	return fmt.Errorf("unsupported type %s", t)
}

// avroName is the record name Confluent's record strategies take from an
// Avro schema: a named type's full name, else the type's name.
func avroName(s hamba.Schema) string {
	if r, ok := s.(*hamba.RefSchema); ok {
		s = r.Schema()
	}
	if n, ok := s.(hamba.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}
