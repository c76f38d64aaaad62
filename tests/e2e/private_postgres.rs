//! The kit's private PostgreSQL does what the kill -9 ledger and the fault
//! campaign take it to do: frozen, it answers nothing until thawed; killed,
//! none of its processes is left (a backend left on the old shared memory
//! would keep a new postmaster from starting); restarted, it has every
//! transaction committed before the kill and none that was not.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use trustmsg_tests::postgres::alive;
use trustmsg_tests::PrivatePostgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_postgresql_freezes_dies_whole_and_comes_back_with_what_was_committed() {
    let mut server = PrivatePostgres::start().await;
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(30))
        .connect(&server.url("postgres"))
        .await
        .unwrap();
    sqlx::query("CREATE TABLE t (n INT PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO t VALUES (1)")
        .execute(&pool)
        .await
        .unwrap();
    // Open and never committed when the server dies.
    let mut open = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO t VALUES (2)")
        .execute(&mut *open)
        .await
        .unwrap();

    server.pause();
    let frozen = tokio::time::timeout(
        Duration::from_secs(2),
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM t").fetch_one(&pool),
    )
    .await;
    assert!(frozen.is_err(), "a frozen server answered: {frozen:?}");
    server.resume();

    let processes = server.processes();
    assert!(
        processes.len() > 2,
        "the postmaster and its backends: {processes:?}"
    );
    server.kill_9();
    let left: Vec<u32> = processes.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "outlived kill -9: {left:?}");
    drop(open);
    pool.close().await;

    server.restart().await;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&server.url("postgres"))
        .await
        .unwrap();
    let rows: Vec<i32> = sqlx::query_scalar("SELECT n FROM t ORDER BY n")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(rows, [1], "the committed row, not the open transaction's");
}
