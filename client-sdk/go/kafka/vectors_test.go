package kafka_test

import (
	"context"
	"encoding/base64"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
)

type submitCase struct {
	Name               string            `json:"name"`
	Op                 string            `json:"op"`
	BizID              string            `json:"biz_id"`
	MessageKey         string            `json:"message_key"`
	Topic              string            `json:"topic"`
	Key                *string           `json:"key"`
	Headers            map[string]string `json:"headers"`
	ValueBase64        string            `json:"value_base64"`
	SigningInputBase64 string            `json:"signing_input_base64"`
	Signature          string            `json:"signature"`
	Record             struct {
		Key         string      `json:"key"`
		ValueBase64 string      `json:"value_base64"`
		Headers     [][2]string `json:"headers"`
	} `json:"record"`
}

func (c submitCase) signed(t *testing.T) kafka.SignedRecord {
	value, err := base64.StdEncoding.DecodeString(c.ValueBase64)
	if err != nil {
		t.Fatal(err)
	}
	r := kafka.SignedRecord{Op: kafka.Op(c.Op), BizID: c.BizID, MessageKey: c.MessageKey, Topic: c.Topic, Headers: c.Headers, Value: value}
	if c.Key != nil {
		r.Key = *c.Key
	}
	return r
}

// Every case of vectors/submit-records.json signs to the same bytes and
// makes the same record; the ambiguous ones are refused before signing.
func TestVectorsSubmitRecords(t *testing.T) {
	var v struct {
		Secret    string       `json:"secret"`
		Cases     []submitCase `json:"cases"`
		Ambiguous []submitCase `json:"ambiguous"`
	}
	kittest.LoadVectors(t, "submit-records.json", &v)
	if len(v.Cases) == 0 || len(v.Ambiguous) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			r := c.signed(t)
			input, err := kafka.SigningInput(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := base64.StdEncoding.EncodeToString(input); got != c.SigningInputBase64 {
				t.Fatalf("signing input %q, want %q", got, c.SigningInputBase64)
			}
			sig, err := kafka.Sign(v.Secret, r)
			if err != nil || sig != c.Signature {
				t.Fatalf("signature %q (%v), want %q", sig, err, c.Signature)
			}
			rec, err := kafka.Record("trustmsg.submit", v.Secret, r)
			if err != nil {
				t.Fatal(err)
			}
			if string(rec.Key) != c.Record.Key || base64.StdEncoding.EncodeToString(rec.Value) != c.Record.ValueBase64 || rec.Value == nil {
				t.Fatalf("record key %q value %q", rec.Key, rec.Value)
			}
			got := make([][2]string, 0, len(rec.Headers))
			for _, h := range rec.Headers {
				got = append(got, [2]string{h.Key, string(h.Value)})
			}
			sortHeaders(got)
			want := append([][2]string(nil), c.Record.Headers...)
			sortHeaders(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("headers %q, want %q", got, want)
			}

			// The Submitter's own way from a Message makes the same record.
			if c.Op == "prepare" {
				m := trustmsg.Message{MessageKey: c.MessageKey, Topic: c.Topic, Payload: r.Value, Key: r.Key, Headers: map[string]string{}}
				for name, value := range c.Headers {
					switch name {
					case kafka.HeaderDeliverAfterMs:
						ms, _ := strconv.ParseInt(value, 10, 64)
						m.DeliverAfter = time.Duration(ms) * time.Millisecond
					default:
						m.Headers[name] = value
					}
				}
				pr, err := kafka.PrepareRecord(context.Background(), c.BizID, m)
				if err != nil {
					t.Fatal(err)
				}
				if sig, _ := kafka.Sign(v.Secret, pr); sig != c.Signature {
					t.Fatalf("PrepareRecord signs to %q, want %q", sig, c.Signature)
				}
			}
		})
	}
	for _, c := range v.Ambiguous {
		t.Run("refused: "+c.Name, func(t *testing.T) {
			_, err := kafka.Sign(v.Secret, c.signed(t))
			if !trustmsg.IsInvalid(err) || trustmsg.ErrorCode(err) != "invalid_request" {
				t.Fatalf("got %v, want an invalid_request refusal", err)
			}
		})
	}
}

func sortHeaders(h [][2]string) {
	sort.Slice(h, func(i, j int) bool { return h[i][0] < h[j][0] || h[i][0] == h[j][0] && h[i][1] < h[j][1] })
}

func TestSubmitterRefusesWhatItCannotPromise(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	if _, err := kafka.NewSubmitter([]string{"127.0.0.1:9"}, "trustmsg.submit", "shop", "not-a-secret"); err == nil {
		t.Error("a secret that is not whsec_ was accepted")
	}
	if _, err := kafka.NewSubmitter([]string{"127.0.0.1:9"}, "trustmsg.submit", "shop!", secret); !trustmsg.IsInvalid(err) {
		t.Errorf("an invalid biz_id: %v", err)
	}
	s, err := kafka.NewSubmitter([]string{"127.0.0.1:9"}, "trustmsg.submit", "shop", secret)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := trustmsg.Message{MessageKey: "k", Topic: "orders", Headers: map[string]string{"Trustmsg-Op": "commit"}}
	if _, err := s.Prepare(context.Background(), m); trustmsg.ErrorCode(err) != "invalid_headers" {
		t.Errorf("a reserved header: %v", err)
	}
	if _, err := s.Commit(context.Background(), "a\nb"); trustmsg.ErrorCode(err) != "invalid_message_key" {
		t.Errorf("a line break in the key: %v", err)
	}
}
