//! Time partitions (issue 60) on the partitioned stores, MariaDB (one
//! database and shards) and PostgreSQL: the ids move to the next period's
//! partition and every message keeps working across the boundary; a
//! prepare stays idempotent across it; a partition past retention goes
//! whole with its children and keys, unless a message an operator may still
//! act on holds it; an interrupted drop is finished; two instances keep the
//! partitions together.

use std::time::Duration;

use trustmsg::store::{CheckAttempt, Inserted, NewMessage, PartitionPlan, PARTITIONS_AHEAD};
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;
use crate::store::ledger::{group, sent};

/// Ids per period (`store::sql::partitions::PERIOD_BITS`).
const PERIOD_BITS: u32 = 32;

/// A shard's periods start at its floor; the period within the shard is
/// what moves.
fn period_in_shard(id: u64) -> u64 {
    (id >> PERIOD_BITS) & 0xFFFF
}

/// A round that moves the ids to the next period on every call, with
/// retention `retention`.
fn every_call(retention: Option<Duration>) -> PartitionPlan {
    PartitionPlan {
        period: Duration::from_millis(1),
        retention,
        ahead: PARTITIONS_AHEAD,
        archive: false,
    }
}

/// How many rows of `table` hang off message `id` (its `message_id`).
async fn rows_of(b: &Backend, table: &str, id: u64) -> i64 {
    b.raw_count(
        &format!("SELECT COUNT(*) FROM {table} WHERE message_id = ?"),
        id,
    )
    .await
}

pub(crate) async fn a_partition_boundary_is_crossed_with_messages_in_every_state(b: &Backend) {
    let s = b.store.as_ref();
    let mut before = Vec::new();
    for state in STATES {
        let key = format!("a-{state:?}");
        before.push((
            state,
            key.clone(),
            arrange_key(s, &key, state, Due::Later).await,
        ));
    }
    let round = s.keep_partitions(&every_call(None)).await.unwrap();
    assert!(round.partitioned && round.led, "{round:?}");
    assert!(round.opened.is_some(), "the ids moved on: {round:?}");
    let mut after = Vec::new();
    for state in STATES {
        let key = format!("b-{state:?}");
        after.push(arrange_key(s, &key, state, Due::Later).await);
    }
    for (_, _, m) in &before {
        if let Some(m) = m {
            assert_eq!(period_in_shard(m.id), 0, "{m:?}");
        }
    }
    for m in after.iter().flatten() {
        assert_eq!(
            period_in_shard(m.id),
            1,
            "new messages take the new period's ids"
        );
    }

    // Every message of the old period is as it was, and goes on.
    for (state, key, m) in &before {
        let Some(m) = m else { continue };
        let now = s.find_message_by_id(m.id).await.unwrap().unwrap();
        assert_eq!(
            (now.status, now.send_status),
            (m.status, m.send_status),
            "{state:?}"
        );
        assert_eq!(s.find_message(BIZ, key).await.unwrap().unwrap().id, m.id);
    }
    let committed = decided(decide_key(s, "a-Prepared", true, producer(), LATER).await);
    assert_eq!(committed.status, MessageStatus::Committed);
    assert_eq!(period_in_shard(committed.id), 0);

    // A prepare of an old period's key finds its message: the same id, so
    // the same answer (or, with other content, the 409 the API derives).
    for (state, key, m) in &before {
        let Some(m) = m else { continue };
        let again = s.insert_prepared(&new_message(key, LATER)).await.unwrap();
        let Inserted::Existing(found) = again else {
            panic!("{state:?}: a second message for {key}: {again:?}");
        };
        assert_eq!(found.id, m.id, "{state:?}");
        let mut other: NewMessage = new_message(key, LATER);
        other.payload = b"other content".to_vec();
        let Inserted::Existing(found) = s.insert_prepared(&other).await.unwrap() else {
            panic!("{state:?}: other content made a second message for {key}");
        };
        assert_ne!(
            found.content_digest.as_deref(),
            Some(other.digest().as_slice())
        );
    }
    // And a batch mixing both periods' keys creates only the new one.
    let batch = [
        new_message("a-Sent", LATER),
        new_message("b-Sent", LATER),
        new_message("c-new", LATER),
    ];
    let got = s.insert_prepared_batch(&batch).await.unwrap();
    assert!(matches!(got[0], Inserted::Existing(_)));
    assert!(matches!(got[1], Inserted::Existing(_)));
    assert!(matches!(got[2], Inserted::Created(_)));
}

pub(crate) async fn a_partition_held_by_a_waiting_message_keeps_it_and_goes_once_it_is_settled(
    b: &Backend,
) {
    let s = b.store.as_ref();
    let waiting = prepare(s, "held", Due::Later).await;
    let done = sent(s, "done", "orders").await;
    let window = Duration::from_millis(10);
    let round = age_partitions(s, window).await;
    assert!(!round.held.is_empty(), "{round:?}");
    assert_eq!(
        s.find_message_by_id(waiting.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        MessageStatus::Prepared,
        "a PREPARED message is never dropped"
    );
    // The finished message goes: with its partition, or row by row where
    // the waiting one holds the partition.
    purge_all(s, window).await;
    assert_eq!(s.find_message_by_id(done.id).await.unwrap(), None);
    assert_eq!(rows_of(b, "message_keys", done.id).await, 0);
    assert_eq!(rows_of(b, "audit_log", done.id).await, 0);
    // Its key is free again.
    assert!(matches!(
        s.insert_prepared(&new_message("done", LATER))
            .await
            .unwrap(),
        Inserted::Created(_)
    ));

    decided(decide_key(s, "held", false, producer(), LATER).await);
    tokio::time::sleep(window + Duration::from_millis(20)).await;
    let round = s.keep_partitions(&every_call(Some(window))).await.unwrap();
    assert!(round.held.is_empty(), "{round:?}");
    assert!(!round.dropped.is_empty(), "{round:?}");
    assert_eq!(s.find_message_by_id(waiting.id).await.unwrap(), None);
    assert_eq!(rows_of(b, "audit_log", waiting.id).await, 0);
    assert_eq!(rows_of(b, "message_keys", waiting.id).await, 0);
}

pub(crate) async fn a_dropped_partition_takes_the_rows_hanging_off_its_messages(b: &Backend) {
    let s = b.store.as_ref();
    let mut big = new_message("big", LATER);
    big.payload = vec![b'x'; 4096];
    s.insert_prepared(&big).await.unwrap();
    let m = decided(decide_key(s, "big", true, producer(), LATER).await);
    assert_eq!(rows_of(b, "message_payloads", m.id).await, 1, "kept apart");
    s.record_check_attempts(&[CheckAttempt {
        message_id: m.id,
        attempt: 1,
        duration_ms: 3,
        http_status: Some(200),
        outcome: "commit",
        error: None,
    }])
    .await
    .unwrap();
    let mark = trustmsg::store::SentMark {
        id: m.id,
        version: m.version,
        partition: 0,
        offset: 7,
        order: None,
    };
    assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
    let g = group(s, "billing", &["orders"], 5, 300_000).await;
    s.begin_consumption(&g, m.id).await.unwrap();
    s.finish_consumption(&g, m.id, true, None).await.unwrap();
    // (A producer's own decision writes no audit row on MySQL: the row
    // says it; what is there goes.)
    for table in ["check_attempts", "consumptions", "message_keys"] {
        assert!(rows_of(b, table, m.id).await > 0, "{table}");
    }

    let window = Duration::from_millis(10);
    let round = age_partitions(s, window).await;
    assert!(round.dropped.contains(&(m.id >> PERIOD_BITS)), "{round:?}");
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), None);
    for table in [
        "audit_log",
        "check_attempts",
        "consumptions",
        "message_payloads",
        "message_keys",
    ] {
        assert_eq!(rows_of(b, table, m.id).await, 0, "{table}");
    }
    let Inserted::Created(again) = s.insert_prepared(&big).await.unwrap() else {
        panic!("the key of a dropped message is free again");
    };
    assert!(again.id > m.id);

    // A key the upkeep has not deleted yet, of a message that has left:
    // a prepare of it creates the message, alone and in a batch.
    for key in ["stale-1", "stale-2"] {
        b.raw_execute(
            &format!(
                "INSERT INTO message_keys (biz_id, message_key, message_id) \
                 VALUES ('{BIZ}', '{key}', ?)"
            ),
            UNKNOWN_ID,
        )
        .await;
    }
    assert!(matches!(
        s.insert_prepared(&new_message("stale-1", LATER))
            .await
            .unwrap(),
        Inserted::Created(_)
    ));
    let batch = [new_message("fresh", LATER), new_message("stale-2", LATER)];
    let got = s.insert_prepared_batch(&batch).await.unwrap();
    assert!(
        got.iter().all(|i| matches!(i, Inserted::Created(_))),
        "{got:?}"
    );
}

pub(crate) async fn with_an_archive_a_partition_goes_only_once_it_is_archived(b: &Backend) {
    let s = b.store.as_ref();
    let m = sent(s, "archived", "orders").await;
    let window = Duration::from_millis(10);
    let plan = PartitionPlan {
        archive: true,
        ..every_call(Some(window))
    };
    s.keep_partitions(&every_call(None)).await.unwrap();
    // Past the second's slack the upkeep gives a change before an archive
    // began (`changed_since_archived`).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let round = s.keep_partitions(&plan).await.unwrap();
    let range = round
        .to_archive
        .iter()
        .find(|r| (r.from..r.to).contains(&m.id))
        .copied()
        .unwrap_or_else(|| panic!("its partition waits for the archive: {round:?}"));
    assert!(!round.dropped.contains(&range.period), "{round:?}");
    assert!(s.find_message_by_id(m.id).await.unwrap().is_some());
    // Half archived: still there.
    s.mark_archived(range.period, m.id).await.unwrap();
    let round = s.keep_partitions(&plan).await.unwrap();
    let left = round.to_archive.iter().find(|r| r.period == range.period);
    assert_eq!(left.map(|r| r.from), Some(m.id), "{round:?}");
    // Archived through its end, but a consumer began the message since
    // (a replay): its ledger row is not in the archive, so the partition
    // is archived again, from its start, before it goes.
    s.mark_archived(range.period, range.to).await.unwrap();
    let g = group(s, "replay", &["orders"], 5, 300_000).await;
    s.begin_consumption(&g, m.id).await.unwrap();
    let round = s.keep_partitions(&plan).await.unwrap();
    assert!(!round.dropped.contains(&range.period), "{round:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let round = s.keep_partitions(&plan).await.unwrap();
    let again = round.to_archive.iter().find(|r| r.period == range.period);
    assert_eq!(again.map(|r| r.from), Some(range.from), "{round:?}");
    assert!(s.find_message_by_id(m.id).await.unwrap().is_some());
    // Archived through its end with nothing changed since: dropped.
    s.mark_archived(range.period, range.to).await.unwrap();
    let round = s.keep_partitions(&plan).await.unwrap();
    assert!(round.dropped.contains(&range.period), "{round:?}");
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), None);
}

pub(crate) async fn a_drop_cut_off_between_two_tables_is_finished_by_the_next_round(b: &Backend) {
    let s = b.store.as_ref();
    let m = sent(s, "cut", "orders").await;
    let period = m.id >> PERIOD_BITS;
    s.keep_partitions(&every_call(None)).await.unwrap();
    // What a kill -9 after the first table's drop leaves behind.
    let drop_one = if b.is_postgres() {
        format!("DROP TABLE audit_log_p{period}")
    } else {
        format!("ALTER TABLE audit_log DROP PARTITION p{period}")
    };
    b.raw_ddl(&drop_one).await;
    assert_eq!(rows_of(b, "audit_log", m.id).await, 0);
    let window = Duration::from_millis(10);
    tokio::time::sleep(window + Duration::from_millis(20)).await;
    let round = s.keep_partitions(&every_call(Some(window))).await.unwrap();
    assert!(round.dropped.contains(&period), "{round:?}");
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), None);
    assert_eq!(rows_of(b, "message_keys", m.id).await, 0);
}

pub(crate) async fn two_instances_keep_the_partitions_together(b: &Backend) {
    let (one, two) = (b.store.clone(), b.another().await);
    let plan = every_call(None);
    let mut created = 0;
    for round in 0..6 {
        let (a, c) = tokio::join!(one.keep_partitions(&plan), two.keep_partitions(&plan));
        let (a, c) = (a.unwrap(), c.unwrap());
        assert!(a.led || c.led || round > 0, "someone leads the first round");
        for (i, s) in [&one, &two].into_iter().enumerate() {
            let key = format!("k-{round}-{i}");
            if let Inserted::Created(_) =
                s.insert_prepared(&new_message(&key, LATER)).await.unwrap()
            {
                created += 1;
            }
        }
    }
    assert_eq!(created, 12, "every prepare found a partition");
    let last = one.keep_partitions(&every_call(None)).await.unwrap();
    assert!(last.partitions >= 7, "{last:?}");
}

/// Not every store is partitioned: SQLite's upkeep says so and does
/// nothing, and retention deletes its rows.
pub(crate) async fn sqlite_is_not_partitioned(b: &Backend) {
    let s = b.store.as_ref();
    let round = s.keep_partitions(&every_call(Some(LATER))).await.unwrap();
    assert!(!round.partitioned);
    assert_eq!(round.partitions, 0);
}
