// Package trustmsg is the Go SDK of trustmsg, a reliable-message service:
// a producer prepares a message, runs its local transaction, then commits or
// rolls the message back; trustmsg delivers committed messages to Kafka and
// asks the producer ("check-back") about messages whose decision never came.
//
// What it holds:
//
//   - [Client]: the producer API over HTTP (prepare, commit, rollback, get),
//     context first, typed errors ([*Error], [IsConflict], ...), retries with
//     backoff and jitter on 5xx and connection errors only.
//   - [Transaction] and [Barrier]: prepare → local transaction (MySQL/MariaDB
//     or PostgreSQL, through database/sql, pgx or GORM) with the barrier's marker →
//     commit or rollback; the barrier answers check-back exactly. A retry
//     of a decided message runs no local work: [*DecidedError], matched by
//     [ErrAlreadyCommitted] ("already placed") or [ErrAlreadyRolledBack]
//     ("refused"); a decision trustmsg refuses after the local transaction
//     is a [*RejectedDecisionError]; [WithAfterLocalCommit] is the test hook
//     at the crash point.
//   - [Verifier] and [CheckHandler]: the check-back endpoint as an
//     [net/http.Handler], signatures verified the Standard Webhooks way.
//   - [Inbox]: a consumer processes each trustmsg message once, the work and
//     its inbox row in one local transaction.
//   - [Outbox]: the local message table's row, written inside the caller's
//     transaction; trustmsg relays the table from MySQL/MariaDB and PostgreSQL
//     (`trustmsg serve --outbox-source BIZ_ID=postgres://…`). The zero value
//     is ready; [NewOutbox] checks a table name up front.
//   - [Tx] and [Database]: the caller's transaction and database as the
//     helpers use them. [SQLTx] and [SQLDB] for database/sql; package
//     trustpgx for pgx (pgx.Tx, pgxpool, sqlc over pgx), package trustgorm
//     for GORM (the *gorm.DB of db.Transaction). [Transaction], [RunInTx]
//     and [Process] hand the work the database's own transaction type.
//   - [WithLogger]: the *slog.Logger the SDK logs to (else [slog.Default]);
//     a context that ended is logged at Info, never Error.
//   - Package kafka (a sub-package): the Kafka way in (signed records,
//     idempotent producer, acks=all) and the inbox for franz-go records;
//     franz-go reads and writes `trustmsg dev`'s broker as it is.
//
// The producer's tables are embedded ([SQL], [CreateTables]); they are the
// same for every trustmsg SDK.
package trustmsg

// Version is this SDK's version.
const Version = "0.1.0"
