package protobuf

import "google.golang.org/protobuf/reflect/protoreflect"

// File is the compiled file: its messages, in declaration order, are what
// the Confluent wire format's message indexes point at
// (internal/schemacheck).
func (s *Schema) File() protoreflect.FileDescriptor { return s.file }
