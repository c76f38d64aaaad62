//! `trustmsg dev`: the whole loop on one machine with nothing installed.
//!
//! - the store is SQLite in `<data>/trustmsg.db`, migrated at start (or the
//!   database given as `-- --database-url URL`, migrated too);
//! - Kafka is librdkafka's mock cluster, in this process, reached through a
//!   fixed bootstrap address (`--kafka-listen`, default `127.0.0.1:9092`);
//!   topics are created the first time a producer writes to them;
//! - the admin API and the console are on, with an admin token, and a demo
//!   producer is registered with short check-back delays;
//! - the Kafka way in is on: signed prepare, commit and rollback records on
//!   `trustmsg.submit` (created at start, 3 partitions) are applied, and what
//!   cannot be is on `trustmsg.submit.dlq` (docs/kafka-submit.md);
//! - the local message table is on: `<data>/trustmsg-dev-outbox.db` is a
//!   SQLite outbox source (its table created at start) relayed for the demo
//!   producer, so a row inserted there appears on its topic (docs/outbox.md);
//! - the tokens and the signing secret are kept in `<data>/env` (a shell file
//!   to source), so a restart keeps them; `--reset` starts clean.
//!
//! It is `trustmsg serve` with these settings: every message goes through the
//! same code as in production.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::Rng;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use trustmsg::api::hash_token;
use trustmsg::config::ServeArgs;
use trustmsg::outbox::schema::{schema, SchemaDialect};
use trustmsg::startup::Application;
use trustmsg_kafka_mock::MockKafka;
use trustmsg_verify_api::{ProducerSettings, ProducerView, SigningSecret};

use crate::serve_flags::ServeFlags;

/// The first check-back after a prepare, for the demo producer and as the
/// dev default for others (`--first-verify-after`).
const FIRST_CHECK_SECS: u64 = 5;
/// The same, as the registration takes it.
const FIRST_CHECK_MS: u32 = FIRST_CHECK_SECS as u32 * 1000;

/// The database file inside `--data`.
const DB_FILE: &str = "trustmsg.db";
/// The credentials file inside `--data`.
const ENV_FILE: &str = "env";
/// The demo outbox source inside `--data`: a producer's own database, as
/// far as trustmsg is concerned.
const OUTBOX_FILE: &str = "trustmsg-dev-outbox.db";

/// `trustmsg dev` flags.
#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// Directory for the SQLite database and the dev credentials (`env`).
    #[arg(long, env = "TRUSTMSG_DEV_DATA", default_value = "trustmsg-dev")]
    pub(crate) data: PathBuf,

    /// Delete the database and credentials in `--data` first.
    #[arg(long)]
    pub(crate) reset: bool,

    /// Where the HTTP API and the console listen.
    #[arg(long, env = "TRUSTMSG_LISTEN", default_value = "127.0.0.1:8080")]
    pub(crate) listen: SocketAddr,

    /// The in-process Kafka broker's bootstrap address.
    #[arg(
        long,
        env = "TRUSTMSG_DEV_KAFKA_LISTEN",
        default_value = "127.0.0.1:9092"
    )]
    pub(crate) kafka_listen: SocketAddr,

    /// A Kafka of your own (bootstrap `HOST:PORT[,HOST:PORT…]`, plaintext)
    /// instead of the in-process broker: dev mode then starts none, creates
    /// the submit topic there if it is missing, and its banner and `env`
    /// name this bootstrap. Options after `--` (`--kafka-config`) reach
    /// the service as with `serve`.
    #[arg(
        long,
        env = "TRUSTMSG_DEV_KAFKA_BROKERS",
        conflicts_with = "kafka_listen"
    )]
    pub(crate) kafka_brokers: Option<String>,

    /// The demo producer's biz_id.
    #[arg(long, default_value = "order-service")]
    pub(crate) demo_biz_id: String,

    /// The demo producer's check endpoint (the SDK example's by default).
    #[arg(long, default_value = "http://127.0.0.1:3000/trustmsg/check")]
    pub(crate) demo_verify_url: String,

    /// More `trustmsg serve` flags, after `--`; they replace dev's own.
    #[arg(last = true)]
    pub(crate) serve_args: Vec<String>,
}

/// The demo producer's check-back: each call cut off after 3 s, 5 attempts
/// before VERIFY_FAILED (the banner says so; a slow or restarting producer
/// meets both).
const DEMO_VERIFY_TIMEOUT_MS: u32 = 3000;
const DEMO_VERIFY_ATTEMPTS: u32 = 5;

/// The serve flags dev mode sets, each replaceable after `--`. Short delays so
/// that a check-back can be watched: every 2–10 s after the first
/// (`FIRST_CHECK_SECS`, set separately).
const DEV_SERVE_FLAGS: &[(&str, &str)] = &[
    ("--verify-timeout", "3s"),
    ("--max-verify-attempts", "5"),
    ("--verify-backoff-base", "2s"),
    ("--verify-backoff-max", "10s"),
    ("--send-backoff-base", "1s"),
    ("--send-backoff-max", "10s"),
    ("--kafka-message-timeout", "10s"),
    ("--backlog-interval", "5s"),
    ("--shutdown-grace", "2s"),
    ("--submit-topic", DEV_SUBMIT_TOPIC),
];

/// The topic dev mode consumes submitted records from.
const DEV_SUBMIT_TOPIC: &str = "trustmsg.submit";

/// What a dev instance prints and keeps in `<data>/env`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Credentials {
    admin_token: String,
    demo_token: Option<String>,
}

/// Runs dev mode until SIGINT/SIGTERM cancels `stop`.
pub(crate) async fn run(args: DevArgs, stop: CancellationToken) -> anyhow::Result<()> {
    let data = &args.data;
    if args.reset {
        reset(data)?;
    }
    std::fs::create_dir_all(data)
        .with_context(|| format!("creating the data directory {}", data.display()))?;
    let saved = read_credentials(&data.join(ENV_FILE))?;
    let admin_token = saved
        .as_ref()
        .map(|c| c.admin_token.clone())
        .unwrap_or_else(|| random_token("tm_admin_"));

    let broker = match &args.kafka_brokers {
        None => Some(KafkaForDev::start(args.kafka_listen, stop.clone()).await?),
        Some(_) => None,
    };
    let (internal, bootstrap) = match (&broker, &args.kafka_brokers) {
        (Some(b), _) => (b.internal_bootstrap().to_string(), b.bootstrap.to_string()),
        (None, Some(given)) => (given.clone(), given.clone()),
        (None, None) => unreachable!("a broker is started when none is given"),
    };
    let serve = serve_args(&args, &admin_token, &internal)?;
    // A consumer does not create the topic it subscribes to: the broker
    // must have it before the service subscribes.
    let submit_topic = serve.submit.submit_topic.clone();
    if let Some(topic) = &submit_topic {
        match &broker {
            Some(b) => b.mock.create_topic(topic, 3),
            None => create_topic(&serve, &internal, topic, 3).await?,
        }
    }
    let outbox = demo_outbox(&args, &serve);
    let store_line = store_shown(&args, &serve);
    if let Some(outbox) = &outbox {
        outbox.create().await?;
    }
    let app = Application::build(serve).await.with_context(|| {
        format!(
            "starting the service on {} (--listen chooses another address)",
            args.listen
        )
    })?;
    let base = format!("http://{}", app.address());
    let shutdown = app.shutdown_token();
    let stop_app = stop.clone();
    tokio::spawn(async move {
        stop_app.cancelled().await;
        shutdown.cancel();
    });
    let store = app.store().clone();
    let running = tokio::spawn(app.run_until_stopped());

    let demo = register_demo(&args, &base, &admin_token, saved.as_ref(), &store).await?;
    let creds = Credentials {
        admin_token,
        demo_token: Some(demo.token.clone()),
    };
    let kafka = DevKafka {
        bootstrap: &bootstrap,
        submit_topic: submit_topic.as_deref(),
    };
    write_credentials(&data.join(ENV_FILE), &base, &kafka, &creds, &demo)?;
    println!(
        "{}",
        banner(
            &args,
            &base,
            &kafka,
            &store_line,
            outbox.as_ref(),
            &creds.admin_token,
            &demo,
            &this_binary()
        )
    );

    let result = running.await.context("the service task")?;
    drop(broker);
    result
}

/// Creates `topic` with `partitions` at `brokers`, with `serve`'s
/// `--kafka-config`; one that exists already is left as it is.
async fn create_topic(
    serve: &ServeArgs,
    brokers: &str,
    topic: &str,
    partitions: i32,
) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::types::RDKafkaErrorCode;

    let f = &serve.forwarder;
    let mut config = rdkafka::ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (key, value) in trustmsg::net::kafka_settings::settings(&f.kafka_config)? {
        config.set(key, value);
    }
    let admin: AdminClient<DefaultClientContext> = config
        .create()
        .context("a Kafka admin client for the submit topic")?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .create_topics([&new], &options)
        .await
        .with_context(|| format!("creating the submit topic {topic} at {brokers}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating the submit topic {name} at {brokers}: {code}"),
        }
    }
    Ok(())
}

/// Deletes the dev database and the demo outbox (with their WAL files) and
/// the credentials.
fn reset(data: &Path) -> anyhow::Result<()> {
    for name in [
        DB_FILE.to_string(),
        format!("{DB_FILE}-wal"),
        format!("{DB_FILE}-shm"),
        OUTBOX_FILE.to_string(),
        format!("{OUTBOX_FILE}-wal"),
        format!("{OUTBOX_FILE}-shm"),
        ENV_FILE.to_string(),
    ] {
        let path = data.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("deleting {}", path.display())),
        }
    }
    Ok(())
}

/// `prefix` and 32 random bytes, URL-safe.
fn random_token(prefix: &str) -> String {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(secret))
}

/// The serve flags of a dev instance: dev's own, except those the user gave after `--`.
fn serve_args(args: &DevArgs, admin_token: &str, brokers: &str) -> anyhow::Result<ServeArgs> {
    let db = format!("sqlite://{}", args.data.join(DB_FILE).display());
    let listen = args.listen.to_string();
    let first_check = format!("{FIRST_CHECK_SECS}s");
    let outbox = format!("{}={}", args.demo_biz_id, outbox_url(args));
    let (argv, _) = ServeFlags::new(&args.serve_args)
        .fixed(&[
            ("--auto-migrate", None),
            ("--listen", Some(listen.as_str())),
            ("--admin-token", Some(admin_token)),
            ("--kafka-brokers", Some(brokers)),
        ])
        .map_err(|fixed| anyhow::anyhow!("{fixed} is set by dev mode (use --data, --listen or --kafka-listen); use `trustmsg serve` to choose it"))?
        .defaults(
            DEV_SERVE_FLAGS
                .iter()
                .copied()
                .chain([
                    // A store of the user's own (`-- --database-url
                    // mysql://…`) replaces the SQLite file: the SDKs'
                    // contract kit runs dev mode on MariaDB.
                    ("--database-url", db.as_str()),
                    ("--first-verify-after", first_check.as_str()),
                    ("--outbox-source", outbox.as_str()),
                ]),
        )
        .build();
    let serve = ServeArgs::from_args(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Dev mode's banner, credentials file and demo registration speak plain
    // HTTP to 127.0.0.1.
    if serve.tls.tls_cert.is_some() || serve.tls.tls_key.is_some() {
        anyhow::bail!(
            "dev mode serves plain HTTP on 127.0.0.1; use `trustmsg serve --tls-cert FILE --tls-key FILE` for HTTPS"
        );
    }
    serve.validate()?;
    Ok(serve)
}

/// The store as the banner shows it: dev's SQLite file, or the database given
/// after `--` (its password never shown).
fn store_shown(args: &DevArgs, serve: &ServeArgs) -> String {
    let sqlite = args.data.join(DB_FILE);
    match serve.database.urls() {
        [url] if url.expose_for_driver() == format!("sqlite://{}", sqlite.display()) => {
            format!("{}  (SQLite; --reset starts clean)", sqlite.display())
        }
        urls => urls
            .iter()
            .map(|u| u.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The demo outbox source's URL.
fn outbox_url(args: &DevArgs) -> String {
    format!("sqlite://{}", args.data.join(OUTBOX_FILE).display())
}

/// The demo outbox source, unless `--outbox-source` after `--` replaced it.
#[derive(Debug)]
struct DevOutbox {
    /// The SQLite file.
    path: PathBuf,
    /// The table in it (`--outbox-table`).
    table: String,
}

fn demo_outbox(args: &DevArgs, serve: &ServeArgs) -> Option<DevOutbox> {
    let url = outbox_url(args);
    serve
        .outbox
        .outbox_sources
        .iter()
        .any(|s| s.biz_id == args.demo_biz_id && s.url.expose_for_driver() == url)
        .then(|| DevOutbox {
            path: args.data.join(OUTBOX_FILE),
            table: serve.outbox.outbox_table.clone(),
        })
}

impl DevOutbox {
    /// Creates the file and its table when missing, as a producer's own
    /// migrations would. WAL, so that a reader never holds up the writers
    /// (the relay, `sqlite3`, an application).
    async fn create(&self) -> anyhow::Result<()> {
        use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
        use sqlx::{ConnectOptions, Connection};
        let mut conn = SqliteConnectOptions::new()
            .filename(&self.path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .connect()
            .await
            .with_context(|| format!("creating the demo outbox {}", self.path.display()))?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(schema(
            SchemaDialect::Sqlite,
            &self.table,
        )))
        .execute(&mut conn)
        .await
        .with_context(|| format!("creating the table of {}", self.path.display()))?;
        conn.close().await.ok();
        Ok(())
    }
}

/// The demo producer as registered: its token (shown once at creation, kept
/// in `<data>/env`) and its signing secret.
#[derive(Debug)]
struct Demo {
    biz_id: String,
    token: String,
    signing_secret: String,
    verify_url: String,
}

/// Registers (or updates) the demo producer through the admin API, as an
/// operator would. A saved token is kept when it still matches; otherwise
/// (no saved token, or rotated meanwhile) a new one is issued.
async fn register_demo(
    args: &DevArgs,
    base: &str,
    admin_token: &str,
    saved: Option<&Credentials>,
    store: &trustmsg::store::DynStore,
) -> anyhow::Result<Demo> {
    let http = reqwest::Client::new();
    let biz_id = &args.demo_biz_id;
    let url = format!("{base}/v1/producers/{biz_id}");
    let answer = http
        .put(&url)
        .bearer_auth(admin_token)
        .json(&ProducerSettings {
            verify_url: args.demo_verify_url.clone(),
            first_verify_after_ms: Some(FIRST_CHECK_MS),
            verify_timeout_ms: Some(DEMO_VERIFY_TIMEOUT_MS),
            max_verify_attempts: Some(DEMO_VERIFY_ATTEMPTS),
            // Any topic, said explicitly: a demo tries topics freely, and an
            // explicit list is not flagged as a missing one.
            topics: Some(vec!["*".into()]),
            ordered: false,
        })
        .send()
        .await
        .context("registering the demo producer")?;
    let status = answer.status();
    let body = answer.bytes().await.context("reading the registration")?;
    if !status.is_success() {
        bail!(
            "registering the demo producer {biz_id}: {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    let mut view: ProducerView =
        serde_json::from_slice(&body).context("reading the registration")?;
    let mut token = view.token.take();
    if token.is_none() {
        let stored = store
            .find_producer(biz_id)
            .await
            .context("reading the demo producer")?;
        let still_valid = |t: &&String| {
            stored
                .as_ref()
                .is_some_and(|p| p.token_hash == hash_token(t))
        };
        token = saved
            .and_then(|c| c.demo_token.as_ref())
            .filter(still_valid)
            .cloned();
    }
    let token = match token {
        Some(t) => t,
        None => {
            view = http
                .post(format!("{url}/rotate-token"))
                .bearer_auth(admin_token)
                .send()
                .await
                .context("issuing the demo producer's token")?
                .error_for_status()?
                .json()
                .await
                .context("reading the rotate-token answer")?;
            view.token
                .take()
                .context("the rotate-token answer has no token")?
        }
    };
    // An update (the demo producer of an earlier run) does not show the
    // secret: ask for it, as an operator would.
    let signing_secret = match view.signing_secret.take() {
        Some(s) => s,
        None => {
            let revealed: SigningSecret = http
                .post(format!("{url}/reveal-signing-secret"))
                .bearer_auth(admin_token)
                .header("x-trustmsg-operator", "trustmsg-dev")
                .send()
                .await
                .context("reading the demo producer's signing secret")?
                .error_for_status()?
                .json()
                .await
                .context("reading the reveal-signing-secret answer")?;
            revealed.signing_secret
        }
    };
    Ok(Demo {
        biz_id: biz_id.clone(),
        token,
        signing_secret,
        verify_url: args.demo_verify_url.clone(),
    })
}

/// Reads `<data>/env` as written by [`write_credentials`]; None when absent.
fn read_credentials(path: &Path) -> anyhow::Result<Option<Credentials>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let value = |key: &str| {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.trim_matches('\'').to_string())
    };
    Ok(
        value("TRUSTMSG_ADMIN_TOKEN").map(|admin_token| Credentials {
            admin_token,
            demo_token: value("TRUSTMSG_DEMO_TOKEN"),
        }),
    )
}

/// Writes `<data>/env`: shell exports for `trustmsg admin`, curl and the SDK
/// example. Readable by its owner only.
/// Where dev mode's Kafka is, and the submit topic if the Kafka way in is on.
struct DevKafka<'a> {
    bootstrap: &'a str,
    submit_topic: Option<&'a str>,
}

fn write_credentials(
    path: &Path,
    base: &str,
    kafka: &DevKafka<'_>,
    creds: &Credentials,
    demo: &Demo,
) -> anyhow::Result<()> {
    let bootstrap = kafka.bootstrap;
    let mut text = format!(
        "# trustmsg dev: what this instance runs with. Load it with `. {path}`.\n\
         export TRUSTMSG_URL='{base}'\n\
         export TRUSTMSG_ADMIN_TOKEN='{admin}'\n\
         export TRUSTMSG_BROKERS='{bootstrap}'\n\
         export TRUSTMSG_DEMO_BIZ_ID='{biz}'\n\
         export TRUSTMSG_DEMO_TOKEN='{token}'\n\
         export TRUSTMSG_DEMO_SIGNING_SECRET='{secret}'\n",
        path = path.display(),
        admin = creds.admin_token,
        biz = demo.biz_id,
        token = demo.token,
        secret = demo.signing_secret,
    );
    if let Some(topic) = kafka.submit_topic {
        text.push_str(&format!("export TRUSTMSG_SUBMIT_TOPIC='{topic}'\n"));
    }
    // Written beside it and renamed into place: whoever waits for the file
    // (a script, the contract kit) reads it whole or not at all, never the
    // empty file an open made before the write (the Go SDK's kit run once
    // read one and found no TRUSTMSG_URL).
    let fresh = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    use std::io::Write;
    options
        .open(&fresh)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&fresh, path))
        .with_context(|| format!("writing {}", path.display()))
}

/// What is running where, and what to try next. One argument per row of
/// the banner's table, each computed where it is known.
#[allow(clippy::too_many_arguments)]
fn banner(
    args: &DevArgs,
    base: &str,
    kafka: &DevKafka<'_>,
    store: &str,
    outbox: Option<&DevOutbox>,
    admin: &str,
    demo: &Demo,
    exe: &str,
) -> String {
    let bootstrap = kafka.bootstrap;
    let env = args.data.join(ENV_FILE);
    let key = "order-1";
    let mut rows = vec![
        ("API", base.to_string()),
        (
            "console",
            format!("{base}/console  (sign in with the admin token)"),
        ),
        (
            "Kafka",
            match args.kafka_brokers {
                None => format!("{bootstrap}  (bootstrap; records kept in memory)"),
                Some(_) => format!("{bootstrap}  (bootstrap; a broker of your own)"),
            },
        ),
        ("database", store.to_string()),
        ("admin token", admin.to_string()),
        ("producer", format!("{}  token {}", demo.biz_id, demo.token)),
        (
            "check-back",
            format!(
                "{}  (first after {FIRST_CHECK_SECS} s; {DEMO_VERIFY_ATTEMPTS} attempts, each cut off after {} s)",
                demo.verify_url,
                DEMO_VERIFY_TIMEOUT_MS / 1000
            ),
        ),
    ];
    if let Some(outbox) = outbox {
        rows.push((
            "outbox",
            format!(
                "{}  (SQLite; its {} rows are relayed for {})",
                outbox.path.display(),
                outbox.table,
                demo.biz_id
            ),
        ));
    }
    if let Some(topic) = kafka.submit_topic {
        rows.push((
            "Kafka way in",
            format!(
                "{topic}  (signed prepare/commit/rollback records; refused ones on \
                 {topic}.dlq; docs/kafka-submit.md)"
            ),
        ));
    }
    rows.push((
        "all of it",
        format!("{}  (`. {}` exports it)", env.display(), env.display()),
    ));
    let table: String = rows
        .iter()
        .map(|(label, value)| format!("  {label:<13} {value}\n"))
        .collect();
    format!(
        r#"
trustmsg dev is running (Ctrl-C stops it)

{table}
Try it, in another terminal:

  . {env}
  {exe} tail --brokers $TRUSTMSG_BROKERS --topic orders --from-beginning &
  curl -s $TRUSTMSG_URL/v1/messages/prepare -H "authorization: Bearer $TRUSTMSG_DEMO_TOKEN" \
    -H 'content-type: application/json' \
    -d '{{"biz_id":"{biz}","message_key":"{key}","topic":"orders","key":"42","payload":"{{\"total\":42}}"}}'
  curl -s $TRUSTMSG_URL/v1/messages/commit -H "authorization: Bearer $TRUSTMSG_DEMO_TOKEN" \
    -H 'content-type: application/json' -d '{{"biz_id":"{biz}","message_key":"{key}"}}'

A prepare left without commit or rollback is checked back after {FIRST_CHECK_SECS} s at the
producer's check endpoint; `{exe} admin messages list` shows where it is.
{outbox_way}{kafka_way}"#,
        biz = demo.biz_id,
        env = env.display(),
        outbox_way = outbox.map_or(String::new(), |o| format!(
            "\nThe local message table needs no call at all: a row inserted into the demo outbox (as a\n\
             producer does, in the transaction of its business change) is relayed as a committed\n\
             message of {biz}, and the tail above shows it on orders (docs/outbox.md):\n\n  \
             sqlite3 -cmd '.timeout 5000' {path} \"INSERT INTO {table} (message_key, topic, payload) \
             VALUES ('outbox-1', 'orders', 'hello from the outbox')\"\n",
            biz = demo.biz_id,
            path = o.path.display(),
            table = o.table,
        )),
        kafka_way = kafka.submit_topic.map_or(String::new(), |topic| format!(
            "\nA producer with only a Kafka client submits the same prepare and commit as records to\n\
             {topic}, signed with $TRUSTMSG_DEMO_SIGNING_SECRET: docs/kafka-submit.md shows it with\n\
             kcat and with the Rust SDK (trustmsg_client::submit::Submitter).\n"
        )),
    )
}

/// This binary's path as the user can type it: relative when under the
/// working directory (`target/release/trustmsg`).
fn this_binary() -> String {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("trustmsg"));
    std::env::current_dir()
        .ok()
        .and_then(|cwd| exe.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or(exe)
        .display()
        .to_string()
}

/// librdkafka's mock cluster behind a fixed address. The cluster binds an
/// ephemeral port of its own; a TCP relay on `--kafka-listen` carries the
/// bootstrap connection to it, and clients then follow the broker address
/// the cluster advertises in its metadata (also on 127.0.0.1).
struct KafkaForDev {
    mock: MockKafka,
    bootstrap: SocketAddr,
}

impl KafkaForDev {
    async fn start(listen: SocketAddr, stop: CancellationToken) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(listen).await.with_context(|| {
            format!(
                "the dev Kafka broker cannot listen on {listen} (is a Kafka already running \
                 there?); choose another address with --kafka-listen"
            )
        })?;
        let bootstrap = listener.local_addr()?;
        let mock = tokio::task::spawn_blocking(|| MockKafka::start_restartable(1))
            .await
            .context("starting the in-process Kafka broker")?;
        let target = mock.bootstrap().to_string();
        tokio::spawn(relay(listener, target, stop));
        Ok(Self { mock, bootstrap })
    }

    /// The cluster's own address, for this process's forwarder.
    fn internal_bootstrap(&self) -> &str {
        self.mock.bootstrap()
    }
}

/// Carries each connection accepted on `listener` to `target`, both ways.
async fn relay(listener: TcpListener, target: String, stop: CancellationToken) {
    loop {
        let (mut client, _) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "dev Kafka relay: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let target = target.clone();
        tokio::spawn(async move {
            match TcpStream::connect(&target).await {
                Ok(mut broker) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                }
                Err(e) => tracing::warn!(error = %e, "dev Kafka relay: broker unreachable"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(extra: &[&str]) -> DevArgs {
        DevArgs {
            data: PathBuf::from("some/dir"),
            reset: false,
            listen: "127.0.0.1:8080".parse().unwrap(),
            kafka_listen: "127.0.0.1:9092".parse().unwrap(),
            kafka_brokers: None,
            demo_biz_id: "order-service".into(),
            demo_verify_url: "http://127.0.0.1:3000/trustmsg/check".into(),
            serve_args: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn serve_flags_after_the_double_dash_replace_dev_defaults() {
        let serve = serve_args(
            &dev(&["--first-verify-after=1s", "--max-verify-attempts", "9"]),
            "t",
            "127.0.0.1:1",
        )
        .unwrap();
        assert_eq!(serve.verifier.first_verify_after, Duration::from_secs(1));
        assert_eq!(serve.verifier.max_verify_attempts.get(), 9);
        assert_eq!(serve.verifier.verify_backoff_base, Duration::from_secs(2));
        let urls: Vec<_> = serve
            .database
            .urls()
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(urls, ["sqlite://some/dir/trustmsg.db"]);
    }

    #[test]
    fn a_database_url_after_the_double_dash_replaces_the_sqlite_store() {
        let mine = dev(&["--database-url", "mysql://kit:s3cret@127.0.0.1:3306/tm_kit"]);
        let serve = serve_args(&mine, "t", "127.0.0.1:1").unwrap();
        let urls: Vec<_> = serve
            .database
            .urls()
            .iter()
            .map(|u| u.expose_for_driver().to_string())
            .collect();
        assert_eq!(urls, ["mysql://kit:s3cret@127.0.0.1:3306/tm_kit"]);
        let shown = store_shown(&mine, &serve);
        assert!(shown.contains("127.0.0.1:3306/tm_kit"), "{shown}");
        assert!(!shown.contains("s3cret"), "the password is shown: {shown}");
        assert!(
            store_shown(&dev(&[]), &serve_args(&dev(&[]), "t", "b").unwrap()).contains("(SQLite")
        );
    }

    #[test]
    fn the_demo_outbox_is_relayed_for_the_demo_producer_unless_replaced() {
        let serve = serve_args(&dev(&[]), "t", "127.0.0.1:1").unwrap();
        let outbox = demo_outbox(&dev(&[]), &serve).expect("on by default");
        assert_eq!(outbox.path, Path::new("some/dir/trustmsg-dev-outbox.db"));
        assert_eq!(outbox.table, "trustmsg_outbox");

        let mine = dev(&["--outbox-source=order-service=mysql://root@127.0.0.1:3306/shop"]);
        let serve = serve_args(&mine, "t", "127.0.0.1:1").unwrap();
        assert_eq!(serve.outbox.outbox_sources.len(), 1, "replaced, not added");
        assert!(demo_outbox(&mine, &serve).is_none());
    }

    #[test]
    fn the_flags_dev_mode_owns_are_refused_after_the_double_dash() {
        let err = serve_args(&dev(&["--listen", "0.0.0.0:1"]), "t", "b").unwrap_err();
        assert!(
            err.to_string().contains("--listen is set by dev mode"),
            "{err}"
        );
    }

    #[test]
    fn https_is_refused_with_a_pointer_to_serve() {
        let err = serve_args(
            &dev(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]),
            "t",
            "b",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("use `trustmsg serve --tls-cert"),
            "{err}"
        );
    }

    #[test]
    fn credentials_survive_a_write_and_a_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ENV_FILE);
        let creds = Credentials {
            admin_token: "tm_admin_x".into(),
            demo_token: Some("tm_b3Jk.y".into()),
        };
        let demo = Demo {
            biz_id: "order-service".into(),
            token: "tm_b3Jk.y".into(),
            signing_secret: "whsec_z".into(),
            verify_url: "http://127.0.0.1:3000/c".into(),
        };
        let kafka = DevKafka {
            bootstrap: "127.0.0.1:9092",
            submit_topic: Some(DEV_SUBMIT_TOPIC),
        };
        write_credentials(&path, "http://127.0.0.1:8080", &kafka, &creds, &demo).unwrap();
        assert_eq!(read_credentials(&path).unwrap(), Some(creds));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("export TRUSTMSG_SUBMIT_TOPIC='trustmsg.submit'"),
            "{text}"
        );
        assert_eq!(read_credentials(&dir.path().join("none")).unwrap(), None);
    }
}
