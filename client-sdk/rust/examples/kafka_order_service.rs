//! The order service of `order_service.rs`, submitting to trustmsg over
//! Kafka instead of HTTP (cargo feature `kafka`; docs/kafka-submit.md).
//!
//! Each order and its barrier marker are written in ONE local transaction
//! between a prepare record and a commit (or rollback) record on trustmsg's
//! submit topic. An acknowledged record is in Kafka, not yet applied: what
//! trustmsg cannot apply goes to `trustmsg.submit.dlq`, and a message whose
//! decision never arrives is settled by check-back, which this service
//! answers from the barrier.
//!
//! ```text
//! cargo run --release -p trustmsg -- dev            # submit topic trustmsg.submit
//! mysql -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS order_service'
//! . trustmsg-dev/env
//! cargo run --release -p trustmsg-client --features kafka --example kafka_order_service -- \
//!     --brokers "$TRUSTMSG_BROKERS" --signing-secret "$TRUSTMSG_DEMO_SIGNING_SECRET"
//! curl -s -X POST http://127.0.0.1:3000/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"K-1001","customer":"alice","amount_cents":1250}'
//! ```

use std::net::SocketAddr;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_client::barrier;
use trustmsg_client::{check_router, Message, Submitter, TxOutcome};

/// An order service submitting to trustmsg over Kafka.
#[derive(Debug, Parser)]
struct Args {
    /// Kafka's bootstrap servers.
    #[arg(long, env = "TRUSTMSG_BROKERS")]
    brokers: String,
    /// trustmsg's submit topic (`--submit-topic`).
    #[arg(long, env = "TRUSTMSG_SUBMIT_TOPIC", default_value = "trustmsg.submit")]
    submit_topic: String,
    /// This producer's biz_id in trustmsg.
    #[arg(long, env = "ORDER_SERVICE_BIZ_ID", default_value = "order-service")]
    biz_id: String,
    /// The signing secret, `whsec_…` (from the registration): signs the
    /// submitted records and checks check-back calls.
    #[arg(long, env = "ORDER_SERVICE_SIGNING_SECRET", hide_env_values = true)]
    signing_secret: String,
    /// The order database (MariaDB/MySQL); it must exist.
    #[arg(
        long,
        env = "ORDER_SERVICE_DATABASE_URL",
        default_value = "mysql://root@127.0.0.1:3306/order_service"
    )]
    database_url: String,
    /// Where the order API and the check endpoint (`/trustmsg/check`) listen.
    #[arg(long, env = "ORDER_SERVICE_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
}

#[derive(Clone)]
struct AppState {
    pool: MySqlPool,
    submitter: Submitter,
}

#[derive(Debug, Deserialize)]
struct NewOrder {
    order_id: String,
    customer: String,
    amount_cents: i64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().init();
    let args = Args::parse();
    let pool = MySqlPool::connect(&args.database_url).await?;
    barrier::create_table(&pool).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) NOT NULL PRIMARY KEY,
            customer VARCHAR(128) NOT NULL, amount_cents BIGINT NOT NULL) ENGINE=InnoDB",
    )
    .execute(&pool)
    .await?;

    // TLS/SASL settings would go in the second argument.
    let submitter = Submitter::new(
        &args.brokers,
        &[],
        args.submit_topic,
        args.biz_id,
        args.signing_secret.clone(),
    )?;
    let check_pool = pool.clone();
    let check = check_router(args.signing_secret, move |req| {
        let pool = check_pool.clone();
        async move { barrier::check(&pool, &req.biz_id, &req.message_key).await }
    });
    let app = Router::new()
        .route("/orders", post(place_order))
        .with_state(AppState { pool, submitter })
        .merge(check);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

async fn place_order(
    State(st): State<AppState>,
    Json(order): Json<NewOrder>,
) -> (StatusCode, Json<Value>) {
    let event = json!({"event": "order_placed", "order_id": order.order_id,
        "customer": order.customer, "amount_cents": order.amount_cents});
    let message = Message::new(order.order_id.clone(), "orders", event.to_string())
        .key(order.customer.clone())
        .header("content-type", "application/json");
    let NewOrder {
        order_id,
        customer,
        amount_cents,
    } = order;
    let id = order_id.clone();
    let outcome = barrier::transaction(&st.submitter, &st.pool, message, move |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id, customer, amount_cents) VALUES (?, ?, ?)")
                .bind(&id)
                .bind(&customer)
                .bind(amount_cents)
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(id)
        })
    })
    .await;
    match outcome {
        // Acknowledged by Kafka; trustmsg applies it next (or dead-letters it).
        Ok(TxOutcome::Committed { value, message }) => (
            StatusCode::CREATED,
            Json(json!({"order_id": value, "commit_record": message.offset})),
        ),
        Ok(other) if other.local_committed() => (
            StatusCode::ACCEPTED,
            Json(json!({"order_id": order_id, "message": "stored; check-back will commit"})),
        ),
        Ok(other) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"order_id": order_id, "message": format!("not placed: {other:?}")})),
        ),
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            Json(
                json!({"order_id": order_id, "message": "prepare not acknowledged; nothing written", "detail": e.to_string()}),
            ),
        ),
    }
}
