package decode

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoWalk reads a message's wire bytes without building it, checking
// that it holds at most maxRecords messages (map entries and groups
// count) and maxItems repeated elements (avrowalk.go says why). Malformed
// bytes end the walk without an error: the decoder then says what is
// wrong with them.
type protoWalk struct {
	items, messages int
}

func checkProto(md protoreflect.MessageDescriptor, data []byte) error {
	w := &protoWalk{items: maxItems, messages: maxRecords}
	return w.walk(md, data, 0)
}

func (w *protoWalk) walk(md protoreflect.MessageDescriptor, b []byte, depth int) error {
	if depth > protoRecursionLimit {
		return nil // proto.Unmarshal refuses it
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		var v []byte
		switch {
		case fd == nil:
			// Unknown fields are kept as their bytes.
		case (fd.Kind() == protoreflect.MessageKind && typ == protowire.BytesType) || (fd.Kind() == protoreflect.GroupKind && typ == protowire.StartGroupType):
			if typ == protowire.BytesType {
				v, n = protowire.ConsumeBytes(b)
			} else {
				v, n = protowire.ConsumeGroup(num, b)
			}
			if n < 0 {
				return nil
			}
			if w.messages--; w.messages < 0 {
				return fmt.Errorf("%w: more than %d messages", ErrData, maxRecords)
			}
			if err := w.walk(fd.Message(), v, depth+1); err != nil {
				return err
			}
			b = b[n:]
			continue
		case fd.IsList() && typ == protowire.BytesType && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
			// Packed scalars: count the elements.
			v, n = protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			count := 0
			switch fd.Kind() {
			case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
				count = len(v) / 4
			case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
				count = len(v) / 8
			default:
				for _, c := range v {
					if c < 0x80 {
						count++
					}
				}
			}
			if w.items -= count; w.items < 0 {
				return fmt.Errorf("%w: more than %d repeated elements", ErrData, maxItems)
			}
			b = b[n:]
			continue
		case fd.IsList():
			if w.items--; w.items < 0 {
				return fmt.Errorf("%w: more than %d repeated elements", ErrData, maxItems)
			}
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}
