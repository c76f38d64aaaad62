// Package trustgorm lets the trustmsg helpers work in GORM's transactions
// (gorm.io/gorm): the barrier's marker, the inbox's row and the outbox's
// row go into the *gorm.DB of db.Transaction, the one the caller's own
// models are saved through. MySQL/MariaDB and PostgreSQL.
//
//	err := db.Transaction(func(tx *gorm.DB) error {
//		if err := tx.Create(&order).Error; err != nil {
//			return err
//		}
//		_, err := outbox.EnqueueTx(ctx, trustgorm.Tx(tx), msg)
//		return err
//	})
//
// It is a package of its own so that a program without GORM does not
// build it. The shape is River's drivers (riverpgxv5.New(pool) next to
// riverdatabasesql.New(db), the caller's own transaction type carried
// through generics). Statements run on the transaction's connection
// (tx.Statement.ConnPool) in the database's own SQL, past GORM's callbacks
// and logger.
package trustgorm

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gorm.io/gorm"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// dialect is db's SQL, from its dialector's name.
func dialect(db *gorm.DB) (trustmsg.Dialect, error) {
	if db == nil || db.Dialector == nil {
		return 0, errors.New("trustgorm: db is nil or has no dialector")
	}
	switch name := db.Dialector.Name(); name {
	case "mysql":
		return trustmsg.MySQL, nil
	case "postgres":
		return trustmsg.Postgres, nil
	default:
		return 0, fmt.Errorf("trustgorm: GORM dialector %q: trustmsg speaks mysql and postgres", name)
	}
}

// Tx is tx, the *gorm.DB of the caller's open transaction (inside
// db.Transaction, or from db.Begin), as a [trustmsg.Tx]: for
// [trustmsg.Outbox.EnqueueTx] and [trustmsg.Barrier.InsertTx]. A tx that
// is not in a transaction, or whose dialector is neither mysql nor
// postgres, fails on first use.
func Tx(tx *gorm.DB) trustmsg.Tx {
	t := gormTx{db: tx}
	t.d, t.err = dialect(tx)
	if t.err == nil {
		if _, ok := tx.Statement.ConnPool.(gorm.TxCommitter); !ok {
			t.err = errors.New("trustgorm: the *gorm.DB is not in a transaction (use the tx of db.Transaction)")
		}
	}
	return t
}

// DB is db as a [trustmsg.Database] whose work gets the transaction's
// *gorm.DB, as db.Transaction's function does.
func DB(db *gorm.DB) (trustmsg.Database[*gorm.DB], error) {
	d, err := dialect(db)
	if err != nil {
		return nil, err
	}
	return database{db: db, d: d}, nil
}

// NewBarrier returns the barrier in db's database (its trustmsg_barrier
// table, [trustmsg.SQL]): [trustmsg.Transaction] and [trustmsg.RunInTx]
// then give their work the transaction's *gorm.DB.
func NewBarrier(db *gorm.DB, opts ...trustmsg.Option) (*trustmsg.Barrier, error) {
	gdb, err := DB(db)
	if err != nil {
		return nil, err
	}
	return trustmsg.NewBarrierOn(gdb, opts...)
}

// NewInbox returns the inbox of consumer group in db's database:
// [trustmsg.Process] then gives its work the transaction's *gorm.DB.
func NewInbox(db *gorm.DB, group string, opts ...trustmsg.Option) (*trustmsg.Inbox, error) {
	gdb, err := DB(db)
	if err != nil {
		return nil, err
	}
	return trustmsg.NewInboxOn(gdb, group, opts...)
}

type gormTx struct {
	db  *gorm.DB
	d   trustmsg.Dialect
	err error
}

func (t gormTx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.err != nil {
		return nil, t.err
	}
	return t.db.Statement.ConnPool.ExecContext(ctx, query, args...)
}

func (t gormTx) QueryRow(ctx context.Context, query string, args ...any) trustmsg.Row {
	if t.err != nil {
		return errRow{t.err}
	}
	return t.db.Statement.ConnPool.QueryRowContext(ctx, query, args...)
}

func (t gormTx) Dialect() trustmsg.Dialect { return t.d }

func (t gormTx) Native() *gorm.DB { return t.db }

// Commit and Rollback go to the connection's own transaction: a *gorm.DB
// keeps the first error it met, which would stand for theirs.
func (t gormTx) Commit(context.Context) error {
	return t.db.Statement.ConnPool.(gorm.TxCommitter).Commit()
}

func (t gormTx) Rollback(context.Context) error {
	err := t.db.Statement.ConnPool.(gorm.TxCommitter).Rollback()
	if err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type database struct {
	db *gorm.DB
	d  trustmsg.Dialect
}

func (d database) Dialect() trustmsg.Dialect { return d.d }

func (d database) Begin(ctx context.Context) (trustmsg.LocalTx[*gorm.DB], error) {
	tx := d.db.WithContext(ctx).Begin()
	if tx.Error != nil {
		return nil, tx.Error
	}
	t := Tx(tx).(gormTx)
	if t.err != nil {
		_ = tx.Rollback()
		return nil, t.err
	}
	return t, nil
}

func (d database) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.db.WithContext(ctx).Statement.ConnPool.ExecContext(ctx, query, args...)
}

func (d database) QueryRow(ctx context.Context, query string, args ...any) trustmsg.Row {
	return d.db.WithContext(ctx).Statement.ConnPool.QueryRowContext(ctx, query, args...)
}
