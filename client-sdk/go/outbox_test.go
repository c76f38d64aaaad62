package trustmsg_test

import (
	"context"
	"testing"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// The zero Outbox asks a bare *sql.Tx which SQL its database speaks, on
// MariaDB and PostgreSQL alike.
func TestS09_zero_outbox_writes_in_a_bare_sql_tx_of_either_database(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			conn := kittest.Open(t, e, db.Dialect)
			kittest.WithDDL(func() {
				if err := trustmsg.CreateOutboxTable(ctx, conn, db.Dialect); err != nil {
					t.Fatal(err)
				}
			})
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			var outbox trustmsg.Outbox
			key := "go-zero-" + kittest.Random()
			if id, err := outbox.Enqueue(ctx, tx, trustmsg.Message{MessageKey: key, Topic: "orders", Payload: []byte("zero")}); err != nil || id <= 0 {
				t.Fatalf("enqueue: %d, %v", id, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n := count(t, conn, db.Dialect, "SELECT COUNT(*) FROM trustmsg_outbox WHERE message_key = ?", key); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
}

func TestNewOutboxRefusesWhatTheRelayWouldNot(t *testing.T) {
	for _, table := range []string{"1st", "orders-outbox", "a_table_name_of_sixty_five_characters_is_one_more_than_the_relay_s"} {
		if _, err := trustmsg.NewOutbox(trustmsg.MySQL, trustmsg.WithTable(table)); trustmsg.ErrorCode(err) != "invalid_table" {
			t.Errorf("NewOutbox(%q): %v, want invalid_table", table, err)
		}
	}
	if _, err := trustmsg.NewOutbox(trustmsg.Dialect(7)); err == nil {
		t.Error("an unknown dialect was accepted")
	}
	if o, err := trustmsg.NewOutbox(0, trustmsg.WithTable("orders_outbox")); err != nil || o.Table != "orders_outbox" {
		t.Errorf("NewOutbox(0, orders_outbox): %+v, %v", o, err)
	}
}
