package decode

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/sluice-mq/sluice/internal/schema/protobuf"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// mainFile names the schema being compiled among its references.
const mainFile = protobuf.MainFile

// maxIndexes bounds a Protobuf record's message index path.
const maxIndexes = 32

// protoRecursionLimit bounds how deep messages nest.
const protoRecursionLimit = 64

func protobufDecoder(s Schema) (func([]byte) (Decoded, error), error) {
	sources := map[string]string{mainFile: s.Text}
	for _, r := range s.Refs {
		if r.Name == mainFile {
			return nil, fmt.Errorf("reference name %q is reserved", mainFile)
		}
		sources[r.Name] = r.Text
	}
	fd, err := compileProto(sources)
	if err != nil {
		return nil, err
	}
	return func(data []byte) (Decoded, error) {
		md, rest, err := messageOf(fd, data)
		if err != nil {
			return Decoded{}, err
		}
		if err := checkProto(md, rest); err != nil {
			return Decoded{}, err
		}
		msg := dynamicpb.NewMessage(md)
		if err := (proto.UnmarshalOptions{RecursionLimit: protoRecursionLimit}).Unmarshal(rest, msg); err != nil {
			return Decoded{}, fmt.Errorf("%w: %s: %v", ErrData, md.FullName(), err)
		}
		j, err := protojson.Marshal(msg)
		if err != nil {
			return Decoded{}, fmt.Errorf("%w: %v", ErrData, err)
		}
		// protojson varies its spacing on purpose; lay it out one way.
		var buf bytes.Buffer
		if err := json.Compact(&buf, j); err != nil {
			return Decoded{}, fmt.Errorf("%w: %v", ErrData, err)
		}
		return Decoded{Message: string(md.FullName()), JSON: shape(buf.Bytes())}, nil
	}, nil
}

func compileProto(sources map[string]string) (protoreflect.FileDescriptor, error) {
	f, err := protobuf.Compile(sources)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// messageOf reads the message indexes that follow the schema id (a
// zigzag varint count, then that many zigzag varint indexes; a lone 0
// means the first message) and returns the message they name and the
// bytes after them.
func messageOf(fd protoreflect.FileDescriptor, data []byte) (protoreflect.MessageDescriptor, []byte, error) {
	n, k := binary.Varint(data)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: bad message index count", ErrData)
	}
	data = data[k:]
	if n < 0 || n > maxIndexes {
		return nil, nil, fmt.Errorf("%w: %d message indexes", ErrData, n)
	}
	path := []int64{0}
	if n > 0 {
		path = path[:0]
		for range n {
			i, k := binary.Varint(data)
			if k <= 0 {
				return nil, nil, fmt.Errorf("%w: bad message index", ErrData)
			}
			data = data[k:]
			path = append(path, i)
		}
	}
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range path {
		if i < 0 || i >= int64(msgs.Len()) {
			return nil, nil, fmt.Errorf("%w: message index %d out of range (%d messages)", ErrData, i, msgs.Len())
		}
		md = msgs.Get(int(i))
		msgs = md.Messages()
	}
	return md, data, nil
}
