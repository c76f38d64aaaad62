package trustmsg

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// OutboxTable is the local message table's default name.
const OutboxTable = "trustmsg_outbox"

// Outbox writes messages as rows of the local message table
// (docs/outbox.md): one INSERT in the caller's own transaction, with the
// business change, no call on the request path. `trustmsg serve
// --outbox-source BIZ_ID=URL` relays every committed row as a COMMITTED
// message of producer BIZ_ID; a rolled-back row never existed.
//
// The zero value is ready to use: it writes to trustmsg_outbox in the SQL
// of the transaction it is given (a pgx or GORM transaction says which; a
// bare *sql.Tx is asked, one SELECT version() per write, unless Dialect is
// set). [NewOutbox] checks the table name once, up front. trustmsg relays
// MySQL/MariaDB and PostgreSQL sources alike (`--outbox-source
// BIZ_ID=mysql://…` or `BIZ_ID=postgres://…`).
type Outbox struct {
	// Dialect is the producer database's SQL; 0 for the transaction's own.
	Dialect Dialect
	// Table is the table's name ("" for trustmsg_outbox): 1 to 64 of
	// A-Z a-z 0-9 _, not starting with a digit (the relay's rule).
	Table string
}

// OutboxOption configures [NewOutbox].
type OutboxOption func(*Outbox)

// WithTable names the local message table (default trustmsg_outbox).
func WithTable(name string) OutboxOption { return func(o *Outbox) { o.Table = name } }

// NewOutbox returns the outbox of the producer database whose SQL is d
// (0: each transaction's own, as the zero [Outbox]), refusing a table
// name the relay would not accept.
func NewOutbox(d Dialect, opts ...OutboxOption) (*Outbox, error) {
	o := &Outbox{Dialect: d}
	for _, opt := range opts {
		opt(o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

// OutboxRow is the row [Outbox.Enqueue] writes for a message: the columns
// it sets; every other column keeps its default.
type OutboxRow struct {
	MessageKey string
	Topic      string
	// RecordKey is nil for none (Kafka's partitioner chooses).
	RecordKey *string
	Payload   []byte
	// Headers is the JSON object of the message's headers, nil for none.
	Headers []byte
	// TraceParent is the valid traceparent ("" for none: an invalid one is
	// left out, as trustmsg ignores it).
	TraceParent string
	// DeliverAfterMs is the delay counted by the database's clock from the
	// INSERT, -1 for none; DeliverAt the time (zero for none).
	DeliverAfterMs int64
	DeliverAt      time.Time
}

// Row returns the row of msg, or the refusal trustmsg would give it (an
// *[Error] with the HTTP API's code, [IsInvalid]), without writing
// anything. ctx supplies the trace context when msg has none.
func (o Outbox) Row(ctx context.Context, msg Message) (*OutboxRow, error) {
	const op = "enqueue"
	if err := o.check(); err != nil {
		return nil, err
	}
	now := time.Now()
	if err := msg.validate(op, now); err != nil {
		return nil, err
	}
	row := &OutboxRow{MessageKey: msg.MessageKey, Topic: msg.Topic, Payload: msg.Payload}
	if row.Payload == nil {
		row.Payload = []byte{}
	}
	if msg.Key != "" {
		k := msg.Key
		row.RecordKey = &k
	}
	if len(msg.Headers) > 0 {
		h, err := json.Marshal(msg.Headers)
		if err != nil {
			return nil, err
		}
		row.Headers = h
	}
	tp, _ := msg.traceHeaders(ctx)
	row.TraceParent = ValidTraceParent(tp)
	row.DeliverAfterMs, row.DeliverAt, _ = msg.due(op, now)
	return row, nil
}

func (o Outbox) table() string {
	if o.Table == "" {
		return OutboxTable
	}
	return o.Table
}

func (o Outbox) check() error {
	if o.Dialect != 0 {
		if err := o.Dialect.check(); err != nil {
			return err
		}
	}
	t := o.table()
	ok := len(t) <= 64 && (t[0] < '0' || t[0] > '9')
	for _, c := range []byte(t) {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_')
	}
	if !ok {
		return invalid("enqueue", "invalid_table", "%q is not a table name the relay accepts: 1 to 64 of A-Z a-z 0-9 _, not starting with a digit", t)
	}
	return nil
}

// Enqueue writes msg as a row of the local message table inside tx, the
// caller's open transaction, and returns the row's id. The row commits or
// rolls back with tx; the relay sees it only once tx commits.
//
// What trustmsg would refuse is refused before anything is written ([Row]).
// message_key is the table's unique key: a second row with the same key
// fails with the database's duplicate-key error (on PostgreSQL that aborts
// tx).
//
// For a pgx or GORM transaction use [Outbox.EnqueueTx].
func (o Outbox) Enqueue(ctx context.Context, tx *sql.Tx, msg Message) (int64, error) {
	if tx == nil {
		return 0, fmt.Errorf("trustmsg: enqueue: tx is nil (the row goes in the caller's transaction)")
	}
	return o.EnqueueTx(ctx, sqlTx{tx: tx, d: o.Dialect}, msg)
}

// EnqueueTx is [Outbox.Enqueue] in any [Tx]: [SQLTx], trustpgx.Tx (a
// pgx.Tx), trustgorm.Tx (the *gorm.DB inside db.Transaction).
func (o Outbox) EnqueueTx(ctx context.Context, tx Tx, msg Message) (int64, error) {
	if tx == nil {
		return 0, fmt.Errorf("trustmsg: enqueue: tx is nil (the row goes in the caller's transaction)")
	}
	row, err := o.Row(ctx, msg)
	if err != nil {
		return 0, err
	}
	d := o.Dialect
	if d == 0 {
		if d, err = dialectOf(ctx, tx); err != nil {
			return 0, err
		}
	}
	var tp, headers, at, after any
	if row.TraceParent != "" {
		tp = row.TraceParent
	}
	if row.Headers != nil {
		headers = string(row.Headers)
	}
	if row.DeliverAfterMs >= 0 {
		after = row.DeliverAfterMs
	}
	var recordKey any
	if row.RecordKey != nil {
		recordKey = *row.RecordKey
	}
	// The table name passed check(): letters, digits and _ only.
	if d == Postgres {
		if !row.DeliverAt.IsZero() {
			at = row.DeliverAt
		}
		var id int64
		err := tx.QueryRow(ctx, "INSERT INTO "+o.table()+
			" (message_key, topic, record_key, payload, headers, traceparent, deliver_at)"+
			" VALUES ($1, $2, $3, $4, $5::jsonb, $6, COALESCE($7::timestamptz, now() + $8::bigint * interval '1 millisecond'))"+
			" RETURNING id",
			row.MessageKey, row.Topic, recordKey, row.Payload, headers, tp, at, after).Scan(&id)
		if err != nil {
			return 0, fmt.Errorf("trustmsg: enqueue %q: %w", row.MessageKey, err)
		}
		return id, nil
	}
	if !row.DeliverAt.IsZero() {
		// DATETIME(3) in UTC, written as text: no driver time zone involved.
		at = row.DeliverAt.UTC().Format("2006-01-02 15:04:05.000")
	}
	res, err := tx.Exec(ctx, "INSERT INTO "+o.table()+
		" (message_key, topic, record_key, payload, headers, traceparent, deliver_at)"+
		" VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND))",
		row.MessageKey, row.Topic, recordKey, row.Payload, headers, tp, at, microsOrNil(after))
	if err != nil {
		return 0, fmt.Errorf("trustmsg: enqueue %q: %w", row.MessageKey, err)
	}
	return res.LastInsertId()
}

func microsOrNil(ms any) any {
	if v, ok := ms.(int64); ok {
		return v * 1000
	}
	return nil
}
