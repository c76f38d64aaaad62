// Command orderservice is a small order service on trustmsg: placing an
// order writes the order row and publishes "order placed" to Kafka topic
// "orders" in one go (prepare → local transaction with the barrier →
// commit), and the service answers trustmsg's check-back from the barrier.
//
// Against `trustmsg dev` (which registers the demo producer "order-service"
// with its check-back at http://127.0.0.1:3000/trustmsg/check):
//
//	trustmsg dev                        # terminal 1: writes trustmsg-dev/env
//	. trustmsg-dev/env                  # terminal 2
//	DATABASE_URL=mysql://root@127.0.0.1:3306/shop go run ./examples/orderservice
//	curl -s localhost:3000/orders -d '{"id":"42","customer":"7","amount_cents":1250}'
//	trustmsg tail --brokers "$TRUSTMSG_BROKERS" --topic orders --from-beginning
//
// Environment:
//
//	TRUSTMSG_URL                  trustmsg's API (trustmsg dev: http://127.0.0.1:8080)
//	TRUSTMSG_DEMO_BIZ_ID          the producer (or TRUSTMSG_BIZ_ID; default order-service)
//	TRUSTMSG_DEMO_TOKEN           its bearer token (or TRUSTMSG_TOKEN)
//	TRUSTMSG_DEMO_SIGNING_SECRET  its check-back signing secret (or TRUSTMSG_SIGNING_SECRET)
//	DATABASE_URL                  mysql://user[:password]@host:port/db or postgres://…
//	LISTEN                        where to listen (default 127.0.0.1:3000)
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// config is what the service needs to run.
type config struct {
	TrustmsgURL, BizID, Token, SigningSecret, DatabaseURL, Listen string
}

// configFromEnv reads the configuration, saying which variable is missing.
func configFromEnv(getenv func(string) string) (config, error) {
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	c := config{
		TrustmsgURL:   first("TRUSTMSG_URL"),
		BizID:         first("TRUSTMSG_BIZ_ID", "TRUSTMSG_DEMO_BIZ_ID"),
		Token:         first("TRUSTMSG_TOKEN", "TRUSTMSG_DEMO_TOKEN"),
		SigningSecret: first("TRUSTMSG_SIGNING_SECRET", "TRUSTMSG_DEMO_SIGNING_SECRET"),
		DatabaseURL:   first("DATABASE_URL"),
		Listen:        first("LISTEN"),
	}
	if c.BizID == "" {
		c.BizID = "order-service"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:3000"
	}
	var missing []string
	for name, v := range map[string]string{
		"TRUSTMSG_URL": c.TrustmsgURL, "TRUSTMSG_TOKEN (or TRUSTMSG_DEMO_TOKEN)": c.Token,
		"TRUSTMSG_SIGNING_SECRET (or TRUSTMSG_DEMO_SIGNING_SECRET)": c.SigningSecret, "DATABASE_URL": c.DatabaseURL,
	} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("set %s (with trustmsg dev: `. trustmsg-dev/env`)", strings.Join(missing, ", "))
	}
	return c, nil
}

// openDB opens DATABASE_URL: mysql://… with go-sql-driver/mysql, postgres://…
// with pgx.
func openDB(raw string) (*sql.DB, trustmsg.Dialect, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("DATABASE_URL: %w", err)
	}
	switch u.Scheme {
	case "mysql", "mariadb":
		cfg := mysql.NewConfig()
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		cfg.Net, cfg.Addr = "tcp", u.Host
		if u.Port() == "" {
			cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		db, err := sql.Open("mysql", cfg.FormatDSN())
		return db, trustmsg.MySQL, err
	case "postgres", "postgresql":
		db, err := sql.Open("pgx", raw)
		return db, trustmsg.Postgres, err
	}
	return nil, 0, fmt.Errorf("DATABASE_URL: %q is neither mysql:// nor postgres://", u.Scheme)
}

// service is the order service.
type service struct {
	db       *sql.DB
	dialect  trustmsg.Dialect
	producer *trustmsg.Client
	barrier  *trustmsg.Barrier
	verifier *trustmsg.Verifier
}

func newService(ctx context.Context, c config, db *sql.DB, d trustmsg.Dialect) (*service, error) {
	producer, err := trustmsg.NewClient(c.TrustmsgURL, c.BizID, c.Token)
	if err != nil {
		return nil, err
	}
	verifier, err := trustmsg.NewVerifier(c.SigningSecret)
	if err != nil {
		return nil, err
	}
	barrier, err := trustmsg.NewBarrier(db, d)
	if err != nil {
		return nil, err
	}
	// The barrier (and inbox) tables, and the service's own.
	if err := trustmsg.CreateTables(ctx, db, d); err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id VARCHAR(64) PRIMARY KEY, customer VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("creating the orders table: %w", err)
	}
	return &service{db: db, dialect: d, producer: producer, barrier: barrier, verifier: verifier}, nil
}

// order is what POST /orders takes and GET /orders/{id} shows.
type order struct {
	ID          string `json:"id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// errCreditLimit is a business rule that fails inside the local transaction.
var errCreditLimit = errors.New("the order is over the customer's credit limit")

const creditLimitCents = 1_000_000

func (s *service) ph(n int) string {
	if s.dialect == trustmsg.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.placeOrder)
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	mux.Handle("POST "+trustmsg.DefaultCheckPath, trustmsg.CheckHandler(s.verifier, s.barrier.Decide))
	return mux
}

func (s *service) placeOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&o); err != nil || o.ID == "" || o.Customer == "" || o.AmountCents <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `give {"id": "...", "customer": "...", "amount_cents": > 0}`})
		return
	}
	event, _ := json.Marshal(map[string]any{"event": "order_placed", "order": o})
	msg := trustmsg.Message{
		MessageKey: "order-" + o.ID, // one message per order
		Topic:      "orders",
		Key:        o.Customer, // a customer's events stay in order on one partition
		Payload:    event,
		Headers:    map[string]string{"content-type": "application/json"},
	}
	// Not r.Context(): a client that hangs up must not abort the order half
	// way (its rollback would race the client's retry of the same order).
	ctx := context.WithoutCancel(r.Context())
	out, err := trustmsg.Transaction(ctx, s.producer, s.barrier, msg, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, amount_cents) VALUES ("+s.ph(1)+", "+s.ph(2)+", "+s.ph(3)+")",
			o.ID, o.Customer, o.AmountCents); err != nil {
			return err
		}
		if o.AmountCents > creditLimitCents {
			return errCreditLimit // rolls the order back, and the message with it
		}
		return nil
	})
	switch {
	case err == nil:
		// The order is placed; its message is committed, or check-back
		// will commit it from the barrier if trustmsg could not be told.
		writeJSON(w, http.StatusCreated, map[string]any{"status": "placed", "order": o, "message_id": out.Prepared.ID, "left_to_check_back": out.LeftToCheckBack()})
	case errors.Is(err, errCreditLimit):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"status": "failed", "error": err.Error()})
	case errors.Is(err, trustmsg.ErrAlreadyCommitted):
		// A retry of an order an earlier request placed (prepare answered
		// COMMITTED, or the barrier held its commit marker and the helper
		// sent the commit): nothing was written now.
		writeJSON(w, http.StatusOK, map[string]string{"status": "already_placed", "order": o.ID})
	case errors.Is(err, trustmsg.ErrAlreadyRolledBack):
		// Its message was rolled back before (an earlier attempt failed):
		// this order id can never be placed. Not 503: a retry cannot help.
		writeJSON(w, http.StatusConflict, map[string]string{"status": "refused", "error": "order " + o.ID + " was refused before; use a new order id"})
	case trustmsg.IsConflict(err):
		// prepare_conflict: the id was used with other content.
		writeJSON(w, http.StatusConflict, map[string]string{"status": "refused", "error": "order " + o.ID + " exists with other content"})
	case trustmsg.IsUnavailable(err), errors.Is(err, trustmsg.ErrOutcomeUnknown):
		// Nothing is known to be stored: the client retries with the same
		// id, and the retry finds out.
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "try again"})
	default:
		// A database failure (the message is rolled back: a retry is
		// refused), a VERIFY_FAILED message, or a decision trustmsg refused
		// after the local transaction (*trustmsg.RejectedDecisionError:
		// local state and message disagree, someone must look).
		slog.ErrorContext(r.Context(), "placing an order", "order", o.ID, "error", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"status": "error", "error": "the order could not be placed"})
	}
}

func (s *service) getOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	err := s.db.QueryRowContext(r.Context(), "SELECT id, customer, amount_cents FROM orders WHERE id = "+s.ph(1), r.PathValue("id")).
		Scan(&o.ID, &o.Customer, &o.AmountCents)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such order"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "database error"})
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func run(ctx context.Context, getenv func(string) string) error {
	c, err := configFromEnv(getenv)
	if err != nil {
		return err
	}
	db, d, err := openDB(c.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := newService(ctx, c, db, d)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: c.Listen, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	slog.Info("order service listening", "addr", c.Listen, "producer", c.BizID, "trustmsg", c.TrustmsgURL, "database", d)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		log.Fatalf("orderservice: %v", err)
	}
}
