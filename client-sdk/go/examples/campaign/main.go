// Command campaign is the order service of the producer campaign
// (client-sdk/conformance/campaign.md), written from this SDK's README: an
// order row and its "order created" message in one barrier transaction
// helper call, check-back answered from the barrier, and the answer to the
// client taken from the helper's typed errors. Started by
// examples/campaign-service with the campaign's environment.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// order is the body of POST /orders.
type order struct {
	OrderID               string `json:"order_id"`
	AmountCents           int64  `json:"amount_cents"`
	Fail                  bool   `json:"fail"`
	CrashAfterLocalCommit bool   `json:"crash_after_local_commit"`
	CrashBeforeAnswer     bool   `json:"crash_before_answer"`
}

var errBusinessStep = errors.New("the business step failed")

type service struct {
	db       *sql.DB
	dialect  trustmsg.Dialect
	producer *trustmsg.Client
	barrier  *trustmsg.Barrier
	topic    string
}

// die stops the process at once, as a crash would: no cleanup, no answer.
func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func (s *service) placeOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	if err := json.NewDecoder(r.Body).Decode(&o); err != nil || o.OrderID == "" {
		answer(w, http.StatusBadRequest, "bad_request")
		return
	}
	payload, _ := json.Marshal(map[string]any{"order_id": o.OrderID, "amount_cents": o.AmountCents})
	msg := trustmsg.Message{MessageKey: "order-" + o.OrderID, Topic: s.topic, Key: o.OrderID, Payload: payload}
	var opts []trustmsg.TxOption
	if o.CrashAfterLocalCommit {
		// The SDK's test hook: after the local COMMIT, before the commit.
		opts = append(opts, trustmsg.WithAfterLocalCommit(func(context.Context, string) error { die(); return nil }))
	}
	insert := "INSERT INTO orders (order_id, amount_cents) VALUES (?, ?)"
	if s.dialect == trustmsg.Postgres {
		insert = "INSERT INTO orders (order_id, amount_cents) VALUES ($1, $2)"
	}
	// Not r.Context(): a client that hangs up must not abort the order half
	// way (its rollback would race the client's retry of the same order).
	ctx := context.WithoutCancel(r.Context())
	out, err := trustmsg.Transaction(ctx, s.producer, s.barrier, msg, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insert, o.OrderID, o.AmountCents); err != nil {
			return err
		}
		if o.Fail {
			return errBusinessStep
		}
		return nil
	}, opts...)
	if o.CrashBeforeAnswer {
		die()
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusCreated, map[string]any{"status": "placed", "message_id": out.Prepared.ID})
	case errors.Is(err, trustmsg.ErrAlreadyCommitted):
		answer(w, http.StatusOK, "already_placed")
	case errors.Is(err, trustmsg.ErrAlreadyRolledBack):
		answer(w, http.StatusConflict, "refused")
	case errors.Is(err, errBusinessStep):
		answer(w, http.StatusUnprocessableEntity, "failed")
	case notStored(err):
		slog.Warn("order not placed, the client may retry", "order_id", o.OrderID, "error", err)
		answer(w, http.StatusServiceUnavailable, "unavailable")
	default:
		slog.Error("placing an order", "order_id", o.OrderID, "error", err)
		answer(w, http.StatusInternalServerError, "error")
	}
}

// notStored reports whether err left nothing stored that a retry could not
// settle: trustmsg unreachable at prepare, or the local transaction failed
// (its message is rolled back, or check-back decides from the barrier).
func notStored(err error) bool {
	var local *trustmsg.LocalError
	var rejected *trustmsg.RejectedDecisionError
	var decided *trustmsg.DecidedError
	switch {
	case errors.As(err, &rejected), errors.As(err, &decided):
		return false
	case trustmsg.IsUnavailable(err), errors.As(err, &local), errors.Is(err, trustmsg.ErrOutcomeUnknown):
		return true
	}
	var tmErr *trustmsg.Error
	return !errors.As(err, &tmErr) // the database's own errors
}

func answer(w http.ResponseWriter, code int, status string) {
	writeJSON(w, code, map[string]string{"status": status})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// openDB opens mysql://user[:password]@host:port/db or postgres://….
func openDB(raw string) (*sql.DB, trustmsg.Dialect, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, 0, err
	}
	if u.Scheme == "postgres" || u.Scheme == "postgresql" {
		db, err := sql.Open("pgx", raw)
		return db, trustmsg.Postgres, err
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	return db, trustmsg.MySQL, err
}

func run(ctx context.Context) error {
	db, dialect, err := openDB(os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	if err := trustmsg.CreateTables(ctx, db, dialect); err != nil { // the barrier (and inbox)
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)"); err != nil {
		return err
	}
	producer, err := trustmsg.NewClient(os.Getenv("TRUSTMSG_URL"), os.Getenv("TRUSTMSG_BIZ_ID"), os.Getenv("TRUSTMSG_TOKEN"))
	if err != nil {
		return err
	}
	barrier, err := trustmsg.NewBarrier(db, dialect)
	if err != nil {
		return err
	}
	verifier, err := trustmsg.NewVerifier(os.Getenv("TRUSTMSG_SIGNING_SECRET"))
	if err != nil {
		return err
	}
	s := &service{db: db, dialect: dialect, producer: producer, barrier: barrier, topic: os.Getenv("ORDERS_TOPIC")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { answer(w, http.StatusOK, "ok") })
	mux.Handle("POST "+trustmsg.DefaultCheckPath, trustmsg.CheckHandler(verifier, barrier.Decide))
	mux.HandleFunc("POST /orders", s.placeOrder)
	srv := &http.Server{Addr: net.JoinHostPort("127.0.0.1", os.Getenv("PORT")), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return srv.ListenAndServe()
}

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatalf("campaign order service: %v", err)
	}
}
