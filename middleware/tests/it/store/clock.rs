//! The clock (`docs/architecture.md`, Storage): UTC from the database, millisecond precision.

use std::time::Duration;

use chrono::Utc;
use trustmsg::store::{DynStore, Inserted};

use crate::store::harness::*;

pub(crate) async fn times_come_from_the_database_clock_in_utc_with_millisecond_precision(
    s: &DynStore,
) {
    let s = s.as_ref();
    let t0 = s.now().await.unwrap();
    assert!(is_whole_ms(t0), "{t0} has sub-millisecond digits");
    let drift = (t0 - Utc::now()).num_seconds().abs();
    assert!(
        drift < 60,
        "database clock is {drift}s off UTC: a time zone mix-up"
    );

    let m = prepare(s, "clock", Due::Later).await;
    let m = s
        .insert_prepared(&new_message("clock-2", Duration::from_millis(1_234)))
        .await
        .map(|i| match i {
            Inserted::Created(m) => m,
            other => panic!("{other:?} (after {m:?})"),
        })
        .unwrap();
    let t1 = s.now().await.unwrap();
    assert!(t0 <= m.created_at && m.created_at <= t1);
    assert_eq!(
        m.next_verify_at,
        Some(m.created_at + chrono::Duration::milliseconds(1_234)),
        "due-times are database time plus the delay, to the millisecond"
    );
    let m = decided(decide_key(s, "clock-2", true, producer(), Duration::from_millis(1_001)).await);
    for t in [
        m.created_at,
        m.updated_at,
        m.decided_at.unwrap(),
        m.next_send_at.unwrap(),
    ] {
        assert!(is_whole_ms(t), "{t} has sub-millisecond digits");
    }
    let audit = &s.audit_trail(m.id).await.unwrap()[0];
    assert!(is_whole_ms(audit.created_at));
    assert!(m.decided_at.unwrap() <= audit.created_at);

    // Milliseconds are real, not a seconds clock padded with zeros.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t2 = s.now().await.unwrap();
    assert!(t2 > t1, "{t2} is not after {t1}");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t3 = s.now().await.unwrap();
    assert!(t3 > t2, "{t3} is not after {t2}");
}
