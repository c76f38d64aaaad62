//! Retention through the archive (`--archive`): every finished message is
//! written whole (payload byte for byte, audit trail, check-back calls,
//! ledger rows) and read back before it is deleted; nothing unfinished is
//! archived or deleted; an archive that fails deletes nothing and raises
//! one alert per episode. The archive here is a directory (`file://`); the
//! S3 one is the e2e test's (tests/e2e/archive.rs).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use trustmsg::archive::Archive;
use trustmsg::store::{
    AlertFilter, ArchiveRange, CheckAttempt, DynStore, FinishedRange, Inserted, Message,
    PartitionRound, SentMark,
};
use trustmsg::workers::retention::Retention;
use trustmsg_verify_api::admin::AlertKind;

use crate::store::harness::*;
use crate::store::ledger::group;

/// The window the tests run retention with: rows are past it after a
/// short sleep.
const WINDOW: Duration = Duration::from_millis(5);

fn archive_in(dir: &std::path::Path) -> Archive {
    Archive::open(&format!("file://{}", dir.display())).unwrap()
}

/// One round of retention through `archive`, past the window.
async fn round(s: &DynStore, archive: &Archive) {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Retention::new(
        Arc::clone(s),
        WINDOW,
        Some(archive.clone()),
        Duration::from_secs(10),
    )
    .round(&CancellationToken::new())
    .await;
}

/// A SENT message whose content is kept apart (9 KB of bytes that are not
/// UTF-8), with a recorded check-back call and a consumer group's ledger row.
async fn sent_with_everything(s: &DynStore) -> Message {
    let mut m = new_message("big", LATER);
    m.payload = (0..9000u32).map(|i| (i % 256) as u8).collect();
    let Inserted::Created(prepared) = s.insert_prepared(&m).await.unwrap() else {
        panic!("created")
    };
    s.record_check_attempts(&[CheckAttempt {
        message_id: prepared.id,
        attempt: 1,
        duration_ms: 12,
        http_status: Some(503),
        outcome: "failed",
        error: Some("busy".into()),
    }])
    .await
    .unwrap();
    let committed = decided(decide_key(s.as_ref(), "big", true, producer(), LATER).await);
    let mark = SentMark {
        id: committed.id,
        version: committed.version,
        partition: 2,
        offset: 77,
        order: None,
    };
    assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
    let group = group(s.as_ref(), "billing", &["orders"], 5, 300_000).await;
    s.begin_consumption(&group, committed.id).await.unwrap();
    s.finish_consumption(&group, committed.id, true, None)
        .await
        .unwrap();
    s.find_message_by_id(committed.id).await.unwrap().unwrap()
}

/// The rows message `id` has in each table retention deletes from.
async fn rows_of(b: &Backend, id: u64) -> Vec<i64> {
    let mut rows = Vec::new();
    for table in [
        "messages",
        "audit_log",
        "check_attempts",
        "consumptions",
        "message_payloads",
    ] {
        let column = if table == "messages" {
            "id"
        } else {
            "message_id"
        };
        rows.push(
            b.raw_count(
                &format!("SELECT COUNT(*) FROM {table} WHERE {column} = ?"),
                id,
            )
            .await,
        );
    }
    rows
}

pub(crate) async fn retention_archives_every_finished_message_whole_before_it_deletes_it(
    b: &Backend,
) {
    let s: &DynStore = b;
    let dir = tempfile::tempdir().unwrap();
    let archive = archive_in(dir.path());
    let every = arrange_every_state(s.as_ref()).await;
    let big = sent_with_everything(s).await;
    let big_detail = big.clone().detail(
        s.audit_trail(big.id).await.unwrap(),
        s.check_attempts(big.id).await.unwrap(),
        None,
        s.consumptions_of(big.id).await.unwrap(),
    );
    assert_eq!(
        rows_of(b, big.id).await,
        [1, 0, 1, 1, 1],
        "kept apart, with everything"
    );

    round(s, &archive).await;

    let found = archive.find_by_id(big.id).await.unwrap().expect("archived");
    let line = found.message;
    assert_eq!(line.payload().unwrap(), big.payload, "byte for byte");
    assert_eq!(line.version, big.version);
    assert_eq!(line.message, big.view());
    assert_eq!(
        line.detail(),
        big_detail,
        "what `admin messages show` showed"
    );
    assert_eq!(line.check_attempts.len(), 1);
    assert_eq!(line.consumptions.len(), 1);
    assert_eq!(
        rows_of(b, big.id).await,
        [0, 0, 0, 0, 0],
        "gone from every table"
    );
    let by_key = archive
        .find_by_key(BIZ, "big", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_key.message, line);

    for (state, before, _) in every {
        let Some(m) = before else { continue };
        let finished = matches!(state, State::Sent | State::RolledBack | State::Tombstone);
        let archived = archive.find_by_id(m.id).await.unwrap();
        let now = s.find_message_by_id(m.id).await.unwrap();
        if finished {
            let line = archived
                .unwrap_or_else(|| panic!("{state:?} archived"))
                .message;
            assert_eq!(line.message, m.view(), "{state:?}");
            assert_eq!(line.payload().unwrap(), m.payload, "{state:?}");
            assert!(!line.audit.is_empty(), "{state:?} keeps its audit trail");
            assert_eq!(now, None, "{state:?} deleted");
        } else {
            assert!(archived.is_none(), "{state:?} is not archived");
            assert_eq!(
                now.map(|n| n.version),
                Some(m.version),
                "{state:?} untouched"
            );
        }
    }

    // A second round finds nothing more: no new object, nothing deleted.
    let objects = archive.objects().await.unwrap();
    round(s, &archive).await;
    assert_eq!(archive.objects().await.unwrap(), objects);
    let lines: usize = {
        let mut n = 0;
        for (path, _) in &objects {
            n += archive.lines(path).await.unwrap().len();
        }
        n
    };
    assert_eq!(
        lines, 4,
        "each finished message once: SENT, ROLLED_BACK, tombstone, big"
    );
}

/// The `archive_failed` alerts raised so far.
async fn archive_alerts(s: &DynStore) -> Vec<u64> {
    s.list_alerts(AlertFilter::default(), 100, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == AlertKind::ArchiveFailed)
        .map(|a| a.message_id)
        .collect()
}

pub(crate) async fn an_archive_that_fails_deletes_nothing_and_alerts_once_per_episode(b: &Backend) {
    let s: &DynStore = b;
    let dir = tempfile::tempdir().unwrap();
    let archive = archive_in(dir.path());
    // A file where the archive's folder must go: every write fails (a
    // read-only directory would not stop root).
    let blocker = dir.path().join("trustmsg");
    std::fs::write(&blocker, b"in the way").unwrap();
    let first = arrange_key(s.as_ref(), "a", State::Sent, Due::Later)
        .await
        .unwrap();
    arrange_key(s.as_ref(), "b", State::RolledBack, Due::Later).await;

    let r = Retention::new(
        Arc::clone(s),
        WINDOW,
        Some(archive.clone()),
        Duration::from_secs(10),
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
    for _ in 0..3 {
        r.round(&CancellationToken::new()).await;
    }
    assert!(
        s.find_message_by_id(first.id).await.unwrap().is_some(),
        "held"
    );
    assert!(s.find_message(BIZ, "b").await.unwrap().is_some(), "held");
    assert_eq!(
        archive_alerts(s).await,
        [first.id],
        "one alert for three failed rounds"
    );

    // Fixed: the next round archives and deletes.
    std::fs::remove_file(&blocker).unwrap();
    r.round(&CancellationToken::new()).await;
    assert_eq!(s.find_message_by_id(first.id).await.unwrap(), None);
    assert!(archive.find_by_id(first.id).await.unwrap().is_some());

    // Broken again after that success: a new episode, a new alert.
    std::fs::remove_dir_all(&blocker).unwrap();
    std::fs::write(&blocker, b"in the way").unwrap();
    let later = arrange_key(s.as_ref(), "c", State::Sent, Due::Later)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    for _ in 0..2 {
        r.round(&CancellationToken::new()).await;
    }
    assert!(s.find_message_by_id(later.id).await.unwrap().is_some());
    assert_eq!(archive_alerts(s).await.len(), 2);
}

pub(crate) async fn a_message_that_changed_after_it_was_archived_stays_until_archived_again(
    b: &Backend,
) {
    let s: &DynStore = b;
    let dir = tempfile::tempdir().unwrap();
    let archive = archive_in(dir.path());
    let kept = arrange_key(s.as_ref(), "kept", State::Sent, Due::Later)
        .await
        .unwrap();
    let other = arrange_key(s.as_ref(), "other", State::RolledBack, Due::Later)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let range = FinishedRange {
        ids: FinishedRange::ALL_IDS,
        older_than: WINDOW,
        limit: 100,
        max_payload_bytes: 1 << 20,
    };
    let (batch, written) = archive
        .archive_next(s.as_ref(), &range)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(written.messages, 2);
    // A consumer group begins the SENT message after it was archived: its
    // ledger is no longer what the archive holds.
    let group = group(s.as_ref(), "late", &["orders"], 5, 300_000).await;
    s.begin_consumption(&group, kept.id).await.unwrap();
    assert_eq!(
        s.delete_archived(&batch).await.unwrap(),
        1,
        "only the unchanged one"
    );
    assert!(s.find_message_by_id(kept.id).await.unwrap().is_some());
    assert_eq!(s.find_message_by_id(other.id).await.unwrap(), None);

    // The next round archives it as it now is, and deletes it.
    round(s, &archive).await;
    assert_eq!(s.find_message_by_id(kept.id).await.unwrap(), None);
    let found = archive.find_by_id(kept.id).await.unwrap().unwrap();
    assert_eq!(
        found.message.consumptions.len(),
        1,
        "the later copy is found"
    );
    // A range that names no finished message archives nothing.
    let empty = FinishedRange {
        ids: 0..kept.id,
        ..range
    };
    assert!(archive
        .archive_next(s.as_ref(), &empty)
        .await
        .unwrap()
        .is_none());
}

pub(crate) async fn a_partition_is_archived_whole_and_marked_without_deleting_a_row(b: &Backend) {
    let s: &DynStore = b;
    let dir = tempfile::tempdir().unwrap();
    let archive = archive_in(dir.path());
    let sent = arrange_key(s.as_ref(), "s", State::Sent, Due::Later)
        .await
        .unwrap();
    let rolled = arrange_key(s.as_ref(), "r", State::RolledBack, Due::Later)
        .await
        .unwrap();
    // What the upkeep hands over for a partition past retention: period 0,
    // none of it archived yet (ids from 0 to the next period's first).
    let period = trustmsg::store::period_ids(0);
    let round = PartitionRound {
        partitioned: true,
        to_archive: vec![ArchiveRange {
            period: 0,
            from: 0,
            to: period.end,
        }],
        ..PartitionRound::default()
    };
    Retention::new(
        Arc::clone(s),
        Duration::from_secs(3600),
        Some(archive.clone()),
        Duration::from_secs(10),
    )
    .after_upkeep(Some(&round), &CancellationToken::new())
    .await;
    for m in [&sent, &rolled] {
        assert!(
            archive.find_by_id(m.id).await.unwrap().is_some(),
            "archived, however recent"
        );
        assert!(
            s.find_message_by_id(m.id).await.unwrap().is_some(),
            "the drop deletes, not this"
        );
    }
    assert_eq!(
        b.raw_count(
            "SELECT COUNT(*) FROM message_partitions WHERE period = 0 AND archived_through = ?",
            period.end,
        )
        .await,
        1,
        "the upkeep may drop it now"
    );
}
