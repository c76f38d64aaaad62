package trustgorm_test

import (
	"context"
	"log"

	"gorm.io/driver/mysql"
	"gorm.io/gorm"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/trustgorm"
)

// The local message table's row, in the transaction of db.Transaction: the
// order and its message commit together. The zero Outbox takes MySQL from
// GORM's dialector.
func ExampleTx() {
	ctx := context.Background()
	db, err := gorm.Open(mysql.Open("root@tcp(127.0.0.1:3306)/shop"), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	var outbox trustmsg.Outbox
	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&Order{ID: "42", Amount: 1250}).Error; err != nil {
			return err
		}
		_, err := outbox.EnqueueTx(ctx, trustgorm.Tx(tx), trustmsg.Message{MessageKey: "order-42", Topic: "orders", Payload: []byte(`{"order":42}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The transaction helper on GORM: the work gets the transaction's
// *gorm.DB, as db.Transaction's function does.
func ExampleNewBarrier() {
	ctx := context.Background()
	db, err := gorm.Open(mysql.Open("root@tcp(127.0.0.1:3306)/shop"), &gorm.Config{})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := trustmsg.NewClient("http://127.0.0.1:8080", "order-service", "token")
	if err != nil {
		log.Fatal(err)
	}
	barrier, err := trustgorm.NewBarrier(db)
	if err != nil {
		log.Fatal(err)
	}
	msg := trustmsg.Message{MessageKey: "order-42", Topic: "orders", Payload: []byte(`{"order":42}`)}
	if _, err := trustmsg.Transaction(ctx, producer, barrier, msg, func(ctx context.Context, tx *gorm.DB) error {
		return tx.WithContext(ctx).Create(&Order{ID: "42", Amount: 1250}).Error
	}); err != nil {
		log.Printf("order 42 not placed: %v", err)
	}
}
