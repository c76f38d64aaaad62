//! Flags the service must refuse at start-up, with one line naming the
//! flag, before it touches anything: an alert webhook the address policy
//! refuses, a malformed alert signing secret (never echoed), and backoff
//! delays so large they used to panic a worker on its first retry.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use trustmsg_tests::process::binary;

/// Runs `trustmsg serve` with `flags` over a fresh SQLite file and returns
/// its output once it has exited (failing the test if it keeps running, or
/// if it got as far as creating its database: a refusal comes before the
/// store is opened, so before any worker exists that could dial anything).
fn serve_refused(flags: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let db_file = dir.path().join("t.db");
    let db = format!("sqlite://{}?mode=rwc", db_file.display());
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--database-url",
            &db,
            "--admin-token",
            "t",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(flags)
        .env("TRUSTMSG_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn trustmsg");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "trustmsg {flags:?} started instead of refusing: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "{flags:?} exited 0");
    assert!(
        !db_file.exists(),
        "{flags:?} was refused only after the database was opened"
    );
    out
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_alert_webhook_the_address_policy_refuses_stops_start_up_naming_the_flag() {
    for (flags, why) in [
        (
            vec!["--alert-webhook", "http://169.254.169.254/latest/alerts"],
            "metadata",
        ),
        (
            vec!["--alert-webhook", "http://[::ffff:169.254.169.254]/alerts"],
            "metadata",
        ),
        (
            vec![
                "--alert-webhook",
                "http://127.0.0.1:9/alerts",
                "--verify-deny-cidr",
                "127.0.0.0/8",
            ],
            "denied by --verify-deny-cidr",
        ),
        (
            vec![
                "--alert-webhook",
                "http://alerts.test:9/alerts",
                "--verify-resolve",
                "alerts.test=127.0.0.2",
                "--verify-allow-cidr",
                "192.168.0.0/16",
            ],
            "not in --verify-allow-cidr",
        ),
    ] {
        let out = serve_refused(&flags);
        let text = said(&out);
        assert!(
            text.contains("--alert-webhook") && text.contains("refused") && text.contains(why),
            "{flags:?}: {text}"
        );
    }
}

#[test]
fn a_malformed_alert_signing_secret_stops_start_up_without_echoing_it() {
    for (secret, why) in [
        (
            "hunter2-hunter2-hunter2-hunter2",
            "must start with \"whsec_\"",
        ),
        ("whsec_***not-base64***", "followed by standard base64"),
        (
            "whsec_c2hvcnQ=",
            "has a key of 5 bytes; it must be 24 to 64",
        ),
    ] {
        let out = serve_refused(&[
            "--alert-webhook",
            "http://127.0.0.1:9/alerts",
            "--alert-signing-secret",
            secret,
        ]);
        let text = said(&out);
        assert!(
            text.contains("--alert-signing-secret") && text.contains(why),
            "{secret}: {text}"
        );
        assert!(!text.contains(secret), "the secret was echoed: {text}");
    }
}

#[test]
fn absurd_backoff_flags_stop_start_up_naming_the_flag() {
    for flag in [
        "--send-backoff-base",
        "--send-backoff-max",
        "--verify-backoff-base",
        "--verify-backoff-max",
    ] {
        let out = serve_refused(&[flag, "500000000000y", "--kafka-brokers", "127.0.0.1:9"]);
        let text = said(&out);
        assert!(
            text.contains(flag) && text.contains("must be at most 30days"),
            "{flag}: {text}"
        );
        assert!(!text.contains("panicked"), "{flag}: {text}");
    }
}

/// A Kafka setting that would have librdkafka dial the cloud metadata
/// service, or a token endpoint on a link-local address, stops start-up
/// before the database is opened or any client is made.
#[test]
fn kafka_settings_that_would_dial_link_local_addresses_stop_start_up() {
    for setting in [
        "sasl.oauthbearer.metadata.authentication.type=azure_imds",
        "sasl.oauthbearer.token.endpoint.url=http://169.254.169.254/metadata/identity/oauth2/token",
    ] {
        let out = serve_refused(&["--kafka-brokers", "127.0.0.1:9", "--kafka-config", setting]);
        let text = said(&out);
        assert!(
            text.contains("--kafka-config") && text.contains("trustmsg never dials it"),
            "{setting}: {text}"
        );
        assert!(!text.contains("panicked"), "{setting}: {text}");
    }
}
