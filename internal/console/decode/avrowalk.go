package decode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// Bounds on one decoded key or value, checked on the bytes before they are
// decoded: a recursive schema lets Avro data nest as deep as it has bytes
// (a stack overflow past about 1 MiB, which no recover catches); each
// array, map or repeated item and each record or message becomes a Go
// value of tens to hundreds of bytes (a record or message of nothing costs
// one or two bytes of data), so 8 MiB of data could take gigabytes.
const (
	maxAvroDepth = 256
	maxItems     = 1 << 20 // array and map items, repeated field elements
	maxRecords   = 1 << 17 // Avro records, Protobuf messages (map entries too)
)

var errAvroShape = errors.New("avro")

// avroWalk reads one datum of s from data without building it, checking
// that it nests at most maxAvroDepth deep, holds at most maxItems array
// and map items and maxRecords records, and that every length fits.
type avroWalk struct {
	b              []byte
	items, records int
}

func checkAvro(s avro.Schema, data []byte) error {
	w := &avroWalk{b: data, items: maxItems, records: maxRecords}
	if err := w.walk(s, 0); err != nil {
		return fmt.Errorf("%w: %w", errAvroShape, err)
	}
	return nil
}

func (w *avroWalk) long() (int64, error) {
	v, n := binary.Varint(w.b)
	if n <= 0 {
		return 0, errors.New("bad varint or short data")
	}
	w.b = w.b[n:]
	return v, nil
}

func (w *avroWalk) skip(n int64) error {
	if n < 0 || n > int64(len(w.b)) {
		return fmt.Errorf("length %d past the data's end", n)
	}
	w.b = w.b[n:]
	return nil
}

func (w *avroWalk) walk(s avro.Schema, depth int) error {
	if depth > maxAvroDepth {
		return fmt.Errorf("nested deeper than %d", maxAvroDepth)
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return w.walk(s.Schema(), depth)
	case *avro.NullSchema:
		return nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Null:
			return nil
		case avro.Boolean:
			return w.skip(1)
		case avro.Int, avro.Long:
			_, err := w.long()
			return err
		case avro.Float:
			return w.skip(4)
		case avro.Double:
			return w.skip(8)
		case avro.String, avro.Bytes:
			n, err := w.long()
			if err != nil {
				return err
			}
			return w.skip(n)
		}
		return fmt.Errorf("unknown type %s", s.Type())
	case *avro.RecordSchema:
		if w.records--; w.records < 0 {
			return fmt.Errorf("more than %d records", maxRecords)
		}
		for _, f := range s.Fields() {
			if err := w.walk(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case *avro.EnumSchema:
		_, err := w.long()
		return err
	case *avro.FixedSchema:
		return w.skip(int64(s.Size()))
	case *avro.UnionSchema:
		i, err := w.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return fmt.Errorf("union index %d of %d", i, len(s.Types()))
		}
		return w.walk(s.Types()[i], depth+1)
	case *avro.ArraySchema:
		return w.blocks(func() error { return w.walk(s.Items(), depth+1) })
	case *avro.MapSchema:
		return w.blocks(func() error {
			n, err := w.long()
			if err == nil {
				err = w.skip(n)
			}
			if err == nil {
				err = w.walk(s.Values(), depth+1)
			}
			return err
		})
	}
	return fmt.Errorf("unknown schema %T", s)
}

// blocks walks an array's or map's blocks: a count (negative: followed by
// the block's size in bytes), its items, until a zero count.
func (w *avroWalk) blocks(item func() error) error {
	for {
		n, err := w.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == -1<<63 {
				return errors.New("bad block count")
			}
			n = -n
			if _, err := w.long(); err != nil {
				return err
			}
		}
		if n > int64(w.items) {
			return fmt.Errorf("more than %d array or map items", maxItems)
		}
		w.items -= int(n)
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}
