package trustmsg_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// Every case of vectors/check-signatures.json agrees with the Verifier.
func TestVectorsCheckSignatures(t *testing.T) {
	var v struct {
		ToleranceSecs int `json:"tolerance_secs"`
		Cases         []struct {
			Name    string            `json:"name"`
			Secret  string            `json:"secret"`
			Headers map[string]string `json:"headers"`
			Body    string            `json:"body"`
			Now     int64             `json:"now"`
			Valid   bool              `json:"valid"`
		} `json:"cases"`
	}
	kittest.LoadVectors(t, "check-signatures.json", &v)
	if len(v.Cases) < 10 {
		t.Fatalf("only %d cases", len(v.Cases))
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			ver, err := trustmsg.NewVerifier(c.Secret,
				trustmsg.WithTolerance(time.Duration(v.ToleranceSecs)*time.Second),
				trustmsg.WithClock(func() time.Time { return time.Unix(c.Now, 0) }))
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			for name, value := range c.Headers {
				h.Set(name, value)
			}
			err = ver.Verify(h, []byte(c.Body))
			if (err == nil) != c.Valid {
				t.Fatalf("valid=%v, Verify said %v", c.Valid, err)
			}
			// The handler agrees: 401 for every invalid case, and the
			// decision function is not called then.
			called := false
			handler := trustmsg.CheckHandler(ver, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
				called = true
				return trustmsg.Commit, nil
			})
			req := httptest.NewRequest(http.MethodPost, "/trustmsg/check", strings.NewReader(c.Body))
			req.Header = h
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			want := http.StatusUnauthorized
			if c.Valid {
				// A valid signature over a body that is a check-back request.
				if _, perr := trustmsg.ParseCheckRequest([]byte(c.Body)); perr == nil {
					want = http.StatusOK
				} else {
					want = http.StatusBadRequest
				}
			}
			if rec.Code != want || called != (want == http.StatusOK) {
				t.Fatalf("handler answered %d (decide called: %v), want %d: %s", rec.Code, called, want, rec.Body)
			}
			// A signature made by Sign verifies.
			if c.Valid && len(strings.Fields(c.Headers["webhook-signature"])) == 1 {
				ts := c.Headers["webhook-timestamp"]
				var n int64
				_ = json.Unmarshal([]byte(ts), &n)
				sig, err := trustmsg.Sign(c.Secret, c.Headers["webhook-id"], n, []byte(c.Body))
				if err != nil || sig != c.Headers["webhook-signature"] {
					t.Fatalf("Sign gave %q (%v), the vector %q", sig, err, c.Headers["webhook-signature"])
				}
			}
		})
	}
}

func TestVerifierRefusesSecretsItCannotUse(t *testing.T) {
	for _, s := range []string{"", "secret", "whsec_", "whsec_not base64!", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		if _, err := trustmsg.NewVerifier(s); err == nil {
			t.Errorf("NewVerifier(%q) accepted it", s)
		}
	}
	if _, err := trustmsg.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", trustmsg.WithSecrets("nope")); err == nil {
		t.Error("WithSecrets accepted a secret that is not whsec_")
	}
}

// A second secret (a rotation on the producer's side) verifies too.
func TestVerifierWithSecretsAcceptsEither(t *testing.T) {
	old, cur := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM="
	v, err := trustmsg.NewVerifier(cur, trustmsg.WithSecrets(old))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	for _, s := range []string{old, cur} {
		sig, _ := trustmsg.Sign(s, "chk_1_1", now, []byte("{}"))
		h := http.Header{}
		h.Set("webhook-id", "chk_1_1")
		h.Set("webhook-timestamp", jsonNumber(now))
		h.Set("webhook-signature", sig)
		if err := v.Verify(h, []byte("{}")); err != nil {
			t.Errorf("signed with %s: %v", s[:10], err)
		}
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

// Every request of vectors/check-bodies.json parses to its request, and
// every answer is what the handler writes (64-bit ids kept whole).
func TestVectorsCheckBodies(t *testing.T) {
	var v struct {
		Requests []struct {
			Name    string          `json:"name"`
			Body    string          `json:"body"`
			Request json.RawMessage `json:"request"`
		} `json:"requests"`
		Answers []struct {
			MessageID uint64          `json:"message_id"`
			Decision  string          `json:"decision"`
			Answer    json.RawMessage `json:"answer"`
		} `json:"answers"`
	}
	kittest.LoadVectors(t, "check-bodies.json", &v)
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ver, err := trustmsg.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Requests {
		t.Run(c.Name, func(t *testing.T) {
			got, err := trustmsg.ParseCheckRequest([]byte(c.Body))
			if err != nil {
				t.Fatal(err)
			}
			var want struct {
				BizID      string `json:"biz_id"`
				MessageKey string `json:"message_key"`
				MessageID  uint64 `json:"message_id"`
				Attempt    int    `json:"attempt"`
				PreparedAt string `json:"prepared_at"`
			}
			if err := json.Unmarshal(c.Request, &want); err != nil {
				t.Fatal(err)
			}
			at, _ := time.Parse(time.RFC3339Nano, want.PreparedAt)
			if got.BizID != want.BizID || got.MessageKey != want.MessageKey || got.MessageID != want.MessageID ||
				got.Attempt != want.Attempt || !got.PreparedAt.Equal(at) {
				t.Fatalf("parsed %+v, want %+v", got, want)
			}
		})
	}
	for _, a := range v.Answers {
		t.Run("answer "+a.Decision, func(t *testing.T) {
			body := []byte(`{"biz_id":"shop","message_key":"k","message_id":` + jsonUint(a.MessageID) + `,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`)
			rec := signedCall(t, trustmsg.CheckHandler(ver, func(_ context.Context, r trustmsg.CheckRequest) (trustmsg.Decision, error) {
				return trustmsg.Decision(a.Decision), nil
			}), secret, body)
			if rec.Code != http.StatusOK {
				t.Fatalf("answered %d: %s", rec.Code, rec.Body)
			}
			if !sameJSON(t, rec.Body.Bytes(), a.Answer) {
				t.Fatalf("answered %s, want %s", rec.Body, a.Answer)
			}
		})
	}
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// sameJSON compares two JSON documents as values, numbers digit for digit.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(data []byte) any {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

func signedCall(t *testing.T, h http.Handler, secret string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	now := time.Now().Unix()
	sig, err := trustmsg.Sign(secret, "chk_1_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/trustmsg/check", bytes.NewReader(body))
	req.Header.Set("webhook-id", "chk_1_1")
	req.Header.Set("webhook-timestamp", jsonNumber(now))
	req.Header.Set("webhook-signature", sig)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A decide function's error is a 500 that tells nothing internal; an
// answer that is not one of the three is one too; GET is 405.
func TestCheckHandlerFailuresAndMethods(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ver, _ := trustmsg.NewVerifier(secret)
	body := []byte(`{"biz_id":"shop","message_key":"k","message_id":1,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`)
	failing := trustmsg.CheckHandler(ver, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
		return "", errors.New("db password wrong for user x")
	})
	if rec := signedCall(t, failing, secret, body); rec.Code != 500 || strings.Contains(rec.Body.String(), "password") {
		t.Fatalf("answered %d %s", rec.Code, rec.Body)
	}
	odd := trustmsg.CheckHandler(ver, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
		return "maybe", nil
	})
	if rec := signedCall(t, odd, secret, body); rec.Code != 500 {
		t.Fatalf("answered %d %s", rec.Code, rec.Body)
	}
	rec := httptest.NewRecorder()
	odd.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/trustmsg/check", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET answered %d", rec.Code)
	}
	big := append([]byte(`{"biz_id":"shop","pad":"`), bytes.Repeat([]byte("x"), 70<<10)...)
	if rec := signedCall(t, odd, secret, append(big, `"}`...)); rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 70 KiB body answered %d", rec.Code)
	}
}

// Every case of vectors/record-headers.json: the message id the inbox keys
// on, or none.
func TestVectorsRecordHeaders(t *testing.T) {
	var v struct {
		Cases []struct {
			Name      string       `json:"name"`
			Headers   [][2]*string `json:"headers"`
			MessageID *uint64      `json:"message_id"`
		} `json:"cases"`
	}
	kittest.LoadVectors(t, "record-headers.json", &v)
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var value []byte
			for _, h := range c.Headers {
				if *h[0] == trustmsg.HeaderMessageID {
					if h[1] != nil {
						value = []byte(*h[1])
					}
					break
				}
			}
			id, ok := trustmsg.ParseMessageID(value)
			if c.MessageID == nil {
				if ok {
					t.Fatalf("parsed %d from a record the inbox must refuse", id)
				}
				return
			}
			if !ok || id != *c.MessageID {
				t.Fatalf("parsed %d (%v), want %d", id, ok, *c.MessageID)
			}
		})
	}
}

type outboxVector struct {
	Name    string `json:"name"`
	Message struct {
		MessageKey     string            `json:"message_key"`
		Topic          string            `json:"topic"`
		PayloadBase64  string            `json:"payload_base64"`
		Key            *string           `json:"key"`
		Headers        map[string]string `json:"headers"`
		TraceParent    string            `json:"traceparent"`
		DeliverAfterMs *int64            `json:"deliver_after_ms"`
	} `json:"message"`
	Row struct {
		MessageKey    string            `json:"message_key"`
		Topic         string            `json:"topic"`
		RecordKey     *string           `json:"record_key"`
		PayloadBase64 string            `json:"payload_base64"`
		Headers       map[string]string `json:"headers"`
		TraceParent   *string           `json:"traceparent"`
		Deliver       *struct {
			AfterMs int64 `json:"after_ms"`
		} `json:"deliver"`
	} `json:"row"`
	Error string `json:"error"`
}

func (v outboxVector) message(t testing.TB) trustmsg.Message {
	payload, err := base64.StdEncoding.DecodeString(v.Message.PayloadBase64)
	if err != nil {
		t.Fatal(err)
	}
	m := trustmsg.Message{
		MessageKey: v.Message.MessageKey, Topic: v.Message.Topic, Payload: payload,
		Headers: v.Message.Headers, TraceParent: v.Message.TraceParent,
	}
	if v.Message.Key != nil {
		m.Key = *v.Message.Key
	}
	if v.Message.DeliverAfterMs != nil {
		m.DeliverAfter = time.Duration(*v.Message.DeliverAfterMs) * time.Millisecond
	}
	return m
}

func loadOutboxVectors(t testing.TB) (valid, invalid []outboxVector) {
	var v struct {
		Valid   []outboxVector `json:"valid"`
		Invalid []outboxVector `json:"invalid"`
	}
	kittest.LoadVectors(t, "outbox-rows.json", &v)
	return v.Valid, v.Invalid
}

// Every case of vectors/outbox-rows.json: the row's columns, or the refusal
// with the API's code. (S09 writes each valid row to MariaDB and PostgreSQL
// and reads it back.)
func TestVectorsOutboxRows(t *testing.T) {
	valid, invalidCases := loadOutboxVectors(t)
	for _, d := range []trustmsg.Dialect{trustmsg.MySQL, trustmsg.Postgres} {
		for _, c := range valid {
			t.Run(d.String()+"/"+c.Name, func(t *testing.T) {
				row, err := trustmsg.Outbox{Dialect: d}.Row(context.Background(), c.message(t))
				if err != nil {
					t.Fatal(err)
				}
				want := c.Row
				if row.MessageKey != want.MessageKey || row.Topic != want.Topic ||
					base64.StdEncoding.EncodeToString(row.Payload) != want.PayloadBase64 {
					t.Fatalf("row %+v, want %+v", row, want)
				}
				if !reflect.DeepEqual(row.RecordKey, want.RecordKey) {
					t.Fatalf("record key %v, want %v", row.RecordKey, want.RecordKey)
				}
				var headers map[string]string
				if row.Headers != nil {
					if err := json.Unmarshal(row.Headers, &headers); err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(headers, want.Headers) {
					t.Fatalf("headers %s, want %v", row.Headers, want.Headers)
				}
				wantTP := ""
				if want.TraceParent != nil {
					wantTP = *want.TraceParent
				}
				if row.TraceParent != wantTP {
					t.Fatalf("traceparent %q, want %q", row.TraceParent, wantTP)
				}
				wantAfter := int64(-1)
				if want.Deliver != nil {
					wantAfter = want.Deliver.AfterMs
				}
				if row.DeliverAfterMs != wantAfter || !row.DeliverAt.IsZero() {
					t.Fatalf("deliver after %d at %v, want after %d", row.DeliverAfterMs, row.DeliverAt, wantAfter)
				}
			})
		}
		for _, c := range invalidCases {
			t.Run(d.String()+"/refused: "+c.Name, func(t *testing.T) {
				_, err := trustmsg.Outbox{Dialect: d}.Row(context.Background(), c.message(t))
				if !trustmsg.IsInvalid(err) || trustmsg.ErrorCode(err) != c.Error {
					t.Fatalf("got %v (code %q), want a refusal %q", err, trustmsg.ErrorCode(err), c.Error)
				}
				// Prepare refuses the same before sending.
				cl, _ := trustmsg.NewClient("http://127.0.0.1:9", "shop", "token")
				if _, err := cl.Prepare(context.Background(), c.message(t)); trustmsg.ErrorCode(err) != c.Error {
					t.Fatalf("prepare: %v, want %q", err, c.Error)
				}
			})
		}
	}
}

// The embedded tables are the kit's, byte for byte.
func TestEmbeddedTablesAreTheKits(t *testing.T) {
	for d, name := range map[trustmsg.Dialect]string{trustmsg.MySQL: "mysql.sql", trustmsg.Postgres: "postgres.sql"} {
		kit, err := os.ReadFile(filepath.Join(kittest.Conformance(t), "sql", name))
		if err != nil {
			t.Skipf("no kit beside this module: %v", err)
		}
		if trustmsg.SQL(d) != string(kit) {
			t.Errorf("sql/%s differs from client-sdk/conformance/sql/%s: copy it again", name, name)
		}
	}
}

// The OpenTelemetry span in the context is the trace context prepare
// sends; a message's own trace context wins; none without a span.
func TestTraceContextFromTheContext(t *testing.T) {
	if tp, ts := trustmsg.TraceContext(context.Background()); tp != "" || ts != "" {
		t.Fatalf("no span, yet %q %q", tp, ts)
	}
	s := &service{statuses: []int{200}}
	c := newClient(t, s)
	ctx := spanContext(t)
	if _, err := c.Prepare(ctx, trustmsg.Message{MessageKey: "k", Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := s.headers[0].Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q", got)
	}
	own := "00-11111111111111111111111111111111-2222222222222222-00"
	if _, err := c.Prepare(ctx, trustmsg.Message{MessageKey: "k", Topic: "t", TraceParent: own}); err != nil {
		t.Fatal(err)
	}
	if got := s.headers[1].Get("traceparent"); got != own {
		t.Fatalf("traceparent %q, want the message's own", got)
	}
	if trustmsg.ValidTraceParent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01") != "" ||
		trustmsg.ValidTraceParent("00-00000000000000000000000000000000-00f067aa0ba902b7-01") != "" ||
		trustmsg.ValidTraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-x") != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatal("ValidTraceParent is not trustmsg's rule")
	}
	if err := (trustmsg.Message{MessageKey: "k", Topic: "t"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func spanContext(t *testing.T) context.Context {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
}
