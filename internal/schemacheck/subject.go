package schemacheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	hamba "github.com/hamba/avro/v2"
	js "github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluice-mq/sluice/internal/registry"
	"github.com/sluice-mq/sluice/internal/schema"
	"github.com/sluice-mq/sluice/internal/schema/jsonlimit"
)

// Strategy is a subject name strategy: how a record's schema names the
// subject its id must be registered under (Confluent's serializers'
// key.subject.name.strategy / value.subject.name.strategy).
type Strategy int8

// The strategies, as Confluent names them.
const (
	// TopicName: <topic>-value (or -key), whatever the schema.
	TopicName Strategy = iota
	// RecordName: the fully-qualified record name of the schema.
	RecordName
	// TopicRecordName: <topic>-<record name>.
	TopicRecordName
)

// strategyPrefix is the package of Confluent's strategy classes, the
// form topic configs name them in.
const strategyPrefix = "io.confluent.kafka.serializers.subject."

// StrategyValues are the values the subject name strategy configs take:
// Confluent's class names and their short forms.
var StrategyValues = []string{
	strategyPrefix + "TopicNameStrategy", strategyPrefix + "RecordNameStrategy", strategyPrefix + "TopicRecordNameStrategy",
	"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy",
}

// ParseStrategy reads a strategy config value; "" is TopicName.
func ParseStrategy(v string) (Strategy, error) {
	switch strings.TrimPrefix(v, strategyPrefix) {
	case "", "TopicNameStrategy":
		return TopicName, nil
	case "RecordNameStrategy":
		return RecordName, nil
	case "TopicRecordNameStrategy":
		return TopicRecordName, nil
	}
	return TopicName, fmt.Errorf("unknown subject name strategy %q: one of %s", v, strings.Join(StrategyValues, ", "))
}

func (s Strategy) String() string {
	return [...]string{"TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"}[s]
}

// maxIndexes bounds a Protobuf payload's message indexes (the nesting of
// the message type in its file).
const maxIndexes = 32

// wireHeader splits a payload in the Confluent wire format: the magic
// byte 0 and a big-endian schema id, then the rest (for Protobuf the
// message indexes, then the data: messageIndexes). ok is false when b is
// not in the format.
func wireHeader(b []byte) (id int, rest []byte, ok bool) {
	if len(b) < 5 || b[0] != 0 {
		return 0, nil, false
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], true
}

// messageIndexes splits the indexes from a Protobuf payload's data (after
// the id): zigzag varints, a count (0 alone: the file's first message, [0])
// then each index. idx is the encoded indexes, path[:n] the indexes.
func messageIndexes(b []byte, path *[maxIndexes]int32) (n int, idx, data []byte, err error) {
	count, m := binary.Varint(b)
	if m <= 0 || count < 0 || count > maxIndexes {
		return 0, nil, nil, errors.New("its Protobuf message indexes do not read")
	}
	if count == 0 {
		path[0] = 0
		return 1, b[:m], b[m:], nil
	}
	off := m
	for i := range int(count) {
		v, m := binary.Varint(b[off:])
		if m <= 0 || v < 0 || v > 1<<30 {
			return 0, nil, nil, errors.New("its Protobuf message indexes do not read")
		}
		path[i] = int32(v)
		off += m
	}
	return int(count), b[:off], b[off:], nil
}

// compiled is what the checks need of one registered schema, made once
// per schema (per *registry.SchemaInfo: an id's schema never changes,
// but a permanently deleted id may come back from an import).
type compiled struct {
	info *registry.SchemaInfo
	// name is the record name (Avro, JSON Schema; "" when the schema has
	// none); for Protobuf, the file's first message's.
	name  string
	avro  hamba.Schema
	proto protoreflect.FileDescriptor
	json  *js.Schema
	err   error // why this schema cannot be checked (not parsed)
	// protoPool keeps dynamic messages per message type for reuse.
	protoPool sync.Map // protoreflect.MessageDescriptor -> *sync.Pool
}

func compile(info *registry.SchemaInfo) *compiled {
	c := &compiled{info: info}
	p := info.Parsed
	if p == nil {
		c.err = fmt.Errorf("schema id %d (%s) cannot be parsed by this broker", info.ID, info.Type)
		return c
	}
	switch info.Type {
	case schema.Avro:
		root := p.Avro().Root()
		c.avro, c.name = root, avroName(root)
	case schema.Protobuf:
		c.proto = p.Protobuf().File()
		if ms := c.proto.Messages(); ms.Len() > 0 {
			c.name = string(ms.Get(0).FullName())
		}
	case schema.JSON:
		c.json = p.JSON().Compiled()
		c.name = c.json.Title
	default:
		c.err = fmt.Errorf("schema id %d has type %s, which this broker does not check", info.ID, info.Type)
	}
	return c
}

// message is the Protobuf message type the indexes point at.
func (c *compiled) message(path []int32) (protoreflect.MessageDescriptor, error) {
	var md protoreflect.MessageDescriptor
	ms := c.proto.Messages()
	for _, i := range path {
		if int(i) >= ms.Len() {
			return nil, fmt.Errorf("its Protobuf message indexes %v name no message of schema id %d", path, c.info.ID)
		}
		md = ms.Get(int(i))
		ms = md.Messages()
	}
	return md, nil
}

// proto0 is the file's first message for a Protobuf schema (indexes
// [0]), nil for another type.
func (c *compiled) proto0() (protoreflect.MessageDescriptor, error) {
	if c.proto == nil {
		return nil, nil
	}
	return c.message([]int32{0})
}

// recordName is the record name of the payload's schema.
func (c *compiled) recordName(md protoreflect.MessageDescriptor) (string, error) {
	if md != nil {
		return string(md.FullName()), nil
	}
	if c.name == "" {
		return "", fmt.Errorf("schema id %d has no record name (a JSON Schema needs a \"title\")", c.info.ID)
	}
	return c.name, nil
}

// decode checks that data is one value of the schema (md: the Protobuf
// message type).
func (c *compiled) decode(md protoreflect.MessageDescriptor, data []byte) error {
	switch {
	case c.avro != nil:
		if err := checkAvro(c.avro, data); err != nil {
			return fmt.Errorf("does not decode with Avro schema id %d: %v", c.info.ID, err)
		}
	case md != nil:
		pv, ok := c.protoPool.Load(md)
		if !ok {
			pv, _ = c.protoPool.LoadOrStore(md, &sync.Pool{New: func() any { return dynamicpb.NewMessage(md) }})
		}
		pool := pv.(*sync.Pool)
		m := pool.Get().(*dynamicpb.Message)
		err := proto.UnmarshalOptions{RecursionLimit: 100}.Unmarshal(data, m)
		if err == nil {
			err = unknownFields(m, "")
		}
		m.Reset()
		pool.Put(m)
		if err != nil {
			return fmt.Errorf("does not decode as Protobuf message %s of schema id %d: %v", md.FullName(), c.info.ID, err)
		}
	case c.json != nil:
		if err := jsonlimit.Check(string(data), len(data), 128); err != nil {
			return fmt.Errorf("is not JSON for schema id %d: %v", c.info.ID, err)
		}
		v, err := js.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("is not JSON: %v", err)
		}
		if err := c.json.Validate(v); err != nil {
			return fmt.Errorf("does not validate with JSON Schema id %d: %s", c.info.ID, oneLine(err))
		}
	}
	return nil
}

// oneLine is a validation error's message without its line breaks.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// unknownFields refuses fields the schema does not declare, or declares
// with another wire type, at any depth (protobuf keeps both as unknown
// fields rather than failing): bytes written with the schema the id
// names have none.
func unknownFields(m protoreflect.Message, path string) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%s has fields its schema does not declare (or of another wire type)", messagePath(m, path))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || (fd.IsMap() && fd.MapValue().Message() == nil) {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = unknownFields(mv.Message(), p)
				return err == nil
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = unknownFields(l.Get(i).Message(), p)
			}
		default:
			err = unknownFields(v.Message(), p)
		}
		return err == nil
	})
	return err
}

func messagePath(m protoreflect.Message, path string) string {
	if path == "" {
		return "message " + string(m.Descriptor().FullName())
	}
	return "field " + path[1:]
}
