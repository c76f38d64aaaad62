package trustgorm_test

// The contract kit's order scenarios (client-sdk/conformance/scenarios.json)
// through GORM: work that gets the transaction's *gorm.DB, on MariaDB,
// against the real trustmsg binary. Each runs only under
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

	"github.com/twmb/franz-go/pkg/kgo"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
	"github.com/trustmsg/trustmsg/client-sdk/go/trustgorm"
)

var errOutOfStock = errors.New("out of stock")

// Order is the business model the scenarios save through GORM.
type Order struct {
	ID     string `gorm:"primaryKey;size:128"`
	Amount int
}

func (Order) TableName() string { return "go_gorm_orders" }

// setup opens the kit's MariaDB database through GORM, with the SDK's
// tables and the business table.
func setup(t *testing.T) (kittest.Env, *gorm.DB) {
	t.Helper()
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.MySQL) // creates the barrier and inbox tables
	kittest.DDL(t, conn, "CREATE TABLE IF NOT EXISTS go_gorm_orders (id VARCHAR(128) PRIMARY KEY, amount BIGINT NOT NULL)")
	dsn, err := kittest.MySQLDSN(e.MySQLURL)
	if err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sqlDB.Close() })
	return e, db
}

func placeOrder(id string, amount int) func(context.Context, *gorm.DB) error {
	return func(ctx context.Context, tx *gorm.DB) error {
		return tx.WithContext(ctx).Create(&Order{ID: id, Amount: amount}).Error
	}
}

func count(t *testing.T, db *gorm.DB, model any, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.Model(model).Where(where, args...).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// marker is a row of the barrier table, counted through GORM.
type marker struct{}

func (marker) TableName() string { return trustmsg.BarrierTable }

func barrier(t *testing.T, db *gorm.DB) *trustmsg.Barrier {
	t.Helper()
	b, err := trustgorm.NewBarrier(db)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestS01_gorm_order_reaches_kafka_byte_for_byte_mysql(t *testing.T) {
	e, db := setup(t)
	p := kittest.Register(t, e, "gorm-s01", "", 60000, "")
	msg := trustmsg.Message{
		MessageKey: "order-" + kittest.Random(), Topic: "go-gorm-s01-" + kittest.Random(), Key: "customer-7",
		Payload: []byte{0, 1, 0xff, '{', 0x80}, Headers: map[string]string{"source": "go-gorm"},
	}
	out, err := trustmsg.Transaction(context.Background(), p.Client, barrier(t, db), msg, placeOrder(msg.MessageKey, 42))
	if err != nil {
		t.Fatal(err)
	}
	if !out.LocalCommitted || !out.DecisionSent || out.Decided.Status != trustmsg.StatusCommitted {
		t.Fatalf("outcome %+v", out)
	}
	if n := count(t, db, &Order{}, "id = ?", msg.MessageKey); n != 1 {
		t.Fatalf("%d order rows, want 1", n)
	}
	if n := count(t, db, &marker{}, "biz_id = ? AND message_key = ? AND op = 'commit'", p.BizID, msg.MessageKey); n != 1 {
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
	if got, _ := kittest.Header(r, "source"); got != "go-gorm" {
		t.Fatalf("header source = %q", got)
	}
	if got, _ := kittest.Header(r, trustmsg.HeaderMessageID); got != strconv.FormatInt(out.Prepared.ID, 10) {
		t.Fatalf("trustmsg-message-id %q, want %d", got, out.Prepared.ID)
	}
	kittest.Await(t, p.Client, msg.MessageKey, 30*time.Second, func(v *trustmsg.MessageView) bool {
		return v.SendStatus == trustmsg.SendSent
	})
}

func TestS02_gorm_failed_order_is_rolled_back_and_never_delivered_mysql(t *testing.T) {
	e, db := setup(t)
	p := kittest.Register(t, e, "gorm-s02", "", 60000, "")
	b := barrier(t, db)
	topic := "go-gorm-s02-" + kittest.Random()
	failed := "order-" + kittest.Random()
	out, err := trustmsg.Transaction(context.Background(), p.Client, b,
		trustmsg.Message{MessageKey: failed, Topic: topic, Payload: []byte("never")},
		func(ctx context.Context, tx *gorm.DB) error {
			if err := placeOrder(failed, 1)(ctx, tx); err != nil {
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
	if n := count(t, db, &Order{}, "id = ?", failed); n != 0 {
		t.Fatalf("%d order rows left", n)
	}
	if n := count(t, db, &marker{}, "message_key = ? AND op = 'commit'", failed); n != 0 {
		t.Fatalf("%d commit markers left", n)
	}
	later := "order-" + kittest.Random()
	if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
		trustmsg.Message{MessageKey: later, Topic: topic, Payload: []byte("later")}, placeOrder(later, 2)); err != nil {
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

func TestS03_gorm_stopped_producer_is_committed_by_check_back_mysql(t *testing.T) {
	e, db := setup(t)
	b := barrier(t, db)
	base, set := kittest.ServeLater(t)
	p := kittest.Register(t, e, "gorm-s03", base+trustmsg.DefaultCheckPath, 1000, "")
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
	topic, key := "go-gorm-s03-"+kittest.Random(), "order-"+kittest.Random()
	view, err := p.Client.Prepare(ctx, trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte("crash")})
	if err != nil {
		t.Fatal(err)
	}
	if err := trustmsg.RunInTx(ctx, b, p.BizID, key, placeOrder(key, 3)); err != nil {
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

func TestS07_gorm_inbox_drops_redelivered_record_mysql(t *testing.T) {
	e, db := setup(t)
	p := kittest.Register(t, e, "gorm-s07", "", 60000, "")
	topic := "go-gorm-s07-" + kittest.Random()
	b := barrier(t, db)
	keys := []string{"ship-" + kittest.Random(), "ship-" + kittest.Random()}
	for _, k := range keys {
		if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
			trustmsg.Message{MessageKey: k, Topic: topic, Payload: []byte(k)}, placeOrder(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	records := kittest.ReadAll(t, e, topic, 2, 30*time.Second, 0)
	in, err := trustgorm.NewInbox(db, "go-gorm-s07-"+kittest.Random())
	if err != nil {
		t.Fatal(err)
	}
	ship := func(r *kgo.Record) func(context.Context, *gorm.DB) error {
		return placeOrder("shipped-"+string(r.Value), 0)
	}
	ctx := context.Background()
	for i, want := range []trustmsg.Processed{trustmsg.Done, trustmsg.Repeat} {
		if got, err := kafka.Process(ctx, in, records[0], ship(records[0])); err != nil || got != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i+1, got, err, want)
		}
	}
	if n := count(t, db, &Order{}, "id = ?", "shipped-"+string(records[0].Value)); n != 1 {
		t.Fatalf("the work ran %d times, want once", n)
	}
	_, err = kafka.Process(ctx, in, records[1], func(ctx context.Context, tx *gorm.DB) error {
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

// outboxRow is a row of the local message table, read through GORM.
type outboxRow struct {
	Status int
}

func (outboxRow) TableName() string { return trustmsg.OutboxTable }

func TestS09_gorm_outbox_row_of_db_transaction_is_relayed_mysql(t *testing.T) {
	e, db := setup(t)
	ctx := context.Background()
	var outbox trustmsg.Outbox // the zero value: GORM's dialector says MySQL
	topic := e.OutboxTopicPrefix + "go-gorm-s09-" + kittest.Random()
	committed := trustmsg.Message{MessageKey: "go-gorm-s09-" + kittest.Random(), Topic: topic, Key: "customer-9", Payload: []byte{0, 0xff, 'o', 'k'}}
	rolled := trustmsg.Message{MessageKey: "go-gorm-s09-" + kittest.Random(), Topic: topic, Payload: []byte("never")}
	for _, c := range []struct {
		msg    trustmsg.Message
		commit bool
	}{{rolled, false}, {committed, true}} {
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Create(&Order{ID: c.msg.MessageKey, Amount: 9}).Error; err != nil {
				return err
			}
			if id, err := outbox.EnqueueTx(ctx, trustgorm.Tx(tx), c.msg); err != nil || id <= 0 {
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
	records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second)
	if len(records) != 1 {
		t.Fatalf("%d records on %s, want only the committed row's", len(records), topic)
	}
	if r := records[0]; string(r.Key) != committed.Key || !bytes.Equal(r.Value, committed.Payload) {
		t.Fatalf("record key %q value %x", r.Key, r.Value)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var row outboxRow
		if err := db.Where("message_key = ?", committed.MessageKey).Take(&row).Error; err != nil {
			t.Fatal(err)
		}
		if row.Status == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the row's status is %d, not 2 (relayed)", row.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(t, db, &outboxRow{}, "message_key = ?", rolled.MessageKey); n != 0 {
		t.Fatal("the rolled-back row exists")
	}
	if n := count(t, db, &Order{}, "id = ?", rolled.MessageKey); n != 0 {
		t.Fatal("the rolled-back order exists")
	}
}

func TestS04_gorm_check_back_during_open_gorm_transaction_waits_for_its_outcome_mysql(t *testing.T) {
	_, db := setup(t)
	b := barrier(t, db)
	ctx := context.Background()
	biz := "go-gorm-s04-" + kittest.Random()
	for _, commit := range []bool{true, false} {
		key := "order-" + kittest.Random()
		answer := make(chan trustmsg.Decision, 1)
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			// The caller's own GORM transaction holds the commit marker.
			if err := b.InsertTx(ctx, trustgorm.Tx(tx), biz, key); err != nil {
				return err
			}
			go func() {
				d, err := b.Check(ctx, biz, key)
				if err != nil {
					t.Error(err)
				}
				answer <- d
			}()
			select {
			case d := <-answer:
				return fmt.Errorf("check-back answered %q while the transaction was open", d)
			case <-time.After(300 * time.Millisecond):
			}
			if !commit {
				return errOutOfStock
			}
			return nil
		})
		want := trustmsg.Commit
		if !commit {
			want = trustmsg.Rollback
			if !errors.Is(err, errOutOfStock) {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if d := <-answer; d != want {
			t.Fatalf("check-back answered %q, want %q", d, want)
		}
		if !commit {
			err := db.Transaction(func(tx *gorm.DB) error { return b.InsertTx(ctx, trustgorm.Tx(tx), biz, key) })
			if !errors.Is(err, trustmsg.ErrAlreadyRolledBack) {
				t.Fatalf("a late insert: %v, want ErrAlreadyRolledBack", err)
			}
		}
	}
}
