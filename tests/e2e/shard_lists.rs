//! Shard lists the real binary must refuse, because they would route keys
//! to databases that do not hold their messages (docs/scaling.md): the
//! shards in another order, fewer shards than the slot map names, one
//! shard of several alone, a shard of another deployment, and a database
//! that holds messages listed as a new shard. And the two a deployment
//! grows by: a new empty shard appended to the list, and one database that
//! already holds messages getting company (its messages stay where they
//! are, every slot stays on it).

use std::process::Command;

use trustmsg_tests::process::binary;
use trustmsg_tests::TestDb;

/// `trustmsg migrate` over `urls`: whether it succeeded, and what it said.
fn migrate(urls: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(binary());
    cmd.arg("migrate");
    for url in urls {
        cmd.args(["--database-url", url]);
    }
    let out = cmd
        .env("TRUSTMSG_LOG", "warn")
        .output()
        .expect("run trustmsg migrate");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn migrated(urls: &[&str]) -> String {
    let (ok, said) = migrate(urls);
    assert!(ok, "migrate {urls:?}: {said}");
    said
}

fn refused(urls: &[&str], because: &str) {
    let (ok, said) = migrate(urls);
    assert!(!ok, "{urls:?} was accepted: {said}");
    assert!(
        said.contains(because),
        "{urls:?}: expected {because:?} in: {said}"
    );
}

async fn scalar(url: &str, sql: &str) -> i64 {
    let pool = sqlx::MySqlPool::connect(url).await.unwrap();
    let v: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    v
}

#[tokio::test]
async fn a_shard_list_that_would_re_route_keys_is_refused() {
    let dbs = [
        TestDb::create().await,
        TestDb::create().await,
        TestDb::create().await,
    ];
    let [a, b, c] = [&dbs[0].url, &dbs[1].url, &dbs[2].url].map(String::as_str);
    migrated(&[a, b, c]);
    // Again, the same list: nothing changes.
    migrated(&[a, b, c]);
    // A new deployment spreads the slots evenly.
    for shard in 0..3 {
        let slots = scalar(
            a,
            &format!("SELECT COUNT(*) FROM shard_slots WHERE shard = {shard}"),
        )
        .await;
        assert!(
            (341..=342).contains(&slots),
            "shard {shard} holds {slots} slots"
        );
    }
    refused(&[b, a, c], "keep the order the shards were first listed in");
    refused(&[a, c, b], "keep the order the shards were first listed in");
    refused(
        &[a, b],
        "the slot map puts slots on shard 2 but only 2 databases are listed",
    );
    refused(
        &[a],
        "the slot map puts slots on shard 2 but only 1 databases are listed",
    );
    refused(&[b], "is shard 1 of its deployment, not its first");

    // A database of another deployment.
    let other = TestDb::create().await;
    let other_second = TestDb::create().await;
    migrated(&[&other.url, &other_second.url]);
    refused(
        &[a, b, c, &other_second.url],
        "a shard of another deployment",
    );

    // A database that holds messages (a deployment of its own, one
    // database) listed as a new shard.
    let single = TestDb::create().await;
    migrated(&[&single.url]);
    sqlx_insert_message(&single.url, "elsewhere").await;
    refused(
        &[a, b, c, &single.url],
        "holds messages but was never a shard",
    );

    // A new, empty shard appended: accepted, with no slots until some are
    // moved to it, and its ids above its floor.
    let d = TestDb::create().await;
    let said = migrated(&[a, b, c, &d.url]);
    assert!(said.contains("holds no slots yet"), "{said}");
    let floor = 3i64 << 48;
    let next: i64 = scalar(
        &d.url,
        "SELECT CAST(AUTO_INCREMENT AS SIGNED) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'messages'",
    )
    .await;
    assert!(next >= floor, "shard 3's ids start at {floor}, not {next}");
    // It is shard 3 now: leaving it out is fine (it holds no slot), listing
    // it elsewhere is not.
    migrated(&[a, b, c]);
    refused(
        &[a, b, &d.url, c],
        "keep the order the shards were first listed in",
    );

    for db in dbs.into_iter().chain([other, other_second, single, d]) {
        db.drop_db().await;
    }
}

/// One raw PREPARED row, as an older deployment's would be.
async fn sqlx_insert_message(url: &str, key: &str) {
    let pool = sqlx::MySqlPool::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO messages (biz_id, message_key, topic, payload, headers, content_digest, \
         status, next_verify_at, created_at, updated_at) VALUES ('shop', ?, 't', 'x', '{}', \
         UNHEX(REPEAT('ab', 32)), 'PREPARED', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
    )
    .bind(key)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

#[tokio::test]
async fn a_database_with_messages_keeps_them_all_when_shards_join_it() {
    let first = TestDb::create().await;
    let joining = TestDb::create().await;
    migrated(&[&first.url]);
    sqlx_insert_message(&first.url, "old").await;
    let said = migrated(&[&first.url, &joining.url]);
    assert!(said.contains("every slot stays on it"), "{said}");
    let elsewhere = scalar(
        &first.url,
        "SELECT COUNT(*) FROM shard_slots WHERE shard <> 0",
    )
    .await;
    assert_eq!(elsewhere, 0, "no key re-routed away from the messages");
    // One database alone is fine again: the map sends everything to it.
    migrated(&[&first.url]);
    first.drop_db().await;
    joining.drop_db().await;
}
