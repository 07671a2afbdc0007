package registry

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error as the REST API returns it: an HTTP status and
// Confluent's error code and message.
type Error struct {
	Status  int    `json:"-"`
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// ErrNotLeader: this broker does not lead _schemas, so it cannot write.
var ErrNotLeader = errors.New("registry: this broker does not lead " + Topic)

// Confluent's error codes.
const (
	codeSubjectNotFound        = 40401
	codeVersionNotFound        = 40402
	codeSchemaNotFound         = 40403
	codeSubjectSoftDeleted     = 40404
	codeSubjectNotSoftDeleted  = 40405
	codeVersionSoftDeleted     = 40406
	codeVersionNotSoftDeleted  = 40407
	codeSubjectNoCompatibility = 40408
	codeSubjectNoMode          = 40409
	codeIncompatible           = 409
	codeInvalidSchema          = 42201
	codeInvalidVersion         = 42202
	codeInvalidCompatibility   = 42203
	codeInvalidMode            = 42204
	codeNotPermitted           = 42205
	codeReferenceExists        = 42206
	codeIDMismatch             = 42207
	codeInvalidSubject         = 42208
	codeStoreError             = 50001
	codeTimeout                = 50002
	codeForwardingFailed       = 50003
	codeUnknownLeader          = 50004
)

func newErr(status, code int, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(s string) *Error {
	return newErr(http.StatusNotFound, codeSubjectNotFound, "Subject '%s' not found.", s)
}

func errVersionNotFound(v int) *Error {
	return newErr(http.StatusNotFound, codeVersionNotFound, "Version %d not found.", v)
}

func errSchemaNotFound(id int) *Error {
	if id < 0 {
		return newErr(http.StatusNotFound, codeSchemaNotFound, "Schema not found")
	}
	return newErr(http.StatusNotFound, codeSchemaNotFound, "Schema %d not found", id)
}

func errInvalidSchema(format string, args ...any) *Error {
	return newErr(http.StatusUnprocessableEntity, codeInvalidSchema, format, args...)
}

func errInvalidVersion(v string) *Error {
	return newErr(http.StatusUnprocessableEntity, codeInvalidVersion,
		"The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
}

func errNotPermitted(format string, args ...any) *Error {
	return newErr(http.StatusUnprocessableEntity, codeNotPermitted, format, args...)
}

func errStore(err error) *Error {
	return newErr(http.StatusInternalServerError, codeStoreError, "Error while storing the schema registry's record: %v", err)
}

func errTimeout(what string) *Error {
	return newErr(http.StatusInternalServerError, codeTimeout, "Operation timed out: %s", what)
}

func errBadRequest(format string, args ...any) *Error {
	return newErr(http.StatusBadRequest, http.StatusBadRequest, format, args...)
}
