package trustmsg

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
)

// Dialect is the SQL of a producer's database.
type Dialect int

// The databases this SDK writes to.
const (
	// MySQL is MySQL >= 8.0 or MariaDB >= 10.6 (go-sql-driver/mysql).
	MySQL Dialect = iota + 1
	// Postgres is PostgreSQL >= 13 (pgx's database/sql driver, "pgx").
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case MySQL:
		return "mysql"
	case Postgres:
		return "postgres"
	default:
		return fmt.Sprintf("Dialect(%d)", int(d))
	}
}

func (d Dialect) check() error {
	if d != MySQL && d != Postgres {
		return fmt.Errorf("trustmsg: unknown SQL dialect %d: use trustmsg.MySQL or trustmsg.Postgres", int(d))
	}
	return nil
}

var (
	//go:embed sql/mysql.sql
	mysqlTables string
	//go:embed sql/postgres.sql
	postgresTables string
	//go:embed sql/outbox-mysql.sql
	mysqlOutbox string
	//go:embed sql/outbox-postgres.sql
	postgresOutbox string
)

// SQL returns the producer's barrier and inbox tables for d (idempotent
// CREATE TABLE IF NOT EXISTS statements): the contract kit's
// sql/{mysql,postgres}.sql, the same for every trustmsg SDK. Copy it into
// your migrations, or call [CreateTables].
func SQL(d Dialect) string {
	if d == Postgres {
		return postgresTables
	}
	return mysqlTables
}

// OutboxSQL returns the local message table (trustmsg_outbox) for d, as
// `trustmsg outbox schema --dialect mysql|postgres` prints it.
func OutboxSQL(d Dialect) string {
	if d == Postgres {
		return postgresOutbox
	}
	return mysqlOutbox
}

// CreateTables creates the barrier and inbox tables in db if they do not
// exist ([SQL]).
func CreateTables(ctx context.Context, db *sql.DB, d Dialect) error {
	if err := d.check(); err != nil {
		return err
	}
	return execScript(ctx, db, d, SQL(d))
}

// CreateOutboxTable creates the local message table in db if it does not
// exist ([OutboxSQL]).
func CreateOutboxTable(ctx context.Context, db *sql.DB, d Dialect) error {
	if err := d.check(); err != nil {
		return err
	}
	return execScript(ctx, db, d, OutboxSQL(d))
}

// statements splits a script of this package into its statements: comment
// lines dropped, split at a ';' that ends a line. (The scripts hold no
// string with ";\n" in it.)
func statements(script string) []string {
	var lines []string
	for _, line := range strings.Split(script, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		lines = append(lines, line)
	}
	var out []string
	for _, s := range strings.Split(strings.Join(lines, "\n"), ";\n") {
		if s = strings.TrimSuffix(strings.TrimSpace(s), ";"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ddlLock is the advisory lock every trustmsg SDK takes on PostgreSQL while
// it creates its tables ("trustmsg" as a bigint): two CREATE TABLE IF NOT
// EXISTS of one table at once can fail there (23505 on pg_type), as two
// instances of a service starting together do.
const ddlLock = "SELECT pg_advisory_xact_lock(8390898194479674215)"

// execScript runs each statement (MySQL's driver runs one per Exec unless
// multiStatements is set in the DSN); on PostgreSQL in one transaction
// behind [ddlLock].
func execScript(ctx context.Context, db *sql.DB, d Dialect, script string) error {
	if d != Postgres {
		for _, stmt := range statements(script) {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("trustmsg: creating tables: %w", err)
			}
		}
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("trustmsg: creating tables: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range append([]string{ddlLock}, statements(script)...) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("trustmsg: creating tables: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("trustmsg: creating tables: %w", err)
	}
	return nil
}
