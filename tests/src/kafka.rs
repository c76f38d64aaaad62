//! Kafka for tests: librdkafka's mock cluster on a thread of its own, with
//! fault injection, and the one consumer (a thread per topic feeding a
//! channel) with [`TopicReader`] to collect what a topic holds by now.
//! All of it is `trustmsg-kafka-mock`'s, shared with `trustmsg bench`.

pub use trustmsg_kafka_mock::{
    consume, record_headers, Consumed, MockKafka, RDKafkaApiKey, RDKafkaRespErr, StopFlag,
    TopicReader,
};
