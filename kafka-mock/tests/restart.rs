//! A restartable mock cluster: refused while its state is lost, back at the
//! same address with empty topics, and a reader that reads on across it.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use trustmsg_kafka_mock::{MockKafka, TopicReader};
use trustmsg_verify_api::kafka_headers;

fn producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "3000")
        .create()
        .unwrap()
}

async fn send(p: &FutureProducer, id: u64) -> Result<i64, RDKafkaErrorCode> {
    let id = id.to_string();
    let headers = OwnedHeaders::new().insert(Header {
        key: kafka_headers::MESSAGE_ID,
        value: Some(id.as_bytes()),
    });
    let record = FutureRecord::<str, str>::to("t")
        .payload(&id)
        .headers(headers);
    p.send(record, Duration::from_secs(1))
        .await
        .map(|d| d.offset)
        .map_err(|(e, _)| e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_comes_back_empty_at_the_same_address_and_the_reader_reads_on() {
    let kafka = MockKafka::start_restartable(1);
    kafka.create_topic("t", 1);
    let mut reader = TopicReader::new(kafka.bootstrap(), "t");
    let old = producer(kafka.bootstrap());
    for id in 1..=3 {
        assert_eq!(send(&old, id).await, Ok(id as i64 - 1));
    }
    reader
        .read_until(Duration::from_secs(20), "the first three", |r| r.len() == 3)
        .await;

    kafka.lose_state();
    let refused = std::net::TcpStream::connect(kafka.bootstrap());
    assert!(refused.is_err(), "a lost broker refuses connections");
    assert_eq!(
        send(&old, 4).await,
        Err(RDKafkaErrorCode::MessageTimedOut),
        "nothing is taken while the state is lost"
    );
    kafka.come_back_empty();

    let fresh = producer(kafka.bootstrap());
    assert_eq!(send(&fresh, 5).await, Ok(0), "the new log starts at 0");
    assert_eq!(send(&fresh, 6).await, Ok(1));
    reader
        .read_until(
            Duration::from_secs(20),
            "the records sent after the restart",
            |r| r.len() == 5,
        )
        .await;
    let seen: Vec<(u64, i64)> = reader
        .records
        .iter()
        .map(|r| (r.message_id, r.offset))
        .collect();
    assert_eq!(seen, [(1, 0), (2, 1), (3, 2), (5, 0), (6, 1)]);
}
