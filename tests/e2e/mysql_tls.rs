//! trustmsg and a MariaDB that speaks only TLS (`--require-secure-transport`,
//! a certificate of the test's own CA for `localhost`): with
//! `ssl-mode=VERIFY_IDENTITY&ssl-ca=…` in the database URL, `migrate` and
//! `serve` connect and work; a certificate that does not name the host
//! dialled, or one from a CA the URL does not trust, stops the start-up with
//! an error that says so. The password in the URL is never printed.

use std::process::Command;

use trustmsg_client::{Message, Producer};
use trustmsg_tests::certs::TestCa;
use trustmsg_tests::process::binary;
use trustmsg_tests::{eventually, PrivateMariaDb, ServiceProcess, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::MessageStatus;

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-mysql-tls";
const USER: &str = "app";
const PASSWORD: &str = "pw-Zq81xTLS";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_and_serve_use_a_tls_only_mariadb_whose_identity_they_verify() {
    let ca = TestCa::new();
    let cert = ca.server_cert("mariadb", &["localhost"]);
    let mariadb = PrivateMariaDb::start_with_tls(&cert, &ca.ca_file()).await;
    create_user(&mariadb).await;
    let port = mariadb.port();
    let base = format!("mysql://{USER}:{PASSWORD}@localhost:{port}/trustmsg_tls");

    // The server refuses a session without TLS (MariaDB says "access
    // denied" then): what lets the same user in below is TLS.
    let plain = trustmsg(&[
        "migrate",
        "--database-url",
        &format!("{base}?ssl-mode=DISABLED"),
    ]);
    assert!(!plain.0, "a plain connection was let in: {}", plain.1);
    assert!(
        plain
            .1
            .contains(&format!("Access denied for user '{USER}'")),
        "{}",
        plain.1
    );

    let verified = format!(
        "{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        ca.ca_file().display()
    );
    let (ok, said) = trustmsg(&["migrate", "--database-url", &verified]);
    assert!(ok, "migrate over TLS: {said}");
    assert!(said.contains("migrations applied"), "{said}");
    assert!(!said.contains(PASSWORD), "the password was printed: {said}");

    let kafka = Kafka::start(&[TOPIC]);
    let log = ca.dir().join("service.log");
    let svc =
        ServiceProcess::start_logged(&verified, kafka.mock.bootstrap(), &[], Some(log.clone()))
            .await;
    let (token, _) = svc
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&svc.url(), "shop", token).unwrap();
    let prepared = producer
        .prepare(&Message::new("k1", TOPIC, "stored over TLS"))
        .await
        .unwrap();
    let committed = producer.commit("k1").await.unwrap();
    assert_eq!(committed.status, MessageStatus::Committed);
    eventually(10, "the message in Kafka", async || {
        kafka.deliveries().contains_key(&prepared.id)
    })
    .await;
    drop(svc);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        !logged.contains(PASSWORD),
        "the password was logged: {logged}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_or_from_an_untrusted_ca_stops_the_start_up() {
    let ca = TestCa::new();
    let cert = ca.server_cert("mariadb", &["localhost"]);
    let mariadb = PrivateMariaDb::start_with_tls(&cert, &ca.ca_file()).await;
    create_user(&mariadb).await;
    let port = mariadb.port();

    // Dialled as 127.0.0.1, a certificate for `localhost` only is not its.
    let wrong_host = format!(
        "mysql://{USER}:{PASSWORD}@127.0.0.1:{port}/trustmsg_tls?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        ca.ca_file().display()
    );
    let (ok, said) = trustmsg(&[
        "serve",
        "--database-url",
        &wrong_host,
        "--listen",
        "127.0.0.1:0",
        "--insecure-no-auth",
        "--no-forwarder",
    ]);
    assert!(!ok, "serve started: {said}");
    assert!(
        said.contains(r#"invalid peer certificate: certificate not valid for name "127.0.0.1""#),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "connecting to mysql://{USER}:***@127.0.0.1:{port}/"
        )),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "the password was printed: {said}");

    // The right host, but the URL trusts another CA.
    let other_ca = TestCa::new();
    let untrusted = format!(
        "mysql://{USER}:{PASSWORD}@localhost:{port}/trustmsg_tls?ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
        other_ca.ca_file().display()
    );
    let (ok, said) = trustmsg(&["migrate", "--database-url", &untrusted]);
    assert!(!ok, "migrate connected: {said}");
    // (Both test CAs have the same name: rustls says BadSignature then,
    // UnknownIssuer for a CA of another name.)
    assert!(said.contains("invalid peer certificate: "), "{said}");
    assert!(
        said.contains(&format!(
            "creating the database at mysql://{USER}:***@localhost:{port}/"
        )),
        "{said}"
    );
    assert!(!said.contains(PASSWORD), "the password was printed: {said}");
}

/// A user with a password, allowed in from anywhere over TLS.
async fn create_user(mariadb: &PrivateMariaDb) {
    let admin = format!("{}?ssl-mode=REQUIRED", mariadb.url(""));
    let pool = sqlx::MySqlPool::connect(&admin).await.unwrap();
    for statement in [
        format!("CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'"),
        format!("GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
}

/// Runs the binary with `args` at log level debug; (succeeded, stdout and
/// stderr).
fn trustmsg(args: &[&str]) -> (bool, String) {
    let out = Command::new(binary())
        .args(args)
        .env("TRUSTMSG_LOG", "debug")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}
