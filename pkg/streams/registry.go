package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrSchema is wrapped by every error of the schema registry serdes: a
// record without the registry's wire format, an unknown schema id, a value
// its schema refuses.
var ErrSchema = errors.New("streams: schema")

// registryTimeout bounds each call to the schema registry.
const registryTimeout = 10 * time.Second

// Registry is a Confluent-compatible schema registry, shared by the serdes
// made from it (Avro, Protobuf, JSONSchema). Records use Confluent's wire
// format: a 0 byte, the schema id (4 bytes big-endian), for Protobuf the
// message indexes, then the encoded value.
type Registry struct {
	cl *sr.Client

	mu      sync.Mutex
	schemas map[int]sr.Schema // by id, as fetched
}

// NewRegistry returns a Registry at url ("http://host:port"); opts are
// franz-go's sr client options (TLS, basic auth).
func NewRegistry(url string, opts ...sr.ClientOpt) (*Registry, error) {
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: registry client: %w", ErrSchema, err)
	}
	return &Registry{cl: cl, schemas: map[int]sr.Schema{}}, nil
}

// schemaByID returns the schema of id, from the cache or the registry.
func (r *Registry) schemaByID(id int) (sr.Schema, error) {
	r.mu.Lock()
	s, ok := r.schemas[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return s, fmt.Errorf("%w: fetching schema id %d: %w", ErrSchema, id, err)
	}
	r.mu.Lock()
	r.schemas[id] = s
	r.mu.Unlock()
	return s, nil
}

// registration registers a serde's schema under its subject on first use
// (auto.register.schemas), and retries on the next use after a failure.
type registration struct {
	reg     *Registry
	subject string
	schema  sr.Schema

	mu sync.Mutex
	id int // 0 until registered (the registry's ids start at 1)
}

func (g *registration) ID() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.id != 0 {
		return g.id, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
	defer cancel()
	ss, err := g.reg.cl.CreateSchema(ctx, g.subject, g.schema)
	if err != nil {
		return 0, fmt.Errorf("%w: registering under %s: %w", ErrSchema, g.subject, err)
	}
	g.id = ss.ID
	return g.id, nil
}

var confluent sr.ConfluentHeader

// Limits of what one Avro record decodes to: a string or bytes value of at
// most 16 MiB, an array of at most 2^20 elements.
const (
	maxAvroBytes = 16 << 20
	maxAvroItems = 1 << 20
)

// avroSerde encodes with its own schema and decodes data written with any
// schema of the registry, resolved to its own (Avro schema evolution).
type avroSerde[T any] struct {
	reg      *registration
	api      avro.API
	schema   avro.Schema
	mu       sync.Mutex
	resolved map[int]avro.Schema // writer id -> schema to decode with
}

// Avro returns a serde of T (a struct with avro tags, or a map) through
// the registry with the Avro schema text, registered under subject
// (Confluent's default naming: "<topic>-value" or "<topic>-key").
// Data written with another schema of the registry is decoded through
// Avro's schema resolution into this one.
func Avro[T any](r *Registry, subject, schema string) (Serde[T], error) {
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: avro schema for %s: %w", ErrSchema, subject, err)
	}
	return &avroSerde[T]{
		reg: &registration{reg: r, subject: subject, schema: sr.Schema{Schema: schema, Type: sr.TypeAvro}},
		// A record's claimed lengths are bounded so bad bytes cannot make
		// the decoder allocate without limit: hamba/avro's default for an
		// array is 2^48 elements.
		api:    avro.Config{MaxByteSliceSize: maxAvroBytes, MaxSliceAllocSize: maxAvroItems}.Freeze(),
		schema: s, resolved: map[int]avro.Schema{},
	}, nil
}

func (s *avroSerde[T]) Encode(v T) ([]byte, error) {
	id, err := s.reg.ID()
	if err != nil {
		return nil, err
	}
	b, err := s.api.Marshal(s.schema, v)
	if err != nil {
		return nil, fmt.Errorf("%w: avro encoding for %s: %w", ErrSchema, s.reg.subject, err)
	}
	h, _ := confluent.AppendEncode(nil, id, nil)
	return append(h, b...), nil
}

func (s *avroSerde[T]) Decode(b []byte) (T, error) {
	var v T
	id, payload, err := confluent.DecodeID(b)
	if err != nil {
		return v, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	rs, err := s.readerFor(id)
	if err != nil {
		return v, err
	}
	if err := s.api.Unmarshal(rs, payload, &v); err != nil {
		return v, fmt.Errorf("%w: avro decoding schema id %d: %w", ErrSchema, id, err)
	}
	return v, nil
}

// readerFor returns the schema that decodes data written with schema id
// into this serde's schema.
func (s *avroSerde[T]) readerFor(id int) (avro.Schema, error) {
	s.mu.Lock()
	rs, ok := s.resolved[id]
	s.mu.Unlock()
	if ok {
		return rs, nil
	}
	ws, err := s.reg.reg.schemaByID(id)
	if err != nil {
		return nil, err
	}
	if ws.Type != sr.TypeAvro {
		return nil, fmt.Errorf("%w: schema id %d is %s, not Avro", ErrSchema, id, ws.Type)
	}
	writer, err := avro.ParseWithCache(ws.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: schema id %d: %w", ErrSchema, id, err)
	}
	if rs, err = avro.NewSchemaCompatibility().Resolve(s.schema, writer); err != nil {
		return nil, fmt.Errorf("%w: schema id %d cannot be read as %s's schema: %w", ErrSchema, id, s.reg.subject, err)
	}
	s.mu.Lock()
	s.resolved[id] = rs
	s.mu.Unlock()
	return rs, nil
}

// protoSerde writes T with its message indexes in the schema's file.
type protoSerde[T proto.Message] struct {
	reg   *registration
	newT  func() T
	index []int
}

// Protobuf returns a serde of the message type T through the registry:
// schema is the text of the .proto file that declares T's message (its
// references are not supported), registered under subject; newT returns an
// empty T to decode into (for a generated type, func() *pb.M { return
// new(pb.M) }).
func Protobuf[T proto.Message](r *Registry, subject, schema string, newT func() T) (Serde[T], error) {
	d := newT().ProtoReflect().Descriptor()
	var index []int
	for desc := protoreflect.Descriptor(d); desc != nil; desc = desc.Parent() {
		if _, ok := desc.(protoreflect.FileDescriptor); ok {
			break
		}
		index = append([]int{desc.Index()}, index...)
	}
	return &protoSerde[T]{
		reg:  &registration{reg: r, subject: subject, schema: sr.Schema{Schema: schema, Type: sr.TypeProtobuf}},
		newT: newT, index: index,
	}, nil
}

func (s *protoSerde[T]) Encode(v T) ([]byte, error) {
	id, err := s.reg.ID()
	if err != nil {
		return nil, err
	}
	h, err := confluent.AppendEncode(nil, id, s.index)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(h, v)
	if err != nil {
		return nil, fmt.Errorf("%w: protobuf encoding for %s: %w", ErrSchema, s.reg.subject, err)
	}
	return b, nil
}

// maxProtoIndexes bounds the message index list a record may carry.
const maxProtoIndexes = 64

func (s *protoSerde[T]) Decode(b []byte) (T, error) {
	v := s.newT()
	id, rest, err := confluent.DecodeID(b)
	if err != nil {
		return v, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	index, payload, err := confluent.DecodeIndex(rest, maxProtoIndexes)
	if err != nil {
		return v, fmt.Errorf("%w: schema id %d: message indexes: %w", ErrSchema, id, err)
	}
	if !equalInts(index, s.index) {
		return v, fmt.Errorf("%w: schema id %d: message indexes %v, want %v (%s)", ErrSchema, id, index, s.index, v.ProtoReflect().Descriptor().FullName())
	}
	if err := proto.Unmarshal(payload, v); err != nil {
		return v, fmt.Errorf("%w: protobuf decoding schema id %d: %w", ErrSchema, id, err)
	}
	return v, nil
}

func equalInts(a, b []int) bool {
	if len(a) == 0 && len(b) == 1 && b[0] == 0 || len(b) == 0 && len(a) == 1 && a[0] == 0 {
		return true // [0] is written as the empty list
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// jsonSchemaSerde writes T as JSON after validating it against the schema.
type jsonSchemaSerde[T any] struct {
	reg    *registration
	schema *jsonschema.Schema
}

// JSONSchema returns a serde of T as JSON through the registry, with the
// JSON Schema text registered under subject. Encode refuses a value the
// schema does not accept (as Confluent's serializer with validation on);
// Decode reads any schema id's JSON into T.
func JSONSchema[T any](r *Registry, subject, schema string) (Serde[T], error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(schema)))
	if err != nil {
		return nil, fmt.Errorf("%w: JSON schema for %s: %w", ErrSchema, subject, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		return nil, fmt.Errorf("%w: JSON schema for %s: %w", ErrSchema, subject, err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		return nil, fmt.Errorf("%w: JSON schema for %s: %w", ErrSchema, subject, err)
	}
	return &jsonSchemaSerde[T]{
		reg:    &registration{reg: r, subject: subject, schema: sr.Schema{Schema: schema, Type: sr.TypeJSON}},
		schema: sch,
	}, nil
}

func (s *jsonSchemaSerde[T]) Encode(v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	if err := s.schema.Validate(doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSchema, s.reg.subject, err)
	}
	id, err := s.reg.ID()
	if err != nil {
		return nil, err
	}
	h, _ := confluent.AppendEncode(nil, id, nil)
	return append(h, b...), nil
}

func (s *jsonSchemaSerde[T]) Decode(b []byte) (T, error) {
	var v T
	id, payload, err := confluent.DecodeID(b)
	if err != nil {
		return v, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("%w: JSON of schema id %d: %w", ErrSchema, id, err)
	}
	return v, nil
}
