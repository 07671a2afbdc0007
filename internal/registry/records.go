package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Topic is the registry's store: compacted, one partition, internal.
const Topic = "_schemas"

// Record is one record of _schemas.
type Record struct {
	Offset int64
	Key    []byte
	Value  []byte // nil: a tombstone
}

// The key types of _schemas records (docs/formats.md). SCHEMA, CONFIG
// and MODE are Confluent's; MAX_ID is sluice's.
const (
	keySchema = "SCHEMA"
	keyConfig = "CONFIG"
	keyMode   = "MODE"
	keyMaxID  = "MAX_ID"
)

// recordKey is every key type's JSON; fields a type does not use are
// left out. Field order is fixed, so one logical key is always the same
// bytes and compaction keeps only its latest value.
type recordKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject,omitempty"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

// Reference names another subject's version a schema uses.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// schemaValue is a SCHEMA record's value: one version of a subject.
type schemaValue struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"` // absent: AVRO
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
	Deleted    bool        `json:"deleted"`
}

type configValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type modeValue struct {
	Mode string `json:"mode"`
}

type maxIDValue struct {
	MaxID int `json:"maxId"`
}

func schemaKey(subject string, version int) []byte {
	return mustJSON(recordKey{KeyType: keySchema, Subject: &subject, Version: version, Magic: 1})
}

// configKey is the subject's key, or the registry-wide one for "".
func configKey(subject string) []byte {
	k := recordKey{KeyType: keyConfig}
	if subject != "" {
		k.Subject = &subject
	}
	return mustJSON(k)
}

func modeKey(subject string) []byte {
	k := recordKey{KeyType: keyMode}
	if subject != "" {
		k.Subject = &subject
	}
	return mustJSON(k)
}

func maxIDKey() []byte { return mustJSON(recordKey{KeyType: keyMaxID}) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints always encode
	}
	return b
}

// ErrBadRecord: a _schemas record that is not one of the formats.
var ErrBadRecord = errors.New("registry: unreadable " + Topic + " record")

// change is a decoded record.
type change struct {
	kind    string
	subject string // "" for the registry-wide CONFIG and MODE
	version int
	schema  *schemaValue // SCHEMA; nil for a tombstone
	level   string       // CONFIG; "" for a tombstone
	mode    string       // MODE; "" for a tombstone
	maxID   int          // MAX_ID
}

// maxRecordBytes bounds what a decoder accepts of one key or value.
const maxRecordBytes = 16 << 20

// decodeRecord reads one _schemas record. Unknown key types (Confluent's
// NOOP, DELETE_SUBJECT, ...) decode to a change of that kind, which the
// state ignores.
func decodeRecord(key, value []byte) (change, error) {
	var c change
	if len(key) > maxRecordBytes || len(value) > maxRecordBytes {
		return c, fmt.Errorf("%w: %d-byte key, %d-byte value", ErrBadRecord, len(key), len(value))
	}
	var k recordKey
	if err := strictJSON(key, &k); err != nil {
		return c, fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	c.kind = k.KeyType
	if k.Subject != nil {
		c.subject = *k.Subject
	}
	switch k.KeyType {
	case keySchema:
		if k.Subject == nil || k.Version < 1 {
			return c, fmt.Errorf("%w: SCHEMA key without subject or version", ErrBadRecord)
		}
		c.version = k.Version
		if value == nil {
			return c, nil
		}
		var v schemaValue
		if err := strictJSON(value, &v); err != nil {
			return c, fmt.Errorf("%w: SCHEMA value: %v", ErrBadRecord, err)
		}
		if v.Subject != c.subject || v.Version != c.version || v.ID < 1 {
			return c, fmt.Errorf("%w: SCHEMA value for %q version %d (id %d) under key %q version %d",
				ErrBadRecord, v.Subject, v.Version, v.ID, c.subject, c.version)
		}
		c.schema = &v
	case keyConfig:
		if value != nil {
			var v configValue
			if err := strictJSON(value, &v); err != nil {
				return c, fmt.Errorf("%w: CONFIG value: %v", ErrBadRecord, err)
			}
			if v.CompatibilityLevel == "" {
				return c, fmt.Errorf("%w: CONFIG value without compatibilityLevel", ErrBadRecord)
			}
			c.level = v.CompatibilityLevel
		}
	case keyMode:
		if value != nil {
			var v modeValue
			if err := strictJSON(value, &v); err != nil {
				return c, fmt.Errorf("%w: MODE value: %v", ErrBadRecord, err)
			}
			if v.Mode == "" {
				return c, fmt.Errorf("%w: MODE value without mode", ErrBadRecord)
			}
			c.mode = v.Mode
		}
	case keyMaxID:
		if value != nil {
			var v maxIDValue
			if err := strictJSON(value, &v); err != nil {
				return c, fmt.Errorf("%w: MAX_ID value: %v", ErrBadRecord, err)
			}
			c.maxID = v.MaxID
		}
	}
	return c, nil
}

// strictJSON decodes exactly one JSON value (unknown fields are allowed:
// records written by a later version).
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
