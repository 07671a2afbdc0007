package protobuf

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluice-mq/sluice/internal/schema/limits"
)

// Limits on schema text: the compiler recurses on nesting.
const (
	maxSchemaBytes = 1 << 20
	maxDepth       = 64
	// mainFile names the schema being parsed; it appears in error positions.
	mainFile = "schema.proto"
)

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid Protobuf schema")

// Schema is a compiled Protobuf file with its imports resolved.
type Schema struct {
	file      protoreflect.FileDescriptor
	canonical string
}

// Parse compiles schema as a .proto file. refs maps each import path to the text of the imported
// file; google/protobuf imports (descriptor, any, timestamp, wrappers, ...) are built in.
func Parse(schema string, refs map[string]string) (*Schema, error) {
	if err := limits.Refs(refs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, ok := refs[mainFile]; ok {
		return nil, fmt.Errorf("%w: reference name %q is reserved", ErrInvalid, mainFile)
	}
	sources := make(map[string]string, len(refs)+1)
	for name, text := range refs {
		if err := checkText(text); err != nil {
			return nil, fmt.Errorf("%w: reference %q: %v", ErrInvalid, name, err)
		}
		sources[name] = text
	}
	if err := checkText(schema); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	sources[mainFile] = schema
	file, err := compile(sources)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	canonical, err := render(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &Schema{file: file, canonical: canonical}, nil
}

// MainFile is the name Compile compiles among sources: the schema itself,
// beside its references under their names.
const MainFile = mainFile

// Compile compiles sources[MainFile] with its references (the other
// entries) and the standard imports; a compiler panic is an error.
func Compile(sources map[string]string) (linker.File, error) { return compile(sources) }

func compile(sources map[string]string) (f linker.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("compiler failure: %v", r)
		}
	}()
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(sources),
		}),
		MaxParallelism: 1,
	}
	files, err := c.Compile(context.Background(), mainFile)
	if err != nil {
		return nil, err
	}
	return files[0], nil
}

// checkText bounds size and brace nesting. Braces in strings and comments are skipped.
func checkText(text string) error {
	if len(text) > maxSchemaBytes {
		return fmt.Errorf("schema text too large: %d bytes, at most %d", len(text), maxSchemaBytes)
	}
	if !utf8.ValidString(text) {
		return errors.New("schema text is not valid UTF-8")
	}
	depth := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"' || c == '\'':
			for i++; i < len(text) && text[i] != c && text[i] != '\n'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '/':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			i += 2
			for i+1 < len(text) && (text[i] != '*' || text[i+1] != '/') {
				i++
			}
			i++
		case c == '{' || c == '[' || c == '(' || c == '<':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("schema nested too deeply: more than %d levels", maxDepth)
			}
		case c == '}' || c == ']' || c == ')' || c == '>':
			depth--
		}
	}
	return nil
}

// Canonical returns the schema rendered as normalised .proto text: comments and layout dropped,
// type names fully qualified, imports sorted, declarations in their original order.
func (s *Schema) Canonical() string { return s.canonical }

// String returns the canonical text.
func (s *Schema) String() string { return s.canonical }
