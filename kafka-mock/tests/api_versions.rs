//! Clients that are not librdkafka open with an ApiVersions request newer
//! than the mock broker implements (Java's kafka-clients v4, franz-go v5,
//! @platformatic/kafka v3). Through the proxies of a restartable cluster
//! (what `trustmsg dev` serves), such a request is answered in version 0's
//! shape, as KIP-511 says a broker must, and the client's retry at a version
//! the mock implements reaches the mock.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use trustmsg_kafka_mock::MockKafka;

/// An ApiVersions request of `version` with correlation id `correlation`
/// (client id "t"; from version 3 the flexible header and body).
fn api_versions(version: i16, correlation: i32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&correlation.to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes());
    body.push(b't');
    if version >= 3 {
        body.push(0); // header tags
        body.extend_from_slice(&[2, b'j']); // client_software_name "j"
        body.extend_from_slice(&[2, b'1']); // client_software_version "1"
        body.push(0); // body tags
    }
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

fn answer(conn: &mut TcpStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    conn.read_exact(&mut size).unwrap();
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    conn.read_exact(&mut body).unwrap();
    body
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

#[test]
fn a_newer_api_versions_request_is_answered_in_version_0s_shape_and_the_retry_reaches_the_mock() {
    let kafka = MockKafka::start_restartable(1);
    let mut conn = TcpStream::connect(kafka.bootstrap()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    conn.write_all(&api_versions(4, 7)).unwrap();
    let refused = answer(&mut conn);
    assert_eq!(
        refused,
        [
            0, 0, 0, 7, // correlation id
            0, 35, // UNSUPPORTED_VERSION
            0, 0, 0, 1, // one entry, an INT32 count as in version 0
            0, 18, 0, 0, 0, 2, // ApiVersions: versions 0 to 2
        ],
        "{refused:?}"
    );

    conn.write_all(&api_versions(2, 8)).unwrap();
    let granted = answer(&mut conn);
    assert_eq!(i32::from_be_bytes(granted[..4].try_into().unwrap()), 8);
    assert_eq!(
        i16_at(&granted, 4),
        0,
        "no error at a version the mock implements"
    );
    let count = i32::from_be_bytes(granted[6..10].try_into().unwrap());
    assert!(count > 10, "the mock's whole list of APIs: {count}");
}
