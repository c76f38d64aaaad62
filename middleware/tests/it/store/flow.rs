//! The flow per minute (`flow_minutes`): what each instance adds to a
//! minute is summed, the latest backlog sample of a minute is kept whatever
//! order the instances add theirs in (a flush without one keeps it),
//! minutes are read back oldest first from a time on, and old minutes are
//! deleted.

use chrono::{DateTime, TimeDelta, Utc};
use trustmsg::store::{BacklogSample, DynStore, FlowCounts, FlowMinute};

fn minute(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A flush of one instance into minute `at`, with a sample taken `secs` into it.
fn added(at: DateTime<Utc>, values: [u64; 9], backlog: Option<(i64, u64, u64)>) -> FlowMinute {
    FlowMinute {
        minute: at,
        counts: FlowCounts::from_values(values),
        backlog: backlog.map(|(secs, prepared, pending)| BacklogSample {
            at: at + TimeDelta::milliseconds(secs * 1000 + 123),
            prepared,
            pending,
        }),
    }
}

pub(crate) async fn each_instances_counts_add_up_per_minute_and_old_minutes_go(s: &DynStore) {
    let s = s.as_ref();
    let (m0, m1, m2) = (
        minute("2026-11-24T10:00:00Z"),
        minute("2026-11-24T10:01:00Z"),
        minute("2026-11-24T10:02:00Z"),
    );
    // Two instances flush into the same minute; one sampled the backlog.
    s.add_flow(&added(m1, [1, 2, 3, 4, 5, 6, 7, 8, 9], Some((30, 40, 12))))
        .await
        .unwrap();
    s.add_flow(&added(m1, [10, 20, 30, 40, 50, 60, 70, 80, 90], None))
        .await
        .unwrap();
    s.add_flow(&added(m0, [5, 0, 0, 0, 0, 0, 0, 0, 0], None))
        .await
        .unwrap();
    s.add_flow(&added(m2, [0; 9], Some((10, 7, 0))))
        .await
        .unwrap();
    // A later sample in the same minute replaces the earlier one; an
    // earlier one added after it (a slower instance's) does not.
    s.add_flow(&added(m2, [0, 1, 0, 0, 0, 0, 0, 0, 0], Some((20, 3, 2))))
        .await
        .unwrap();
    s.add_flow(&added(m2, [0; 9], Some((15, 99, 99))))
        .await
        .unwrap();

    let all = s.flow_since(m0).await.unwrap();
    assert_eq!(
        all,
        vec![
            added(m0, [5, 0, 0, 0, 0, 0, 0, 0, 0], None),
            added(m1, [11, 22, 33, 44, 55, 66, 77, 88, 99], Some((30, 40, 12))),
            added(m2, [0, 1, 0, 0, 0, 0, 0, 0, 0], Some((20, 3, 2))),
        ],
        "summed per minute, oldest first, the latest sample kept"
    );
    assert_eq!(
        s.flow_since(m1 + TimeDelta::seconds(1)).await.unwrap(),
        vec![added(m2, [0, 1, 0, 0, 0, 0, 0, 0, 0], Some((20, 3, 2)))],
        "from a time on"
    );

    assert_eq!(s.purge_flow(m2).await.unwrap(), 2, "the minutes before m2");
    assert_eq!(
        s.flow_since(m0).await.unwrap().len(),
        1,
        "only the newest minute is left"
    );
    assert_eq!(s.purge_flow(m2).await.unwrap(), 0, "nothing more to delete");
}
