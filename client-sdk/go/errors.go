package trustmsg

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a failure of a call to trustmsg, or a refusal made by this SDK
// before anything was sent, with the code the HTTP API would give.
//
// Status is the HTTP status of the (last) answer: 0 when no answer came at
// all (a connection error), 400 for what this SDK refuses itself. Code is
// trustmsg's error code (e.g. "prepare_conflict", "already_rolled_back",
// "invalid_topic", "store_unavailable"). Use [errors.As] to get one out of a
// wrapped error, or the helpers [IsConflict], [IsNotFound], [IsInvalid],
// [IsUnauthorized] and [IsUnavailable]:
//
//	var tmErr *trustmsg.Error
//	if errors.As(err, &tmErr) && tmErr.Code == "prepare_conflict" { ... }
type Error struct {
	// Op is what was attempted: "prepare", "commit", "rollback", "get",
	// "put producer", "enqueue", "submit prepare", ...
	Op string
	// Status is the HTTP status of the last answer (0: none came).
	Status int
	// Code is trustmsg's error code, when it sent one (or the code of the
	// refusal this SDK made in its place).
	Code string
	// Message is trustmsg's explanation, or what went wrong.
	Message string
	// Attempts is how many requests were made (1 unless retried).
	Attempts int
	// Err is the underlying error of the last attempt, if any (a network
	// error, the context's error, Kafka's error).
	Err error

	// unavailable marks a failure that may or may not have taken effect
	// and is safe to repeat: connection errors and 5xx after the retries,
	// a Kafka record that was not acknowledged.
	unavailable bool
}

func (e *Error) Error() string {
	var s string
	switch {
	case e.Status != 0 && e.Code != "":
		s = fmt.Sprintf("trustmsg: %s: HTTP %d (%s): %s", e.Op, e.Status, e.Code, e.Message)
	case e.Status != 0:
		s = fmt.Sprintf("trustmsg: %s: HTTP %d: %s", e.Op, e.Status, e.Message)
	case e.Code != "":
		s = fmt.Sprintf("trustmsg: %s (%s): %s", e.Op, e.Code, e.Message)
	default:
		s = fmt.Sprintf("trustmsg: %s: %s", e.Op, e.Message)
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return s
}

// Unwrap returns the underlying error (network, context, Kafka), if any.
func (e *Error) Unwrap() error { return e.Err }

// Unavailable reports whether the call may or may not have reached
// trustmsg (connection errors, 5xx on every attempt, a Kafka record not
// acknowledged). Every producer call is idempotent: repeating it is safe.
func (e *Error) Unavailable() bool { return e.unavailable }

func asError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsConflict reports whether err is trustmsg's 409: the same key prepared
// with other content ("prepare_conflict"), a prepare after a rollback
// ("rolled_back"), a commit after a rollback ("already_rolled_back") or the
// reverse ("already_committed").
func IsConflict(err error) bool {
	e, ok := asError(err)
	return ok && e.Status == http.StatusConflict
}

// IsNotFound reports whether err is trustmsg's 404 (e.g. "message_not_found").
func IsNotFound(err error) bool {
	e, ok := asError(err)
	return ok && e.Status == http.StatusNotFound
}

// IsInvalid reports whether err is a request that is invalid and will stay
// so: trustmsg's 400, 413 or 415, or the same refusal made by this SDK
// before sending anything (Code says which rule, e.g. "invalid_topic").
func IsInvalid(err error) bool {
	e, ok := asError(err)
	return ok && !e.unavailable &&
		(e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge ||
			e.Status == http.StatusUnsupportedMediaType)
}

// IsUnauthorized reports whether err is trustmsg's 401 or 403: a missing,
// wrong or other producer's token.
func IsUnauthorized(err error) bool {
	e, ok := asError(err)
	return ok && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// IsUnavailable reports whether err is a call that may or may not have
// reached trustmsg (or Kafka) and is safe to repeat later: see
// [Error.Unavailable].
func IsUnavailable(err error) bool {
	e, ok := asError(err)
	return ok && e.unavailable
}

// ErrorCode returns trustmsg's error code carried by err, or "".
func ErrorCode(err error) string {
	if e, ok := asError(err); ok {
		return e.Code
	}
	return ""
}

// invalid is a refusal made by this SDK with the HTTP API's code.
func invalid(op, code, format string, args ...any) *Error {
	return &Error{Op: op, Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NewUnavailableError is the error of a call that may or may not have taken
// effect and is safe to repeat ([IsUnavailable] is true for it). It is for
// this SDK's own ways in (package kafka uses it for a record Kafka did not
// acknowledge); op says what was attempted.
func NewUnavailableError(op string, attempts int, err error) *Error {
	msg := "no answer"
	if err != nil {
		msg = err.Error()
	}
	return &Error{Op: op, Message: msg, Attempts: attempts, Err: err, unavailable: true}
}

// NewInvalidError is a refusal made before sending anything, with the HTTP
// API's code ([IsInvalid] is true for it). For this SDK's own ways in.
func NewInvalidError(op, code, message string) *Error {
	return &Error{Op: op, Status: http.StatusBadRequest, Code: code, Message: message}
}
