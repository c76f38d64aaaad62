package trustpgx_test

// The contract kit's order scenarios (client-sdk/conformance/scenarios.json)
// through pgx: a pgxpool, work that gets a pgx.Tx, on PostgreSQL, against
// the real trustmsg binary. Each runs only under
// `client-sdk/conformance/kit run -- go test ./...`.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
	"github.com/trustmsg/trustmsg/client-sdk/go/trustpgx"
)

var errOutOfStock = errors.New("out of stock")

// setup opens the kit's PostgreSQL database as a pgx pool, with the SDK's
// tables and the business table.
func setup(t *testing.T) (kittest.Env, *pgxpool.Pool) {
	t.Helper()
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.Postgres) // creates the barrier and inbox tables
	kittest.DDL(t, conn, "CREATE TABLE IF NOT EXISTS go_pgx_orders (id VARCHAR(128) PRIMARY KEY, amount INT NOT NULL)")
	kittest.WithDDL(func() {
		if err := trustmsg.CreateOutboxTable(context.Background(), conn, trustmsg.Postgres); err != nil {
			t.Fatal(err)
		}
	})
	pool, err := pgxpool.New(context.Background(), e.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return e, pool
}

func insertOrder(id string, amount int) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO go_pgx_orders (id, amount) VALUES ($1, $2)", id, amount)
		return err
	}
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func barrier(t *testing.T, pool *pgxpool.Pool) *trustmsg.Barrier {
	t.Helper()
	b, err := trustpgx.NewBarrier(pool)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS01_pgx_order_reaches_kafka_byte_for_byte_postgres(t *testing.T) {
	e, pool := setup(t)
	p := kittest.Register(t, e, "pgx-s01", "", 60000, "")
	msg := trustmsg.Message{
		MessageKey: "order-" + kittest.Random(), Topic: "go-pgx-s01-" + kittest.Random(), Key: "customer-7",
		Payload: []byte{0, 1, 0xff, '{', 0x80}, Headers: map[string]string{"source": "go-pgx"},
	}
	out, err := trustmsg.Transaction(context.Background(), p.Client, barrier(t, pool), msg, insertOrder(msg.MessageKey, 42))
	if err != nil {
		t.Fatal(err)
	}
	if !out.LocalCommitted || !out.DecisionSent || out.Decided.Status != trustmsg.StatusCommitted {
		t.Fatalf("outcome %+v", out)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM go_pgx_orders WHERE id = $1", msg.MessageKey); n != 1 {
		t.Fatalf("%d order rows, want 1", n)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 AND op = 'commit'", p.BizID, msg.MessageKey); n != 1 {
		t.Fatalf("%d commit markers, want 1", n)
	}
	records := kittest.ReadAll(t, e, msg.Topic, 1, 30*time.Second, time.Second)
	if len(records) != 1 {
		t.Fatalf("%d records, want 1", len(records))
	}
	r := records[0]
	if string(r.Key) != msg.Key || !bytes.Equal(r.Value, msg.Payload) {
		t.Fatalf("record key %q value %x", r.Key, r.Value)
	}
	if got, _ := kittest.Header(r, "source"); got != "go-pgx" {
		t.Fatalf("header source = %q", got)
	}
	if got, _ := kittest.Header(r, trustmsg.HeaderMessageID); got != strconv.FormatInt(out.Prepared.ID, 10) {
		t.Fatalf("trustmsg-message-id %q, want %d", got, out.Prepared.ID)
	}
	kittest.Await(t, p.Client, msg.MessageKey, 30*time.Second, func(v *trustmsg.MessageView) bool {
		return v.SendStatus == trustmsg.SendSent
	})
}

func TestS02_pgx_failed_order_is_rolled_back_and_never_delivered_postgres(t *testing.T) {
	e, pool := setup(t)
	p := kittest.Register(t, e, "pgx-s02", "", 60000, "")
	b := barrier(t, pool)
	topic := "go-pgx-s02-" + kittest.Random()
	failed := "order-" + kittest.Random()
	out, err := trustmsg.Transaction(context.Background(), p.Client, b,
		trustmsg.Message{MessageKey: failed, Topic: topic, Payload: []byte("never")},
		func(ctx context.Context, tx pgx.Tx) error {
			if err := insertOrder(failed, 1)(ctx, tx); err != nil {
				return err
			}
			return fmt.Errorf("reserving stock: %w", errOutOfStock)
		})
	if !errors.Is(err, errOutOfStock) {
		t.Fatalf("err = %v, want the work's own error", err)
	}
	if out == nil || out.LocalCommitted || out.Decided.Status != trustmsg.StatusRolledBack {
		t.Fatalf("outcome %+v", out)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM go_pgx_orders WHERE id = $1", failed); n != 0 {
		t.Fatalf("%d order rows left", n)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM trustmsg_barrier WHERE message_key = $1 AND op = 'commit'", failed); n != 0 {
		t.Fatalf("%d commit markers left", n)
	}
	later := "order-" + kittest.Random()
	if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
		trustmsg.Message{MessageKey: later, Topic: topic, Payload: []byte("later")}, insertOrder(later, 2)); err != nil {
		t.Fatal(err)
	}
	for _, r := range kittest.ReadUntil(t, e, topic, 30*time.Second, func(r *kgo.Record) bool {
		k, _ := kittest.Header(r, trustmsg.HeaderMessageKey)
		return k == later
	}) {
		if k, _ := kittest.Header(r, trustmsg.HeaderMessageKey); k == failed {
			t.Fatal("the rolled-back order's message reached Kafka")
		}
	}
}

func TestS03_pgx_stopped_producer_is_committed_by_check_back_postgres(t *testing.T) {
	e, pool := setup(t)
	b := barrier(t, pool)
	base, set := kittest.ServeLater(t)
	p := kittest.Register(t, e, "pgx-s03", base+trustmsg.DefaultCheckPath, 1000, "")
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
	ctx := context.Background()
	topic, key := "go-pgx-s03-"+kittest.Random(), "order-"+kittest.Random()
	view, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte("crash")})
	if err != nil {
		t.Fatal(err)
	}
	// The local transaction commits with its marker; the producer stops
	// before its commit call.
	if err := trustmsg.RunInTx(ctx, b, p.BizID, key, insertOrder(key, 3)); err != nil {
		t.Fatal(err)
	}
	kittest.Await(t, p.Client, key, 30*time.Second, func(v *trustmsg.MessageView) bool {
		return v.Status == trustmsg.StatusCommitted
	})
	if calls.Load() == 0 {
		t.Fatal("committed without a check-back reaching the handler")
	}
	kittest.ReadUntil(t, e, topic, 30*time.Second, func(r *kgo.Record) bool {
		id, _ := kittest.Header(r, trustmsg.HeaderMessageID)
		return id == strconv.FormatInt(view.ID, 10)
	})
}

func TestS07_pgx_inbox_drops_redelivered_record_postgres(t *testing.T) {
	e, pool := setup(t)
	p := kittest.Register(t, e, "pgx-s07", "", 60000, "")
	topic := "go-pgx-s07-" + kittest.Random()
	b := barrier(t, pool)
	keys := []string{"ship-" + kittest.Random(), "ship-" + kittest.Random()}
	for _, k := range keys {
		if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
			trustmsg.Message{MessageKey: k, Topic: topic, Payload: []byte(k)}, insertOrder(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	records := kittest.ReadAll(t, e, topic, 2, 30*time.Second, 0)
	in, err := trustpgx.NewInbox(pool, "go-pgx-s07-"+kittest.Random())
	if err != nil {
		t.Fatal(err)
	}
	ship := func(r *kgo.Record) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO go_pgx_orders (id, amount) VALUES ($1, 0)", "shipped-"+string(r.Value))
			return err
		}
	}
	ctx := context.Background()
	for i, want := range []trustmsg.Processed{trustmsg.Done, trustmsg.Repeat} {
		if got, err := kafka.Process(ctx, in, records[0], ship(records[0])); err != nil || got != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i+1, got, err, want)
		}
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM go_pgx_orders WHERE id = $1", "shipped-"+string(records[0].Value)); n != 1 {
		t.Fatalf("the work ran %d times, want once", n)
	}
	// A failed work keeps neither its row nor the inbox row: it runs again.
	_, err = kafka.Process(ctx, in, records[1], func(ctx context.Context, tx pgx.Tx) error {
		if err := ship(records[1])(ctx, tx); err != nil {
			return err
		}
		return errOutOfStock
	})
	if !errors.Is(err, errOutOfStock) {
		t.Fatalf("err = %v", err)
	}
	if got, err := kafka.Process(ctx, in, records[1], ship(records[1])); err != nil || got != trustmsg.Done {
		t.Fatalf("after the failure: %v, %v; want done", got, err)
	}
}

func TestS09_pgx_outbox_zero_value_writes_in_the_pgx_transaction_postgres(t *testing.T) {
	_, pool := setup(t)
	ctx := context.Background()
	var outbox trustmsg.Outbox // the zero value: the pgx transaction says PostgreSQL
	committed := trustmsg.Message{MessageKey: "go-pgx-s09-" + kittest.Random(), Topic: "orders", Key: "customer-9", Payload: []byte{0, 0xff, 'o', 'k'}}
	rolled := trustmsg.Message{MessageKey: "go-pgx-s09-" + kittest.Random(), Topic: "orders", Payload: []byte("never")}
	for _, c := range []struct {
		msg    trustmsg.Message
		commit bool
	}{{rolled, false}, {committed, true}} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if id, err := outbox.EnqueueTx(ctx, trustpgx.Tx(tx), c.msg); err != nil || id <= 0 {
				return fmt.Errorf("enqueue: %d, %w", id, err)
			}
			if !c.commit {
				return errOutOfStock
			}
			return nil
		})
		if c.commit && err != nil || !c.commit && !errors.Is(err, errOutOfStock) {
			t.Fatal(err)
		}
	}
	var key *string
	var payload []byte
	if err := pool.QueryRow(ctx, "SELECT record_key, payload FROM trustmsg_outbox WHERE message_key = $1", committed.MessageKey).Scan(&key, &payload); err != nil {
		t.Fatal(err)
	}
	if key == nil || *key != committed.Key || !bytes.Equal(payload, committed.Payload) {
		t.Fatalf("row: key %v payload %x", key, payload)
	}
	if n := count(t, pool, "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = $1", rolled.MessageKey); n != 0 {
		t.Fatal("the rolled-back row exists")
	}
}

func TestS04_pgx_check_back_during_open_pgx_transaction_waits_for_its_outcome_postgres(t *testing.T) {
	_, pool := setup(t)
	b := barrier(t, pool)
	ctx := context.Background()
	biz := "go-pgx-s04-" + kittest.Random()
	for _, commit := range []bool{true, false} {
		key := "order-" + kittest.Random()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Ended on every path: an open transaction would keep the pool
		// from closing.
		defer func() { _ = tx.Rollback(ctx) }()
		// The caller's own pgx transaction holds the commit marker.
		if err := b.InsertTx(ctx, trustpgx.Tx(tx), biz, key); err != nil {
			t.Fatal(err)
		}
		answer := make(chan trustmsg.Decision, 1)
		go func() {
			d, err := b.Check(ctx, biz, key)
			if err != nil {
				t.Error(err)
			}
			answer <- d
		}()
		select {
		case d := <-answer:
			t.Fatalf("check-back answered %q while the transaction was open", d)
		case <-time.After(300 * time.Millisecond):
		}
		want := trustmsg.Commit
		if commit {
			err = tx.Commit(ctx)
		} else {
			err, want = tx.Rollback(ctx), trustmsg.Rollback
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := <-answer; d != want {
			t.Fatalf("check-back answered %q, want %q", d, want)
		}
		if !commit {
			// The rollback marker is there: a late local transaction of
			// the key is refused.
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return b.InsertTx(ctx, trustpgx.Tx(tx), biz, key) })
			if !errors.Is(err, trustmsg.ErrAlreadyRolledBack) {
				t.Fatalf("a late insert: %v, want ErrAlreadyRolledBack", err)
			}
		}
	}
}
