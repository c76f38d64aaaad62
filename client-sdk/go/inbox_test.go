package trustmsg_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// Two deliveries of one message at once (two consumers of a group during a
// rebalance): the second waits for the first's transaction and finds its
// row; the work runs once. On MariaDB and PostgreSQL.
func TestInboxConcurrentDeliveriesRunTheWorkOnce(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			conn := kittest.Open(t, e, db.Dialect)
			kittest.DDL(t, conn, "CREATE TABLE IF NOT EXISTS go_charges (id VARCHAR(64) PRIMARY KEY)")
			in, err := trustmsg.NewInbox(conn, db.Dialect, "go-group-"+kittest.Random())
			if err != nil {
				t.Fatal(err)
			}
			charge := kittest.Random()
			var wg sync.WaitGroup
			results := make([]trustmsg.Processed, 2)
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = in.Process(context.Background(), 4711, func(ctx context.Context, tx *sql.Tx) error {
						time.Sleep(300 * time.Millisecond) // the other delivery arrives meanwhile
						_, err := tx.ExecContext(ctx, "INSERT INTO go_charges (id) VALUES ("+ph(db.Dialect, 1)+")", charge)
						return err
					})
				}()
			}
			wg.Wait()
			if errors.Join(errs...) != nil || results[0]+results[1] != trustmsg.Done+trustmsg.Repeat {
				t.Fatalf("results %v, errors %v: want one done and one repeat", results, errs)
			}
			if n := count(t, conn, db.Dialect, "SELECT COUNT(*) FROM go_charges WHERE id = ?", charge); n != 1 {
				t.Fatalf("the work ran %d times", n)
			}
			// The largest id a record can carry is kept as it is, once.
			for i, want := range []trustmsg.Processed{trustmsg.Done, trustmsg.Repeat} {
				got, err := in.Process(context.Background(), math.MaxUint64, func(context.Context, *sql.Tx) error { return nil })
				if err != nil || got != want {
					t.Fatalf("id 2^64-1, delivery %d: got %v (%v), want %v", i+1, got, err, want)
				}
			}
			if _, err := trustmsg.NewInbox(conn, db.Dialect, ""); err == nil {
				t.Fatal("an empty group was accepted")
			}
			if _, err := in.Process(context.Background(), 0, func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, trustmsg.ErrNoMessageID) {
				t.Fatalf("id 0: %v", err)
			}
			// The barrier's purge runs on both dialects (an age no marker of
			// this run has: the other tests' markers stay).
			if _, err := barrier(t, conn, db.Dialect).Purge(context.Background(), 30*24*time.Hour); err != nil {
				t.Fatal(err)
			}
		})
	}
}
