package trustmsg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"
)

// Decision is a producer's answer to a check-back.
type Decision string

// The three answers to a check-back.
const (
	// Commit: the local transaction committed; the message is delivered.
	Commit Decision = "commit"
	// Rollback: the local transaction rolled back or never happened.
	Rollback Decision = "rollback"
	// Unknown: cannot tell yet; trustmsg asks again later.
	Unknown Decision = "unknown"
)

// Errors of the barrier and of the transaction helper, found with
// [errors.Is]. [Transaction] returns them inside a *[DecidedError] also when
// trustmsg's prepare answered that the message was decided before.
var (
	// ErrAlreadyCommitted: the message was committed before this call: the
	// barrier holds a commit marker for the key (an earlier local
	// transaction of the same message committed), or trustmsg's prepare
	// answered COMMITTED. The work did not run again. [Transaction] also
	// returns it when its work failed but an identical request committed
	// first (the barrier answered commit).
	ErrAlreadyCommitted = errors.New("trustmsg: the barrier already holds a commit marker for this message (an earlier transaction committed)")
	// ErrAlreadyRolledBack: the message was rolled back before this call:
	// the barrier holds a rollback marker for the key (check-back answered
	// rollback), or trustmsg refused the prepare with 409
	// "already_rolled_back" or "rolled_back". It must never commit; the
	// work did not run.
	ErrAlreadyRolledBack = errors.New("trustmsg: the barrier already holds a rollback marker for this message (check-back answered rollback)")
	// ErrOutcomeUnknown: COMMIT failed and the barrier could not be read to
	// learn whether it had been applied; only a later check-back can tell.
	ErrOutcomeUnknown = errors.New("trustmsg: the local transaction's outcome is unknown")
)

// BarrierTable is the barrier's table.
const BarrierTable = "trustmsg_barrier"

// Barrier gives exact check-back answers from the producer's own database.
//
// Answering check-back by "is my order row there?" is wrong while the local
// transaction is still open: the row is not visible yet, the answer is
// rollback, and then the transaction commits. The barrier closes that gap
// with one marker row per (biz_id, message_key) under a primary key: the
// local transaction inserts a "commit" marker first ([Barrier.Insert],
// done by [Barrier.RunInTx] and [Transaction]); check-back inserts a
// "rollback" marker unless one exists, waiting on the row lock while the
// local transaction is open, then answers whichever marker is there
// ([Barrier.Check]). If check-back came first, the local transaction's own
// insert finds its rollback marker and the transaction does not commit.
// Keys are compared byte for byte.
//
// The table is [SQL]'s trustmsg_barrier ([CreateTables]). A Barrier is safe
// for concurrent use.
//
// [NewBarrier] puts it in a database/sql database; [NewBarrierOn] in any
// [Database] (package trustpgx for pgx, trustgorm for GORM), whose
// transaction type the work of [Transaction] and [RunInTx] gets.
type Barrier struct {
	db      anyDB
	sqlDB   *sql.DB
	dialect Dialect
	log     *slog.Logger
}

// NewBarrier returns the barrier in db, whose SQL is d's. Of opts only
// [WithLogger] applies.
func NewBarrier(db *sql.DB, d Dialect, opts ...Option) (*Barrier, error) {
	if db == nil {
		return nil, errors.New("trustmsg: NewBarrier: db is nil")
	}
	b, err := NewBarrierOn(SQLDB(db, d), opts...)
	if err != nil {
		return nil, err
	}
	b.sqlDB = db
	return b, nil
}

// NewBarrierOn returns the barrier in db: [SQLDB], trustpgx.Pool,
// trustgorm.DB or a [Database] of your own. Of opts only [WithLogger]
// applies.
func NewBarrierOn[T any](db Database[T], opts ...Option) (*Barrier, error) {
	adb, err := checkDatabase("NewBarrierOn", db)
	if err != nil {
		return nil, err
	}
	return &Barrier{db: adb, dialect: db.Dialect(), log: loggerOf(opts)}, nil
}

// DB is the barrier's database/sql database, nil for a barrier made by
// [NewBarrierOn].
func (b *Barrier) DB() *sql.DB { return b.sqlDB }

// Dialect is the barrier database's SQL.
func (b *Barrier) Dialect() Dialect { return b.dialect }

func (b *Barrier) q(mysql, postgres string) string {
	if b.dialect == Postgres {
		return postgres
	}
	return mysql
}

func checkKeys(op, bizID, messageKey string) error {
	if err := checkBizID(op, bizID); err != nil {
		return err
	}
	return checkMessageKey(op, messageKey)
}

// Insert writes the "commit" marker of (bizID, messageKey) inside the
// caller's open transaction. Call it before the business writes, so that a
// concurrent [Barrier.Check] waits for the transaction instead of racing it.
// When a marker exists it returns [ErrAlreadyRolledBack] or
// [ErrAlreadyCommitted]; the transaction is still usable (roll it back).
//
// For a pgx or GORM transaction use [Barrier.InsertTx].
func (b *Barrier) Insert(ctx context.Context, tx *sql.Tx, bizID, messageKey string) error {
	if tx == nil {
		return errors.New("trustmsg: barrier insert: tx is nil")
	}
	return b.InsertTx(ctx, SQLTx(tx), bizID, messageKey)
}

// InsertTx is [Barrier.Insert] in any [Tx]: [SQLTx], trustpgx.Tx,
// trustgorm.Tx.
func (b *Barrier) InsertTx(ctx context.Context, tx Tx, bizID, messageKey string) error {
	if err := checkKeys("barrier insert", bizID, messageKey); err != nil {
		return err
	}
	if b.dialect == Postgres {
		// ON CONFLICT DO NOTHING: a unique violation would abort the
		// transaction; this waits for a concurrent insert of the key instead.
		res, err := tx.Exec(ctx,
			"INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES ($1, $2, 'commit') ON CONFLICT DO NOTHING",
			bizID, messageKey)
		if err != nil {
			return fmt.Errorf("trustmsg: barrier insert: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return b.existing(ctx, tx, bizID, messageKey, nil)
	}
	_, err := tx.Exec(ctx,
		"INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'commit')", bizID, messageKey)
	if err == nil {
		return nil
	}
	// A duplicate key (any driver's error type): the marker is there. A
	// failed statement leaves a MySQL transaction usable.
	return b.existing(ctx, tx, bizID, messageKey, err)
}

// existing reports the marker that made the insert fail (a locking read: the
// latest committed marker, not the transaction's snapshot); insertErr is the
// insert's error, returned when no marker is there after all.
func (b *Barrier) existing(ctx context.Context, tx Tx, bizID, messageKey string, insertErr error) error {
	var op []byte
	err := tx.QueryRow(ctx, b.q(
		"SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? LOCK IN SHARE MODE",
		"SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 FOR SHARE"),
		bizID, messageKey).Scan(&op)
	switch {
	case errors.Is(err, sql.ErrNoRows) && insertErr != nil:
		return fmt.Errorf("trustmsg: barrier insert: %w", insertErr)
	case err != nil:
		return fmt.Errorf("trustmsg: barrier insert: reading the existing marker: %w", errors.Join(err, insertErr))
	}
	d, err := parseOp(op)
	if err != nil {
		return err
	}
	if d == Commit {
		return ErrAlreadyCommitted
	}
	return ErrAlreadyRolledBack
}

// Check answers a check-back exactly: it inserts a "rollback" marker unless
// a marker exists (waiting for a local transaction that holds one), then
// returns the marker that is there: [Commit] or [Rollback], never [Unknown].
func (b *Barrier) Check(ctx context.Context, bizID, messageKey string) (Decision, error) {
	if err := checkKeys("barrier check", bizID, messageKey); err != nil {
		return "", err
	}
	// Only a duplicate key is ignored (INSERT IGNORE would also store a key
	// too long for the column truncated, and the read below would miss it).
	if _, err := b.db.Exec(ctx, b.q(
		"INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'rollback') ON DUPLICATE KEY UPDATE op = op",
		"INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES ($1, $2, 'rollback') ON CONFLICT DO NOTHING"),
		bizID, messageKey); err != nil {
		return "", fmt.Errorf("trustmsg: barrier check: %w", err)
	}
	var op []byte
	if err := b.db.QueryRow(ctx, b.q(
		"SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?",
		"SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2"),
		bizID, messageKey).Scan(&op); err != nil {
		return "", fmt.Errorf("trustmsg: barrier check: reading the marker: %w", err)
	}
	return parseOp(op)
}

// Decide answers a verified check-back request from the barrier: a
// [DecideFunc] for [CheckHandler].
func (b *Barrier) Decide(ctx context.Context, req CheckRequest) (Decision, error) {
	return b.Check(ctx, req.BizID, req.MessageKey)
}

func parseOp(op []byte) (Decision, error) {
	switch string(op) {
	case "commit":
		return Commit, nil
	case "rollback":
		return Rollback, nil
	}
	return "", fmt.Errorf("trustmsg: unexpected barrier marker %q in %s", op, BarrierTable)
}

// RunInTx runs work in a new transaction on the barrier's database after
// inserting the "commit" marker of (bizID, messageKey), and commits: the
// database/sql form of the function [RunInTx], for a barrier made by
// [NewBarrier].
func (b *Barrier) RunInTx(ctx context.Context, bizID, messageKey string, work func(ctx context.Context, tx *sql.Tx) error) error {
	return RunInTx(ctx, b, bizID, messageKey, work)
}

// RunInTx runs work in a new transaction on b's database after inserting
// the "commit" marker of (bizID, messageKey), and commits. T is the
// database's transaction type: *sql.Tx ([NewBarrier]), pgx.Tx
// (trustpgx.NewBarrier), *gorm.DB (trustgorm.NewBarrier).
//
// It returns nil when the transaction committed; work's own error (wrapped:
// [errors.Is] and [errors.As] find it) when work failed, after rolling back;
// [ErrAlreadyCommitted] or [ErrAlreadyRolledBack] when a marker existed
// (work did not run); the database's error when the transaction did not
// commit. If COMMIT itself fails (a lost connection may hide a COMMIT that
// was applied), the barrier is asked, and only if it cannot be read either
// is the error [ErrOutcomeUnknown].
func RunInTx[T any](ctx context.Context, b *Barrier, bizID, messageKey string, work func(ctx context.Context, tx T) error) error {
	if b == nil || work == nil {
		return errors.New("trustmsg: RunInTx needs a barrier and the work")
	}
	if err := checkKeys("barrier transaction", bizID, messageKey); err != nil {
		return err
	}
	if err := checkTxType[T]("barrier transaction", b.db); err != nil {
		return err
	}
	tx, err := b.db.begin(ctx)
	if err != nil {
		return fmt.Errorf("trustmsg: beginning the local transaction: %w", err)
	}
	if err := b.InsertTx(ctx, tx, bizID, messageKey); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := runWork(ctx, tx, work); err != nil {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil {
			logFailure(ctx, b.log, slog.LevelWarn, "trustmsg: rolling back the local transaction failed", rbErr, "message_key", messageKey)
		}
		return &LocalError{MessageKey: messageKey, Err: err}
	}
	commitErr := tx.Commit(ctx)
	if commitErr == nil {
		return nil
	}
	// Ask the barrier on a fresh context: ctx may be what ended the COMMIT.
	checkCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	d, checkErr := b.Check(checkCtx, bizID, messageKey)
	switch {
	case checkErr != nil:
		logFailure(ctx, b.log, slog.LevelError, "trustmsg: local COMMIT outcome unknown", commitErr, "biz_id", bizID, "message_key", messageKey, "check_error", checkErr)
		return fmt.Errorf("%w: COMMIT failed (%w) and the barrier could not be read (%w)", ErrOutcomeUnknown, commitErr, checkErr)
	case d == Commit:
		return nil
	default:
		return fmt.Errorf("trustmsg: committing the local transaction: %w", commitErr)
	}
}

// runWork runs work on tx's native transaction, turning a panic into a
// rollback first (then panics on).
func runWork[T any](ctx context.Context, tx anyTx, work func(context.Context, T) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	native, ok := tx.native().(T)
	if !ok {
		return fmt.Errorf("trustmsg: the database gave a %T, the work takes a %v", tx.native(), reflect.TypeFor[T]())
	}
	return work(ctx, native)
}

// LocalError is the failure of the caller's local work: the local
// transaction was rolled back. [errors.Is] and [errors.As] find the work's
// own error through it.
type LocalError struct {
	// MessageKey is the message whose local transaction failed.
	MessageKey string
	// Err is the work's own error.
	Err error
}

func (e *LocalError) Error() string {
	return fmt.Sprintf("trustmsg: the local transaction of %q failed and was rolled back: %v", e.MessageKey, e.Err)
}

// Unwrap returns the work's own error.
func (e *LocalError) Unwrap() error { return e.Err }

// Purge deletes markers older than age and returns how many. Keep
// markers well beyond the longest check-back schedule (about an hour from
// prepare by default) and the longest local transaction: a deleted
// "rollback" marker no longer stops a late transaction, and a deleted
// "commit" marker turns a late check-back into a rollback answer.
func (b *Barrier) Purge(ctx context.Context, age time.Duration) (int64, error) {
	if age <= 0 {
		return 0, errors.New("trustmsg: purge: age must be positive")
	}
	// The database's clock, the one created_at was written with.
	micros := age.Microseconds()
	var total int64
	for {
		// Small batches keep each DELETE's locks short.
		res, err := b.db.Exec(ctx, b.q(
			"DELETE FROM trustmsg_barrier WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT 1000",
			"DELETE FROM trustmsg_barrier WHERE ctid IN (SELECT ctid FROM trustmsg_barrier WHERE created_at < now() - $1 * interval '1 microsecond' LIMIT 1000)"),
			micros)
		if err != nil {
			return total, fmt.Errorf("trustmsg: purging the barrier: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < 1000 {
			return total, nil
		}
	}
}
