package jsonschema

import js "github.com/santhosh-tekuri/jsonschema/v6"

// Compiled is the compiled schema: its Title is the record name of
// Confluent's record subject name strategies, and it validates instances
// (internal/schemacheck).
func (s *Schema) Compiled() *js.Schema { return s.root }
