//! Where a message's content is kept (issue 42, migration 0018): a content
//! longer than 2 KiB (payload plus headers) in `message_payloads`, written
//! with its row, so that no state change reads it; a shorter one in its
//! row. Every read that returns a message returns its content whole
//! wherever it is, retention deletes it with its message, and the move
//! takes the long contents of rows written before the migration out of
//! their rows.

use std::collections::BTreeMap;
use std::time::Duration;

use trustmsg::store::{
    Inserted, Message, MessageFilter, NewMessage, PayloadMove, PayloadRoom, SentMark,
};

use crate::store::harness::*;

/// A message of `key` whose payload is `len` bytes that no other key's
/// payload has, with two headers.
fn sized(key: &str, len: usize) -> NewMessage {
    let mut m = new_message(key, LATER);
    m.payload = key.bytes().cycle().take(len).collect();
    m.headers = BTreeMap::from([
        (
            "content-type".to_string(),
            "application/octet-stream".to_string(),
        ),
        ("trace".to_string(), format!("of {key}")),
    ]);
    m
}

fn created(i: Inserted) -> Message {
    match i {
        Inserted::Created(m) => m,
        other => panic!("expected a created row, got {other:?}"),
    }
}

/// Whether row `id`'s content is apart (1) or in the row (0), the bytes of
/// payload the row itself holds, and whether `message_payloads` has a row.
async fn layout(b: &Backend, id: u64) -> (i64, i64, i64) {
    (
        b.raw_count("SELECT payload_apart FROM messages WHERE id = ?", id)
            .await,
        b.raw_count("SELECT LENGTH(payload) FROM messages WHERE id = ?", id)
            .await,
        b.raw_count(
            "SELECT COUNT(*) FROM message_payloads WHERE message_id = ?",
            id,
        )
        .await,
    )
}

fn assert_content(m: &Message, of: &NewMessage, what: &str) {
    assert_eq!(
        m.payload, of.payload,
        "{what}: payload of {}",
        of.message_key
    );
    assert_eq!(
        m.headers, of.headers,
        "{what}: headers of {}",
        of.message_key
    );
}

pub(crate) async fn a_long_content_is_kept_apart_and_every_read_finds_it_whole(b: &Backend) {
    let s = b.store.as_ref();
    let long = sized("long", 5000);
    let short = sized("short", 256);
    // A payload short enough for the row whose headers make the content too long.
    let mut headed = sized("headed", 100);
    headed.headers.insert("big".into(), "h".repeat(3000));
    let alone = created(s.insert_prepared(&long).await.unwrap());
    assert_content(&alone, &long, "prepare");
    let batch = [short.clone(), headed.clone(), sized("batch-long", 70_000)];
    let rows: Vec<Message> = s
        .insert_prepared_batch(&batch)
        .await
        .unwrap()
        .into_iter()
        .map(created)
        .collect();
    for (m, of) in rows.iter().zip(&batch) {
        assert_content(m, of, "batched prepare");
    }
    let all: Vec<(&Message, &NewMessage)> = std::iter::once((&alone, &long))
        .chain(rows.iter().zip(&batch))
        .collect();
    for (m, of) in &all {
        let apart = of.message_key != "short";
        let expected = if apart { (1, 0, 1) } else { (0, 256, 0) };
        assert_eq!(layout(b, m.id).await, expected, "{}", of.message_key);
        let by_id = s.find_message_by_id(m.id).await.unwrap().unwrap();
        assert_content(&by_id, of, "find by id");
        let by_key = s.find_message(BIZ, &of.message_key).await.unwrap().unwrap();
        assert_content(&by_key, of, "find by key");
    }
    let keys: Vec<(&str, &str)> = all
        .iter()
        .map(|(_, of)| (BIZ, of.message_key.as_str()))
        .collect();
    for m in s.find_messages(&keys).await.unwrap() {
        let of = all
            .iter()
            .find(|(_, of)| of.message_key == m.message_key)
            .unwrap()
            .1;
        assert_content(&m, of, "find many");
    }
    // A prepare again of a long content finds the row with its content.
    match s.insert_prepared(&long).await.unwrap() {
        Inserted::Existing(m) => assert_content(&m, &long, "prepare again"),
        other => panic!("{other:?}"),
    }

    // Committed (due at once): the commit hands its row, content and all,
    // to the forwarder; a claim reads it, whether it reads the lengths
    // first (a small room) or not.
    for (_, of) in &all {
        let m = decided(decide_key(s, &of.message_key, true, producer(), Duration::ZERO).await);
        assert_content(&m, of, "commit");
    }
    let claimed = s
        .claim_due_sends(10, ROOM, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(claimed.messages.len(), 4, "{:?}", claimed.quarantined);
    for m in &claimed.messages {
        let of = all
            .iter()
            .find(|(_, of)| of.message_key == m.message_key)
            .unwrap()
            .1;
        assert_content(m, of, "unsized claim");
    }
    let claims: Vec<(u64, u64)> = claimed.messages.iter().map(|m| (m.id, m.version)).collect();
    assert_eq!(s.release_sends(&claims).await.unwrap(), 4);
    let room = PayloadRoom {
        bytes: 1 << 20,
        unknown: 1 << 20,
    };
    let sized_claim = claim_eventually(async || {
        s.claim_due_sends(10, room, Duration::from_secs(30))
            .await
            .unwrap()
    })
    .await;
    assert_eq!(sized_claim.messages.len(), 4);
    for m in &sized_claim.messages {
        let of = all
            .iter()
            .find(|(_, of)| of.message_key == m.message_key)
            .unwrap()
            .1;
        assert_content(m, of, "claim sized by the payloads' lengths");
    }

    // The operators' list reads no content but knows each one's size.
    let listed = s
        .list_messages(&MessageFilter::default(), 50, None)
        .await
        .unwrap();
    for (m, of) in &all {
        let view = listed.iter().find(|v| v.id == m.id).unwrap();
        assert_eq!(
            view.payload_size,
            of.payload.len() as u64,
            "{}",
            of.message_key
        );
    }

    // SENT, then deleted by retention with their contents.
    let marks: Vec<SentMark> = sized_claim
        .messages
        .iter()
        .map(|m| SentMark {
            id: m.id,
            version: m.version,
            partition: 0,
            offset: m.id as i64,
            order: None,
        })
        .collect();
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 4);
    // Row by row, or with their partition.
    let window = Duration::from_millis(5);
    age_partitions(s, window).await;
    purge_all(s, window).await;
    for m in &sized_claim.messages {
        assert_eq!(s.find_message_by_id(m.id).await.unwrap(), None);
    }
    assert_eq!(
        b.raw_count(
            "SELECT COUNT(*) FROM message_payloads WHERE message_id > ?",
            0
        )
        .await,
        0,
        "retention leaves no content behind"
    );
}

/// Makes row `id` look written before migration 0018: its content back in
/// the row, its length unrecorded, nothing in `message_payloads`.
async fn as_before_the_migration(b: &Backend, id: u64) {
    b.raw_execute(
        "UPDATE messages SET \
         payload = COALESCE((SELECT p.payload FROM message_payloads p WHERE p.message_id = messages.id), payload), \
         headers = COALESCE((SELECT p.headers FROM message_payloads p WHERE p.message_id = messages.id), headers), \
         payload_apart = FALSE, payload_bytes = NULL WHERE id = ?",
        id,
    )
    .await;
    b.raw_execute("DELETE FROM message_payloads WHERE message_id = ?", id)
        .await;
}

pub(crate) async fn the_move_takes_long_contents_out_of_older_rows_and_then_ends(b: &Backend) {
    let s = b.store.as_ref();
    // A fresh database has nothing to move: the first call ends the walk.
    let first = s.move_payloads(100).await.unwrap();
    assert!(first.finished, "{first:?}");
    let older: Vec<NewMessage> = (0..5)
        .map(|i| sized(&format!("older-{i}"), if i % 2 == 0 { 9000 } else { 300 }))
        .collect();
    let mut rows = Vec::new();
    for of in &older {
        let m = created(s.insert_prepared(of).await.unwrap());
        as_before_the_migration(b, m.id).await;
        rows.push(m);
    }
    // One is waiting to be sent when the move comes.
    decided(decide_key(s, "older-0", true, producer(), LATER).await);
    for (m, of) in rows.iter().zip(&older) {
        let long = of.payload.len() > 2048;
        assert_eq!(
            layout(b, m.id).await,
            (0, of.payload.len() as i64, 0),
            "{}",
            of.message_key
        );
        assert_content(
            &s.find_message_by_id(m.id).await.unwrap().unwrap(),
            of,
            &format!("before the move (long: {long})"),
        );
    }
    // Walk again from the start, two rows a chunk.
    b.raw_execute(
        "UPDATE payload_move SET moved_through = 0, finished_at = NULL WHERE id = ?",
        1,
    )
    .await;
    let (mut walked, mut moved, mut chunks) = (0, 0, 0);
    loop {
        let chunk = s.move_payloads(2).await.unwrap();
        chunks += 1;
        assert!(chunk.walked <= 2, "{chunk:?}");
        walked += chunk.walked;
        moved += chunk.moved;
        if chunk.finished {
            break;
        }
        assert!(chunks < 20, "the walk does not end");
    }
    assert_eq!((walked, moved), (5, 3));
    for (m, of) in rows.iter().zip(&older) {
        let long = of.payload.len() > 2048;
        let expected = if long {
            (1, 0, 1)
        } else {
            (0, of.payload.len() as i64, 0)
        };
        assert_eq!(layout(b, m.id).await, expected, "{}", of.message_key);
        assert_content(
            &s.find_message_by_id(m.id).await.unwrap().unwrap(),
            of,
            "after the move",
        );
        if long {
            assert_eq!(
                b.raw_count(
                    "SELECT CAST(payload_bytes AS SIGNED) FROM messages WHERE id = ?",
                    m.id
                )
                .await,
                of.payload.len() as i64,
                "the move records the length it read"
            );
        }
    }
    // The moved row that waits to be sent is sent whole, and the move
    // never changed its state.
    let pending = s.find_message(BIZ, "older-0").await.unwrap().unwrap();
    let claim = PayloadRoom {
        bytes: 1 << 20,
        unknown: 1 << 20,
    };
    let version = pending.version;
    b.raw_execute(
        "UPDATE messages SET next_send_at = created_at WHERE id = ?",
        pending.id,
    )
    .await;
    let claimed = s.claim_due_sends(10, claim, LATER).await.unwrap();
    assert_eq!(claimed.messages.len(), 1);
    assert_eq!(claimed.messages[0].version, version + 1);
    assert_content(&claimed.messages[0], &older[0], "claimed after the move");
    // Over for good: a row written since is not walked.
    s.insert_prepared(&sized("newer", 300)).await.unwrap();
    assert_eq!(s.move_payloads(100).await.unwrap(), PayloadMove::FINISHED);
}

/// A row whose content is apart but missing (or unreadable) is set aside by
/// the claim that reaches it, and the rest of the claim is sent.
pub(crate) async fn a_claimed_row_whose_content_apart_is_gone_is_quarantined(b: &Backend) {
    let s = b.store.as_ref();
    for key in ["lost", "kept"] {
        s.insert_prepared(&sized(key, 4000)).await.unwrap();
        decided(decide_key(s, key, true, producer(), Duration::ZERO).await);
    }
    let lost = s.find_message(BIZ, "lost").await.unwrap().unwrap();
    b.raw_execute(
        "UPDATE message_payloads SET headers = 'not json' WHERE message_id = ?",
        lost.id,
    )
    .await;
    let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap();
    assert_eq!(
        claimed
            .messages
            .iter()
            .map(|m| m.message_key.as_str())
            .collect::<Vec<_>>(),
        ["kept"]
    );
    assert_eq!(claimed.quarantined.len(), 1, "{claimed:?}");
    assert_eq!(claimed.quarantined[0].id, lost.id);
    let row = s.find_message_by_id(lost.id);
    // The row itself reads as unreadable as its content is.
    assert!(row.await.is_err());
    assert_eq!(
        b.raw_count(
            "SELECT COUNT(*) FROM messages WHERE id = ? AND next_send_at IS NULL",
            lost.id
        )
        .await,
        1,
        "no claim takes it again"
    );
}
