package trustpgx_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/trustpgx"
)

// producer counts the calls a transaction makes.
type producer struct{ calls int }

func (p *producer) BizID() string { return "shop" }
func (p *producer) Prepare(context.Context, trustmsg.Message) (string, error) {
	p.calls++
	return "", nil
}
func (p *producer) Commit(context.Context, string) (string, error)   { p.calls++; return "", nil }
func (p *producer) Rollback(context.Context, string) (string, error) { p.calls++; return "", nil }

func TestWorkOfAnotherTransactionTypeIsRefusedBeforeThePrepare(t *testing.T) {
	// A pool connects on first use: none here.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := trustpgx.NewBarrier(pool)
	if err != nil {
		t.Fatal(err)
	}
	p := &producer{}
	ran := false
	_, err = trustmsg.Transaction(context.Background(), p, b, trustmsg.Message{MessageKey: "order-1", Topic: "orders"},
		func(context.Context, *sql.Tx) error { ran = true; return nil })
	if err == nil || !strings.Contains(err.Error(), "*sql.Tx") || !strings.Contains(err.Error(), "pgx.Tx") {
		t.Fatalf("err = %v, want the two transaction types named", err)
	}
	if p.calls != 0 || ran {
		t.Fatalf("%d calls to trustmsg, work ran %v: want none before the refusal", p.calls, ran)
	}
}
