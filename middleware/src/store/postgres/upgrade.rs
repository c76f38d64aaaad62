//! Migration 0020 (time partitions) on a PostgreSQL store that holds rows,
//! with a short lock: the file renames each table and attaches it to a new
//! partitioned parent, which is quick but for three things it does while it
//! holds the tables (18.1 s for a million messages here): fill
//! `message_keys` from `messages`, build the parent's `(biz_id,
//! message_key)` index on the old rows, and scan each table to prove its
//! rows fit the partition. Done first, without holding anything a write
//! waits for, they leave the file little to do:
//!
//! - `message_keys` is made and filled a chunk at a time, a trigger on
//!   `messages` keeping it up to date meanwhile;
//! - the index is built `CONCURRENTLY`, under the name the file's renaming
//!   gives the first partition's, so that the attach takes it as it is;
//! - a `CHECK` constraint that implies the partition's bound is added `NOT
//!   VALID` and validated (which lets writes go on), so that the attach
//!   skips its scan.
//!
//! What is left is the file from its `message_partitions` on (the renames,
//! the parents, the attach, the key trigger) with the trigger and the
//! constraints of the steps above dropped in the same transaction. Each
//! step can be cut off and run again. The steps can run while an instance
//! of the previous release serves ([`prepare`]): it must be stopped before
//! what is left runs, which takes well under a second.

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Postgres};

use crate::store::migrations::{self, TIME_PARTITIONS};
use crate::store::sql::{partitions_migrated, period_of};
use crate::store::StoreResult;

/// Messages per chunk of `message_keys` filled.
const CHUNK: i64 = 5_000;

/// Each partitioned table and its partition column.
const TABLES: [(&str, &str); 5] = [
    ("messages", "id"),
    ("audit_log", "message_id"),
    ("check_attempts", "message_id"),
    ("consumptions", "message_id"),
    ("message_payloads", "message_id"),
];

/// Where the part of the file that is left begins.
const LEFT_FROM: &str = "-- The periods opened";

/// The trigger that keeps `message_keys` filled until the file's own takes
/// over.
const KEYS: &str =
    "CREATE OR REPLACE FUNCTION trustmsg_0020_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO message_keys (biz_id, message_key, message_id)
            VALUES (NEW.biz_id, NEW.message_key, NEW.id) ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM message_keys WHERE biz_id = OLD.biz_id
            AND message_key = OLD.message_key AND message_id = OLD.id;
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS trustmsg_0020_keys ON messages;
CREATE TRIGGER trustmsg_0020_keys AFTER INSERT OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION trustmsg_0020_keys()";

/// Whether migration 0020 is to be made by these steps: not applied, and
/// `messages` holds rows (or the steps have begun).
async fn wanted(conn: &mut PoolConnection<Postgres>) -> StoreResult<bool> {
    if partitions_migrated::<Postgres>(&mut **conn).await? {
        return Ok(false);
    }
    // Begun before (its keys are there), or rows to upgrade.
    Ok(sqlx::query(
        "SELECT 1 WHERE to_regclass('message_keys') IS NOT NULL OR EXISTS (SELECT 1 FROM messages)",
    )
    .fetch_optional(&mut **conn)
    .await?
    .is_some())
}

/// The steps that hold nothing a write waits for long, when migration 0020
/// is to be made by them; returns what is left of the file then. Safe to
/// run while an instance of the previous release serves.
pub(super) async fn prepare(conn: &mut PoolConnection<Postgres>) -> StoreResult<Option<String>> {
    if !wanted(conn).await? {
        return Ok(None);
    }
    let last: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM messages")
        .fetch_one(&mut **conn)
        .await?;
    let period = period_of(last.unwrap_or(0) as u64);
    let upper = crate::store::sql::first_id(period + 1);
    let all = migrations::postgres();
    for (head, again) in [
        (
            "CREATE TABLE message_keys",
            "CREATE TABLE IF NOT EXISTS message_keys",
        ),
        (
            "CREATE INDEX idx_message_keys_message",
            "CREATE INDEX IF NOT EXISTS idx_message_keys_message",
        ),
    ] {
        let made = migrations::statement(&all, TIME_PARTITIONS, head);
        exec(conn, &made.replacen(head, again, 1)).await?;
    }
    exec(conn, KEYS).await?;
    let filled: Option<String> =
        sqlx::query_scalar("SELECT obj_description('message_keys'::regclass, 'pg_class')")
            .fetch_one(&mut **conn)
            .await?;
    if filled.as_deref() != Some(FILLED) {
        fill_keys(conn).await?;
        exec(
            conn,
            &format!("COMMENT ON TABLE message_keys IS '{FILLED}'"),
        )
        .await?;
    }
    for (table, column) in TABLES {
        let name = format!("{table}_0020_range");
        let have = sqlx::query("SELECT 1 FROM pg_constraint WHERE conname = $1")
            .bind(&name)
            .fetch_optional(&mut **conn)
            .await?
            .is_some();
        if !have {
            exec(
                conn,
                &format!("ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({column} < {upper}) NOT VALID"),
            )
            .await?;
        }
        exec(
            conn,
            &format!("ALTER TABLE {table} VALIDATE CONSTRAINT {name}"),
        )
        .await?;
    }
    // An index a build cut off left is invalid: built again.
    exec(
        conn,
        "DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                       WHERE c.relname = 'idx_messages_biz_key' AND NOT i.indisvalid) THEN
                DROP INDEX idx_messages_biz_key;
            END IF;
        END $$",
    )
    .await?;
    exec(
        conn,
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_biz_key ON messages (biz_id, message_key)",
    )
    .await?;
    Ok(Some(left_to_run()))
}

/// Marks `message_keys` filled, so that the steps run again (by `migrate`
/// after `migrate --prepare`) do not fill it again.
const FILLED: &str = "trustmsg 0020: filled";

/// The steps' trigger goes before the file renames `messages`… What is
/// left waits at most 5 s for a table's lock (meanwhile every write to the
/// table waits behind it) before it gives up and is tried again.
const BEFORE: &str = "SET LOCAL lock_timeout = '5s';
DROP TRIGGER trustmsg_0020_keys ON messages;
DROP FUNCTION trustmsg_0020_keys();
COMMENT ON TABLE message_keys IS NULL;";

/// …and their constraints once it has attached the tables.
const AFTER: &str = r"DO $$
DECLARE r RECORD;
BEGIN
    FOR r IN SELECT conrelid::regclass AS t, conname FROM pg_constraint
             WHERE conname LIKE '%\_0020\_range' LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.t, r.conname);
    END LOOP;
END
$$;";

/// What is left of the file once [`prepare`] ran: the rest of it, with the
/// steps' trigger and constraints dropped in its transaction.
fn left_to_run() -> String {
    let all = migrations::postgres();
    let file = migrations::sql_of(&all, TIME_PARTITIONS);
    let rest = &file[file
        .find(LEFT_FROM)
        .expect("migration 0020 opens its periods")..];
    format!("{BEFORE}\n{rest}\n{AFTER}")
}

/// Fills `message_keys` from `messages`, [`CHUNK`] messages per statement.
async fn fill_keys(conn: &mut PoolConnection<Postgres>) -> StoreResult<()> {
    let mut from = 0i64;
    loop {
        let to: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(id) FROM (SELECT id FROM messages WHERE id >= $1 ORDER BY id LIMIT $2) chunk",
        )
        .bind(from)
        .bind(CHUNK)
        .fetch_one(&mut **conn)
        .await?;
        let Some(to) = to else {
            return Ok(());
        };
        sqlx::query(
            "INSERT INTO message_keys (biz_id, message_key, message_id) \
             SELECT biz_id, message_key, id FROM messages WHERE id >= $1 AND id <= $2 \
             ON CONFLICT DO NOTHING",
        )
        .bind(from)
        .bind(to)
        .execute(&mut **conn)
        .await?;
        from = to + 1;
    }
}

async fn exec(conn: &mut PoolConnection<Postgres>, sql: &str) -> StoreResult<()> {
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut **conn)
        .await?;
    Ok(())
}
