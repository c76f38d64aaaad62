//! What only a store of several databases does (the conformance suite
//! holds it to everything a store of one does): where a key's message is
//! written, a claim that a backlog on one shard does not starve, the
//! registry on every shard, and operator views read from replicas.

use std::collections::BTreeSet;
use std::sync::Arc;

use trustmsg::store::mysql::MySqlStore;
use trustmsg::store::prelude::*;
use trustmsg::store::shards::{shard_of_id, slot_of, ShardedStore};
use trustmsg::store::{DynStore, Inserted, MessageFilter};

use super::harness::{arrange_key, new_message, Backend, Due, State, BIZ, LATER, ROOM, SHARDS};
use trustmsg_tests::TestDb;

/// The first `n` keys named `prefix-i` whose messages live on `shard` (a new
/// deployment of [`SHARDS`] puts slot s on shard s mod SHARDS).
fn keys_on(shard: usize, prefix: &str, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| usize::from(slot_of(BIZ, k.as_bytes())) % SHARDS == shard)
        .take(n)
        .collect()
}

/// The message key of the row `id`, read by id.
async fn key_of_id(s: &dyn Store, id: u64) -> String {
    let m = s.find_message_by_id(id).await.unwrap();
    m.expect("the row is found by id").message_key
}

#[tokio::test]
async fn a_message_is_written_to_its_keys_shard_and_found_by_key_and_by_id() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    for shard in 0..SHARDS {
        for key in keys_on(shard, "k", 5) {
            let m = arrange_key(s, &key, State::Prepared, Due::Later)
                .await
                .unwrap();
            assert_eq!(shard_of_id(m.id), shard, "{key}");
            let count = b
                .raw_count("SELECT COUNT(*) FROM messages WHERE id = ?", m.id)
                .await;
            assert_eq!(count, 1, "{key} is on one shard only");
            assert_eq!(s.find_message(BIZ, &key).await.unwrap().unwrap().id, m.id);
            assert_eq!(key_of_id(s, m.id).await, key);
        }
    }
    b.finish().await;
}

#[tokio::test]
async fn a_backlog_on_one_shard_does_not_starve_the_others_claims() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    for key in keys_on(0, "busy", 40) {
        arrange_key(s, &key, State::SendPending, Due::Now)
            .await
            .unwrap();
    }
    let mut quiet = BTreeSet::new();
    for shard in 1..SHARDS {
        for key in keys_on(shard, "quiet", 2) {
            let m = arrange_key(s, &key, State::SendPending, Due::Now)
                .await
                .unwrap();
            quiet.insert(m.id);
        }
    }
    // Older rows on the busy shard come first in its due order; a claim of
    // 6 still takes the other shards' rows.
    let claimed = s.claim_due_sends(6, ROOM, LATER).await.unwrap().messages;
    assert_eq!(claimed.len(), 6);
    let ids: BTreeSet<u64> = claimed.iter().map(|m| m.id).collect();
    assert!(quiet.is_subset(&ids), "{quiet:?} not all in {ids:?}");
    // And what the quiet shards leave of a claim goes to the busy one.
    let next = s.claim_due_sends(30, ROOM, LATER).await.unwrap().messages;
    assert_eq!(next.len(), 30);
    assert!(next.iter().all(|m| shard_of_id(m.id) == 0));
    b.finish().await;
}

#[tokio::test]
async fn the_registry_is_on_every_shard_and_read_from_the_first() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    s.upsert_producer(&super::producers::producer_record("orders"))
        .await
        .unwrap();
    let on_every_shard = b
        .raw_count(
            "SELECT COUNT(*) FROM producers WHERE biz_id = 'orders' AND ? = 0",
            0,
        )
        .await;
    assert_eq!(on_every_shard, SHARDS as i64);
    // Read from the first: the other shards' copies, changed behind the
    // store's back, are not what it answers.
    for shard in 1..SHARDS {
        let changed = b
            .raw_execute_on_shard(
                shard,
                "UPDATE producers SET verify_url = 'http://127.0.0.1:1/not-the-first' \
                 WHERE biz_id = 'orders'",
            )
            .await;
        assert_eq!(changed, 1, "shard {shard} holds a copy");
    }
    let first_url = super::producers::producer_record("orders").verify_url;
    let found = s.find_producer("orders").await.unwrap().unwrap();
    assert_eq!(found.verify_url, first_url, "found on the first");
    let listed = s.list_producers().await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|p| p.verify_url.as_str())
            .collect::<Vec<_>>(),
        [first_url.as_str()],
        "listed from the first"
    );
    assert!(s.set_producer_token("orders", &[7u8; 32]).await.unwrap());
    let rotated = b
        .raw_count(
            "SELECT COUNT(*) FROM producers WHERE biz_id = 'orders' \
             AND token_hash = UNHEX(REPEAT('07', 32)) AND ? = 0",
            0,
        )
        .await;
    assert_eq!(rotated, SHARDS as i64, "the token on every shard");
    assert!(s.delete_producer("orders").await.unwrap());
    let left = b
        .raw_count("SELECT COUNT(*) FROM producers WHERE ? = 0", 0)
        .await;
    assert_eq!(left, 0);
    b.finish().await;
}

#[tokio::test]
async fn operator_views_read_the_replica_and_the_rest_reads_the_database() {
    let primary = TestDb::create().await;
    let replica = TestDb::create().await;
    // The replica's schema, as replication would have copied it.
    let r = MySqlStore::connect(&replica.database_url()).await.unwrap();
    r.migrate().await.unwrap();
    let store: DynStore = Arc::new(
        ShardedStore::open(&[primary.database_url()], &[replica.database_url()], true)
            .await
            .unwrap(),
    );
    let s = store.as_ref();
    let m = arrange_key(s, "fresh", State::Prepared, Due::Later)
        .await
        .unwrap();
    // Not replicated yet: the views do not show it, the message itself is there.
    let listed = s
        .list_messages(&MessageFilter::default(), 10, None)
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    assert!(s.summary(LATER).await.unwrap().is_empty());
    assert_eq!(key_of_id(s, m.id).await, "fresh");
    assert_eq!(
        s.find_message(BIZ, "fresh").await.unwrap().unwrap().id,
        m.id
    );
    // Replicated: the views show it.
    let copy = format!(
        "INSERT INTO `{}`.messages SELECT * FROM `{}`.messages",
        replica.name, primary.name
    );
    let pool = sqlx::MySqlPool::connect(&primary.url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(copy))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let listed = s
        .list_messages(&MessageFilter::default(), 10, None)
        .await
        .unwrap();
    assert_eq!(listed.iter().map(|v| v.id).collect::<Vec<_>>(), [m.id]);
    let summary = s.summary(LATER).await.unwrap();
    assert_eq!(summary[0].by_status.get("PREPARED"), Some(&1));
    // Writes go to the database, never to the replica: a decision and a
    // prepare change the database's rows and leave the replica's as they were.
    let failed = s
        .transition(&super::harness::verify_failed(&m))
        .await
        .unwrap()
        .expect("the guard matched the database's row");
    assert_eq!(failed.version, m.version + 1);
    s.insert_prepared(&new_message("second", LATER))
        .await
        .unwrap();
    let status = |db: &TestDb| {
        let url = db.url.clone();
        async move {
            let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
            let rows: Vec<(String, String)> = sqlx::query_as(
                "SELECT CAST(message_key AS CHAR), CAST(status AS CHAR) FROM messages ORDER BY id",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            pool.close().await;
            rows
        }
    };
    assert_eq!(
        status(&primary).await,
        [
            ("fresh".to_string(), "VERIFY_FAILED".to_string()),
            ("second".to_string(), "PREPARED".to_string())
        ]
    );
    assert_eq!(
        status(&replica).await,
        [("fresh".to_string(), "PREPARED".to_string())]
    );
    drop(store);
    drop(r);
    primary.drop_db().await;
    replica.drop_db().await;
}

#[tokio::test]
async fn an_ordered_message_key_names_one_message_whichever_record_key_it_is_prepared_with() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    // An ordered message lives by its order key (biz_id, topic, record key);
    // two record keys whose order keys are on different shards.
    let shard = |record_key: &str| {
        let order = trustmsg::store::order_key(BIZ, "orders", record_key);
        usize::from(slot_of(BIZ, &order)) % SHARDS
    };
    let first = "order-1";
    let other = (2..)
        .map(|i| format!("order-{i}"))
        .find(|k| shard(k) != shard(first))
        .unwrap();
    let ordered = |record_key: &str| trustmsg::store::NewMessage {
        key: Some(record_key.to_string()),
        order_key: Some(trustmsg::store::order_key(BIZ, "orders", record_key)),
        ..new_message("same-key", LATER)
    };
    let Inserted::Created(m) = s.insert_prepared(&ordered(first)).await.unwrap() else {
        panic!("created");
    };
    assert_eq!(shard_of_id(m.id), shard(first), "by its order key");
    match s.insert_prepared(&ordered(&other)).await.unwrap() {
        Inserted::Existing(found) => assert_eq!(found.id, m.id),
        Inserted::Created(dup) => panic!("a second message {} for one key", dup.id),
    }
    assert_eq!(
        s.find_message(BIZ, "same-key").await.unwrap().unwrap().id,
        m.id
    );
    b.finish().await;
}

#[tokio::test]
async fn a_database_from_before_shards_opens_as_it_always_did() {
    let db = TestDb::create().await;
    MySqlStore::connect(&db.database_url())
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();
    // As a database the previous release migrated (no migration 0017).
    let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
    for sql in [
        "DROP TABLE shard_identity, shard_slots",
        "DELETE FROM _sqlx_migrations WHERE version = 17",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    pool.close().await;
    let store = trustmsg::startup::open_store(&[db.database_url()], &[], false)
        .await
        .expect("one database that was never a shard opens without the shard tables");
    assert!(store.find_message(BIZ, "none").await.unwrap().is_none());
    drop(store);
    db.drop_db().await;
}

#[tokio::test]
async fn a_message_whose_slot_moved_is_found_and_changed_on_its_new_shard() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    let key = &keys_on(0, "moving", 1)[0];
    arrange_key(s, key, State::SendPending, Due::Now)
        .await
        .unwrap();
    let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages;
    assert_eq!(claimed.len(), 1);
    let m = &claimed[0];
    b.move_row(m.id, 2).await;
    // By key (its slot still names shard 0) and by id (which names 0).
    assert_eq!(s.find_message(BIZ, key).await.unwrap().unwrap().id, m.id);
    assert_eq!(s.find_message_by_id(m.id).await.unwrap().unwrap().id, m.id);
    let mark = trustmsg::store::SentMark {
        id: m.id,
        version: m.version,
        partition: 1,
        offset: 42,
        order: None,
    };
    assert_eq!(
        s.mark_sent(&[mark]).await.unwrap(),
        1,
        "marked where it lives"
    );
    let sent = s.find_message_by_id(m.id).await.unwrap().unwrap();
    assert_eq!(
        (sent.send_status, sent.kafka_offset),
        (Some(trustmsg_verify_api::SendStatus::Sent), Some(42))
    );
    b.finish().await;
}

/// Two instances started with --auto-migrate at once on new databases,
/// held in step so that both find the first database unclaimed (a lock on
/// its `shard_identity` table makes both wait at their first look): both
/// start, and they leave one deployment behind, each database the shard of
/// its place in the list, one slot map, by which both route; a third
/// instance accepts the list and a reordered one is refused.
#[tokio::test]
async fn instances_that_start_a_new_deployment_together_agree_on_it() {
    let dbs = [
        TestDb::create().await,
        TestDb::create().await,
        TestDb::create().await,
    ];
    let urls: Vec<_> = dbs.iter().map(|d| d.database_url()).collect();
    let mut pools = Vec::new();
    for url in &urls {
        let store = MySqlStore::connect(url).await.unwrap();
        store.migrate().await.unwrap();
        pools.push(store.pool().clone());
    }
    let mut lock = pools[0].acquire().await.unwrap();
    sqlx::query("LOCK TABLES shard_identity WRITE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let one = tokio::spawn({
        let urls = urls.clone();
        async move { ShardedStore::open(&urls, &[], true).await }
    });
    let two = tokio::spawn({
        let urls = urls.clone();
        async move { ShardedStore::open(&urls, &[], true).await }
    });
    let waiting = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                   WHERE DB = ? AND INFO LIKE '%shard_identity%' AND STATE LIKE 'Waiting%'";
    trustmsg_tests::eventually(
        20,
        "both starters waiting at the first database",
        async || {
            sqlx::query_scalar::<_, i64>(waiting)
                .bind(&dbs[0].name)
                .fetch_one(&pools[1])
                .await
                .unwrap()
                == 2
        },
    )
    .await;
    sqlx::query("UNLOCK TABLES")
        .execute(&mut *lock)
        .await
        .unwrap();
    drop(lock);
    let one = one.await.unwrap().expect("the first starter starts");
    let two = two.await.unwrap().expect("the second starter starts");

    let mut deployments = BTreeSet::new();
    for (shard, pool) in pools.iter().enumerate() {
        let rows: Vec<(String, u16)> =
            sqlx::query_as("SELECT deployment, shard FROM shard_identity")
                .fetch_all(pool)
                .await
                .unwrap();
        assert_eq!(rows.len(), 1, "one identity on shard {shard}: {rows:?}");
        assert_eq!(
            usize::from(rows[0].1),
            shard,
            "shard {shard} knows its place"
        );
        deployments.insert(rows[0].0.clone());
    }
    assert_eq!(deployments.len(), 1, "one deployment: {deployments:?}");
    let map: Vec<(u16, u16)> = sqlx::query_as("SELECT slot, shard FROM shard_slots ORDER BY slot")
        .fetch_all(&pools[0])
        .await
        .unwrap();
    assert_eq!(map.len(), usize::from(trustmsg::store::shards::SLOTS));
    // Both route every key by that map.
    for i in 0..2000 {
        let key = format!("k-{i}");
        let stored = usize::from(map[usize::from(slot_of(BIZ, key.as_bytes()))].1);
        assert_eq!(
            (one.shard_of_key(BIZ, &key), two.shard_of_key(BIZ, &key)),
            (stored, stored),
            "{key}"
        );
    }
    drop((one, two));
    let third = ShardedStore::open(&urls, &[], false).await;
    assert!(third.is_ok(), "the list as set up: {:?}", third.err());
    drop(third);
    let reordered = [urls[1].clone(), urls[0].clone(), urls[2].clone()];
    assert!(ShardedStore::open(&reordered, &[], true).await.is_err());
    for pool in pools {
        pool.close().await;
    }
    for db in dbs {
        db.drop_db().await;
    }
}

/// The batch paths reach a moved row as the one-by-one paths do: the
/// verifier's batch (`transition_batch`) and a producer's decision batch
/// (`transition_batch_seen`) each change a prepared row that now lives on
/// another shard than its id names, beside a row that did not move.
#[tokio::test]
async fn batch_transitions_reach_a_row_whose_slot_moved() {
    let b = Backend::sharded().await;
    let s = b.store.as_ref();
    let keys = keys_on(0, "moved-batch", 4);
    let mut rows = Vec::new();
    for key in &keys {
        rows.push(super::harness::prepare(s, key, Due::Later).await);
    }
    b.move_row(rows[0].id, 2).await;
    b.move_row(rows[2].id, 1).await;
    let failed = |m: &trustmsg::store::Message| super::harness::verify_failed(m);
    let by_verifier = s
        .transition_batch(&[failed(&rows[0]), failed(&rows[1])])
        .await
        .unwrap();
    let seen: Vec<&trustmsg::store::Message> = rows[2..].iter().collect();
    let by_producer = s
        .transition_batch_seen(&[failed(&rows[2]), failed(&rows[3])], &seen)
        .await
        .unwrap();
    for (m, result) in rows.iter().zip(by_verifier.iter().chain(&by_producer)) {
        let changed = result
            .as_ref()
            .unwrap_or_else(|| panic!("row {} changed", m.id));
        assert_eq!(
            changed.status,
            trustmsg_verify_api::MessageStatus::VerifyFailed
        );
        let stored = s.find_message_by_id(m.id).await.unwrap().unwrap();
        assert_eq!(&stored, changed, "the row as stored where it lives");
    }
    b.finish().await;
}
