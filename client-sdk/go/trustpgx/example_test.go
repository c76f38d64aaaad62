package trustpgx_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/trustpgx"
)

// The transaction helper on a pgx pool: the work gets a pgx.Tx (hand it
// to sqlc's queries.WithTx(tx) as well).
func ExampleNewBarrier() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	producer, err := trustmsg.NewClient("http://127.0.0.1:8080", "order-service", os.Getenv("TRUSTMSG_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	barrier, err := trustpgx.NewBarrier(pool)
	if err != nil {
		log.Fatal(err)
	}
	msg := trustmsg.Message{MessageKey: "order-42", Topic: "orders", Payload: []byte(`{"order":42}`)}
	_, err = trustmsg.Transaction(ctx, producer, barrier, msg, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO orders (id, amount_cents) VALUES ($1, $2)", 42, 1250)
		return err
	})
	switch {
	case errors.Is(err, trustmsg.ErrAlreadyCommitted):
		log.Print("order 42 was placed before (a retry)")
	case err != nil:
		log.Printf("order 42 not placed: %v", err)
	}
}

// The local message table's row, in the caller's pgx transaction. The zero
// Outbox writes trustmsg_outbox in PostgreSQL's SQL.
func ExampleTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	var outbox trustmsg.Outbox
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, amount_cents) VALUES ($1, $2)", 42, 1250); err != nil {
			return err
		}
		_, err := outbox.EnqueueTx(ctx, trustpgx.Tx(tx), trustmsg.Message{MessageKey: "order-42", Topic: "orders", Payload: []byte(`{"order":42}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The inbox on a pgx pool: a redelivered message does not run the work
// twice.
func ExampleNewInbox() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	inbox, err := trustpgx.NewInbox(pool, "billing")
	if err != nil {
		log.Fatal(err)
	}
	var messageID uint64 = 4711 // the record's trustmsg-message-id (package kafka: MessageID, Process)
	done, err := trustmsg.Process(ctx, inbox, messageID, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 1250 WHERE id = $1", 7)
		return err
	})
	if err != nil {
		log.Printf("not processed, will be again: %v", err)
		return
	}
	log.Printf("message %d: %v", messageID, done) // done or repeat
}
