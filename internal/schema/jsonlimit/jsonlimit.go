// Package jsonlimit checks the size and nesting depth of JSON schema text before it reaches a
// parser that recurses on nesting (a deeply nested document would otherwise exhaust the stack,
// which Go cannot recover from). It does not validate JSON beyond what it needs to count depth.
package jsonlimit

import (
	"errors"
	"fmt"
)

// ErrTooLarge and ErrTooDeep report text over the limits passed to Check.
var (
	ErrTooLarge = errors.New("schema text too large")
	ErrTooDeep  = errors.New("schema nested too deeply")
)

// Check returns an error when text is longer than maxBytes or when arrays and objects nest deeper
// than maxDepth. Brackets inside JSON strings are not counted.
func Check(text string, maxBytes, maxDepth int) error {
	if len(text) > maxBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(text), maxBytes)
	}
	depth := 0
	inString := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("%w: more than %d levels", ErrTooDeep, maxDepth)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}
