package kafka_test

import (
	"bytes"
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
)

// S08: the Kafka way in delivers. The transaction helper with the
// Submitter: a signed prepare, the local transaction with its barrier
// marker, a signed commit, each acknowledged by Kafka (idempotent producer,
// acks=all); trustmsg applies them and delivers the record byte for byte.
func TestS08_kafka_way_in_delivers(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	p := kittest.Register(t, e, "s08", "", 60000, "")
	s, err := kafka.NewSubmitter([]string{e.Kafka}, e.SubmitTopic, p.BizID, p.Secret)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := kittest.Open(t, e, trustmsg.MySQL)
	b, err := trustmsg.NewBarrier(conn, trustmsg.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	topic := "go-s08-" + kittest.Random()
	payload := []byte{0xde, 0xad, 0xbe, 0xef, 0, '\n', 'x'}
	msg := trustmsg.Message{
		MessageKey: "order-" + kittest.Random(), Topic: topic, Key: "customer-8", Payload: payload,
		Headers: map[string]string{"content-type": "application/octet-stream", "source": "go-submit"},
	}
	ran := false
	out, err := trustmsg.Transaction(context.Background(), s, b, msg, func(context.Context, *sql.Tx) error {
		ran = true
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("transaction: %v (work ran: %v)", err, ran)
	}
	if !out.DecisionSent || out.Decided.Offset <= out.Prepared.Offset && out.Decided.Partition == out.Prepared.Partition {
		t.Fatalf("outcome %+v: the commit record is not after the prepare", out)
	}
	view := kittest.Await(t, p.Client, msg.MessageKey, 30*time.Second, func(v *trustmsg.MessageView) bool {
		return v.Status == trustmsg.StatusCommitted && v.SendStatus == trustmsg.SendSent
	})
	records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, 500*time.Millisecond)
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	r := records[0]
	if string(r.Key) != msg.Key || !bytes.Equal(r.Value, payload) {
		t.Fatalf("record key %q value %x", r.Key, r.Value)
	}
	for name, value := range msg.Headers {
		if got, ok := kittest.Header(r, name); !ok || got != value {
			t.Fatalf("header %s = %q, want %q", name, got, value)
		}
	}
	if id, _ := kittest.Header(r, trustmsg.HeaderMessageID); id != strconv.FormatInt(view.ID, 10) {
		t.Fatalf("trustmsg-message-id %q, want %d", id, view.ID)
	}
	for _, h := range r.Headers {
		if h.Key == kafka.HeaderSignature || h.Key == kafka.HeaderOp {
			t.Fatalf("a contract header reached the delivered record: %s", h.Key)
		}
	}

	// A rollback submitted for another key is applied too: never delivered.
	rolled := "order-" + kittest.Random()
	if _, err := s.Prepare(context.Background(), trustmsg.Message{MessageKey: rolled, Topic: topic, Payload: []byte("no")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rollback(context.Background(), rolled); err != nil {
		t.Fatal(err)
	}
	kittest.Await(t, p.Client, rolled, 30*time.Second, func(v *trustmsg.MessageView) bool {
		return v.Status == trustmsg.StatusRolledBack
	})
	// (Every case of vectors/submit-records.json: TestVectorsSubmitRecords.)
}

// A record Kafka cannot acknowledge (no broker) is an unavailable error,
// within the delivery timeout.
func TestSubmitterUnacknowledgedIsUnavailable(t *testing.T) {
	s, err := kafka.NewSubmitter([]string{"127.0.0.1:9"}, "trustmsg.submit", "shop",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", kgo.RecordDeliveryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = s.Commit(context.Background(), "order-1")
	if !trustmsg.IsUnavailable(err) || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %v, want an unavailable error within the timeout", err, time.Since(start))
	}
}
