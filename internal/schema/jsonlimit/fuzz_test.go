package jsonlimit

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzCheck compares the depth Check accepts with the nesting encoding/json sees, for valid JSON.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{`{"a":[1,{"b":"[["}]}`, `[[[]]]`, `"\"{"`, `{}`, `[1,[2,[3]]]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		err := Check(text, 1<<20, 3)
		if !json.Valid([]byte(text)) {
			return
		}
		depth, err2 := jsonDepth(text)
		if err2 != nil {
			t.Fatalf("decoding valid JSON: %v", err2)
		}
		if tooDeep := depth > 3; tooDeep != errors.Is(err, ErrTooDeep) {
			t.Fatalf("depth %d, Check = %v", depth, err)
		}
	})
}

func jsonDepth(text string) (int, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest, nil
		}
		if err != nil {
			return 0, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
