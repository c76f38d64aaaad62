//! The flags, parsed and checked as `trustmsg serve` does.

use super::*;

#[test]
fn secrets_never_print() {
    let s = Secret::new("hunter2");
    assert_eq!(format!("{s:?}"), "Secret(***)");
    let args = ServeArgs::from_args([
        "--database-url",
        "mysql://u:db-pw%23@h/db",
        "--replica-url",
        "mysql://u:replica-pw@h/db",
        "--admin-token",
        "tok",
        "--kafka-brokers",
        "k:9093",
        "--kafka-config",
        "sasl.password=kafka-pw",
        "--alert-webhook",
        "https://u:webhook-pw@hooks.test/alerts",
        "--otlp-endpoint",
        "http://u:otlp-pw@collector.test:4318",
    ])
    .unwrap();
    let dump = format!("{args:?}");
    assert!(!dump.contains("-pw") && !dump.contains("tok\""), "{dump}");
    assert!(dump.contains("mysql://u:***@h/db"), "{dump}");
    let dump = format!("{:?}", args.settings().unwrap());
    assert!(
        !dump.contains("-pw") && dump.contains("sasl.password"),
        "{dump}"
    );
}

#[test]
fn a_url_flag_that_cannot_be_used_is_refused_naming_the_flag_but_not_the_password() {
    for (flag, value) in [
        (
            "--database-url",
            "mysql://root:hunter2#swordfish@127.0.0.1:1/x",
        ),
        (
            "--database-url",
            "mysql//root:hunter2swordfish@127.0.0.1:1/x",
        ),
        (
            "--replica-url",
            "mysql://root:hunter2/swordfish@127.0.0.1:1/x",
        ),
        ("--alert-webhook", "https://u:hunter2?swordfish@hooks.test/"),
        (
            "--otlp-endpoint",
            "http://u:hunter2#swordfish@collector.test:4318",
        ),
        ("--kafka-brokers", "u:hunter2swordfish@k:9092"),
    ] {
        let mut args = vec!["--admin-token", "t", flag, value];
        if flag != "--database-url" {
            args.extend(["--database-url", "sqlite://x.db"]);
        }
        let err = ServeArgs::from_args(args).expect_err(value).to_string();
        assert!(
            !err.contains("hunter2") && !err.contains("swordfish"),
            "{flag}: {err}"
        );
        assert!(err.contains(flag), "{flag}: {err}");
    }
}

#[test]
fn durations_parse_the_human_way() {
    let args = ServeArgs::from_args([
        "--database-url",
        "sqlite://x.db",
        "--first-verify-after",
        "250ms",
        "--verify-backoff-max",
        "5m",
    ])
    .unwrap();
    assert_eq!(args.verifier.first_verify_after, Duration::from_millis(250));
    assert_eq!(args.verifier.verify_backoff_max, Duration::from_secs(300));
    assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
}

fn parse(extra: &[&str]) -> Result<ServeArgs, clap::Error> {
    let mut args = vec!["--database-url", "sqlite://x.db", "--admin-token", "t"];
    args.extend_from_slice(extra);
    ServeArgs::from_args(args)
}

/// The first line of a refusal, which is all an operator sees.
fn refusal(extra: &[&str]) -> String {
    match parse(extra) {
        Err(e) => e.to_string().lines().next().unwrap_or_default().to_string(),
        Ok(args) => args.settings().expect_err("refused").to_string(),
    }
}

#[test]
fn zero_counts_are_refused_while_parsing_naming_the_flag() {
    for flag in [
        "--write-workers",
        "--write-batch",
        "--max-payload-bytes",
        "--max-concurrent-requests",
        "--sweep-batch",
        "--max-send-attempts",
        "--send-concurrency",
        "--max-verify-attempts",
        "--verify-batch",
        "--verify-concurrency",
        "--verify-concurrency-per-producer",
    ] {
        let why = refusal(&[flag, "0"]);
        assert!(
            why.contains(flag) && why.contains("at least 1"),
            "{flag}: {why}"
        );
        assert!(parse(&[flag, "1"]).is_ok(), "{flag} 1 is fine");
    }
}

#[test]
fn zero_intervals_timeouts_and_leases_are_refused_while_parsing_naming_the_flag() {
    for flag in [
        "--sweep-interval",
        "--verify-interval",
        "--kafka-message-timeout",
        "--send-lease",
        "--verify-timeout",
        "--send-backoff-base",
        "--send-backoff-max",
        "--verify-backoff-base",
        "--verify-backoff-max",
        "--request-timeout",
    ] {
        let why = refusal(&[flag, "0s"]);
        assert!(
            why.contains(flag) && why.contains("longer than 0"),
            "{flag}: {why}"
        );
    }
    for flag in [
        "--send-backoff-base",
        "--send-backoff-max",
        "--verify-backoff-base",
        "--verify-backoff-max",
    ] {
        let why = refusal(&[flag, "1000000000y"]);
        assert!(
            why.contains(flag) && why.contains("at most 30days"),
            "{flag}: {why}"
        );
        assert!(parse(&[flag, "30d"]).is_ok(), "{flag} 30d is fine");
    }
    // A first check at once and no grace period are meaningful.
    assert!(parse(&["--first-verify-after", "0s", "--shutdown-grace", "0s"]).is_ok());
}

#[test]
fn a_lease_not_longer_than_what_it_covers_is_refused_naming_both_flags() {
    let why = refusal(&[
        "--kafka-brokers",
        "127.0.0.1:9",
        "--kafka-message-timeout",
        "30s",
        "--send-lease",
        "30s",
    ]);
    assert!(
        why.contains("--send-lease (30s) must be longer than --kafka-message-timeout (30s)"),
        "{why}"
    );
    // Without a forwarder in this instance the send lease covers no send here.
    let api_only = parse(&["--send-lease", "100ms"]).unwrap();
    assert!(api_only.settings().is_ok());

    let why = refusal(&["--verify-timeout", "10s", "--verify-timeout-max", "5s"]);
    assert!(
        why.contains("--verify-timeout (10s) must not be longer than --verify-timeout-max (5s)"),
        "{why}"
    );
}

#[test]
fn a_check_back_claim_covers_its_call_plus_the_margin_and_by_default_ends_within_ten_seconds_of_it()
{
    let settings = |args: &[&str]| parse(args).unwrap().settings().unwrap();
    let default = settings(&[]).verifier.expect("verifier on");
    assert_eq!(
        default.lease,
        VerifyLease {
            margin: Duration::from_secs(5),
            max_timeout: Duration::from_secs(120),
        }
    );
    // The goal: after a crash, another instance checks a row again
    // within its producer's timeout + 10 s. The claim ends the margin
    // after the call could, and the next round comes an interval later.
    assert!(
        default.lease.margin + default.interval <= Duration::from_secs(10),
        "margin {:?} + interval {:?}",
        default.lease.margin,
        default.interval
    );
    let two_seconds = default.lease.covering(Some(2_000));
    assert_eq!(two_seconds, Duration::from_secs(7));
    // A registration made under a higher cap is covered up to the cap; an
    // unregistered producer for the cap.
    let capped = settings(&["--verify-timeout-max", "3s", "--verify-timeout", "1s"])
        .verifier
        .unwrap()
        .lease;
    assert_eq!(capped.covering(Some(60_000)), Duration::from_secs(8));
    assert_eq!(capped.covering(None), Duration::from_secs(8));
    let custom = settings(&["--verify-lease-margin", "2s"]).verifier.unwrap();
    assert_eq!(custom.lease.margin, Duration::from_secs(2));
}

#[test]
fn a_lease_margin_under_a_second_is_refused_while_parsing() {
    for short in ["0s", "999ms"] {
        let why = refusal(&["--verify-lease-margin", short]);
        assert!(
            why.contains("--verify-lease-margin") && why.contains("at least 1s"),
            "{short}: {why}"
        );
    }
    assert!(parse(&["--verify-lease-margin", "1s"]).is_ok());
}

#[test]
fn a_payload_limit_whose_record_would_not_fit_kafka_is_refused_naming_both_flags() {
    let why = refusal(&["--max-payload-bytes", "1048576"]);
    assert!(
        why.contains(
            "--max-payload-bytes (1048576) does not fit --kafka-message-max-bytes (1000000)"
        ),
        "{why}"
    );
    let fits = why
        .split("at most ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .expect("the refusal names the largest payload that fits");
    assert!(parse(&["--max-payload-bytes", fits])
        .unwrap()
        .settings()
        .is_ok());
    let next = (fits.parse::<usize>().unwrap() + 1).to_string();
    assert!(parse(&["--max-payload-bytes", &next])
        .unwrap()
        .settings()
        .is_err());
    assert!(parse(&[
        "--max-payload-bytes",
        "1048576",
        "--kafka-message-max-bytes",
        "1100000"
    ])
    .unwrap()
    .settings()
    .is_ok());
    // The defaults agree with each other.
    let s = parse(&[]).unwrap().settings().unwrap();
    assert_eq!(
        (s.max_payload_bytes, s.max_record_bytes),
        (960_000, 1_000_000)
    );
}

#[test]
fn the_record_limit_reaches_librdkafka_and_a_disagreeing_override_is_refused() {
    let s = parse(&[
        "--kafka-brokers",
        "k:9092",
        "--kafka-message-max-bytes",
        "2000000",
    ])
    .unwrap()
    .settings()
    .unwrap();
    let Forwarding::Kafka { kafka, .. } = &s.forwarding else {
        panic!("forwarding on: {:?}", s.forwarding);
    };
    assert_eq!(kafka.message_max_bytes, 2_000_000);
    assert_eq!(s.max_record_bytes, 2_000_000);
    let why = refusal(&[
        "--kafka-brokers",
        "k:9092",
        "--kafka-config",
        "message.max.bytes=2000000",
    ]);
    assert!(why.contains("--kafka-message-max-bytes (1000000)"), "{why}");
}

#[test]
fn the_payload_budget_bounds_librdkafkas_queue_and_must_hold_the_largest_record() {
    let s = parse(&["--kafka-brokers", "k:9092"])
        .unwrap()
        .settings()
        .unwrap();
    let Forwarding::Kafka { kafka, config } = &s.forwarding else {
        panic!("forwarding on: {:?}", s.forwarding);
    };
    assert_eq!(config.payload_budget, 128 << 20);
    assert_eq!(kafka.queue_max_bytes, 128 << 20);
    assert_eq!(
        refusal(&[
            "--kafka-brokers",
            "k:9092",
            "--kafka-message-max-bytes",
            "3000000",
            "--payload-budget-mib",
            "2",
        ]),
        "--payload-budget-mib (2 MiB = 2097152 bytes) must be at least \
         --kafka-message-max-bytes (3000000): a message of the largest size could never be sent"
    );
    // Refused whether or not this instance forwards: the flags are wrong.
    assert!(refusal(&["--payload-budget-mib", "0"]).contains("--payload-budget-mib"));
    let why = refusal(&[
        "--kafka-brokers",
        "k:9092",
        "--kafka-config",
        "queue.buffering.max.kbytes=1048576",
    ]);
    assert!(why.contains("--payload-budget-mib"), "{why}");
}

#[test]
fn requests_are_answered_within_five_seconds_by_default() {
    let s = parse(&[]).unwrap().settings().unwrap();
    assert_eq!(s.request_timeout, Duration::from_secs(5));
    let s = parse(&["--request-timeout", "750ms"])
        .unwrap()
        .settings()
        .unwrap();
    assert_eq!(s.request_timeout, Duration::from_millis(750));
}

#[test]
fn no_admin_token_is_refused_unless_insecure() {
    let args = ServeArgs::from_args(["--database-url", "sqlite://x.db"]).unwrap();
    assert!(args
        .settings()
        .unwrap_err()
        .to_string()
        .contains("--admin-token"));
    let args =
        ServeArgs::from_args(["--database-url", "sqlite://x.db", "--insecure-no-auth"]).unwrap();
    assert!(args.settings().is_ok());
}

#[test]
fn settings_carry_the_flags_to_each_component() {
    let s = parse(&[
        "--kafka-brokers",
        "k:9092",
        "--kafka-config",
        "linger.ms=1",
        "--write-workers",
        "3",
        "--verify-batch",
        "7",
        "--verify-backoff-base",
        "1s",
        "--verify-backoff-max",
        "9s",
        "--send-lease",
        "45s",
    ])
    .unwrap()
    .settings()
    .unwrap();
    let Forwarding::Kafka { kafka, config } = &s.forwarding else {
        panic!("forwarding on: {:?}", s.forwarding);
    };
    assert_eq!(kafka.brokers, "k:9092");
    assert_eq!(kafka.extra, vec![("linger.ms".into(), "1".into())]);
    assert_eq!(config.send_lease, Duration::from_secs(45));
    let v = s.verifier.expect("verifier on");
    assert_eq!(v.batch, 7);
    assert_eq!(v.send_lease, Duration::from_secs(45));
    assert_eq!(
        v.backoff,
        Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(9)
        }
    );
    assert_eq!(s.writes.workers.get(), 3);
    let off = parse(&[]).unwrap().settings().unwrap();
    assert!(matches!(off.forwarding, Forwarding::Off { .. }));
    assert_eq!(
        (off.writes.send_lease, off.verifier.map(|v| v.send_lease)),
        (Duration::ZERO, Some(Duration::ZERO)),
        "without a forwarder a commit claims nothing: it is due at once"
    );
}

#[test]
fn resolve_overrides_go_through_the_policy() {
    let s = parse(&[
        "--verify-resolve",
        "canary.test=127.0.0.2,ok.test=127.0.0.1",
        "--verify-deny-cidr",
        "127.0.0.2/32",
    ])
    .unwrap()
    .settings()
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(s
            .address_policy
            .resolve_allowed("canary.test")
            .await
            .is_err());
        assert_eq!(
            s.address_policy.resolve_allowed("ok.test").await,
            Ok(vec!["127.0.0.1".parse().unwrap()])
        );
    });
}

#[test]
fn an_outbox_source_and_trustmsgs_own_database_may_both_be_postgresql() {
    let args = parse(&[
        "--outbox-source",
        "shop=postgres://relay:hunter2@db:5432/shop?sslmode=verify-full",
    ])
    .unwrap();
    let outbox = args.settings().unwrap().outbox.expect("a source");
    assert_eq!(outbox.sources[0].0, "shop");
    assert_eq!(
        outbox.sources[0].1.backend(),
        crate::store::Backend::Postgres
    );
    assert_eq!(
        outbox.sources[0].1.to_string(),
        "postgres://relay:***@db:5432/shop?sslmode=verify-full"
    );
    let own = ServeArgs::from_args(vec![
        "--database-url",
        "postgres://u:hunter2@db/trustmsg?sslmode=verify-full",
        "--admin-token",
        "t",
    ])
    .expect("a PostgreSQL store");
    let urls = own.database.urls();
    assert_eq!(urls[0].backend(), crate::store::Backend::Postgres);
    assert!(!format!("{:?}", urls[0]).contains("hunter2"));
}

#[test]
fn an_archive_without_retention_or_on_sqlite_or_of_an_unknown_kind_is_refused() {
    let refused = |extra: &[&str]| {
        let mut args = vec!["--admin-token", "t", "--kafka-brokers", "k:9092"];
        args.extend_from_slice(extra);
        ServeArgs::from_args(args)
            .unwrap()
            .settings()
            .unwrap_err()
            .to_string()
    };
    let mysql = ["--database-url", "mysql://u@h/db"];
    let e = refused(
        &[
            &mysql[..],
            &["--retention", "0s", "--archive", "file:///tmp/a"],
        ]
        .concat(),
    );
    assert!(e.contains("--archive needs --retention"), "{e}");
    let e = refused(&[
        "--database-url",
        "sqlite://x.db",
        "--retention",
        "7d",
        "--archive",
        "file:///tmp/a",
    ]);
    assert!(e.contains("MySQL/MariaDB or PostgreSQL"), "{e}");
    let e = refused(&[&mysql[..], &["--retention", "7d", "--archive", "ftp://h/a"]].concat());
    assert!(e.starts_with("--archive:"), "{e}");
    let ok = ServeArgs::from_args(
        [
            &mysql[..],
            &[
                "--admin-token",
                "t",
                "--kafka-brokers",
                "k:9092",
                "--retention",
                "7d",
                "--archive",
                "file:///tmp/a",
            ],
        ]
        .concat(),
    )
    .unwrap();
    assert!(ok.settings().unwrap().archive.is_some());
}
