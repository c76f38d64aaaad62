package trustmsg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Row is one row of a query: *sql.Row and pgx.Row are one.
type Row interface {
	Scan(dest ...any) error
}

// Tx is the caller's open transaction as the helpers write to it: the
// barrier's marker ([Barrier.InsertTx]), the outbox's row
// ([Outbox.EnqueueTx]). Statements use the placeholders of the database's
// own SQL (? for MySQL/MariaDB, $1 for PostgreSQL).
//
// database/sql's *sql.Tx becomes one through [SQLTx]; pgx's (pgx.Tx,
// pgxpool) through package trustpgx; GORM's (the *gorm.DB inside
// db.Transaction) through package trustgorm. Those packages are apart so
// that a database/sql program builds without pgx's or GORM's source.
type Tx interface {
	// Exec runs a statement that returns no rows.
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	// QueryRow runs a query expected to return at most one row; its
	// error, if any, comes from Scan.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Dialect is the database's SQL, or 0 when the transaction cannot
	// tell (a bare *sql.Tx).
	Dialect() Dialect
}

// Database is a database the helpers begin their own transactions on
// ([Transaction], [RunInTx], [Process]) and run the barrier's check-back
// statements on: [SQLDB] for database/sql, trustpgx.Pool for a pgx pool,
// trustgorm.DB for GORM. T is the transaction type the caller's work gets:
// *sql.Tx, pgx.Tx, *gorm.DB.
type Database[T any] interface {
	// Dialect is the database's SQL: [MySQL] or [Postgres].
	Dialect() Dialect
	// Begin begins a transaction.
	Begin(ctx context.Context) (LocalTx[T], error)
	// Exec runs a statement in a transaction of its own (autocommit).
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	// QueryRow runs a query in a transaction of its own.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// LocalTx is a transaction a helper began on a [Database].
type LocalTx[T any] interface {
	Tx
	// Native is the transaction as the caller's work gets it.
	Native() T
	// Commit commits the transaction.
	Commit(ctx context.Context) error
	// Rollback rolls the transaction back; nil when it had ended already.
	Rollback(ctx context.Context) error
}

// SQLTx is tx, database/sql's transaction, as a [Tx]. Its Dialect is 0:
// an [Outbox] without a Dialect asks the database once per write
// (SELECT version()).
func SQLTx(tx *sql.Tx) Tx { return sqlTx{tx: tx} }

// SQLDB is db, a database/sql database whose SQL is d's, as a [Database]
// whose work gets a *sql.Tx. [NewBarrier] and [NewInbox] use it.
func SQLDB(db *sql.DB, d Dialect) Database[*sql.Tx] { return sqlDB{db: db, d: d} }

type sqlTx struct {
	tx *sql.Tx
	d  Dialect
}

func (t sqlTx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

func (t sqlTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

func (t sqlTx) Dialect() Dialect { return t.d }

func (t sqlTx) Native() *sql.Tx { return t.tx }

func (t sqlTx) Commit(context.Context) error { return t.tx.Commit() }

func (t sqlTx) Rollback(context.Context) error {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

type sqlDB struct {
	db *sql.DB
	d  Dialect
}

func (s sqlDB) Dialect() Dialect { return s.d }

func (s sqlDB) Begin(ctx context.Context) (LocalTx[*sql.Tx], error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return sqlTx{tx: tx, d: s.d}, nil
}

func (s sqlDB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, query, args...)
}

func (s sqlDB) QueryRow(ctx context.Context, query string, args ...any) Row {
	return s.db.QueryRowContext(ctx, query, args...)
}

// anyDB is a Database[T] with T erased, as a Barrier or an Inbox holds it.
type anyDB interface {
	Dialect() Dialect
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	begin(ctx context.Context) (anyTx, error)
	txType() reflect.Type
}

type anyTx interface {
	Tx
	native() any
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

type erasedDB[T any] struct{ Database[T] }

func (e erasedDB[T]) begin(ctx context.Context) (anyTx, error) {
	tx, err := e.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return erasedTx[T]{tx}, nil
}

func (erasedDB[T]) txType() reflect.Type { return reflect.TypeFor[T]() }

type erasedTx[T any] struct{ LocalTx[T] }

func (e erasedTx[T]) native() any { return e.Native() }

// checkTxType refuses work whose transaction type is not the database's
// (a pgx barrier given work that takes a *sql.Tx), before anything runs.
func checkTxType[T any](op string, db anyDB) error {
	if want, got := db.txType(), reflect.TypeFor[T](); got != want && !want.AssignableTo(got) {
		return fmt.Errorf("trustmsg: %s: the work takes a %v but the database gives a %v", op, got, want)
	}
	return nil
}

func checkDatabase[T any](op string, db Database[T]) (anyDB, error) {
	if db == nil {
		return nil, fmt.Errorf("trustmsg: %s: db is nil", op)
	}
	if err := db.Dialect().check(); err != nil {
		return nil, err
	}
	return erasedDB[T]{db}, nil
}

// dialectOf is tx's dialect, asked of the database when tx cannot tell.
func dialectOf(ctx context.Context, tx Tx) (Dialect, error) {
	if d := tx.Dialect(); d != 0 {
		return d, nil
	}
	var version string
	if err := tx.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		return 0, fmt.Errorf("trustmsg: asking the database which SQL it speaks (set the Dialect to skip this): %w", err)
	}
	if strings.Contains(version, "PostgreSQL") {
		return Postgres, nil
	}
	return MySQL, nil
}
