//! An order service that publishes "order placed" through trustmsg.
//!
//! Each order and its message are written with the barrier in ONE local
//! MariaDB/MySQL transaction: prepare → insert order + barrier marker →
//! commit. If the commit call is lost, trustmsg calls this service's check
//! endpoint, which answers from the barrier, exactly.
//!
//! # Running it against `trustmsg dev`
//!
//! Dev mode registers this service as its demo producer (`order-service`,
//! check endpoint `http://127.0.0.1:3000/trustmsg/check`) and writes the
//! credentials to `trustmsg-dev/env`. The order database is this service's
//! own, on MariaDB/MySQL.
//!
//! ```text
//! # 1. trustmsg, in one terminal:
//! cargo run --release -p trustmsg -- dev
//!
//! # 2. this service, in another (same directory):
//! mysql -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS order_service'
//! . trustmsg-dev/env
//! cargo run --release -p trustmsg-client --example order_service -- \
//!     --token "$TRUSTMSG_DEMO_TOKEN" --signing-secret "$TRUSTMSG_DEMO_SIGNING_SECRET"
//!
//! # 3. what reaches Kafka, in a third:
//! . trustmsg-dev/env
//! cargo run --release -p trustmsg -- tail --brokers "$TRUSTMSG_BROKERS" --topic orders --from-beginning
//!
//! # 4. place orders: committed; failed locally (rolled back); and one whose
//! #    commit call is lost, which trustmsg settles by check-back a few seconds later:
//! curl -s -X POST http://127.0.0.1:3000/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-1001","customer":"alice","amount_cents":1250}'
//! curl -s -X POST http://127.0.0.1:3000/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-1002","customer":"bob","amount_cents":990,"fail":true}'
//! curl -s -X POST http://127.0.0.1:3000/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-1003","customer":"carol","amount_cents":4200,"lose_commit":true}'
//! curl -s http://127.0.0.1:3000/orders/A-1003
//! ```
//!
//! Against `trustmsg serve`, register the producer first with the admin
//! token (`PUT /v1/producers/order-service` with
//! `{"verify_url":"http://127.0.0.1:3000/trustmsg/check","topics":["orders"]}`)
//! and pass the `token` and `signing_secret` of the answer the same way (the
//! secret is shown again only by `POST /v1/producers/order-service/reveal-signing-secret`).
//! Add `"ordered":true` to have one order's events (one record key) reach
//! Kafka in the order they were committed (`trustmsg_client::api::ProducerSettings`
//! is that body, for a registration made from Rust).
//!
//! # Flags (each also an environment variable)
//!
//! | flag | env | default |
//! |------|-----|---------|
//! | `--trustmsg-url` | `TRUSTMSG_URL` | `http://127.0.0.1:8080` |
//! | `--biz-id` | `ORDER_SERVICE_BIZ_ID` | `order-service` |
//! | `--token` | `ORDER_SERVICE_TOKEN` | required: the producer's bearer token |
//! | `--signing-secret` | `ORDER_SERVICE_SIGNING_SECRET` | required: `whsec_…` from the registration |
//! | `--database-url` | `ORDER_SERVICE_DATABASE_URL` | `mysql://root@127.0.0.1:3306/order_service` |
//! | `--listen` | `ORDER_SERVICE_LISTEN` | `127.0.0.1:3000` (the check endpoint is `/trustmsg/check`) |
//! | `--topic` | `ORDER_SERVICE_TOPIC` | `orders` |

use std::net::SocketAddr;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Parser;
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_client::barrier::{self, BoxFuture};
use trustmsg_client::{check_router, Error, Message, Producer, TxOptions, TxOutcome};

/// An order service publishing through trustmsg.
#[derive(Debug, Parser)]
struct Args {
    /// trustmsg's base URL.
    #[arg(long, env = "TRUSTMSG_URL", default_value = "http://127.0.0.1:8080")]
    trustmsg_url: String,
    /// This producer's biz_id in trustmsg.
    #[arg(long, env = "ORDER_SERVICE_BIZ_ID", default_value = "order-service")]
    biz_id: String,
    /// The producer's bearer token (from the registration).
    #[arg(long, env = "ORDER_SERVICE_TOKEN", hide_env_values = true)]
    token: String,
    /// The check-back signing secret, `whsec_…` (from the registration).
    #[arg(long, env = "ORDER_SERVICE_SIGNING_SECRET", hide_env_values = true)]
    signing_secret: String,
    /// The order database (MariaDB/MySQL); it must exist.
    #[arg(
        long,
        env = "ORDER_SERVICE_DATABASE_URL",
        default_value = "mysql://root@127.0.0.1:3306/order_service"
    )]
    database_url: String,
    /// Where the order API and the check endpoint listen.
    #[arg(long, env = "ORDER_SERVICE_LISTEN", default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// The Kafka topic of "order placed" messages.
    #[arg(long, env = "ORDER_SERVICE_TOPIC", default_value = "orders")]
    topic: String,
}

#[derive(Clone)]
struct AppState {
    pool: MySqlPool,
    producer: Producer,
    topic: String,
}

#[derive(Debug, Deserialize)]
struct NewOrder {
    order_id: String,
    customer: String,
    amount_cents: i64,
    /// Makes the local transaction fail after writing the order, to show a rollback.
    #[serde(default)]
    fail: bool,
    /// Stores the order but never calls commit, as if this service crashed
    /// right after its local transaction: trustmsg asks the check endpoint.
    #[serde(default)]
    lose_commit: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,trustmsg_client=debug".into()),
        )
        .init();
    let args = Args::parse();

    let pool = MySqlPool::connect(&args.database_url).await?;
    barrier::create_table(&pool).await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS orders (
            id           VARCHAR(64)  NOT NULL PRIMARY KEY,
            customer     VARCHAR(128) NOT NULL,
            amount_cents BIGINT       NOT NULL,
            created_at   TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
        ) ENGINE=InnoDB",
    )
    .execute(&pool)
    .await?;

    let producer = Producer::new(&args.trustmsg_url, args.biz_id.clone(), args.token)?;
    let state = AppState {
        pool: pool.clone(),
        producer,
        topic: args.topic,
    };

    // Check-back answers straight from the barrier: exact even while an order's
    // transaction is still running.
    let check_pool = pool.clone();
    let check = check_router(args.signing_secret, move |req| {
        let pool = check_pool.clone();
        async move { barrier::check(&pool, &req.biz_id, &req.message_key).await }
    });

    let app = Router::new()
        .route("/orders", post(place_order))
        .route("/orders/{id}", get(show_order))
        .with_state(state)
        .merge(check);

    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, biz_id = %args.biz_id, "order service listening");
    axum::serve(listener, app).await?;
    Ok(())
}

async fn place_order(
    State(st): State<AppState>,
    Json(order): Json<NewOrder>,
) -> (StatusCode, Json<Value>) {
    let message = Message::new(
        order.order_id.clone(),
        st.topic.clone(),
        json!({
            "event": "order_placed",
            "order_id": order.order_id,
            "customer": order.customer,
            "amount_cents": order.amount_cents,
        })
        .to_string(),
    )
    .key(order.customer.clone())
    .header("content-type", "application/json");

    let (id, customer, amount, fail) = (
        order.order_id.clone(),
        order.customer,
        order.amount_cents,
        order.fail,
    );
    let work = insert_order(id, customer, amount, fail);
    // `lose_commit`: the helper's test hook stops it right after the local
    // COMMIT, before the commit call, as a crash there would.
    let options = if order.lose_commit {
        TxOptions::new()
            .after_local_commit(|_| Err("lose_commit: the commit call is skipped".into()))
    } else {
        TxOptions::new()
    };
    let outcome = barrier::transaction_with(&st.producer, &st.pool, message, &options, work).await;

    let id = order.order_id;
    match outcome {
        Ok(TxOutcome::Committed { value, message }) => (
            StatusCode::CREATED,
            Json(json!({"order_id": value, "message_id": message.id, "message": "committed"})),
        ),
        Ok(TxOutcome::CommitLeftToCheckBack { value, error }) => (
            StatusCode::ACCEPTED,
            Json(
                json!({"order_id": value, "message": "order stored; trustmsg will confirm the message by check-back", "detail": error.to_string()}),
            ),
        ),
        Ok(TxOutcome::RolledBack { error }) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(
                json!({"order_id": id, "message": "order not placed; message rolled back", "detail": error.to_string()}),
            ),
        ),
        Ok(other) => (
            StatusCode::ACCEPTED,
            Json(
                json!({"order_id": id, "message": "trustmsg will settle this order by check-back", "detail": format!("{other:?}")}),
            ),
        ),
        // A retry of an order placed before: nothing was written now.
        Err(Error::AlreadyCommitted { message_id, .. }) => (
            StatusCode::OK,
            Json(
                json!({"order_id": id, "message_id": message_id, "message": "order was already placed"}),
            ),
        ),
        // A retry of an order that failed before: it can never be placed.
        Err(e @ (Error::AlreadyRolledBack { .. } | Error::Conflict { .. })) => (
            StatusCode::CONFLICT,
            Json(
                json!({"order_id": id, "message": "order refused before; use a new order id", "detail": e.to_string()}),
            ),
        ),
        Err(e @ Error::StoppedAfterLocalCommit { .. }) => (
            StatusCode::ACCEPTED,
            Json(
                json!({"order_id": id, "message": "order stored, commit call skipped: trustmsg will ask /trustmsg/check", "detail": e.to_string()}),
            ),
        ),
        Err(e @ (Error::CommitRejected { .. } | Error::RollbackRejected { .. })) => {
            tracing::error!(order_id = %id, error = %e, "order and message disagree: needs attention");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(
                    json!({"order_id": id, "message": "order state needs attention; see the log"}),
                ),
            )
        }
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                json!({"order_id": id, "message": "trustmsg refused or unreachable; nothing was written", "detail": e.to_string()}),
            ),
        ),
    }
}

/// The order's local work: insert it, then fail if asked to.
fn insert_order(
    id: String,
    customer: String,
    amount: i64,
    fail: bool,
) -> impl for<'c> FnOnce(&'c mut sqlx::MySqlConnection) -> BoxFuture<'c, Result<String, sqlx::Error>>
{
    move |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id, customer, amount_cents) VALUES (?, ?, ?)")
                .bind(&id)
                .bind(&customer)
                .bind(amount)
                .execute(&mut *conn)
                .await?;
            if fail {
                return Err(sqlx::Error::Protocol(
                    "payment declined (requested with \"fail\": true)".into(),
                ));
            }
            Ok(id)
        })
    }
}

async fn show_order(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> (StatusCode, Json<Value>) {
    let row: Result<Option<(String, i64)>, sqlx::Error> =
        sqlx::query_as("SELECT customer, amount_cents FROM orders WHERE id = ?")
            .bind(&id)
            .fetch_optional(&st.pool)
            .await;
    let order = match row {
        Ok(Some((customer, amount_cents))) => {
            json!({"customer": customer, "amount_cents": amount_cents})
        }
        Ok(None) => Value::Null,
        Err(e) => {
            tracing::error!(error = %e, "reading order");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"message": "database error"})),
            );
        }
    };
    let message = match st.producer.get(&id).await {
        Ok(view) => json!({"id": view.id, "status": view.status, "send_status": view.send_status}),
        Err(Error::NotFound { .. }) => Value::Null,
        Err(e) => json!({"error": e.to_string()}),
    };
    let status = if order.is_null() && message.is_null() {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    (
        status,
        Json(json!({"order_id": id, "order": order, "message": message})),
    )
}
