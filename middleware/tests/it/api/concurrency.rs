use std::collections::HashMap;

use futures::future::join_all;
use trustmsg_tests::{decision_body, prepare_body, TestApp};

#[tokio::test]
async fn fifty_parallel_identical_prepares_make_exactly_one_row() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;
    let body = prepare_body("orders", "same");
    let results = join_all((0..50).map(|_| app.prepare(Some(&token), &body))).await;
    let mut statuses: HashMap<u16, usize> = HashMap::new();
    let ids: std::collections::HashSet<u64> = results
        .iter()
        .map(|(s, v)| {
            *statuses.entry(*s).or_default() += 1;
            v["id"].as_u64().unwrap_or_else(|| panic!("{s}: {v}"))
        })
        .collect();
    assert_eq!(statuses.get(&201), Some(&1), "{statuses:?}");
    assert_eq!(statuses.get(&200), Some(&49), "{statuses:?}");
    assert_eq!(ids.len(), 1);
    let pool = app.db.pool().await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    app.finish().await;
}

#[tokio::test]
async fn fifty_commit_versus_rollback_races_each_have_exactly_one_winner() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;
    for i in 0..50 {
        let (s, _) = app
            .prepare(Some(&token), &prepare_body("orders", &format!("r-{i}")))
            .await;
        assert_eq!(s, 201);
    }
    let races = (0..50).map(|i| {
        let key = format!("r-{i}");
        let app = &app;
        let token = &token;
        async move {
            let body = decision_body("orders", &key);
            let (commit, rollback) = tokio::join!(
                app.commit(Some(token), &body),
                app.rollback(Some(token), &body)
            );
            (key, commit.0, rollback.0)
        }
    });
    for (key, commit, rollback) in join_all(races).await {
        let (_, view) = app
            .get(&format!("/v1/messages/orders/{key}"), Some(&token))
            .await;
        let winner = view["status"].as_str().unwrap().to_string();
        match winner.as_str() {
            "COMMITTED" => assert_eq!((commit, rollback), (200, 409), "{key}"),
            "ROLLED_BACK" => assert_eq!((commit, rollback), (409, 200), "{key}"),
            other => panic!("{key} ended {other}"),
        }
        let trail = app
            .store()
            .audit_trail(view["id"].as_u64().unwrap())
            .await
            .unwrap();
        assert_eq!(trail.len(), 1, "{key}: one transition audited: {trail:?}");
        assert_eq!(trail[0].to_status.as_deref(), Some(winner.as_str()));
    }
    app.finish().await;
}

/// An instance keeps the rows it prepared for their decision; when the
/// decision came through another instance first, the kept row is stale and
/// the late decision must still be answered from the row as stored.
#[tokio::test]
async fn a_decision_on_the_preparing_instance_after_another_decided_is_answered_from_the_stored_row(
) {
    let first = TestApp::spawn(&[]).await;
    let second = TestApp::spawn_on(first.db.share(), &[]).await;
    let token = first.register("orders", "http://127.0.0.1:9/check").await;
    let (s, prepared) = first
        .prepare(Some(&token), &prepare_body("orders", "elsewhere"))
        .await;
    assert_eq!(s, 201, "{prepared}");
    let body = decision_body("orders", "elsewhere");
    let (s, committed) = second.commit(Some(&token), &body).await;
    assert_eq!(s, 200, "{committed}");
    assert_eq!(committed["status"], "COMMITTED");
    // The first instance still holds the row as prepared: its commit is a
    // repeat of the decision, and a rollback after it a conflict.
    let (s, again) = first.commit(Some(&token), &body).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["status"], "COMMITTED");
    assert_eq!(
        again["version"], committed["version"],
        "{again} vs {committed}"
    );
    let (s, rollback) = first.rollback(Some(&token), &body).await;
    assert_eq!(s, 409, "{rollback}");
    let trail = first
        .store()
        .audit_trail(prepared["id"].as_u64().unwrap())
        .await
        .unwrap();
    assert_eq!(trail.len(), 1, "one transition audited: {trail:?}");
    second.finish().await;
    first.finish().await;
}
