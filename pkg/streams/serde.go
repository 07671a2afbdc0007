package streams

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Serde turns values of T into bytes and back. Decode is given nil for a
// null key or value.
type Serde[T any] interface {
	Encode(T) ([]byte, error)
	Decode([]byte) (T, error)
}

type bytesSerde struct{}

func (bytesSerde) Encode(b []byte) ([]byte, error) { return b, nil }
func (bytesSerde) Decode(b []byte) ([]byte, error) { return b, nil }

// Bytes passes bytes through unchanged.
func Bytes() Serde[[]byte] { return bytesSerde{} }

type stringSerde struct{}

func (stringSerde) Encode(s string) ([]byte, error) { return []byte(s), nil }
func (stringSerde) Decode(b []byte) (string, error) { return string(b), nil }

// String encodes strings as their UTF-8 bytes.
func String() Serde[string] { return stringSerde{} }

type int64Serde struct{}

func (int64Serde) Encode(v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}
func (int64Serde) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("streams: int64 serde: %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// Int64 encodes int64 as 8 big-endian bytes (Kafka's LongSerde).
func Int64() Serde[int64] { return int64Serde{} }

type jsonSerde[T any] struct{}

func (jsonSerde[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }
func (jsonSerde[T]) Decode(b []byte) (T, error) {
	var v T
	if b == nil {
		return v, nil
	}
	err := json.Unmarshal(b, &v)
	return v, err
}

// JSON encodes T with encoding/json; a null decodes to T's zero value.
func JSON[T any]() Serde[T] { return jsonSerde[T]{} }
