// Package kafka is trustmsg's Kafka side for Go, on franz-go (pure Go, no
// cgo): the Kafka way in ([Submitter]: prepare, commit and rollback as
// signed records on trustmsg's submit topic, docs/kafka-submit.md) and the
// consumer inbox for the records trustmsg delivers ([Process]).
package kafka

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// Op is what a submitted record asks trustmsg to do.
type Op string

// The three operations of the Kafka way in.
const (
	OpPrepare  Op = "prepare"
	OpCommit   Op = "commit"
	OpRollback Op = "rollback"
)

// The contract headers of a submitted record, and the delivery-time headers
// a prepare may carry (signed as other headers).
const (
	HeaderOp             = "trustmsg-op"
	HeaderBizID          = "trustmsg-biz-id"
	HeaderMessageKey     = "trustmsg-message-key"
	HeaderTopic          = "trustmsg-topic"
	HeaderKey            = "trustmsg-key"
	HeaderSignature      = "trustmsg-signature"
	HeaderDeliverAfterMs = "trustmsg-deliver-after-ms"
	HeaderDeliverAt      = "trustmsg-deliver-at"
)

// SignedRecord is one operation as the submit topic carries it, before
// signing.
type SignedRecord struct {
	Op         Op
	BizID      string
	MessageKey string
	// Topic and Key belong to a prepare (Key "" for none).
	Topic string
	Key   string
	// Headers are the other headers: the message's own, its delivery time
	// and trace context.
	Headers map[string]string
	// Value is the payload of a prepare; empty for a decision.
	Value []byte
}

// SigningInput returns the exact bytes the signature covers: the lines op,
// biz_id, message_key, topic, key, then each other header as name=value in
// byte order of the names, each ending in "\n", then the value. A record
// that lines could make ambiguous (a line break in a field, header name or
// value; an "=" in a header name) is refused (an invalid_request
// *trustmsg.Error): trustmsg would only dead-letter it.
func SigningInput(r SignedRecord) ([]byte, error) {
	refuse := func(format string, args ...any) ([]byte, error) {
		return nil, trustmsg.NewInvalidError("submit "+string(r.Op), "invalid_request", fmt.Sprintf(format, args...))
	}
	if r.Op != OpPrepare && r.Op != OpCommit && r.Op != OpRollback {
		return refuse("op %q is not prepare, commit or rollback", r.Op)
	}
	fields := []struct{ name, value string }{
		{"biz_id", r.BizID}, {"message_key", r.MessageKey}, {"topic", r.Topic}, {"key", r.Key},
	}
	for _, f := range fields {
		if strings.ContainsAny(f.value, "\r\n") {
			return refuse("the %s %q holds a line break, which the record signature cannot express", f.name, f.value)
		}
	}
	names := make([]string, 0, len(r.Headers))
	for name, value := range r.Headers {
		if strings.ContainsAny(name, "\r\n=") {
			return refuse("header name %q holds a line break or '=', which the record signature cannot express", name)
		}
		if strings.ContainsAny(value, "\r\n") {
			return refuse("the value of header %q holds a line break, which the record signature cannot express", name)
		}
		names = append(names, name)
	}
	sort.Strings(names) // byte order
	var b bytes.Buffer
	for _, line := range []string{string(r.Op), r.BizID, r.MessageKey, r.Topic, r.Key} {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(r.Headers[name])
		b.WriteByte('\n')
	}
	b.Write(r.Value)
	return b.Bytes(), nil
}

// Sign returns the trustmsg-signature header of r: "v1,<base64 of
// HMAC-SHA256(key, SigningInput(r))>", the key being the base64 part of
// the producer's signing secret ("whsec_…") decoded.
func Sign(secret string, r SignedRecord) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	input, err := SigningInput(r)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(input)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

func secretKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("trustmsg/kafka: the signing secret is whsec_<base64> (the registration's signing_secret)")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, errors.New("trustmsg/kafka: the signing secret's part after whsec_ is not base64")
	}
	return key, nil
}

// Record returns r signed with secret as the record to produce to the
// submit topic: keyed by the message key (one partition per message, so
// its prepare and decision stay in order), the contract headers, the other
// headers in byte order of their names, the signature last.
func Record(submitTopic, secret string, r SignedRecord) (*kgo.Record, error) {
	sig, err := Sign(secret, r)
	if err != nil {
		return nil, err
	}
	h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	headers := []kgo.RecordHeader{h(HeaderOp, string(r.Op)), h(HeaderBizID, r.BizID), h(HeaderMessageKey, r.MessageKey)}
	if r.Op == OpPrepare {
		headers = append(headers, h(HeaderTopic, r.Topic))
		if r.Key != "" {
			headers = append(headers, h(HeaderKey, r.Key))
		}
	}
	names := make([]string, 0, len(r.Headers))
	for name := range r.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		headers = append(headers, h(name, r.Headers[name]))
	}
	headers = append(headers, h(HeaderSignature, sig))
	value := r.Value
	if value == nil {
		value = []byte{}
	}
	return &kgo.Record{Topic: submitTopic, Key: []byte(r.MessageKey), Value: value, Headers: headers}, nil
}

// Submitted is where an acknowledged record is in the submit topic: durable
// in Kafka, not yet applied by trustmsg.
type Submitted struct {
	Partition int32
	Offset    int64
}

// Submitter submits prepare, commit and rollback to trustmsg as signed
// records on its submit topic, for a producer that already speaks Kafka.
//
//   - Each call produces one record keyed by the message key, so every
//     operation of a message lands on one partition, in order.
//   - A call returns nil once Kafka acknowledged the record: idempotent
//     producer, acks=all (no duplicates from the client's own retries).
//     Acknowledged means durable in Kafka, not applied by trustmsg: what
//     trustmsg cannot apply (a conflicting prepare, a commit after a
//     rollback) goes to the dead-letter topic "<submit topic>.dlq"; the
//     message then stays PREPARED until check-back asks the producer, which
//     is why a producer on this way in serves the check-back endpoint too.
//   - A record not acknowledged in time is an error for which
//     trustmsg.IsUnavailable is true: it may still have been written;
//     submitting it again is safe.
//   - What the signature cannot express, and headers in the reserved
//     "trustmsg-" namespace, are refused before anything is sent
//     (trustmsg.IsInvalid).
//
// A Submitter implements trustmsg.TxProducer[Submitted]: trustmsg.Transaction
// takes it. Safe for concurrent use; Close it when done.
type Submitter struct {
	cl     *kgo.Client
	topic  string
	bizID  string
	secret string
}

// DefaultDeliveryTimeout is how long a call waits for Kafka's
// acknowledgement unless an option says otherwise.
const DefaultDeliveryTimeout = 30 * time.Second

// NewSubmitter returns a submitter producing to topic (trustmsg's
// --submit-topic, "trustmsg.submit" by default) on the seed brokers as
// producer bizID, signing with its signing secret (the registration's
// signing_secret, "whsec_…").
//
// opts are franz-go options for TLS, SASL and tuning (e.g.
// kgo.DialTLSConfig, kgo.SASL, kgo.RecordDeliveryTimeout; 30 s unless
// given). The Submitter always requires acks from all in-sync replicas and
// an idempotent producer: kgo.DisableIdempotentWrite or other acks are
// refused.
func NewSubmitter(seedBrokers []string, topic, bizID, signingSecret string, opts ...kgo.Opt) (*Submitter, error) {
	if len(seedBrokers) == 0 {
		return nil, errors.New("trustmsg/kafka: no seed brokers")
	}
	if topic == "" {
		return nil, errors.New("trustmsg/kafka: the submit topic is empty")
	}
	if _, err := secretKey(signingSecret); err != nil {
		return nil, err
	}
	if err := trustmsg.ValidateBizID(bizID); err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.RecordDeliveryTimeout(DefaultDeliveryTimeout)}, opts...)
	all = append(all, kgo.SeedBrokers(seedBrokers...), kgo.DefaultProduceTopic(topic))
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("trustmsg/kafka: %w", err)
	}
	if disabled, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); disabled {
		cl.Close()
		return nil, errors.New("trustmsg/kafka: the Submitter needs the idempotent producer: drop kgo.DisableIdempotentWrite")
	}
	if acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks != kgo.AllISRAcks() {
		cl.Close()
		return nil, errors.New("trustmsg/kafka: the Submitter needs acks from all in-sync replicas: drop kgo.RequiredAcks")
	}
	return &Submitter{cl: cl, topic: topic, bizID: bizID, secret: signingSecret}, nil
}

// BizID is the producer's id.
func (s *Submitter) BizID() string { return s.bizID }

// Topic is the submit topic.
func (s *Submitter) Topic() string { return s.topic }

// Close flushes nothing and closes the Kafka client.
func (s *Submitter) Close() { s.cl.Close() }

// Prepare submits the prepare of msg: one record whose value is the
// payload, whose headers are the message's headers plus its delivery time
// and trace context (the message's own, else the OpenTelemetry span in ctx),
// signed. It returns once Kafka acknowledged it; trustmsg then stores the
// message PREPARED, or dead-letters the record.
func (s *Submitter) Prepare(ctx context.Context, msg trustmsg.Message) (Submitted, error) {
	if err := msg.Validate(); err != nil {
		return Submitted{}, err
	}
	r, err := PrepareRecord(ctx, s.bizID, msg)
	if err != nil {
		return Submitted{}, err
	}
	return s.send(ctx, r)
}

// PrepareRecord returns the record a Submitter signs for the prepare of msg
// by producer bizID (before signing).
func PrepareRecord(ctx context.Context, bizID string, msg trustmsg.Message) (SignedRecord, error) {
	headers := make(map[string]string, len(msg.Headers)+3)
	for name, value := range msg.Headers {
		if strings.HasPrefix(strings.ToLower(name), trustmsg.ReservedHeaderPrefix) {
			return SignedRecord{}, trustmsg.NewInvalidError("submit prepare", "invalid_headers",
				fmt.Sprintf("header %q uses the reserved prefix %q; trustmsg sets those itself", name, trustmsg.ReservedHeaderPrefix))
		}
		headers[name] = value
	}
	if msg.DeliverAfter != 0 {
		headers[HeaderDeliverAfterMs] = strconv.FormatInt(msg.DeliverAfter.Milliseconds(), 10)
	}
	if !msg.DeliverAt.IsZero() {
		headers[HeaderDeliverAt] = msg.DeliverAt.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
	}
	// The trace context wins over a user header of that name, as over HTTP.
	tp, ts := msg.TraceParent, msg.TraceState
	if tp == "" {
		tp, ts = trustmsg.TraceContext(ctx)
	}
	if tp != "" {
		headers[trustmsg.HeaderTraceParent] = tp
		if ts != "" {
			headers[trustmsg.HeaderTraceState] = ts
		}
	}
	return SignedRecord{
		Op: OpPrepare, BizID: bizID, MessageKey: msg.MessageKey, Topic: msg.Topic, Key: msg.Key,
		Headers: headers, Value: msg.Payload,
	}, nil
}

// Commit submits the commit of message messageKey: one record with an empty
// value, returned once Kafka acknowledged it.
func (s *Submitter) Commit(ctx context.Context, messageKey string) (Submitted, error) {
	return s.send(ctx, SignedRecord{Op: OpCommit, BizID: s.bizID, MessageKey: messageKey})
}

// Rollback submits the rollback of message messageKey: one record with an
// empty value, returned once Kafka acknowledged it. Read before its prepare,
// it leaves a tombstone, so the late prepare is dead-lettered.
func (s *Submitter) Rollback(ctx context.Context, messageKey string) (Submitted, error) {
	return s.send(ctx, SignedRecord{Op: OpRollback, BizID: s.bizID, MessageKey: messageKey})
}

func (s *Submitter) send(ctx context.Context, r SignedRecord) (Submitted, error) {
	op := "submit " + string(r.Op)
	if err := trustmsg.ValidateMessageKey(r.MessageKey); err != nil {
		return Submitted{}, err
	}
	rec, err := Record(s.topic, s.secret, r)
	if err != nil {
		return Submitted{}, err
	}
	res := s.cl.ProduceSync(ctx, rec)
	got, err := res.First()
	if err != nil {
		return Submitted{}, trustmsg.NewUnavailableError(op, 1, fmt.Errorf("the record was not acknowledged by Kafka: %w", err))
	}
	return Submitted{Partition: got.Partition, Offset: got.Offset}, nil
}

// MessageID returns the trustmsg-message-id of a record trustmsg delivered
// (the first header of that name), if it has a usable one.
func MessageID(r *kgo.Record) (uint64, bool) {
	for _, h := range r.Headers {
		if h.Key == trustmsg.HeaderMessageID {
			return trustmsg.ParseMessageID(h.Value)
		}
	}
	return 0, false
}

// Process runs work through the inbox for a record trustmsg delivered, keyed
// by its trustmsg-message-id: once per consumer group, in one local
// transaction with the inbox row (see trustmsg.Inbox.Process). A record
// without a usable id is refused with trustmsg.ErrNoMessageID and nothing
// runs. Commit the record's offset after Process returned nil.
//
// T is the inbox database's transaction type, which work gets: *sql.Tx
// (trustmsg.NewInbox), pgx.Tx (trustpgx.NewInbox), *gorm.DB
// (trustgorm.NewInbox).
func Process[T any](ctx context.Context, in *trustmsg.Inbox, r *kgo.Record, work func(ctx context.Context, tx T) error) (trustmsg.Processed, error) {
	id, ok := MessageID(r)
	if !ok {
		return 0, trustmsg.ErrNoMessageID
	}
	return trustmsg.Process(ctx, in, id, work)
}
