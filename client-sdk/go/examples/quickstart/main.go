// Command quickstart places one order and its "order placed" message
// together, against `trustmsg dev` (`. trustmsg-dev/env` first) and a
// MySQL/MariaDB database "shop". Run it twice with the same order id: the
// second run is a client's retry and writes nothing.
//
//	go run ./examples/quickstart [ORDER_ID]
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

func run(ctx context.Context, dsn, id string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := trustmsg.CreateTables(ctx, db, trustmsg.MySQL); err != nil { // barrier + inbox
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, customer VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL)"); err != nil {
		return err
	}
	producer, err := trustmsg.NewClient(os.Getenv("TRUSTMSG_URL"), os.Getenv("TRUSTMSG_DEMO_BIZ_ID"), os.Getenv("TRUSTMSG_DEMO_TOKEN"))
	if err != nil {
		return err
	}
	barrier, err := trustmsg.NewBarrier(db, trustmsg.MySQL)
	if err != nil {
		return err
	}
	msg := trustmsg.Message{MessageKey: "order-" + id, Topic: "orders", Payload: []byte(`{"order":"` + id + `"}`)}
	out, err := trustmsg.Transaction(ctx, producer, barrier, msg, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, amount_cents) VALUES (?, ?, ?)", id, "7", 1250)
		return err // an error rolls back the order and the message
	})
	switch {
	case err == nil:
		fmt.Printf("order %s placed; message %d committed: %v\n", id, out.Prepared.ID, out.DecisionSent)
	case errors.Is(err, trustmsg.ErrAlreadyCommitted):
		fmt.Printf("order %s was placed before; nothing written now\n", id) // a retry
	case errors.Is(err, trustmsg.ErrAlreadyRolledBack):
		return fmt.Errorf("order %s was refused before and can never be placed: %w", id, err)
	default:
		return err // prepare failed, or the local transaction did (errors.Is finds your error)
	}
	return nil
}

func main() {
	dsn := os.Getenv("MYSQL_DSN") // go-sql-driver/mysql's form
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/shop"
	}
	id := fmt.Sprint(time.Now().UnixNano())
	if len(os.Args) > 1 {
		id = os.Args[1]
	}
	if err := run(context.Background(), dsn, id); err != nil {
		log.Fatal(err)
	}
}
