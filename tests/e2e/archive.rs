//! The archive against a real S3 server (moto's, `scripts/s3-server`) and
//! the real binary: `trustmsg serve --retention … --archive s3://…` killed
//! with -9 in the middle of archiving loses no row, and its restart finishes
//! the archive and the deletion (the same objects, every message once);
//! `trustmsg admin archive find` then finds a message by id and by key.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use trustmsg::archive::Archive;
use trustmsg::store::{DynStore, NewMessage};
use trustmsg_tests::{eventually, S3Server, ServiceProcess, TestDb};

const BUCKET: &str = "trustmsg-archive";
/// Finished messages: two archive batches (500 and 100).
const FINISHED: usize = 600;
/// Bytes of payload each: incompressible, so a batch is an object of about
/// 11 MB that takes the server a while to take.
const PAYLOAD: usize = 16 * 1024;

/// `len` bytes no compressor shrinks, different for each `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn message(i: usize) -> NewMessage {
    NewMessage {
        biz_id: "shop".into(),
        message_key: format!("k-{i}"),
        topic: "orders".into(),
        key: Some(format!("order-{i}")),
        payload: noise(i as u64, PAYLOAD),
        headers: BTreeMap::from([("n".to_string(), i.to_string())]),
        first_verify_after: Duration::from_secs(3600),
        traceparent: None,
        tracestate: None,
        order_key: None,
        deliver: None,
    }
}

/// How many messages the database holds.
async fn count(pool: &sqlx::MySqlPool, condition: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM messages WHERE {condition}"
    )))
    .fetch_one(pool)
    .await
    .unwrap()
}

/// `FINISHED` messages made finished (half SENT, half ROLLED_BACK) an hour
/// ago (keys k-0 to k-599), and three left
/// PREPARED (k-600 to k-602).
async fn populate(store: &DynStore, pool: &sqlx::MySqlPool) {
    let all: Vec<NewMessage> = (0..FINISHED + 3).map(message).collect();
    for chunk in all.chunks(200) {
        store.insert_prepared_batch(chunk).await.unwrap();
    }
    sqlx::query(
        "UPDATE messages SET status = IF(id % 2 = 0, 'COMMITTED', 'ROLLED_BACK'), \
         send_status = IF(id % 2 = 0, 'SENT', NULL), next_verify_at = NULL, \
         kafka_partition = IF(id % 2 = 0, 0, NULL), kafka_offset = IF(id % 2 = 0, id, NULL), \
         updated_at = NOW(3) - INTERVAL 1 HOUR WHERE CAST(SUBSTRING(message_key, 3) AS UNSIGNED) < 600",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// Every object's lines, as (object path, message ids).
async fn contents(archive: &Archive) -> Vec<(String, Vec<u64>)> {
    let mut out = Vec::new();
    for (path, _) in archive.objects().await.unwrap() {
        let ids = archive
            .lines(&path)
            .await
            .unwrap()
            .iter()
            .map(|l| l.message.id)
            .collect();
        out.push((path, ids));
    }
    out
}

/// `trustmsg admin archive find ARGS --archive URL` with the S3 server's
/// environment: its exit status and output.
fn find(s3: &S3Server, url: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(trustmsg_tests::process::binary())
        .args(["admin", "archive", "find", "--archive", url])
        .args(args)
        .envs(s3.env())
        .env_remove("TRUSTMSG_ADMIN_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_while_archiving_to_s3_loses_no_row_and_the_restart_finishes_it() {
    let started = Instant::now();
    let s3 = S3Server::start();
    s3.create_bucket(BUCKET).await;
    for (k, v) in s3.env() {
        // The test's own process: the archive it reads with, and the
        // service it starts, reach the server the same way.
        std::env::set_var(k, v);
    }
    let url = format!("s3://{BUCKET}/e2e");
    let archive = Archive::open(&url).unwrap();
    let db = TestDb::create().await;
    let store = trustmsg::store::open(&[db.url.parse().unwrap()], &[], true)
        .await
        .unwrap();
    let pool = sqlx::MySqlPool::connect(&db.url).await.unwrap();
    populate(&store, &pool).await;
    let finished = "status <> 'PREPARED'";
    assert_eq!(count(&pool, finished).await, FINISHED as i64);
    eprintln!("populated in {:?}", started.elapsed());

    let flags = [
        "--no-forwarder",
        "--retention",
        "1s",
        "--partition-period",
        "1s",
        "--archive",
        &url,
    ];
    let mut service = ServiceProcess::start(&db, "127.0.0.1:9", &flags).await;
    // Killed as soon as the first object is there: while the service reads
    // it back, deletes its batch, or writes the next.
    let listed = Instant::now();
    while archive.objects().await.unwrap().is_empty() {
        assert!(
            listed.elapsed() < Duration::from_secs(30),
            "no object after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    service.kill_9();
    let before = contents(&archive).await;
    let left = count(&pool, finished).await;
    eprintln!(
        "killed with {} object(s) written and {left} finished messages still in the database",
        before.len()
    );
    // No row lost: each finished message is in the database or archived.
    let archived: Vec<u64> = before.iter().flat_map(|(_, ids)| ids.clone()).collect();
    let in_db: i64 = count(&pool, finished).await;
    let gone = FINISHED as i64 - in_db;
    assert!(
        gone == 0 || gone as usize <= archived.len(),
        "{gone} deleted but only {} archived",
        archived.len()
    );

    service.restart().await;
    eventually(
        30,
        "every finished message archived and deleted",
        async || count(&pool, finished).await == 0,
    )
    .await;
    let after = contents(&archive).await;
    for (path, ids) in &before {
        assert!(
            after.iter().any(|(p, i)| p == path && i == ids),
            "{path} is where it was, as it was"
        );
    }
    let mut ids: Vec<u64> = after.iter().flat_map(|(_, ids)| ids.clone()).collect();
    assert_eq!(
        ids.len(),
        FINISHED,
        "every finished message once: {after:?}"
    );
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), FINISHED, "no message twice");
    assert_eq!(
        count(&pool, "status = 'PREPARED'").await,
        3,
        "unfinished stay"
    );

    // `admin archive find`, by id and by key, against the binary.
    let id = ids[FINISHED / 2];
    let (ok, out) = find(&s3, &url, &["--id", &id.to_string(), "--json"]);
    assert!(ok, "{out}");
    let line: serde_json::Value = serde_json::from_str(&out).unwrap();
    let key = line["message"]["message_key"].as_str().unwrap().to_string();
    let i: usize = key.trim_start_matches("k-").parse().unwrap();
    use base64::Engine;
    let payload = base64::engine::general_purpose::STANDARD
        .decode(line["payload_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(payload, noise(i as u64, PAYLOAD), "byte for byte");
    let (ok, out) = find(&s3, &url, &["--biz-id", "shop", "--key", &key]);
    assert!(ok, "{out}");
    let object = format!("archived in {url}/trustmsg/messages/");
    assert!(out.contains(&object), "{out}");
    assert!(
        out.contains(&format!("#{id}")) || out.contains(&id.to_string()),
        "{out}"
    );
    let (ok, out) = find(&s3, &url, &["--biz-id", "shop", "--key", "k-601"]);
    assert!(!ok && out.contains("not in the archive"), "{out}");
    eprintln!("whole test: {:?}", started.elapsed());
    drop(service);
    db.drop_db().await;
}
