//! The large tables' sizes (`HousekeepingStore::storage`, for `/metrics`
//! and the console): read from the catalog, they count the rows the store
//! wrote and their bytes, the oldest message is the first one stored, and
//! a table partitioned by time is the sum of its partitions.

use std::time::{Duration, Instant};

use trustmsg::store::{PartitionPlan, Storage, TableSize, PARTITIONS_AHEAD};

use super::harness::{prepare, Backend, Due};

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

/// The store's own partitioned tables (MariaDB's RANGE partitions,
/// PostgreSQL's declarative ones, whose parent holds no rows): 100 messages
/// in one period's partition and 100 in the next, and the sizes count both
/// partitions' rows (on the shards, each shard's), `message_keys` too, and
/// the oldest message is the older partition's first.
pub(crate) async fn a_partitioned_tables_size_is_the_sum_of_its_partitions(b: &Backend) {
    let s = b.store.as_ref();
    let first = prepare(s, "old-0", Due::Later).await;
    for i in 1..100 {
        prepare(s, &format!("old-{i}"), Due::Later).await;
    }
    let moved = PartitionPlan {
        period: Duration::from_millis(1),
        retention: None,
        ahead: PARTITIONS_AHEAD,
        archive: false,
    };
    let round = s.keep_partitions(&moved).await.unwrap();
    assert!(round.partitioned && round.opened.is_some(), "{round:?}");
    let next = prepare(s, "new-0", Due::Later).await;
    // A shard's periods start at its floor: the period within it moves.
    let period = |id: u64| (id >> 32) & 0xFFFF;
    assert!(
        period(next.id) > period(first.id),
        "the next period: {} then {}",
        first.id,
        next.id
    );
    for i in 1..100 {
        prepare(s, &format!("new-{i}"), Due::Later).await;
    }
    let st = storage_until(b, "both partitions' rows", |st| {
        rows(st, "messages") >= 200 && rows(st, "message_keys") >= 200
    })
    .await;
    assert!(rows(&st, "messages") < 400, "{st:?}");
    // Each partition has pages of its own (InnoDB: 16 KiB at least;
    // PostgreSQL: 8 KiB pages of heap and of each index).
    assert!(table(&st, "messages").unwrap().bytes >= 2 * 16384, "{st:?}");
    assert_eq!(st.oldest_message_at, Some(first.created_at), "{st:?}");
    // The oldest partition began before the first message (on the shards,
    // a shard's first, empty, from before its ids moved to its floor), and
    // it has ended.
    let oldest = st.oldest_partition.expect("partitioned");
    assert!(oldest.from <= first.created_at, "{st:?}");
    assert!(oldest.to.is_some_and(|to| to > oldest.from), "{st:?}");
}
