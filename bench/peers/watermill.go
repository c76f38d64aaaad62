package main

// Watermill's SQL forwarder (github.com/ThreeDotsLabs/watermill
// components/forwarder) on MySQL, the peer of trustmsg's relay in
// `peers outbox` (issue 50 item 3). Both sides as a Watermill user writes
// them: the producer publishes with watermill-sql's Publisher on its own
// *sql.Tx, wrapped by forwarder.Publisher, so the row is an envelope in the
// forwarder topic's table; the forwarder (`peers watermill-forwarder`, a
// process of its own so its CPU is read apart) subscribes to that table
// with watermill-sql's Subscriber and publishes each message to Kafka with
// watermill-kafka's Publisher (Sarama). Every component keeps its defaults
// (DefaultMySQLSchema: batches of 100, 1 s poll interval when a query finds
// nothing; DefaultMySQLOffsetsAdapter; forwarder.Config{}; the Kafka
// publisher's DefaultSaramaSyncPublisherConfig and DefaultMarshaler), but
// the logger, which logs at info level only.

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
)

// forwarderTopic is the forwarder's default topic: its rows live in
// `watermill_forwarder_topic`, its consumer's offset in
// `watermill_offsets_forwarder_topic`.
const forwarderTopic = "forwarder_topic"

// watermillUUIDHeader is the Kafka header where watermill-kafka's
// DefaultMarshaler puts the message's UUID: the load generator's key.
const watermillUUIDHeader = wkafka.UUIDHeaderKey

func watermillSubscriber(db *sql.DB, logger watermill.LoggerAdapter) (*wsql.Subscriber, error) {
	return wsql.NewSubscriber(wsql.BeginnerFromStdSQL(db), wsql.SubscriberConfig{
		SchemaAdapter:  wsql.DefaultMySQLSchema{},
		OffsetsAdapter: wsql.DefaultMySQLOffsetsAdapter{},
	}, logger)
}

// watermillForwarderCommand is `peers watermill-forwarder`: Watermill's
// forwarder from the MySQL table to Kafka, until SIGTERM or SIGINT.
func watermillForwarderCommand(args []string) error {
	fs := flag.NewFlagSet("watermill-forwarder", flag.ExitOnError)
	dsn := fs.String("dsn", "", "the source database, go-sql-driver form (user@tcp(host:port)/db)")
	brokers := fs.String("kafka", "", "Kafka bootstrap address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" || *brokers == "" {
		return errors.New("watermill-forwarder needs --dsn and --kafka")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := watermill.NewStdLogger(false, false)
	db, err := sql.Open("mysql", *dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	sub, err := watermillSubscriber(db, logger)
	if err != nil {
		return err
	}
	pub, err := wkafka.NewPublisher(wkafka.PublisherConfig{
		Brokers:   []string{*brokers},
		Marshaler: wkafka.DefaultMarshaler{},
	}, logger)
	if err != nil {
		return err
	}
	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{ForwarderTopic: forwarderTopic})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		if err := fwd.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "watermill-forwarder: closing:", err)
		}
	}()
	err = fwd.Run(ctx)
	if cerr := pub.Close(); err == nil {
		err = cerr
	}
	return err
}

// watermillOutbox is the producer's side: each transaction publishes its
// messages through forwarder.Publisher over watermill-sql's Publisher on
// the transaction, as Watermill's documentation shows.
type watermillOutbox struct {
	db    *sql.DB
	topic string
	// What lost last found: the rows' offsets, and the acknowledged one.
	lostOffsets []int64
	acked       int64
}

func newWatermillOutbox(dsn, topic string) (*watermillOutbox, error) {
	db, err := openSource(dsn)
	if err != nil {
		return nil, err
	}
	// The forwarder topic's tables, by Watermill's own DDL.
	sub, err := watermillSubscriber(db, nil)
	if err == nil {
		err = sub.SubscribeInitialize(forwarderTopic)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("creating Watermill's tables: %w", err)
	}
	return &watermillOutbox{db: db, topic: topic}, nil
}

func (w *watermillOutbox) insert(ctx context.Context, keys []string) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
	pub, err := wsql.NewPublisher(wsql.TxFromStdSQL(tx), wsql.PublisherConfig{SchemaAdapter: wsql.DefaultMySQLSchema{}}, nil)
	if err != nil {
		return err
	}
	fwd := forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: forwarderTopic})
	msgs := make([]*message.Message, len(keys))
	for i, k := range keys {
		msgs[i] = message.NewMessage(k, message.Payload(outboxPayload))
	}
	if err := fwd.Publish(w.topic, msgs...); err != nil {
		return err
	}
	return tx.Commit()
}

func (w *watermillOutbox) rows(ctx context.Context) (int, error) {
	var n int
	err := w.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `watermill_"+forwarderTopic+"`").Scan(&n)
	return n, err
}

func (w *watermillOutbox) send(ctx context.Context, key string) error {
	return w.insert(ctx, []string{key})
}

// unsettled: rows past the consumer group's acknowledged offset.
func (w *watermillOutbox) unsettled(ctx context.Context) (int, error) {
	var n int
	err := w.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM `watermill_"+forwarderTopic+"` WHERE `offset` > "+
			"COALESCE((SELECT offset_acked FROM `watermill_offsets_"+forwarderTopic+"` WHERE consumer_group = ''), 0)").Scan(&n)
	return n, err
}

// lost: rows of keys at or below the acknowledged offset, which the
// subscriber never reads again (its SELECT asks for `offset` > it). The key
// is the enveloped message's UUID, in the row's JSON payload.
func (w *watermillOutbox) lost(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	if err := w.db.QueryRowContext(ctx,
		"SELECT COALESCE((SELECT offset_acked FROM `watermill_offsets_"+forwarderTopic+"` WHERE consumer_group = ''), 0)").Scan(&w.acked); err != nil {
		return nil, err
	}
	args = append(args, w.acked)
	rows, err := w.db.QueryContext(ctx,
		"SELECT `offset`, JSON_UNQUOTE(JSON_EXTRACT(payload, '$.uuid')) FROM `watermill_"+forwarderTopic+"`"+
			" WHERE JSON_UNQUOTE(JSON_EXTRACT(payload, '$.uuid')) IN (?"+strings.Repeat(", ?", len(keys)-1)+")"+
			" AND `offset` <= ? ORDER BY `offset`", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lost []string
	w.lostOffsets = w.lostOffsets[:0]
	for rows.Next() {
		var k string
		var offset int64
		if err := rows.Scan(&offset, &k); err != nil {
			return nil, err
		}
		lost = append(lost, k)
		w.lostOffsets = append(w.lostOffsets, offset)
	}
	return lost, rows.Err()
}

func (w *watermillOutbox) afterSettled()      {}
func (w *watermillOutbox) warnings() []string { return nil }
func (w *watermillOutbox) close()             { w.db.Close() }

// lostDetail says which rows lost last found, for the run's warning.
func (w *watermillOutbox) lostDetail() string {
	if len(w.lostOffsets) == 0 {
		return ""
	}
	shown := w.lostOffsets[:min(len(w.lostOffsets), 10)]
	more := ""
	if len(w.lostOffsets) > len(shown) {
		more = ", …"
	}
	return fmt.Sprintf(" (offsets %s%s, the consumer group's acknowledged offset %d)",
		strings.Trim(fmt.Sprint(shown), "[]"), more, w.acked)
}
