package kafka_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
)

// A consumer of trustmsg's records with franz-go: each record's work runs
// once per consumer group, in one transaction with its inbox row; the
// offsets are committed after.
func ExampleProcess() {
	ctx := context.Background()
	db, _ := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/billing") // import _ "github.com/go-sql-driver/mysql"
	inbox, err := trustmsg.NewInbox(db, trustmsg.MySQL, "billing")
	if err != nil {
		log.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Getenv("TRUSTMSG_BROKERS")), kgo.ConsumeTopics("orders"),
		kgo.ConsumerGroup("billing"), kgo.DisableAutoCommit())
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if _, err := kafka.Process(ctx, inbox, r, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO invoices (order_payload) VALUES (?)", r.Value)
				return err
			}); err != nil {
				log.Printf("not processed, will be again: %v", err) // a real consumer seeks back
			}
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			log.Print(err)
		}
	}
}
