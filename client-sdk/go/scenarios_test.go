package trustmsg_test

// The contract kit's scenarios S01-S07, S09 and S10 (client-sdk/conformance/
// scenarios.json) against the real trustmsg binary, MariaDB, PostgreSQL and
// the kit's Kafka broker. S08 is in package kafka. Each runs only under
// `client-sdk/conformance/kit run -- go test ./...`.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
)

var errOutOfStock = errors.New("out of stock")

// ph is the placeholder of the n-th bound value in d's SQL.
func ph(d trustmsg.Dialect, n int) string {
	if d == trustmsg.Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// ordersTable creates the business table of the scenarios.
func ordersTable(t *testing.T, db *sql.DB) {
	t.Helper()
	kittest.DDL(t, db, "CREATE TABLE IF NOT EXISTS go_orders (id VARCHAR(128) PRIMARY KEY, amount INT NOT NULL)")
}

func insertOrder(d trustmsg.Dialect, id string, amount int) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO go_orders (id, amount) VALUES ("+ph(d, 1)+", "+ph(d, 2)+")", id, amount)
		return err
	}
}

func count(t *testing.T, db *sql.DB, d trustmsg.Dialect, query string, args ...any) int {
	t.Helper()
	for i := range args {
		query = strings.Replace(query, "?", ph(d, i+1), 1)
	}
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func markers(t *testing.T, db *sql.DB, d trustmsg.Dialect, bizID, key string) int {
	return count(t, db, d, "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?", bizID, key)
}

// commitMarkers counts the barrier's commit markers of key (a failed local
// transaction leaves a rollback marker, as check-back would).
func commitMarkers(t *testing.T, db *sql.DB, d trustmsg.Dialect, bizID, key string) int {
	return count(t, db, d, "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? AND op = 'commit'", bizID, key)
}

func barrier(t *testing.T, db *sql.DB, d trustmsg.Dialect) *trustmsg.Barrier {
	b, err := trustmsg.NewBarrier(db, d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS01_committed_message_reaches_kafka_byte_for_byte(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			conn := kittest.Open(t, e, db.Dialect)
			ordersTable(t, conn)
			p := kittest.Register(t, e, "s01", "", 60000, "")
			topic := "go-s01-" + kittest.Random()
			payload := []byte{0, 1, 2, 0xff, 0xfe, '{', '}', 0x80}
			msg := trustmsg.Message{
				MessageKey: "order-" + kittest.Random(), Topic: topic, Key: "customer-7", Payload: payload,
				Headers: map[string]string{"content-type": "application/octet-stream", "source": "go-sdk"},
			}
			// The producer's trace, as an OpenTelemetry span in the context.
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
				SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
				TraceFlags: trace.FlagsSampled, Remote: true,
			})
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
			out, err := trustmsg.Transaction(ctx, p.Client, barrier(t, conn, db.Dialect), msg, insertOrder(db.Dialect, msg.MessageKey, 42))
			if err != nil {
				t.Fatal(err)
			}
			if !out.LocalCommitted || !out.DecisionSent || out.Decided.Status != trustmsg.StatusCommitted {
				t.Fatalf("outcome %+v", out)
			}
			if markers(t, conn, db.Dialect, p.BizID, msg.MessageKey) != 1 {
				t.Fatal("no barrier marker")
			}
			records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second)
			if len(records) != 1 {
				t.Fatalf("%d records on %s, want exactly 1", len(records), topic)
			}
			r := records[0]
			if string(r.Key) != "customer-7" || !bytes.Equal(r.Value, payload) {
				t.Fatalf("record key %q value %x, want customer-7 / %x", r.Key, r.Value, payload)
			}
			for name, value := range msg.Headers {
				if got, ok := kittest.Header(r, name); !ok || got != value {
					t.Fatalf("header %s = %q (%v), want %q", name, got, ok, value)
				}
			}
			if got, _ := kittest.Header(r, trustmsg.HeaderMessageID); got != strconv.FormatInt(out.Prepared.ID, 10) {
				t.Fatalf("trustmsg-message-id %q, want %d", got, out.Prepared.ID)
			}
			if tp, _ := kittest.Header(r, "traceparent"); !strings.HasPrefix(tp, "00-"+sc.TraceID().String()+"-") {
				t.Fatalf("traceparent %q does not continue the producer's trace %s", tp, sc.TraceID())
			}
			kittest.Await(t, p.Client, msg.MessageKey, 30*time.Second, func(v *trustmsg.MessageView) bool {
				return v.Status == trustmsg.StatusCommitted && v.SendStatus == trustmsg.SendSent
			})
		})
	}
}

func TestS02_failed_local_transaction_is_rolled_back_and_never_delivered(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p := kittest.Register(t, e, "s02", "", 60000, "")
		topic := "go-s02-" + kittest.Random()
		failed := "order-" + kittest.Random()
		out, err := trustmsg.Transaction(context.Background(), p.Client, b,
			trustmsg.Message{MessageKey: failed, Topic: topic, Payload: []byte(`{"order":1}`)},
			func(ctx context.Context, tx *sql.Tx) error {
				if err := insertOrder(d, failed, 1)(ctx, tx); err != nil {
					return err
				}
				return fmt.Errorf("reserving stock: %w", errOutOfStock)
			})
		// The work's own error, not swallowed, not replaced.
		if !errors.Is(err, errOutOfStock) {
			t.Fatalf("err = %v, want the work's error", err)
		}
		var local *trustmsg.LocalError
		if !errors.As(err, &local) || local.MessageKey != failed {
			t.Fatalf("err = %#v, want a *LocalError", err)
		}
		if out == nil || out.LocalCommitted || !out.DecisionSent || out.Decided.Status != trustmsg.StatusRolledBack {
			t.Fatalf("outcome %+v", out)
		}
		if n := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", failed); n != 0 {
			t.Fatalf("%d business rows left", n)
		}
		// The commit marker is not there; a rollback marker may be.
		if n := commitMarkers(t, conn, d, p.BizID, failed); n != 0 {
			t.Fatalf("%d barrier commit markers left", n)
		}
		if v, err := p.Client.Get(context.Background(), failed); err != nil || v.Status != trustmsg.StatusRolledBack {
			t.Fatalf("message %+v, %v", v, err)
		}
		// A later message of the same producer and topic arrives; the
		// failed one never does.
		later := "order-" + kittest.Random()
		if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
			trustmsg.Message{MessageKey: later, Topic: topic, Payload: []byte("marker")}, insertOrder(d, later, 2)); err != nil {
			t.Fatal(err)
		}
		records := kittest.ReadUntil(t, e, topic, 30*time.Second, func(r *kgo.Record) bool {
			k, _ := kittest.Header(r, trustmsg.HeaderMessageKey)
			return k == later
		})
		for _, r := range records {
			if k, _ := kittest.Header(r, trustmsg.HeaderMessageKey); k == failed {
				t.Fatalf("the rolled-back message reached Kafka: %+v", r)
			}
		}
	})
}

// checkEndpoint serves the SDK's check-back handler, answering from the
// barrier, for a producer registered with it; calls counts the verified
// calls answered.
func checkEndpoint(t *testing.T, e kittest.Env, name string, b *trustmsg.Barrier, firstVerifyMs int) (kittest.Producer, string, *atomic.Int32) {
	t.Helper()
	base, set := kittest.ServeLater(t)
	url := base + trustmsg.DefaultCheckPath
	p := kittest.Register(t, e, name, url, firstVerifyMs, "")
	v, err := trustmsg.NewVerifier(p.Secret)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("POST "+trustmsg.DefaultCheckPath, trustmsg.CheckHandler(v, func(ctx context.Context, req trustmsg.CheckRequest) (trustmsg.Decision, error) {
		calls.Add(1)
		return b.Decide(ctx, req)
	}))
	set(mux)
	return p, url, &calls
}

func TestS03_stopped_producer_is_committed_by_check_back(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p, _, calls := checkEndpoint(t, e, "s03", b, 1000)
		topic := "go-s03-" + kittest.Random()
		key := "order-" + kittest.Random()
		ctx := context.Background()
		view, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte("crash")})
		if err != nil {
			t.Fatal(err)
		}
		// The local transaction commits with its marker; the producer
		// "stops" before its commit call.
		if err := b.RunInTx(ctx, p.BizID, key, insertOrder(d, key, 3)); err != nil {
			t.Fatal(err)
		}
		kittest.Await(t, p.Client, key, 30*time.Second, func(v *trustmsg.MessageView) bool {
			return v.Status == trustmsg.StatusCommitted
		})
		if calls.Load() == 0 {
			t.Fatal("committed without the check-back reaching the handler")
		}
		records := kittest.ReadUntil(t, e, topic, 30*time.Second, func(r *kgo.Record) bool {
			id, _ := kittest.Header(r, trustmsg.HeaderMessageID)
			return id == strconv.FormatInt(view.ID, 10)
		})
		if got := records[len(records)-1]; string(got.Value) != "crash" {
			t.Fatalf("record value %q", got.Value)
		}
	})
}

// signedCheck calls the check-back endpoint at url as trustmsg does.
func signedCheck(url, secret, bizID, key string, id int64, ts time.Time) (*http.Response, error) {
	body := fmt.Sprintf(`{"biz_id":%q,"message_key":%q,"message_id":%d,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`, bizID, key, id)
	sig, err := trustmsg.Sign(secret, fmt.Sprintf("chk_%d_1", id), ts.Unix(), []byte(body))
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("webhook-id", fmt.Sprintf("chk_%d_1", id))
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	return http.DefaultClient.Do(req)
}

func decision(t *testing.T, res *http.Response, err error) trustmsg.Decision {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var answer trustmsg.CheckResponse
	if res.StatusCode != http.StatusOK {
		t.Fatalf("check-back answered %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&answer); err != nil {
		t.Fatal(err)
	}
	return answer.Decision
}

func TestS04_check_back_during_open_transaction_waits_and_answers_its_outcome(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	for _, db := range kittest.Dialects {
		for _, commit := range []bool{true, false} {
			name := db.Name + "/rollback"
			if commit {
				name = db.Name + "/commit"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				conn := kittest.Open(t, e, db.Dialect)
				ordersTable(t, conn)
				b := barrier(t, conn, db.Dialect)
				p, url, _ := checkEndpoint(t, e, "s04", b, 3600000)
				key := "order-" + kittest.Random()
				ctx := context.Background()
				view, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: key, Topic: "go-s04", Payload: []byte("x")})
				if err != nil {
					t.Fatal(err)
				}
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				// A failing test must not leave the transaction (and its
				// locks) open for the other tests.
				defer func() { _ = tx.Rollback() }()
				if err := b.Insert(ctx, tx, p.BizID, key); err != nil {
					t.Fatal(err)
				}
				if err := insertOrder(db.Dialect, key, 4)(ctx, tx); err != nil {
					t.Fatal(err)
				}
				type answer struct {
					d  trustmsg.Decision
					at time.Time
				}
				answered := make(chan answer, 1)
				go func() {
					res, err := signedCheck(url, p.Secret, p.BizID, key, view.ID, time.Now())
					if err != nil {
						answered <- answer{d: "error: " + trustmsg.Decision(err.Error())}
						return
					}
					var a trustmsg.CheckResponse
					_ = json.NewDecoder(res.Body).Decode(&a)
					_ = res.Body.Close()
					answered <- answer{d: a.Decision, at: time.Now()}
				}()
				select {
				case a := <-answered:
					t.Fatalf("answered %q while the local transaction was open", a.d)
				case <-time.After(700 * time.Millisecond):
				}
				ended := time.Now()
				if commit {
					err = tx.Commit()
				} else {
					err = tx.Rollback()
				}
				if err != nil {
					t.Fatal(err)
				}
				var a answer
				select {
				case a = <-answered:
				case <-time.After(20 * time.Second):
					t.Fatal("no answer after the transaction ended")
				}
				want := trustmsg.Rollback
				if commit {
					want = trustmsg.Commit
				}
				if a.d != want || a.at.Before(ended) {
					t.Fatalf("answered %q at %v (transaction ended %v), want %q after", a.d, a.at, ended, want)
				}
				if !commit {
					// The commit marker can no longer go in for that key.
					err := b.RunInTx(ctx, p.BizID, key, insertOrder(db.Dialect, key, 4))
					if !errors.Is(err, trustmsg.ErrAlreadyRolledBack) {
						t.Fatalf("a later commit marker: %v, want ErrAlreadyRolledBack", err)
					}
					_, err = p.Client.Rollback(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
				} else if _, err := p.Client.Commit(ctx, key); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestS05_barrier_keys_differing_by_space_or_case_are_other_messages(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	var v struct {
		Pairs []struct {
			Name string `json:"name"`
			A    string `json:"a"`
			B    string `json:"b"`
		} `json:"pairs"`
	}
	kittest.LoadVectors(t, "barrier-keys.json", &v)
	if len(v.Pairs) == 0 {
		t.Fatal("no pairs")
	}
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			conn := kittest.Open(t, e, db.Dialect)
			b := barrier(t, conn, db.Dialect)
			bizID := "go-s05-" + kittest.Random()
			ctx := context.Background()
			for _, pair := range v.Pairs {
				if err := b.RunInTx(ctx, bizID, pair.A, func(context.Context, *sql.Tx) error { return nil }); err != nil {
					t.Fatalf("%s: %v", pair.Name, err)
				}
				if d, err := b.Check(ctx, bizID, pair.B); err != nil || d != trustmsg.Rollback {
					t.Fatalf("%s: %q is answered %q (%v), want rollback", pair.Name, pair.B, d, err)
				}
				if d, err := b.Check(ctx, bizID, pair.A); err != nil || d != trustmsg.Commit {
					t.Fatalf("%s: %q is answered %q (%v), want commit", pair.Name, pair.A, d, err)
				}
			}
		})
	}
}

func TestS06_forged_or_stale_check_back_is_refused(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.MySQL)
	b := barrier(t, conn, trustmsg.MySQL)
	p, url, calls := checkEndpoint(t, e, "s06", b, 3600000)
	key := "order-" + kittest.Random()
	other := "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM="
	body := fmt.Sprintf(`{"biz_id":%q,"message_key":%q,"message_id":7,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`, p.BizID, key)
	now := time.Now().Unix()
	sign := func(secret string, ts int64, b string) string {
		s, err := trustmsg.Sign(secret, "chk_7_1", ts, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name      string
		ts        int64
		signature string
		body      string
		headers   bool
	}{
		{"another secret", now, sign(other, now, body), body, true},
		{"tampered body", now, sign(p.Secret, now, body), strings.Replace(body, `"message_id":7`, `"message_id":8`, 1), true},
		{"10 minutes old", now - 600, sign(p.Secret, now-600, body), body, true},
		{"no signature headers", now, "", body, false},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(c.body))
		req.Header.Set("content-type", "application/json")
		if c.headers {
			req.Header.Set("webhook-id", "chk_7_1")
			req.Header.Set("webhook-timestamp", strconv.FormatInt(c.ts, 10))
			req.Header.Set("webhook-signature", c.signature)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: answered %d, want 401", c.name, res.StatusCode)
		}
	}
	if calls.Load() != 0 || markers(t, conn, trustmsg.MySQL, p.BizID, key) != 0 {
		t.Fatalf("a refused call reached the barrier (%d calls, %d markers)", calls.Load(), markers(t, conn, trustmsg.MySQL, p.BizID, key))
	}
	// The same handler accepts a correctly signed call: rollback, written.
	res, err := signedCheck(url, p.Secret, p.BizID, key, 7, time.Now())
	if d := decision(t, res, err); d != trustmsg.Rollback {
		t.Fatalf("answered %q", d)
	}
	if markers(t, conn, trustmsg.MySQL, p.BizID, key) != 1 {
		t.Fatal("the accepted call left no marker")
	}
	// (Every case of vectors/check-signatures.json: TestVectorsCheckSignatures.)
}

func TestS07_inbox_drops_redelivered_record_and_keeps_work_atomic(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			conn := kittest.Open(t, e, db.Dialect)
			ordersTable(t, conn)
			kittest.DDL(t, conn, "CREATE TABLE IF NOT EXISTS go_shipments (order_id VARCHAR(128) PRIMARY KEY)")
			b := barrier(t, conn, db.Dialect)
			p := kittest.Register(t, e, "s07", "", 60000, "")
			topic := "go-s07-" + kittest.Random()
			first, second := "order-"+kittest.Random(), "order-"+kittest.Random()
			for _, key := range []string{first, second} {
				if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
					trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte(key)}, insertOrder(db.Dialect, key, 7)); err != nil {
					t.Fatal(err)
				}
			}
			records := kittest.ReadAll(t, e, topic, 2, 30*time.Second, 0)
			byKey := map[string]*kgo.Record{}
			for _, r := range records {
				byKey[string(r.Value)] = r
			}
			group := "go-billing-" + kittest.Random()
			in, err := trustmsg.NewInbox(conn, db.Dialect, group)
			if err != nil {
				t.Fatal(err)
			}
			ship := func(order string) func(context.Context, *sql.Tx) error {
				return func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "INSERT INTO go_shipments (order_id) VALUES ("+ph(db.Dialect, 1)+")", order)
					return err
				}
			}
			ctx := context.Background()
			for i, want := range []trustmsg.Processed{trustmsg.Done, trustmsg.Repeat} {
				got, err := kafka.Process(ctx, in, byKey[first], ship(first))
				if err != nil || got != want {
					t.Fatalf("delivery %d: %v, %v; want %v", i+1, got, err, want)
				}
			}
			if n := count(t, conn, db.Dialect, "SELECT COUNT(*) FROM go_shipments WHERE order_id = ?", first); n != 1 {
				t.Fatalf("the work ran %d times", n)
			}
			// A record whose work fails leaves neither its row nor the inbox's.
			id, _ := kafka.MessageID(byKey[second])
			_, err = kafka.Process(ctx, in, byKey[second], func(ctx context.Context, tx *sql.Tx) error {
				if err := ship(second)(ctx, tx); err != nil {
					return err
				}
				return errOutOfStock
			})
			if !errors.Is(err, errOutOfStock) {
				t.Fatalf("err = %v, want the work's", err)
			}
			if n := count(t, conn, db.Dialect, "SELECT COUNT(*) FROM go_shipments WHERE order_id = ?", second); n != 0 {
				t.Fatal("the failed work's row was kept")
			}
			if n := count(t, conn, db.Dialect, "SELECT COUNT(*) FROM trustmsg_inbox WHERE consumer_group = ? AND message_id = ?", group, int64(id)); n != 0 {
				t.Fatal("the failed work's inbox row was kept")
			}
			// ... so it is processed again later.
			if got, err := kafka.Process(ctx, in, byKey[second], ship(second)); err != nil || got != trustmsg.Done {
				t.Fatalf("the redelivery: %v, %v", got, err)
			}
			// Records without a usable trustmsg-message-id are refused
			// (vectors/record-headers.json), nothing run.
			var v struct {
				Cases []struct {
					Name      string       `json:"name"`
					Headers   [][2]*string `json:"headers"`
					MessageID *uint64      `json:"message_id"`
				} `json:"cases"`
			}
			kittest.LoadVectors(t, "record-headers.json", &v)
			for _, c := range v.Cases {
				r := &kgo.Record{Value: []byte("x")}
				for _, h := range c.Headers {
					rh := kgo.RecordHeader{Key: *h[0]}
					if h[1] != nil {
						rh.Value = []byte(*h[1])
					}
					r.Headers = append(r.Headers, rh)
				}
				id, ok := kafka.MessageID(r)
				if c.MessageID == nil {
					ran := false
					_, err := kafka.Process(ctx, in, r, func(context.Context, *sql.Tx) error { ran = true; return nil })
					if !errors.Is(err, trustmsg.ErrNoMessageID) || ran {
						t.Fatalf("%s: %v (work ran: %v), want ErrNoMessageID", c.Name, err, ran)
					}
				} else if !ok || id != *c.MessageID {
					t.Fatalf("%s: id %d (%v), want %d", c.Name, id, ok, *c.MessageID)
				}
			}
		})
	}
}

func TestS10_503_is_retried_with_backoff_and_409_is_not(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	p := kittest.Register(t, e, "s10", "", 60000, e.ProxyURL)
	ctx := context.Background()
	key := "order-" + kittest.Random()
	if _, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: key, Topic: "go-s10", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	kittest.Faults(t, e, key, 503, 2)
	view, err := p.Client.Commit(ctx, key)
	if err != nil || view.Status != trustmsg.StatusCommitted {
		t.Fatalf("commit: %+v, %v", view, err)
	}
	var commits []kittest.ProxyRequest
	for _, r := range kittest.Requests(t, e, key) {
		if strings.HasSuffix(r.Path, "/commit") {
			commits = append(commits, r)
		}
	}
	if len(commits) != 3 || commits[0].Status != 503 || commits[1].Status != 503 || commits[2].Status != 200 {
		t.Fatalf("commit requests %+v, want 503, 503, 200", commits)
	}
	// The default policy waits 100-150 ms, then 200-300 ms. A busy machine
	// only adds to a gap, so each is held to its step's least (comparing
	// the two gaps failed when the first one was slowed down).
	gap1, gap2 := commits[1].AtMs-commits[0].AtMs, commits[2].AtMs-commits[1].AtMs
	if gap1 < 95 || gap2 < 195 {
		t.Fatalf("gaps %d ms then %d ms: not a backoff from 100 ms doubling", gap1, gap2)
	}

	conflict := "order-" + kittest.Random()
	if _, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: conflict, Topic: "go-s10", Payload: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	_, err = p.Client.Prepare(ctx, trustmsg.Message{MessageKey: conflict, Topic: "go-s10", Payload: []byte("two")})
	var tmErr *trustmsg.Error
	if !trustmsg.IsConflict(err) || !errors.As(err, &tmErr) || tmErr.Code != "prepare_conflict" || tmErr.Status != 409 || tmErr.Attempts != 1 {
		t.Fatalf("the conflicting prepare: %#v", err)
	}
	if seen := kittest.Requests(t, e, conflict); len(seen) != 2 || seen[1].Status != 409 {
		t.Fatalf("requests for the conflicting key: %+v, want 2 (the second a single 409)", seen)
	}
}

func TestS09_local_message_table_delivers(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	ctx := context.Background()
	t.Run("mysql relayed", func(t *testing.T) {
		conn := kittest.Open(t, e, trustmsg.MySQL)
		outbox := trustmsg.Outbox{Dialect: trustmsg.MySQL}
		topic := e.OutboxTopicPrefix + "go-s09-" + kittest.Random()
		rolled := trustmsg.Message{MessageKey: "go-s09-" + kittest.Random(), Topic: topic, Payload: []byte("never")}
		committed := trustmsg.Message{
			MessageKey: "go-s09-" + kittest.Random(), Topic: topic, Key: "customer-9",
			Payload: []byte{0, 0xff, 'o', 'k', 0x80}, Headers: map[string]string{"content-type": "application/octet-stream", "source": "go-outbox"},
		}
		for _, c := range []struct {
			msg    trustmsg.Message
			commit bool
		}{{rolled, false}, {committed, true}} {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := outbox.Enqueue(ctx, tx, c.msg); err != nil || id <= 0 {
				t.Fatalf("enqueue: %d, %v", id, err)
			}
			if c.commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second)
		if len(records) != 1 {
			t.Fatalf("%d records on %s, want only the committed row's", len(records), topic)
		}
		r := records[0]
		if string(r.Key) != committed.Key || !bytes.Equal(r.Value, committed.Payload) {
			t.Fatalf("record key %q value %x", r.Key, r.Value)
		}
		for name, value := range committed.Headers {
			if got, _ := kittest.Header(r, name); got != value {
				t.Fatalf("header %s = %q, want %q", name, got, value)
			}
		}
		if k, _ := kittest.Header(r, trustmsg.HeaderMessageKey); k != committed.MessageKey {
			t.Fatalf("trustmsg-message-key %q", k)
		}
		if _, ok := kittest.Header(r, trustmsg.HeaderMessageID); !ok {
			t.Fatal("no trustmsg-message-id")
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var status int
			if err := conn.QueryRow("SELECT status FROM trustmsg_outbox WHERE message_key = ?", committed.MessageKey).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if status == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the row's status is %d, not 2 (relayed)", status)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if n := count(t, conn, trustmsg.MySQL, "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ?", rolled.MessageKey); n != 0 {
			t.Fatal("the rolled-back row exists")
		}
	})
	// Every case of vectors/outbox-rows.json, written and read back (then
	// rolled back: the relay never sees it), on MariaDB and PostgreSQL.
	valid, invalidCases := loadOutboxVectors(t)
	for _, db := range kittest.Dialects {
		t.Run(db.Name+" vectors", func(t *testing.T) {
			conn := kittest.Open(t, e, db.Dialect)
			kittest.WithDDL(func() {
				if err := trustmsg.CreateOutboxTable(ctx, conn, db.Dialect); err != nil {
					t.Fatal(err)
				}
			})
			outbox := trustmsg.Outbox{Dialect: db.Dialect}
			q := "SELECT message_key, topic, record_key, payload, headers, traceparent, content_type, status, %s FROM trustmsg_outbox WHERE id = " + ph(db.Dialect, 1)
			delay := "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), deliver_at) DIV 1000"
			if db.Dialect == trustmsg.Postgres {
				delay = "CAST(EXTRACT(EPOCH FROM (deliver_at - now())) * 1000 AS BIGINT)"
			}
			for _, c := range valid {
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				id, err := outbox.Enqueue(ctx, tx, c.message(t))
				if err != nil {
					_ = tx.Rollback()
					t.Fatalf("%s: %v", c.Name, err)
				}
				var key, topic string
				var recordKey, headers, tp, contentType sql.NullString
				var payload []byte
				var status int
				var afterMs sql.NullInt64
				err = tx.QueryRow(fmt.Sprintf(q, delay), id).Scan(&key, &topic, &recordKey, &payload, &headers, &tp, &contentType, &status, &afterMs)
				_ = tx.Rollback()
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				w := c.Row
				if key != w.MessageKey || topic != w.Topic || base64Std(payload) != w.PayloadBase64 || status != 0 || contentType.Valid {
					t.Fatalf("%s: row %q %q %q status %d content_type %v", c.Name, key, topic, base64Std(payload), status, contentType)
				}
				if (w.RecordKey == nil) != !recordKey.Valid || w.RecordKey != nil && *w.RecordKey != recordKey.String {
					t.Fatalf("%s: record_key %v, want %v", c.Name, recordKey, w.RecordKey)
				}
				var gotHeaders map[string]string
				if headers.Valid {
					if err := json.Unmarshal([]byte(headers.String), &gotHeaders); err != nil {
						t.Fatal(err)
					}
				}
				if fmt.Sprint(gotHeaders) != fmt.Sprint(w.Headers) || (w.Headers == nil) != !headers.Valid {
					t.Fatalf("%s: headers %v, want %v", c.Name, headers, w.Headers)
				}
				if (w.TraceParent == nil) != !tp.Valid || w.TraceParent != nil && *w.TraceParent != tp.String {
					t.Fatalf("%s: traceparent %v, want %v", c.Name, tp, w.TraceParent)
				}
				switch {
				case w.Deliver == nil && afterMs.Valid:
					t.Fatalf("%s: deliver_at set (%d ms ahead)", c.Name, afterMs.Int64)
				case w.Deliver != nil && (!afterMs.Valid || afterMs.Int64 < w.Deliver.AfterMs-5000 || afterMs.Int64 > w.Deliver.AfterMs):
					t.Fatalf("%s: deliver_at %v ms ahead, want the database's now + %d", c.Name, afterMs, w.Deliver.AfterMs)
				}
			}
			// A delivery time is written as given, in UTC, to the millisecond.
			at := time.Now().Add(time.Hour).Truncate(time.Millisecond).In(time.FixedZone("UTC+5", 5*3600))
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := outbox.Enqueue(ctx, tx, trustmsg.Message{MessageKey: "order-at", Topic: "orders", Payload: []byte("x"), DeliverAt: at.Add(999 * time.Microsecond)})
			if err != nil {
				_ = tx.Rollback()
				t.Fatal(err)
			}
			var written string
			column := "DATE_FORMAT(deliver_at, '%Y-%m-%d %H:%i:%s.%f')"
			if db.Dialect == trustmsg.Postgres {
				column = "to_char(deliver_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
			}
			err = tx.QueryRow("SELECT "+column+" FROM trustmsg_outbox WHERE id = "+ph(db.Dialect, 1), id).Scan(&written)
			_ = tx.Rollback()
			if want := at.UTC().Format("2006-01-02 15:04:05.000000"); err != nil || written != want {
				t.Fatalf("deliver_at %q (%v), want %q", written, err, want)
			}
			for _, c := range invalidCases {
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = outbox.Enqueue(ctx, tx, c.message(t))
				var n int
				cerr := tx.QueryRow("SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = "+ph(db.Dialect, 1), c.Message.MessageKey).Scan(&n)
				_ = tx.Rollback()
				if trustmsg.ErrorCode(err) != c.Error || cerr != nil || n != 0 {
					t.Fatalf("%s: %v (rows %d, %v), want refused %q before writing", c.Name, err, n, cerr, c.Error)
				}
			}
		})
	}
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
