//! A consumer that processes each trustmsg message once, in effect: the
//! billing side of `order_service.rs` (cargo feature `kafka`).
//!
//! Each record of `orders` is charged in ONE local transaction with its
//! inbox row (`trustmsg_client::inbox`): a repeat (the forwarder's retry, a
//! restart before the offset commit) is skipped, two deliveries at once run
//! the charge once, and a failed charge leaves nothing, so the record is read
//! again. The offset is committed only after that transaction.
//!
//! ```text
//! cargo run --release -p trustmsg -- dev
//! mysql -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS billing'
//! . trustmsg-dev/env
//! cargo run --release -p trustmsg-client --features kafka --example inbox_consumer -- \
//!     --brokers "$TRUSTMSG_BROKERS"
//! ```

use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Message as _;
use sqlx::MySqlPool;
use trustmsg_client::inbox::{self, Processed};

/// A billing consumer of the `orders` topic.
#[derive(Debug, Parser)]
struct Args {
    /// Kafka's bootstrap servers.
    #[arg(long, env = "TRUSTMSG_BROKERS")]
    brokers: String,
    /// The topic to consume.
    #[arg(long, default_value = "orders")]
    topic: String,
    /// The consumer group: also the inbox's group.
    #[arg(long, default_value = "billing")]
    group: String,
    /// This consumer's own database (the inbox table is created in it).
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306/billing")]
    database_url: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt::init();
    let args = Args::parse();
    let pool = MySqlPool::connect(&args.database_url).await?;
    inbox::create_table(&pool).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS charges (message_id BIGINT UNSIGNED PRIMARY KEY, \
         order_json JSON NOT NULL)",
    )
    .execute(&pool)
    .await?;
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.brokers)
        .set("group.id", &args.group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&[&args.topic])?;
    loop {
        let record = consumer.recv().await?;
        let order = record.payload().unwrap_or_default().to_vec();
        let id = inbox::message_id(&record);
        let done = inbox::process(&pool, &args.group, &record, move |conn| {
            Box::pin(async move {
                sqlx::query("INSERT INTO charges (message_id, order_json) VALUES (?, ?)")
                    .bind(id)
                    .bind(String::from_utf8_lossy(&order).into_owned())
                    .execute(&mut *conn)
                    .await?;
                Ok::<_, sqlx::Error>(())
            })
        })
        .await;
        match done {
            Ok(Processed::Done(())) => println!("charged message {id:?}"),
            Ok(Processed::Repeat) => println!("message {id:?} again: skipped"),
            // Not processed: the offset is not committed, the record comes again.
            Err(e) => {
                eprintln!("message {id:?} not processed: {e}");
                continue;
            }
        }
        consumer.commit_message(&record, CommitMode::Async)?;
    }
}
