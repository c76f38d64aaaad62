//! trustmsg's own store on PostgreSQL, through the real binary: `serve
//! --database-url postgres://…` creates and migrates a missing database,
//! then a commit reaches Kafka, a rollback never does, and check-back
//! decides a message its producer left undecided; two `trustmsg migrate`
//! started together on a missing database both succeed and apply each
//! migration once (sqlx's advisory lock waits); and PostgreSQL among
//! shards or as a replica is refused at start-up, before any database is
//! touched.

use std::process::{Command, Output};

use trustmsg_client::{check_router, Decision, Message, Producer};
use trustmsg_tests::process::binary;
use trustmsg_tests::{eventually, postgres_server_url, Endpoint, PgTestDb, ServiceProcess, TestDb};

use crate::harness::{settings, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-postgres";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_commit_is_sent_a_rollback_never_and_check_back_decides_the_undecided() {
    // Not created: --auto-migrate creates it, as on MySQL.
    let db = PgTestDb::named();
    let kafka = Kafka::start(&[TOPIC]);
    let service =
        ServiceProcess::start_logged(&db.url, kafka.mock.bootstrap(), FAST_VERIFY, None).await;

    // Check-back commits "undecided" (its producer never said) and would
    // roll back anything else it were asked about.
    let endpoint = Endpoint::bind().await;
    let url = endpoint.url(trustmsg_client::DEFAULT_CHECK_PATH);
    // Each decided message is decided right after its prepare, well within
    // the first check-back's 2 s, even on a loaded machine.
    let (token, secret) = service.register("shop", settings(&url, 2_000, 5)).await;
    endpoint.serve(check_router(
        secret,
        |req: trustmsg_client::CheckRequest| async move {
            Ok::<_, std::convert::Infallible>(if req.message_key == "undecided" {
                Decision::Commit
            } else {
                Decision::Rollback
            })
        },
    ));
    let producer = Producer::new(&service.url(), "shop", token).unwrap();

    let mut ids = Vec::new();
    for key in ["committed", "rolled-back", "undecided"] {
        let view = producer
            .prepare(&Message::new(key, TOPIC, format!("payload of {key}")).key("customer-7"))
            .await
            .unwrap();
        ids.push(view.id);
        match key {
            "committed" => drop(producer.commit(key).await.unwrap()),
            "rolled-back" => drop(producer.rollback(key).await.unwrap()),
            _ => {}
        }
    }
    let [committed, rolled_back, undecided] = ids[..] else {
        unreachable!()
    };

    let admin_view = async |id: u64| service.admin_get(&format!("/v1/admin/messages/{id}")).await;
    eventually(
        30,
        "the committed and the checked-back message are SENT",
        async || {
            let sent = async |id| admin_view(id).await["message"]["send_status"] == "SENT";
            sent(committed).await && sent(undecided).await
        },
    )
    .await;
    let mut in_kafka: Vec<u64> = kafka.records().iter().map(|r| r.message_id).collect();
    in_kafka.sort();
    assert_eq!(
        in_kafka,
        [committed, undecided],
        "each decided commit once, no rollback"
    );

    let rolled = admin_view(rolled_back).await;
    assert_eq!(rolled["message"]["status"], "ROLLED_BACK", "{rolled}");
    let checked = admin_view(undecided).await;
    assert_eq!(checked["message"]["status"], "COMMITTED", "{checked}");
    assert_eq!(
        checked["check_attempts"][0]["outcome"], "commit",
        "{checked}"
    );
    let actors: Vec<&str> = checked["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["actor"].as_str())
        .collect();
    assert!(actors.iter().any(|a| a.contains("verifier")), "{checked}");
    // Nothing else was asked about: the commit and the rollback came first.
    assert!(admin_view(committed).await["check_attempts"]
        .as_array()
        .unwrap()
        .is_empty());

    drop(service);
    db.drop_db().await;
}

/// `trustmsg migrate` with `urls`, as a child process.
fn migrate(urls: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.arg("migrate").env("TRUSTMSG_LOG", "warn");
    for url in urls {
        cmd.args(["--database-url", url]);
    }
    cmd
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_migrates_at_once_on_a_missing_postgresql_database_both_succeed_applying_each_once() {
    let db = PgTestDb::named();
    let first = migrate(&[db.url.as_str()])
        .spawn()
        .expect("run trustmsg migrate");
    let second = migrate(&[db.url.as_str()])
        .spawn()
        .expect("run trustmsg migrate");
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", said(&out));
    }
    let pool = db.pool_of(1).await;
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    let files = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../migrations/postgres"
    ))
    .unwrap()
    .count();
    assert_eq!(
        applied.len(),
        files,
        "each migration recorded once: {applied:?}"
    );
    assert!(applied.iter().all(|(_, ok)| *ok), "{applied:?}");
    pool.close().await;
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_among_shards_or_as_a_replica_is_refused_before_any_database_is_touched() {
    let mysql = TestDb::create().await;
    let pg = PgTestDb::named();
    for urls in [
        vec![mysql.url.as_str(), pg.url.as_str()],
        vec![pg.url.as_str(), mysql.url.as_str()],
    ] {
        let out = migrate(&urls).output().expect("run trustmsg migrate");
        let why = said(&out);
        assert!(!out.status.success(), "{urls:?}: {why}");
        assert!(
            why.contains("is PostgreSQL") && why.contains("MySQL/MariaDB-only"),
            "{urls:?}: {why}"
        );
        assert!(
            !why.contains("postgres:postgres@"),
            "the password is not shown: {why}"
        );
    }
    let out = Command::new(binary())
        .args(["serve", "--admin-token", "t", "--listen", "127.0.0.1:0"])
        .args(["--database-url", &pg.url, "--replica-url", &pg.url])
        .env("TRUSTMSG_LOG", "warn")
        .output()
        .expect("run trustmsg serve");
    let why = said(&out);
    assert!(
        !out.status.success() && why.contains("--replica-url"),
        "{why}"
    );

    // Nothing was created or migrated on either server.
    let mysql_pool = sqlx::MySqlPool::connect(&mysql.url).await.unwrap();
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
    )
    .fetch_one(&mysql_pool)
    .await
    .unwrap();
    assert_eq!(tables, 0, "the MySQL shard was not migrated");
    mysql_pool.close().await;
    let server = sqlx::PgPool::connect(&postgres_server_url()).await.unwrap();
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&pg.name)
            .fetch_one(&server)
            .await
            .unwrap();
    assert!(!exists, "the PostgreSQL database was not created");
    server.close().await;
    mysql.drop_db().await;
}
