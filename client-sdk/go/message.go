package trustmsg

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
)

// Limits of a message, as trustmsg checks them (docs/openapi.json).
const (
	MaxMessageKeyBytes = 128
	MaxBizIDBytes      = 64
	MaxTopicLen        = 249
	MaxRecordKeyBytes  = 1024
	MaxHeaders         = 64
	MaxHeaderNameBytes = 256
	MaxHeaderBytes     = 16 * 1024
	// MaxDeliveryDelay is the longest a message may wait after its prepare.
	MaxDeliveryDelay = 7 * 24 * time.Hour
)

// ReservedHeaderPrefix starts the record header names trustmsg sets itself
// (compared case-insensitively); a message's own headers may not use it.
const ReservedHeaderPrefix = "trustmsg-"

// The record headers trustmsg adds to every delivered record.
const (
	HeaderMessageID   = "trustmsg-message-id"
	HeaderBizID       = "trustmsg-biz-id"
	HeaderMessageKey  = "trustmsg-message-key"
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// Message is a message to prepare (HTTP), submit (Kafka) or enqueue (the
// local message table).
type Message struct {
	// MessageKey is the producer's unique key for the message, e.g. an
	// order id: 1 to 128 bytes of UTF-8, no control characters. Keys are
	// compared byte for byte ("A" and "A " are two messages).
	MessageKey string
	// Topic is the Kafka topic: 1 to 249 of A-Z a-z 0-9 . _ -.
	Topic string
	// Payload is the record value, bytes as they are.
	Payload []byte
	// Key is the Kafka record key (at most 1024 bytes); "" sends none and
	// Kafka's default partitioner picks.
	Key string
	// Headers are extra record headers (names starting with "trustmsg-"
	// are reserved).
	Headers map[string]string
	// DeliverAfter sends the message no earlier than this long after the
	// prepare (by trustmsg's database clock; the producer database's for
	// the local message table); at most 7 days, milliseconds kept. Zero:
	// at once. Not together with DeliverAt.
	DeliverAfter time.Duration
	// DeliverAt sends the message no earlier than this time (millisecond
	// precision, at most 7 days ahead). The zero time: at once.
	DeliverAt time.Time
	// TraceParent and TraceState are the W3C trace context to prepare
	// under. Empty: the OpenTelemetry span of the call's context, if any.
	// An invalid TraceParent is ignored by trustmsg, never refused.
	TraceParent string
	TraceState  string
}

// traceHeaders returns the trace context prepare sends: the message's own,
// else the span in ctx (OpenTelemetry's W3C propagator), else none.
func (m Message) traceHeaders(ctx context.Context) (traceparent, tracestate string) {
	if m.TraceParent != "" {
		return m.TraceParent, m.TraceState
	}
	return TraceContext(ctx)
}

// TraceContext returns the W3C traceparent and tracestate of the
// OpenTelemetry span in ctx (through OpenTelemetry's TraceContext
// propagator), or "" when ctx carries no valid span.
func TraceContext(ctx context.Context) (traceparent, tracestate string) {
	h := http.Header{}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get(HeaderTraceParent), h.Get(HeaderTraceState)
}

// payloadField returns the payload as the prepare request carries it: the
// text itself when it is UTF-8, else base64.
func (m Message) payloadField() (payload, encoding string) {
	if utf8.Valid(m.Payload) {
		return string(m.Payload), ""
	}
	return base64.StdEncoding.EncodeToString(m.Payload), "base64"
}

// Validate returns what trustmsg would refuse in m, as an *[Error] with the
// HTTP API's code ([IsInvalid]), or nil. What only the service knows (the
// payload limit, the producer's topic allow-list) is not checked.
func (m Message) Validate() error {
	return m.validate("validate", time.Now())
}

// validate checks what trustmsg would refuse, with its error codes; now
// bounds DeliverAt.
func (m Message) validate(op string, now time.Time) error {
	if err := checkMessageKey(op, m.MessageKey); err != nil {
		return err
	}
	if err := checkTopic(op, m.Topic); err != nil {
		return err
	}
	if len(m.Key) > MaxRecordKeyBytes {
		return invalid(op, "invalid_key", "the record key must be at most %d bytes (got %d)", MaxRecordKeyBytes, len(m.Key))
	}
	if err := checkHeaders(op, m.Headers); err != nil {
		return err
	}
	_, _, err := m.due(op, now)
	return err
}

// due returns the delivery time: a delay in milliseconds (>= 0, -1 for
// none) or a time (zero for none).
func (m Message) due(op string, now time.Time) (afterMs int64, at time.Time, err error) {
	afterMs = -1
	if m.DeliverAfter != 0 && !m.DeliverAt.IsZero() {
		return 0, time.Time{}, invalid(op, "invalid_delivery", "give DeliverAfter or DeliverAt, not both")
	}
	if m.DeliverAfter != 0 {
		if m.DeliverAfter < 0 || m.DeliverAfter > MaxDeliveryDelay {
			return 0, time.Time{}, invalid(op, "invalid_deliver_after_ms",
				"deliver_after_ms is %d; it must be 0 to %d ms (7 days)", m.DeliverAfter.Milliseconds(), MaxDeliveryDelay.Milliseconds())
		}
		afterMs = m.DeliverAfter.Milliseconds()
	}
	if !m.DeliverAt.IsZero() {
		at = m.DeliverAt.UTC().Truncate(time.Millisecond)
		if at.Before(time.Unix(0, 0)) {
			return 0, time.Time{}, invalid(op, "invalid_deliver_at", "deliver_at %s is before 1970", at.Format(time.RFC3339Nano))
		}
		if latest := now.Add(MaxDeliveryDelay); at.After(latest) {
			return 0, time.Time{}, invalid(op, "invalid_deliver_at",
				"deliver_at %s is more than 7 days ahead (the latest now is %s)", at.Format(time.RFC3339Nano), latest.UTC().Format(time.RFC3339Nano))
		}
	}
	return afterMs, at, nil
}

// ValidateBizID returns the refusal of a producer id trustmsg would not
// accept (1 to 64 of A-Z a-z 0-9 . _ -), or nil.
func ValidateBizID(bizID string) error { return checkBizID("validate", bizID) }

// ValidateMessageKey returns the refusal of a message key trustmsg would not
// accept (1 to 128 bytes of UTF-8, no control characters), or nil.
func ValidateMessageKey(key string) error { return checkMessageKey("validate", key) }

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

func checkBizID(op, v string) error {
	if v == "" || len(v) > MaxBizIDBytes || strings.ContainsFunc(v, func(r rune) bool { return !isTopicRune(r) }) {
		return invalid(op, "invalid_biz_id", "biz_id %q must be 1 to %d of A-Z a-z 0-9 . _ -", v, MaxBizIDBytes)
	}
	return nil
}

func checkMessageKey(op, v string) error {
	if v == "" || len(v) > MaxMessageKeyBytes {
		return invalid(op, "invalid_message_key", "message_key must be 1 to %d bytes long (got %d)", MaxMessageKeyBytes, len(v))
	}
	if !utf8.ValidString(v) {
		return invalid(op, "invalid_message_key", "message_key must be UTF-8")
	}
	if hasControl(v) {
		return invalid(op, "invalid_message_key", "message_key %q must not contain control characters", v)
	}
	return nil
}

func isTopicRune(r rune) bool {
	return r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

func checkTopic(op, v string) error {
	if v == "" || len(v) > MaxTopicLen {
		return invalid(op, "invalid_topic", "topic must be 1 to %d characters long (got %d)", MaxTopicLen, len(v))
	}
	if v == "." || v == ".." {
		return invalid(op, "invalid_topic", "topic cannot be %q", v)
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return !isTopicRune(r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(v[i:])
		return invalid(op, "invalid_topic", "topic may contain only ASCII letters, digits, '.', '_' and '-' (found %q)", r)
	}
	return nil
}

func checkHeaders(op string, h map[string]string) error {
	if len(h) > MaxHeaders {
		return invalid(op, "invalid_headers", "at most %d headers are allowed (got %d)", MaxHeaders, len(h))
	}
	total := 0
	for name, value := range h {
		if name == "" || len(name) > MaxHeaderNameBytes {
			return invalid(op, "invalid_headers", "header names must be 1 to %d bytes long", MaxHeaderNameBytes)
		}
		if hasControl(name) || !utf8.ValidString(name) {
			return invalid(op, "invalid_headers", "header name %q must be printable UTF-8 text", name)
		}
		if hasControl(value) || !utf8.ValidString(value) {
			return invalid(op, "invalid_headers", "the value of header %q must be printable UTF-8 text (no control characters)", name)
		}
		if strings.HasPrefix(strings.ToLower(name), ReservedHeaderPrefix) {
			return invalid(op, "invalid_headers", "header %q uses the reserved prefix %q; trustmsg sets those itself", name, ReservedHeaderPrefix)
		}
		total += len(name) + len(value)
	}
	if total > MaxHeaderBytes {
		return invalid(op, "invalid_headers", "headers total %d bytes; at most %d are allowed", total, MaxHeaderBytes)
	}
	return nil
}

// ValidTraceParent returns traceparent as trustmsg stores it (version 00),
// or "" when trustmsg would ignore it (W3C Trace Context: lowercase hex,
// neither id all zeros, version ff invalid).
func ValidTraceParent(v string) string {
	const n = 55
	if len(v) < n {
		return ""
	}
	hexByte := func(s string) (byte, bool) {
		var b byte
		for i := 0; i < 2; i++ {
			c := s[i]
			switch {
			case c >= '0' && c <= '9':
				b = b<<4 | (c - '0')
			case c >= 'a' && c <= 'f':
				b = b<<4 | (c - 'a' + 10)
			default:
				return 0, false
			}
		}
		return b, true
	}
	version, ok := hexByte(v[0:2])
	if !ok || version == 0xff || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return ""
	}
	if version == 0 && len(v) != n {
		return ""
	}
	if version != 0 && len(v) > n && v[55] != '-' {
		return ""
	}
	allZero := func(s string) bool { return strings.Trim(s, "0") == "" }
	for _, part := range []string{v[3:35], v[36:52], v[53:55]} {
		for i := 0; i < len(part); i += 2 {
			if _, ok := hexByte(part[i : i+2]); !ok {
				return ""
			}
		}
	}
	if allZero(v[3:35]) || allZero(v[36:52]) {
		return ""
	}
	flags, _ := hexByte(v[53:55])
	if version != 0 {
		flags &= 1
	}
	return fmt.Sprintf("00-%s-%s-%02x", v[3:35], v[36:52], flags)
}
