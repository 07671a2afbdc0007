package avro

import hamba "github.com/hamba/avro/v2"

// Root is the parsed schema, its named types resolved (the broker's
// payload check walks records with it; internal/schemacheck).
func (s *Schema) Root() hamba.Schema { return s.root }
