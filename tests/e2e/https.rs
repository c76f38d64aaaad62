//! HTTPS served by the binary itself (`--tls-cert`, `--tls-key`): the
//! producer API, the admin API and `/metrics` over TLS with a certificate of
//! the test's own CA, plain HTTP refused on that port, and the certificate
//! replaced without a restart, on SIGHUP and when the files change, a bad
//! replacement keeping the old one.

use std::path::Path;
use std::process::Command;

use trustmsg_client::{Message, Producer, RetryPolicy};
use trustmsg_tests::certs::{ServerCert, TestCa};
use trustmsg_tests::process::{binary, client_trusting};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-https";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_operators_talk_to_the_service_over_https_and_plain_http_is_refused() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let ca = TestCa::new();
    let cert = ca.server_cert("api", &["localhost", "127.0.0.1"]);
    let svc =
        ServiceProcess::start_https(&db, kafka.mock.bootstrap(), &[], &cert, &ca.ca_file()).await;
    assert!(svc.url().starts_with("https://localhost:"), "{}", svc.url());

    let (token, _) = svc
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&svc.url(), "shop", token.as_str())
        .unwrap()
        .with_ca_certificates(&std::fs::read(ca.ca_file()).unwrap())
        .unwrap();
    let prepared = producer
        .prepare(&Message::new("k1", TOPIC, "over https"))
        .await
        .unwrap();
    producer.commit("k1").await.unwrap();
    eventually(10, "the message in Kafka", async || {
        kafka.deliveries().contains_key(&prepared.id)
    })
    .await;

    let http = svc.http_client();
    let shown = svc
        .admin_get(&format!("/v1/admin/messages/{}", prepared.id))
        .await;
    assert_eq!(shown["message"]["status"], "COMMITTED");
    assert_eq!(shown["payload"], "over https");
    let metrics = svc.metrics_via(&http).await;
    assert!(
        metrics.sum("trustmsg_forwarder_sent_total") >= 1.0,
        "the send of k1 counted: {}",
        metrics.text()
    );
    let console = http
        .get(format!("{}/console", svc.url()))
        .send()
        .await
        .unwrap();
    assert!(console.status().is_success(), "{}", console.status());

    // The admin CLI trusts the system's roots, which SSL_CERT_FILE extends.
    let admin = |ca: Option<&Path>| {
        let mut cmd = Command::new(binary());
        cmd.args(["admin", "--url", &svc.url(), "--admin-token", ADMIN_TOKEN])
            .args(["messages", "show", &prepared.id.to_string(), "--json"]);
        if let Some(ca) = ca {
            cmd.env("SSL_CERT_FILE", ca);
        }
        cmd.output().unwrap()
    };
    let shown = admin(Some(&ca.ca_file()));
    assert!(shown.status.success(), "{shown:?}");
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("COMMITTED"),
        "{shown:?}"
    );
    let untrusted = admin(None);
    assert!(!untrusted.status.success(), "{untrusted:?}");

    // Plain HTTP to the HTTPS port gets no answer a client could read.
    let plain = trustmsg_tests::http_client()
        .get(format!("http://{}/healthz", svc.addr))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
    // A producer that does not trust the test CA (system roots only) is
    // refused the connection, its token never sent.
    let untrusting = Producer::new(&svc.url(), "shop", token.as_str())
        .unwrap()
        .with_retry(RetryPolicy::none());
    let refused = untrusting.get("k1").await.unwrap_err().to_string();
    assert!(refused.contains("UnknownIssuer"), "{refused}");

    // A graceful shutdown with a kept-alive HTTPS connection open (`http`'s):
    // it exits 0, its shutdown not cut off by the connection.
    let mut svc = svc;
    svc.terminate_cleanly();
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_serves_a_new_certificate_and_a_bad_one_keeps_the_old() {
    let db = TestDb::create().await;
    // No polling: only the signal can make it look at the files.
    let (svc, old_ca, files) = serving_a_certificate(&db, "0s").await;

    // A key that does not belong to the certificate: refused, the old
    // certificate still served, the failure counted.
    let (new_ca, new) = ca_and_certificate();
    std::fs::copy(&new.key, &files.key).unwrap();
    svc.hangup();
    eventually(10, "a failed reload counted", async || {
        reloads(&svc, "error").await == 1
    })
    .await;
    assert!(serves(&svc, &old_ca.ca_file()).await);
    assert!(!serves(&svc, &new_ca.ca_file()).await);

    // The matching certificate too: served after the signal.
    std::fs::copy(&new.cert, &files.cert).unwrap();
    svc.hangup();
    eventually(10, "the new CA's certificate served", async || {
        serves(&svc, &new_ca.ca_file()).await
    })
    .await;
    assert!(!serves(&svc, &old_ca.ca_file()).await);
    assert_eq!(reloads_via(&svc, &new_ca, "ok").await, 1);

    drop(svc);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaced_certificate_files_are_served_without_a_signal() {
    let db = TestDb::create().await;
    let (svc, old_ca, files) = serving_a_certificate(&db, "200ms").await;

    let (new_ca, new) = ca_and_certificate();
    replace(&new, &files);
    eventually(10, "the new CA's certificate served", async || {
        serves(&svc, &new_ca.ca_file()).await
    })
    .await;
    assert!(!serves(&svc, &old_ca.ca_file()).await);

    drop(svc);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_stops_on_a_missing_file_a_foreign_key_or_one_flag_alone() {
    let ca = TestCa::new();
    let a = ca.server_cert("a", &["localhost"]);
    let b = ca.server_cert("b", &["localhost"]);
    let missing = ca.dir().join("missing.pem");
    let cert = a.cert.display().to_string();
    let (missing_cert, key_a, key_b) = (
        missing.display().to_string(),
        a.key.display().to_string(),
        b.key.display().to_string(),
    );
    let cases: [(&[&str], String); 4] = [
        (
            &["--tls-cert", &missing_cert, "--tls-key", &key_a],
            format!("reading --tls-cert {}", missing.display()),
        ),
        (
            &["--tls-cert", &cert, "--tls-key", &key_b],
            format!(
                "--tls-key {} is not the key of the certificate in --tls-cert {}",
                b.key.display(),
                a.cert.display()
            ),
        ),
        (
            &["--tls-cert", &cert, "--tls-key", &cert],
            format!("--tls-key {}: no private key in it", a.cert.display()),
        ),
        (&["--tls-cert", &cert], "--tls-key <FILE>".to_string()),
    ];
    for (flags, expected) in cases {
        let out = Command::new(binary())
            .args([
                "serve",
                // Never reached: the certificate is read first.
                "--database-url",
                "mysql://root@127.0.0.1:1/never",
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                ADMIN_TOKEN,
                "--no-forwarder",
            ])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started");
        assert!(stderr.contains(&expected), "{flags:?}: {stderr}");
    }
}

/// A CA of its own and a server certificate from it for the service's
/// addresses.
fn ca_and_certificate() -> (TestCa, ServerCert) {
    let ca = TestCa::new();
    let files = ca.server_cert("api", &["localhost", "127.0.0.1"]);
    (ca, files)
}

/// The service (no forwarder) over HTTPS with a certificate of a CA of its
/// own, its files looked at again every `reload_interval` ("0s": never),
/// shown to be served; and that CA and the certificate's files.
async fn serving_a_certificate(
    db: &TestDb,
    reload_interval: &str,
) -> (ServiceProcess, TestCa, ServerCert) {
    let (ca, files) = ca_and_certificate();
    let svc = ServiceProcess::start_https(
        db,
        "127.0.0.1:1",
        &["--no-forwarder", "--tls-reload-interval", reload_interval],
        &files,
        &ca.ca_file(),
    )
    .await;
    assert!(serves(&svc, &ca.ca_file()).await);
    (svc, ca, files)
}

/// Whether a new connection trusting only `ca_file` gets an answer.
async fn serves(svc: &ServiceProcess, ca_file: &Path) -> bool {
    client_trusting(ca_file)
        .get(format!("{}/healthz", svc.url()))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// `trustmsg_tls_cert_reloads_total{result}` as the old CA's client reads it.
async fn reloads(svc: &ServiceProcess, result: &str) -> u64 {
    metric(&svc.http_client(), svc, result).await
}

/// The same, through a client trusting `ca`.
async fn reloads_via(svc: &ServiceProcess, ca: &TestCa, result: &str) -> u64 {
    metric(&client_trusting(&ca.ca_file()), svc, result).await
}

async fn metric(http: &reqwest::Client, svc: &ServiceProcess, result: &str) -> u64 {
    svc.metrics_via(http)
        .await
        .value("trustmsg_tls_cert_reloads_total", &[("result", result)])
        .unwrap_or(0.0) as u64
}

/// Writes `new` over `files` the way a renewal tool does: each file to a
/// temporary name, then renamed over the old one.
fn replace(new: &ServerCert, files: &ServerCert) {
    for (from, to) in [(&new.key, &files.key), (&new.cert, &files.cert)] {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
}
