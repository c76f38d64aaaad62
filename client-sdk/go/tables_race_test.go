package trustmsg_test

import (
	"context"
	"database/sql"
	"net/url"
	"sync"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// Eight instances of a service starting at once on an empty PostgreSQL
// database each create the tables: every one succeeds, and the tables are
// there once. (Two CREATE TABLE IF NOT EXISTS of one table at once can fail
// on PostgreSQL's catalog; the SDK takes an advisory lock around them.)
func TestCreateTablesAtOnceOnAnEmptyPostgresDatabase(t *testing.T) {
	e := kittest.Kit(t)
	admin, err := sql.Open("pgx", e.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := "go_ddl_" + kittest.Random()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const instances = 8
	errs := make(chan error, 2*instances)
	var wg sync.WaitGroup
	for i := 0; i < instances; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("pgx", u.String())
			if err != nil {
				errs <- err
				return
			}
			defer db.Close()
			errs <- trustmsg.CreateTables(ctx, db, trustmsg.Postgres)
			errs <- trustmsg.CreateOutboxTable(ctx, db, trustmsg.Postgres)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('trustmsg_barrier', 'trustmsg_inbox', 'trustmsg_outbox')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Fatalf("%d of the 3 tables", tables)
	}
}
