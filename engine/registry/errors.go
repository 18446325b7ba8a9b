package registry

import (
	"fmt"
	"net/http"
)

// Error is an error as Confluent's registry reports it: an HTTP status and
// an error code, sent as {"error_code": Code, "message": Message}.
type Error struct {
	Status  int
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("registry: %d: %s", e.Code, e.Message) }

// Confluent's error codes.
const (
	codeSubjectNotFound           = 40401
	codeVersionNotFound           = 40402
	codeSchemaNotFound            = 40403
	codeSubjectSoftDeleted        = 40404
	codeSubjectNotSoftDeleted     = 40405
	codeVersionSoftDeleted        = 40406
	codeVersionNotSoftDeleted     = 40407
	codeSubjectLevelNotConfigured = 40408
	codeIncompatible              = 409
	codeInvalidSchema             = 42201
	codeInvalidVersion            = 42202
	codeInvalidLevel              = 42203
	codeInvalidMode               = 42204
	codeNotPermitted              = 42205
	codeInvalidSubject            = 42208
	codeStoreError                = 50001
	codeTimeout                   = 50002
)

func errorf(status, code int, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(s string) *Error {
	return errorf(http.StatusNotFound, codeSubjectNotFound, "Subject '%s' not found.", s)
}

func errVersionNotFound(s string, v int) *Error {
	return errorf(http.StatusNotFound, codeVersionNotFound, "Version %d not found for subject '%s'.", v, s)
}

func errSchemaNotFound() *Error {
	return errorf(http.StatusNotFound, codeSchemaNotFound, "Schema not found")
}

func errInvalidSchema(format string, args ...any) *Error {
	return errorf(http.StatusUnprocessableEntity, codeInvalidSchema, "Invalid schema: "+format, args...)
}
