//! Rows the code cannot read (`docs/architecture.md`, Unreadable rows): a
//! claim decodes its rows one by one, so a row it cannot read is set aside
//! (quarantined) and the rest of the batch is claimed as usual, instead of
//! one bad row failing every claim that reaches it.

use std::time::Duration;

use trustmsg::store::{Claimed, Message, Quarantined};

use crate::store::harness::*;

/// What makes a row unreadable here: headers that are not JSON.
const CORRUPT: &str = "UPDATE messages SET headers = 'not json' WHERE id = ?";

/// The ids claimed, in id order (the claim's own order is its shards'
/// when it has several).
fn ids(rows: &[Message]) -> Vec<u64> {
    let mut ids: Vec<u64> = rows.iter().map(|m| m.id).collect();
    ids.sort_unstable();
    ids
}

fn sorted<const N: usize>(mut ids: [u64; N]) -> Vec<u64> {
    ids.sort_unstable();
    ids.to_vec()
}

/// Claims with `claim` until every row of `wanted` has been taken again
/// (on several shards the leases end one by one, each counted from its own
/// shard's claim): the ids taken, in id order, and every row set aside on
/// the way.
async fn reclaim<F, Fut>(wanted: &[u64], mut claim: F) -> (Vec<u64>, Vec<Quarantined>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Claimed>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (mut taken, mut quarantined) = (Vec::new(), Vec::new());
    loop {
        let got = claim().await;
        taken.extend(got.messages.iter().map(|m| m.id));
        quarantined.extend(got.quarantined);
        if wanted.iter().all(|id| taken.contains(id)) {
            taken.sort_unstable();
            return (taken, quarantined);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the leases never ran out: {taken:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The claim set aside exactly the row `id`, saying what was wrong with it.
/// Rows "good-a", "bad" and "good-b" in `state`, due now, the middle one
/// made unreadable.
async fn good_bad_good(b: &Backend, state: State) -> [Message; 3] {
    let mut rows = Vec::new();
    for key in ["good-a", "bad", "good-b"] {
        rows.push(
            arrange_key(b.store.as_ref(), key, state, Due::Now)
                .await
                .unwrap(),
        );
    }
    assert_eq!(b.raw_execute(CORRUPT, rows[1].id).await, 1);
    rows.try_into().unwrap()
}

/// `claimed` took the good rows of [`good_bad_good`]'s `rows` and
/// quarantined the bad one; returns the good rows' ids, sorted.
fn assert_took_the_good_and_quarantined_the_bad(
    claimed: &Claimed,
    rows: &[Message; 3],
) -> Vec<u64> {
    let [good_a, bad, good_b] = rows;
    let good = sorted([good_a.id, good_b.id]);
    assert_eq!(ids(&claimed.messages), good);
    assert_quarantined(&claimed.quarantined, bad.id);
    good
}

fn assert_quarantined(quarantined: &[Quarantined], id: u64) {
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    let q = &quarantined[0];
    assert_eq!(
        (q.id, q.biz_id.as_str(), q.message_key.as_str()),
        (id, BIZ, "bad")
    );
    assert!(
        q.reason
            .starts_with("quarantined: unreadable row: headers: "),
        "{}",
        q.reason
    );
}

pub(crate) async fn an_unreadable_row_is_quarantined_and_the_rest_of_its_send_claim_goes_ahead(
    b: &Backend,
) {
    let s = b.store.as_ref();
    let rows = good_bad_good(b, State::SendPending).await;
    let bad = &rows[1];

    let short = Duration::from_millis(300);
    let claimed = s
        .claim_due_sends(10, ROOM, short)
        .await
        .expect("one unreadable row does not fail the claim");
    let good = assert_took_the_good_and_quarantined_the_bad(&claimed, &rows);

    // Once the short lease is over the good rows are due again; the
    // quarantined one is not.
    let (again, quarantined) = reclaim(&good, || async {
        s.claim_due_sends(10, ROOM, LATER).await.unwrap()
    })
    .await;
    assert_eq!(again, good, "each good row taken again once");
    assert_eq!(quarantined, [], "a row is quarantined (and alerted) once");
    assert_eq!(
        b.raw_count(
            "SELECT COUNT(*) FROM messages WHERE id = ? AND next_send_at IS NULL \
             AND status = 'COMMITTED' AND send_status = 'PENDING' \
             AND last_error LIKE 'quarantined: unreadable row: headers%'",
            bad.id
        )
        .await,
        1,
        "the quarantined row is out of the send scan, with the reason in last_error"
    );
    assert_eq!(
        audit_lines(s, bad.id).await.last().map(String::as_str),
        Some("forwarder quarantine COMMITTED=>COMMITTED send PENDING=>PENDING")
    );
}

pub(crate) async fn an_unreadable_row_is_quarantined_and_the_rest_of_its_verify_claim_goes_ahead(
    b: &Backend,
) {
    let s = b.store.as_ref();
    let rows = good_bad_good(b, State::Prepared).await;
    let bad = &rows[1];

    let short = Duration::from_millis(300);
    let claimed = s
        .claim_due_verifies(10, lasting(short))
        .await
        .expect("one unreadable row does not fail the claim");
    let good = assert_took_the_good_and_quarantined_the_bad(&claimed, &rows);

    let (again, quarantined) = reclaim(&good, || async {
        s.claim_due_verifies(10, lasting(LATER)).await.unwrap()
    })
    .await;
    assert_eq!(again, good, "each good row taken again once");
    assert_eq!(quarantined, [], "a row is quarantined (and alerted) once");
    assert_eq!(
        b.raw_count(
            "SELECT COUNT(*) FROM messages WHERE id = ? AND next_verify_at IS NULL \
             AND status = 'PREPARED' \
             AND last_error LIKE 'quarantined: unreadable row: headers%'",
            bad.id
        )
        .await,
        1,
        "the quarantined row is out of the check-back scan, with the reason in last_error"
    );
    assert_eq!(
        audit_lines(s, bad.id).await.last().map(String::as_str),
        Some("verifier quarantine PREPARED=>PREPARED send -=>-")
    );
}
