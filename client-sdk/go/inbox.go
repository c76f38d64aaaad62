package trustmsg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// ErrNoMessageID: a record carries no usable trustmsg-message-id header (none,
// no value, not a decimal number from 1 to 2^64-1): it was not sent by
// trustmsg, and the inbox refuses it rather than process it unkeyed.
var ErrNoMessageID = errors.New("trustmsg: the record has no valid trustmsg-message-id header; it was not sent by trustmsg")

// ParseMessageID reads a trustmsg-message-id header value: a decimal number
// from 1 to 2^64-1, digits only. ok is false for anything else (a header
// without a value is passed as nil).
func ParseMessageID(value []byte) (id uint64, ok bool) {
	if len(value) == 0 {
		return 0, false
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(string(value), 10, 64)
	if err != nil || id == 0 {
		return 0, false
	}
	return id, true
}

// InboxTable is the inbox's table.
const InboxTable = "trustmsg_inbox"

// MaxGroupBytes is the longest consumer group name the inbox holds.
const MaxGroupBytes = 255

// Processed says what [Inbox.Process] did.
type Processed int

const (
	// Done: the first delivery for the group; the work ran and committed
	// with the inbox row.
	Done Processed = iota + 1
	// Repeat: the group had processed this message already; the work did
	// not run.
	Repeat
)

func (p Processed) String() string {
	switch p {
	case Done:
		return "done"
	case Repeat:
		return "repeat"
	}
	return "Processed(" + strconv.Itoa(int(p)) + ")"
}

// Inbox processes each trustmsg message once, in effect, for one consumer
// group with its own database.
//
// Delivery is at least once: a record may come again (the forwarder's
// retry, a consumer restart before its offset commit). Every record
// carries a stable trustmsg-message-id; the inbox keeps one row per
// (group, message id) and writes it in the same local transaction as the
// work: a repeat finds the row and skips the work; two deliveries at once
// wait on each other's row lock; a failed work rolls back the work and the
// row together, so the next delivery runs it again.
//
// The table is [SQL]'s trustmsg_inbox ([CreateTables]). Safe for concurrent
// use.
//
// [NewInbox] puts it in a database/sql database; [NewInboxOn] in any
// [Database] (package trustpgx for pgx, trustgorm for GORM), whose
// transaction type the work of [Process] gets.
type Inbox struct {
	db      anyDB
	dialect Dialect
	group   string
}

// NewInbox returns the inbox of consumer group (1 to 255 bytes, compared
// byte for byte) in db, whose SQL is d's. No option applies yet (the inbox
// logs nothing); opts is there for those to come.
func NewInbox(db *sql.DB, d Dialect, group string, opts ...Option) (*Inbox, error) {
	if db == nil {
		return nil, errors.New("trustmsg: NewInbox: db is nil")
	}
	return NewInboxOn(SQLDB(db, d), group, opts...)
}

// NewInboxOn returns the inbox of consumer group in db: [SQLDB],
// trustpgx.Pool, trustgorm.DB or a [Database] of your own.
func NewInboxOn[T any](db Database[T], group string, _ ...Option) (*Inbox, error) {
	adb, err := checkDatabase("NewInboxOn", db)
	if err != nil {
		return nil, err
	}
	if group == "" || len(group) > MaxGroupBytes {
		return nil, fmt.Errorf("trustmsg: a consumer group is 1 to %d bytes (got %d)", MaxGroupBytes, len(group))
	}
	return &Inbox{db: adb, dialect: db.Dialect(), group: group}, nil
}

// Group is the inbox's consumer group.
func (in *Inbox) Group() string { return in.group }

// Process runs work once per (group, messageID): in one local transaction
// with the inbox row, skipped for a repeat ([Repeat]). When work fails its
// error comes back wrapped in a *[LocalError] ([errors.Is] finds it) and
// nothing of the work nor the inbox row is kept: the next delivery runs it
// again. Commit the record's offset only after Process returned nil.
//
// It is the database/sql form of the function [Process].
func (in *Inbox) Process(ctx context.Context, messageID uint64, work func(ctx context.Context, tx *sql.Tx) error) (Processed, error) {
	return Process(ctx, in, messageID, work)
}

// Process runs work once per (in's group, messageID), in one local
// transaction with the inbox row, as [Inbox.Process] does. T is the
// database's transaction type: *sql.Tx ([NewInbox]), pgx.Tx
// (trustpgx.NewInbox), *gorm.DB (trustgorm.NewInbox).
func Process[T any](ctx context.Context, in *Inbox, messageID uint64, work func(ctx context.Context, tx T) error) (Processed, error) {
	if in == nil {
		return 0, errors.New("trustmsg: Process: the inbox is nil")
	}
	if messageID == 0 {
		return 0, ErrNoMessageID
	}
	if work == nil {
		return 0, errors.New("trustmsg: Process: work is nil")
	}
	var insert string
	var id any = messageID
	if in.dialect == Postgres {
		// The kit's column is NUMERIC(20,0), which keeps every uint64; an
		// id goes as its decimal text, which pgx would refuse as a uint64
		// above 2^63-1.
		id = strconv.FormatUint(messageID, 10)
		insert = "INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES ($1, $2::numeric) ON CONFLICT DO NOTHING"
	} else {
		// IGNORE for the duplicate only: the group's length was checked and
		// the id fits. (ON DUPLICATE KEY UPDATE would count a duplicate as
		// one row affected under the DSN's clientFoundRows=true.)
		insert = "INSERT IGNORE INTO trustmsg_inbox (consumer_group, message_id) VALUES (?, ?)"
	}
	if err := checkTxType[T]("inbox", in.db); err != nil {
		return 0, err
	}
	tx, err := in.db.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("trustmsg: inbox: beginning the transaction: %w", err)
	}
	// Waits for a concurrent delivery's uncommitted row, then either finds
	// it (a repeat) or, that delivery having rolled back, takes it.
	rollback := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	res, err := tx.Exec(ctx, insert, in.group, id)
	if err != nil {
		rollback()
		return 0, fmt.Errorf("trustmsg: inbox: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		rollback()
		return 0, fmt.Errorf("trustmsg: inbox: %w", err)
	}
	if n != 1 {
		rollback()
		return Repeat, nil
	}
	if err := runWork(ctx, tx, work); err != nil {
		rollback()
		return 0, &LocalError{MessageKey: strconv.FormatUint(messageID, 10), Err: err}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("trustmsg: inbox: committing: %w", err)
	}
	return Done, nil
}
