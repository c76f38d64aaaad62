//! SQLite only: how the embedded store is opened.

use trustmsg::store;
use trustmsg::store::prelude::*;
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

#[tokio::test]
async fn sqlite_in_memory_url_keeps_one_database_for_the_life_of_the_store() {
    let s = store::connect(&"sqlite::memory:".parse().unwrap())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    let m = prepare(s.as_ref(), "in-memory", Due::Later).await;
    // Concurrent calls must all see the same (single-connection) database.
    let (a, b) = tokio::join!(s.find_message_by_id(m.id), s.find_message(BIZ, "in-memory"));
    assert_eq!(a.unwrap(), Some(m.clone()));
    assert_eq!(b.unwrap(), Some(m.clone()));
    let t = decided(decide_key(s.as_ref(), "in-memory", false, producer(), LATER).await);
    assert_eq!(t.status, MessageStatus::RolledBack);
}

#[tokio::test]
async fn sqlite_file_is_created_when_missing_and_runs_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    assert!(!path.exists());
    let url = format!("sqlite://{}", path.display());
    let s = trustmsg::store::sqlite::SqliteStore::connect(&url.parse().unwrap())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    assert!(path.exists(), "connect must create the database file");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert!(busy >= 1_000, "busy_timeout is {busy} ms");
    // And the schema is really there: a second connect sees the same rows.
    prepare(&s, "persisted", Due::Later).await;
    s.pool().close().await;
    let again = store::connect(&url.parse().unwrap()).await.unwrap();
    again.migrate().await.unwrap();
    assert!(again
        .find_message(BIZ, "persisted")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn sqlite_due_scans_use_their_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("plan.db").display());
    let s = trustmsg::store::sqlite::SqliteStore::connect(&url.parse().unwrap())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    for (column, index) in [
        ("next_send_at", "idx_messages_send_due"),
        ("next_verify_at", "idx_messages_verify_due"),
    ] {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE {column} <= 0 ORDER BY {column} LIMIT 10"
        )))
        .fetch_all(s.pool())
        .await
        .unwrap();
        let details: Vec<String> = rows
            .iter()
            .map(|r| sqlx::Row::get::<String, _>(r, "detail"))
            .collect();
        assert!(
            details.iter().any(|d| d.contains(index)),
            "{column} scan does not use {index}: {details:?}"
        );
    }
}
