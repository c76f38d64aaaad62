//! The barrier's and the inbox's statements, one implementation of
//! [`sealed::Database`] per database.
//!
//! Both rely on one behaviour of the unique key, which each database has:
//! an INSERT of a key that another open transaction has inserted waits for
//! that transaction, then fails (or does nothing) if it committed, and goes
//! in if it rolled back. MySQL spells "do nothing" `ON DUPLICATE KEY UPDATE
//! op = op` (not `INSERT IGNORE`, which would also store a too-long key
//! truncated) and `INSERT IGNORE` for the inbox; PostgreSQL `ON CONFLICT DO
//! NOTHING`. On PostgreSQL a failed statement would abort the caller's
//! transaction, so the local transaction's INSERT never fails on the key:
//! it does nothing, and the marker already there is read.
//!
//! After the wait, the marker is read by a statement of its own: on
//! PostgreSQL a statement sees what was committed when it began, so the
//! INSERT that waited cannot itself return the marker another transaction
//! committed meanwhile; the next statement (READ COMMITTED) sees it.

use sqlx::{MySql, MySqlConnection, PgConnection, Pool, Postgres};

use super::{sealed, BoxFuture, EXACT_KEYS_MIGRATION, MIGRATION};

impl sealed::Database for MySql {
    fn create_barrier(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
        Box::pin(async move {
            sqlx::raw_sql(MIGRATION).execute(pool).await?;
            let padded_keys: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'trustmsg_barrier' \
                 AND COLUMN_NAME IN ('biz_id', 'message_key') AND DATA_TYPE <> 'varbinary'",
            )
            .fetch_one(pool)
            .await?;
            if padded_keys > 0 {
                sqlx::raw_sql(EXACT_KEYS_MIGRATION).execute(pool).await?;
            }
            Ok(())
        })
    }

    fn insert_commit<'c>(
        conn: &'c mut MySqlConnection,
        biz_id: &'c str,
        message_key: &'c str,
    ) -> BoxFuture<'c, Result<Option<Vec<u8>>, sqlx::Error>> {
        Box::pin(async move {
            let inserted = sqlx::query(
                "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'commit')",
            )
            .bind(biz_id)
            .bind(message_key)
            .execute(&mut *conn)
            .await;
            match inserted {
                Ok(_) => Ok(None),
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    // A failed statement leaves the transaction usable. A
                    // locking read sees the latest committed marker, not this
                    // transaction's snapshot.
                    let op: Vec<u8> = sqlx::query_scalar(
                        "SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ? \
                         LOCK IN SHARE MODE",
                    )
                    .bind(biz_id)
                    .bind(message_key)
                    .fetch_one(&mut *conn)
                    .await?;
                    Ok(Some(op))
                }
                Err(e) => Err(e),
            }
        })
    }

    fn check<'c>(
        conn: &'c mut MySqlConnection,
        biz_id: &'c str,
        message_key: &'c str,
    ) -> BoxFuture<'c, Result<Vec<u8>, sqlx::Error>> {
        Box::pin(async move {
            sqlx::query(
                "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (?, ?, 'rollback') \
                 ON DUPLICATE KEY UPDATE op = op",
            )
            .bind(biz_id)
            .bind(message_key)
            .execute(&mut *conn)
            .await?;
            // Read as bytes: with a `_bin` collation MariaDB reports the
            // column as binary.
            sqlx::query_scalar(
                "SELECT op FROM trustmsg_barrier WHERE biz_id = ? AND message_key = ?",
            )
            .bind(biz_id)
            .bind(message_key)
            .fetch_one(&mut *conn)
            .await
        })
    }

    fn purge_batch(pool: &Pool<Self>, micros: i64) -> BoxFuture<'_, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            // A cut-off before any date is NULL, which matches nothing.
            Ok(sqlx::query(
                "DELETE FROM trustmsg_barrier \
                 WHERE created_at < CURRENT_TIMESTAMP(3) - INTERVAL ? MICROSECOND LIMIT 1000",
            )
            .bind(micros)
            .execute(pool)
            .await?
            .rows_affected())
        })
    }

    fn create_inbox(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
        Box::pin(async move {
            sqlx::raw_sql(crate::inbox::MIGRATION)
                .execute(pool)
                .await
                .map(drop)
        })
    }

    fn insert_inbox<'c>(
        conn: &'c mut MySqlConnection,
        group: &'c str,
        message_id: u64,
    ) -> BoxFuture<'c, Result<bool, sqlx::Error>> {
        Box::pin(async move {
            let done = sqlx::query(
                "INSERT IGNORE INTO trustmsg_inbox (consumer_group, message_id) VALUES (?, ?)",
            )
            .bind(group.as_bytes())
            .bind(message_id)
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }
}

impl sealed::Database for Postgres {
    fn create_barrier(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
        Box::pin(async move { create_locked(pool, super::postgres_parts().0).await })
    }

    fn insert_commit<'c>(
        conn: &'c mut PgConnection,
        biz_id: &'c str,
        message_key: &'c str,
    ) -> BoxFuture<'c, Result<Option<Vec<u8>>, sqlx::Error>> {
        Box::pin(async move {
            let inserted = sqlx::query(
                "INSERT INTO trustmsg_barrier (biz_id, message_key, op) \
                 VALUES ($1, $2, 'commit') ON CONFLICT (biz_id, message_key) DO NOTHING",
            )
            .bind(biz_id)
            .bind(message_key)
            .execute(&mut *conn)
            .await?;
            if inserted.rows_affected() == 1 {
                return Ok(None);
            }
            // READ COMMITTED (PostgreSQL's default): this statement's
            // snapshot has the marker that made the INSERT do nothing.
            let op: String = sqlx::query_scalar(
                "SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2 \
                 FOR SHARE",
            )
            .bind(biz_id)
            .bind(message_key)
            .fetch_one(&mut *conn)
            .await?;
            Ok(Some(op.into_bytes()))
        })
    }

    fn check<'c>(
        conn: &'c mut PgConnection,
        biz_id: &'c str,
        message_key: &'c str,
    ) -> BoxFuture<'c, Result<Vec<u8>, sqlx::Error>> {
        Box::pin(async move {
            // The marker it inserted, or nothing when one was there (after
            // waiting for the transaction that held it).
            let inserted: Option<String> = sqlx::query_scalar(
                "INSERT INTO trustmsg_barrier (biz_id, message_key, op) \
                 VALUES ($1, $2, 'rollback') ON CONFLICT (biz_id, message_key) DO NOTHING \
                 RETURNING op",
            )
            .bind(biz_id)
            .bind(message_key)
            .fetch_optional(&mut *conn)
            .await?;
            if let Some(op) = inserted {
                return Ok(op.into_bytes());
            }
            let op: String = sqlx::query_scalar(
                "SELECT op FROM trustmsg_barrier WHERE biz_id = $1 AND message_key = $2",
            )
            .bind(biz_id)
            .bind(message_key)
            .fetch_one(&mut *conn)
            .await?;
            Ok(op.into_bytes())
        })
    }

    fn purge_batch(pool: &Pool<Self>, micros: i64) -> BoxFuture<'_, Result<u64, sqlx::Error>> {
        Box::pin(async move {
            // No DELETE … LIMIT: the batch is chosen by the index on
            // created_at, by the rows' physical ids.
            Ok(sqlx::query(
                "DELETE FROM trustmsg_barrier WHERE ctid = ANY(ARRAY(\
                 SELECT ctid FROM trustmsg_barrier \
                 WHERE created_at < now() - $1::float8 * interval '1 microsecond' LIMIT 1000))",
            )
            .bind(micros)
            .execute(pool)
            .await?
            .rows_affected())
        })
    }

    fn create_inbox(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
        Box::pin(async move { create_locked(pool, super::postgres_parts().1).await })
    }

    fn insert_inbox<'c>(
        conn: &'c mut PgConnection,
        group: &'c str,
        message_id: u64,
    ) -> BoxFuture<'c, Result<bool, sqlx::Error>> {
        Box::pin(async move {
            // The kit's column is NUMERIC(20, 0): every u64, bound as its
            // decimal text (sqlx has no unsigned 64-bit encoding for PostgreSQL).
            let done = sqlx::query(
                "INSERT INTO trustmsg_inbox (consumer_group, message_id) VALUES ($1, $2::numeric) \
                 ON CONFLICT (consumer_group, message_id) DO NOTHING",
            )
            .bind(group)
            .bind(message_id.to_string())
            .execute(&mut *conn)
            .await?;
            Ok(done.rows_affected() == 1)
        })
    }
}

/// Runs a PostgreSQL schema script behind [`crate::DDL_LOCK`]: one simple
/// query is one transaction, so the lock holds while the tables are made.
async fn create_locked(pool: &Pool<Postgres>, script: &str) -> Result<(), sqlx::Error> {
    let script = format!("{};\n{script}", crate::DDL_LOCK);
    sqlx::raw_sql(sqlx::AssertSqlSafe(script))
        .execute(pool)
        .await
        .map(drop)
}
