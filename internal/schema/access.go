package schema

import (
	"github.com/sluice-mq/sluice/internal/schema/avro"
	"github.com/sluice-mq/sluice/internal/schema/jsonschema"
	"github.com/sluice-mq/sluice/internal/schema/protobuf"
)

// Avro is the parsed Avro schema; nil when s is of another type.
func (s *Schema) Avro() *avro.Schema { x, _ := s.p.(*avro.Schema); return x }

// Protobuf is the compiled Protobuf schema; nil when s is of another type.
func (s *Schema) Protobuf() *protobuf.Schema { x, _ := s.p.(*protobuf.Schema); return x }

// JSON is the compiled JSON Schema; nil when s is of another type.
func (s *Schema) JSON() *jsonschema.Schema { x, _ := s.p.(*jsonschema.Schema); return x }
