package trustmsg_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// The transaction helper: the order and its message commit together, or
// neither does.
func ExampleTransaction() {
	ctx := context.Background()
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/shop") // import _ "github.com/go-sql-driver/mysql"
	producer, err := trustmsg.NewClient("http://127.0.0.1:8080", "order-service", os.Getenv("TRUSTMSG_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	barrier, err := trustmsg.NewBarrier(db, trustmsg.MySQL)
	if err != nil {
		log.Fatal(err)
	}
	msg := trustmsg.Message{MessageKey: "order-42", Topic: "orders", Key: "customer-7", Payload: []byte(`{"order":42}`)}
	out, err := trustmsg.Transaction(ctx, producer, barrier, msg, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (id, amount_cents) VALUES (?, ?)", 42, 1250)
		return err
	})
	switch {
	case errors.Is(err, trustmsg.ErrAlreadyCommitted):
		log.Printf("order 42 was placed before (a retry); nothing was written now")
	case errors.Is(err, trustmsg.ErrAlreadyRolledBack):
		log.Printf("order 42 was refused before; it can never be placed: %v", err)
	case trustmsg.IsConflict(err):
		log.Printf("order 42 was placed before with other content: %v", err)
	case err != nil:
		log.Printf("order 42 not placed: %v", err) // errors.Is finds the work's own error
	case out.LeftToCheckBack():
		log.Printf("order 42 placed; trustmsg was unreachable, check-back will commit its message")
	default:
		log.Printf("order 42 placed, message %d committed", out.Prepared.ID)
	}
}

// The test hook at the crash point: the local transaction commits, no
// decision is sent. A retry of the same message then runs no work and
// sends the commit itself.
func ExampleWithAfterLocalCommit() {
	ctx := context.Background()
	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	producer, err := trustmsg.NewClient("http://127.0.0.1:8080", "order-service", os.Getenv("TRUSTMSG_TOKEN"))
	if err != nil {
		log.Fatal(err)
	}
	barrier, err := trustmsg.NewBarrier(db, trustmsg.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	msg := trustmsg.Message{MessageKey: "order-43", Topic: "orders", Payload: []byte(`{"order":43}`)}
	work := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (id, amount_cents) VALUES ($1, $2)", 43, 990)
		return err
	}
	errCrash := errors.New("crash")
	_, err = trustmsg.Transaction(ctx, producer, barrier, msg, work,
		trustmsg.WithAfterLocalCommit(func(context.Context, string) error { return errCrash }))
	log.Printf("first attempt: %v", err) // errors.Is(err, errCrash): committed locally, no decision
	_, err = trustmsg.Transaction(ctx, producer, barrier, msg, work)
	log.Printf("retry: already placed: %v", errors.Is(err, trustmsg.ErrAlreadyCommitted))
}

// The check-back endpoint, answered from the barrier.
func ExampleCheckHandler() {
	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL")) // import _ "github.com/jackc/pgx/v5/stdlib"
	barrier, err := trustmsg.NewBarrier(db, trustmsg.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	verifier, err := trustmsg.NewVerifier(os.Getenv("TRUSTMSG_SIGNING_SECRET")) // whsec_…
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /trustmsg/check", trustmsg.CheckHandler(verifier, barrier.Decide))
	log.Fatal(http.ListenAndServe("127.0.0.1:3000", mux))
}

// The inbox: a redelivered message does not run the work twice.
func ExampleInbox_Process() {
	ctx := context.Background()
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/billing")
	inbox, err := trustmsg.NewInbox(db, trustmsg.MySQL, "billing")
	if err != nil {
		log.Fatal(err)
	}
	var messageID uint64 = 4711 // the record's trustmsg-message-id (package kafka: MessageID, Process)
	done, err := inbox.Process(ctx, messageID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 1250 WHERE id = ?", 7)
		return err
	})
	if err != nil {
		log.Printf("not processed, will be again: %v", err)
		return
	}
	log.Printf("message %d: %v", messageID, done) // done or repeat
}

// The local message table: the row goes in the caller's transaction.
func ExampleOutbox_Enqueue() {
	ctx := context.Background()
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/shop")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, amount_cents) VALUES (?, ?)", 42, 1250); err != nil {
		log.Fatal(err)
	}
	outbox := trustmsg.Outbox{Dialect: trustmsg.MySQL}
	if _, err := outbox.Enqueue(ctx, tx, trustmsg.Message{MessageKey: "order-42", Topic: "orders", Payload: []byte(`{"order":42}`)}); err != nil {
		if trustmsg.IsInvalid(err) {
			log.Fatalf("trustmsg would refuse it (%s): %v", trustmsg.ErrorCode(err), err)
		}
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		log.Fatal(err)
	}
}

// NewOutbox checks the table name once; the zero Outbox works as well.
// Row shows what a write would store, without a database.
func ExampleNewOutbox() {
	_, err := trustmsg.NewOutbox(trustmsg.MySQL, trustmsg.WithTable("2nd_outbox"))
	fmt.Println(trustmsg.ErrorCode(err))

	outbox, err := trustmsg.NewOutbox(trustmsg.Postgres, trustmsg.WithTable("orders_outbox"))
	if err != nil {
		log.Fatal(err)
	}
	row, err := outbox.Row(context.Background(), trustmsg.Message{MessageKey: "order-42", Topic: "orders", Key: "customer-7", Payload: []byte(`{"order":42}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(row.MessageKey, row.Topic, *row.RecordKey, string(row.Payload))
	// Output:
	// invalid_table
	// order-42 orders customer-7 {"order":42}
}

// The SDK logs to the caller's *slog.Logger. Here a forged check-back is
// refused (401) and logged once, at Warn.
func ExampleWithLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable example
			}
			return a
		},
	}))
	verifier, err := trustmsg.NewVerifier("whsec_" + base64.StdEncoding.EncodeToString([]byte("the producer's signing secret...")))
	if err != nil {
		log.Fatal(err)
	}
	handler := trustmsg.CheckHandler(verifier, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
		return trustmsg.Commit, nil
	}, trustmsg.WithLogger(logger))

	req := httptest.NewRequest(http.MethodPost, "/trustmsg/check", strings.NewReader(`{}`))
	req.Header.Set(trustmsg.HeaderWebhookID, "chk_1_1")
	req.Header.Set(trustmsg.HeaderWebhookTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set(trustmsg.HeaderWebhookSignature, "v1,Zm9yZ2Vk")
	res := httptest.NewRecorder()
	handler.ServeHTTP(res, req)
	fmt.Println(res.Code)
	// Output:
	// level=WARN msg="trustmsg: check-back refused" webhook_id=chk_1_1 error="trustmsg: no v1 signature matches"
	// 401
}
