// Package trustpgx lets the trustmsg helpers work in pgx's transactions
// (github.com/jackc/pgx/v5, pgxpool): the barrier's marker, the inbox's row
// and the outbox's row go into the pgx.Tx the caller's own code (or sqlc's
// generated queries over pgx) writes in. PostgreSQL only.
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	barrier, _ := trustpgx.NewBarrier(pool)
//	out, err := trustmsg.Transaction(ctx, producer, barrier, msg, func(ctx context.Context, tx pgx.Tx) error {
//		return queries.WithTx(tx).CreateOrder(ctx, order) // sqlc
//	})
//
// It is a package of its own so that a database/sql program does not build
// pgx. The shape is River's drivers (riverpgxv5.New(pool) next to
// riverdatabasesql.New(db), the caller's own transaction type carried
// through generics) with sqlc's DBTX interface as what a transaction must
// offer ([Querier]).
package trustpgx

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// Querier is what a pgx transaction offers the helpers: pgx.Tx,
// *pgxpool.Tx, *pgx.Conn and *pgxpool.Conn are one (as in sqlc's DBTX for
// pgx).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tx is q, the caller's open pgx transaction, as a [trustmsg.Tx]: for
// [trustmsg.Outbox.EnqueueTx] and [trustmsg.Barrier.InsertTx].
func Tx(q Querier) trustmsg.Tx { return tx{q: q} }

// Pool is pool as a [trustmsg.Database] whose work gets a pgx.Tx.
func Pool(pool *pgxpool.Pool) trustmsg.Database[pgx.Tx] { return database{pool: pool} }

// NewBarrier returns the barrier in pool's database (its trustmsg_barrier
// table, [trustmsg.SQL]): [trustmsg.Transaction] and [trustmsg.RunInTx]
// then give their work a pgx.Tx.
func NewBarrier(pool *pgxpool.Pool, opts ...trustmsg.Option) (*trustmsg.Barrier, error) {
	if pool == nil {
		return nil, errors.New("trustpgx: NewBarrier: pool is nil")
	}
	return trustmsg.NewBarrierOn(Pool(pool), opts...)
}

// NewInbox returns the inbox of consumer group in pool's database:
// [trustmsg.Process] then gives its work a pgx.Tx.
func NewInbox(pool *pgxpool.Pool, group string, opts ...trustmsg.Option) (*trustmsg.Inbox, error) {
	if pool == nil {
		return nil, errors.New("trustpgx: NewInbox: pool is nil")
	}
	return trustmsg.NewInboxOn(Pool(pool), group, opts...)
}

// result is a command tag as a sql.Result.
type result struct{ tag pgconn.CommandTag }

func (r result) RowsAffected() (int64, error) { return r.tag.RowsAffected(), nil }

func (result) LastInsertId() (int64, error) {
	return 0, errors.New("trustpgx: PostgreSQL has no last insert id (use RETURNING)")
}

type tx struct{ q Querier }

func (t tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tag, err := t.q.Exec(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return result{tag}, nil
}

func (t tx) QueryRow(ctx context.Context, query string, args ...any) trustmsg.Row {
	return t.q.QueryRow(ctx, query, args...)
}

func (tx) Dialect() trustmsg.Dialect { return trustmsg.Postgres }

// localTx is a transaction the helpers began on the pool.
type localTx struct {
	tx
	ptx pgx.Tx
}

func (t localTx) Native() pgx.Tx { return t.ptx }

func (t localTx) Commit(ctx context.Context) error { return t.ptx.Commit(ctx) }

func (t localTx) Rollback(ctx context.Context) error {
	if err := t.ptx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

type database struct{ pool *pgxpool.Pool }

func (database) Dialect() trustmsg.Dialect { return trustmsg.Postgres }

func (d database) Begin(ctx context.Context) (trustmsg.LocalTx[pgx.Tx], error) {
	ptx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return localTx{tx: tx{q: ptx}, ptx: ptx}, nil
}

func (d database) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx{q: d.pool}.Exec(ctx, query, args...)
}

func (d database) QueryRow(ctx context.Context, query string, args ...any) trustmsg.Row {
	return d.pool.QueryRow(ctx, query, args...)
}
