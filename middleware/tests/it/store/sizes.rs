//! The large tables' sizes (`HousekeepingStore::storage`, for `/metrics`
//! and the console): read from the catalog, they count the rows the store
//! wrote and their bytes, the oldest message is the first one stored, and
//! a table partitioned by time is the sum of its partitions.

use std::time::{Duration, Instant};

use trustmsg::store::{Storage, TableSize};

use super::harness::{prepare, Backend, Due, SHARDS};

/// The catalog's figures trail the writes (PostgreSQL publishes its
/// statistics within a second or two): reads until `done` holds, at most 30 s.
async fn storage_until(b: &Backend, what: &str, done: impl Fn(&Storage) -> bool) -> Storage {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = b.storage().await.unwrap();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what} never came: {s:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn table<'a>(s: &'a Storage, name: &str) -> Option<&'a TableSize> {
    s.tables.iter().find(|t| t.table == name)
}

fn rows(s: &Storage, name: &str) -> u64 {
    table(s, name).map_or(0, |t| t.rows)
}

pub(crate) async fn the_tables_sizes_count_the_rows_written_and_the_oldest_message_is_the_first(
    b: &Backend,
) {
    let empty = b.storage().await.unwrap();
    assert_eq!(empty.oldest_message_at, None, "{empty:?}");
    let names: Vec<&str> = empty.tables.iter().map(|t| t.table.as_str()).collect();
    for name in ["messages", "audit_log", "check_attempts", "alerts"] {
        assert_eq!(
            names.iter().filter(|n| **n == name).count(),
            1,
            "{name} listed once: {names:?}"
        );
    }
    assert_eq!(names[0], "messages", "in the order of the large tables");

    let first = prepare(b.as_ref(), "size-0", Due::Later).await;
    for i in 1..40 {
        prepare(b.as_ref(), &format!("size-{i}"), Due::Later).await;
    }
    let s = storage_until(b, "40 message rows", |s| rows(s, "messages") >= 40).await;
    let messages = table(&s, "messages").unwrap();
    // An estimate, not a count, but InnoDB and PostgreSQL count inserts as
    // they go: nowhere near double.
    assert!(messages.rows < 80, "{s:?}");
    assert!(messages.bytes > 0, "{s:?}");
    assert!(
        messages.bytes > table(&empty, "messages").unwrap().bytes || b.kind() != "sqlite",
        "SQLite's pages are counted exactly: 40 rows take more than none: {s:?} {empty:?}"
    );
    assert_eq!(s.oldest_message_at, Some(first.created_at), "{s:?}");
    assert!(s.at >= first.created_at, "{s:?}");
}

/// A table partitioned as MySQL/MariaDB (RANGE COLUMNS) and PostgreSQL
/// (declarative) do it, two partitions of 100 rows: its rows and bytes
/// are both partitions', not one's nor the (empty) parent's. Made here as
/// `message_keys` while the store makes no such table; once its migrations
/// make one, the first test above reads the store's own partitioned tables.
pub(crate) async fn a_partitioned_tables_size_is_the_sum_of_its_partitions(b: &Backend) {
    if table(&b.storage().await.unwrap(), "message_keys").is_some() {
        eprintln!("message_keys is the store's own now: the first test reads it");
        return;
    }
    let statements: &[&str] = match b.kind() {
        "postgres" => &[
            "CREATE TABLE message_keys (id BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL, pad TEXT) \
             PARTITION BY RANGE (at)",
            "CREATE TABLE message_keys_p1 PARTITION OF message_keys \
             FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')",
            "CREATE TABLE message_keys_p2 PARTITION OF message_keys \
             FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')",
            "INSERT INTO message_keys SELECT i, TIMESTAMPTZ '2026-01-10' + (i / 100) * INTERVAL '31 days', \
             repeat('x', 200) FROM generate_series(0, 199) AS i",
        ],
        _ => &[
            "CREATE TABLE message_keys (id BIGINT NOT NULL, at DATETIME NOT NULL, pad VARCHAR(255), \
             PRIMARY KEY (id, at)) PARTITION BY RANGE COLUMNS (at) (\
             PARTITION p1 VALUES LESS THAN ('2026-02-01'), PARTITION p2 VALUES LESS THAN ('2026-03-01'))",
            "INSERT INTO message_keys WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n \
             WHERE i < 199) SELECT i, '2026-01-10' + INTERVAL (i DIV 100) * 31 DAY, REPEAT('x', 200) FROM n",
        ],
    };
    for sql in statements {
        b.raw_statement(sql).await;
    }
    // The shards' tables are summed too: each shard made its own.
    let copies = if b.kind() == "sharded" {
        SHARDS as u64
    } else {
        1
    };
    let s = storage_until(b, "both partitions' rows", |s| {
        rows(s, "message_keys") >= 200 * copies
    })
    .await;
    let keys = table(&s, "message_keys").unwrap();
    assert!(keys.rows < 400 * copies, "{s:?}");
    // Each partition has pages of its own (InnoDB: at least one 16 KiB page
    // each; PostgreSQL: 8 KiB pages of heap and index each).
    assert!(keys.bytes >= 2 * 16384 * copies, "{s:?}");
}
