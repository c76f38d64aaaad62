//! An order service that publishes "order placed" through trustmsg's local
//! message table: each order and its message are ONE local MariaDB/MySQL
//! transaction, and nothing else. No call to trustmsg on the request path,
//! no check endpoint: `trustmsg serve --outbox-source order-service=URL`
//! reads the committed rows of this service's `trustmsg_outbox` table and
//! publishes them. An order whose transaction rolls back leaves no message,
//! and orders keep being taken while trustmsg is down (their rows wait).
//!
//! Compare `order_service.rs`, the same service the 2PC + check-back way.
//!
//! # Running it against `trustmsg dev`
//!
//! Dev mode's demo producer is `order-service`; tell dev to relay this
//! service's database instead of its demo outbox file:
//!
//! ```text
//! # 1. this service, in one terminal (it creates its tables):
//! mysql -uroot -h127.0.0.1 -e 'CREATE DATABASE IF NOT EXISTS order_service'
//! cargo run --release -p trustmsg-client --example outbox_order_service
//!
//! # 2. trustmsg, in another (same directory):
//! cargo run --release -p trustmsg -- dev -- \
//!     --outbox-source order-service=mysql://root@127.0.0.1:3306/order_service
//!
//! # 3. what reaches Kafka, in a third:
//! . trustmsg-dev/env
//! cargo run --release -p trustmsg -- tail --brokers "$TRUSTMSG_BROKERS" --topic orders --from-beginning
//!
//! # 4. place orders: one committed, one whose transaction fails (rolled
//! #    back: neither the order nor its message exists), and the first again
//! #    (its message key is taken: 409):
//! curl -s -X POST http://127.0.0.1:3001/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-2001","customer":"alice","amount_cents":1250}'
//! curl -s -X POST http://127.0.0.1:3001/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-2002","customer":"bob","amount_cents":990,"fail":true}'
//! curl -s -X POST http://127.0.0.1:3001/orders -H 'content-type: application/json' \
//!     -d '{"order_id":"A-2001","customer":"alice","amount_cents":1250}'
//! curl -s http://127.0.0.1:3001/orders/A-2001
//! ```
//!
//! The last call shows the order and its outbox row: `pending` until
//! trustmsg has it, then `relayed`. Stop trustmsg, place an order, start it
//! again: the order was taken at once and its message goes out when
//! trustmsg is back.
//!
//! Against `trustmsg serve`, register the producer with the admin token
//! (`PUT /v1/producers/order-service` with
//! `{"verify_url":"http://127.0.0.1:3000/trustmsg/check","topics":["orders"]}`;
//! the relay commits what it relays, check-back does not decide it) and
//! start serve with
//! `--outbox-source order-service=mysql://…/order_service`. The table's SQL
//! for your own migrations: `trustmsg outbox schema --dialect mysql`, or
//! `trustmsg_client::outbox::MYSQL_MIGRATION`.
//!
//! # Flags (each also an environment variable)
//!
//! | flag | env | default |
//! |------|-----|---------|
//! | `--database-url` | `ORDER_SERVICE_DATABASE_URL` | `mysql://root@127.0.0.1:3306/order_service` |
//! | `--listen` | `ORDER_SERVICE_LISTEN` | `127.0.0.1:3001` |
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
use trustmsg_client::outbox::{self, EnqueueError};
use trustmsg_client::Message;

/// An order service publishing through the local message table.
#[derive(Debug, Parser)]
struct Args {
    /// The order database (MariaDB/MySQL); it must exist. trustmsg relays
    /// its `trustmsg_outbox` table (`--outbox-source order-service=…`).
    #[arg(
        long,
        env = "ORDER_SERVICE_DATABASE_URL",
        default_value = "mysql://root@127.0.0.1:3306/order_service"
    )]
    database_url: String,
    /// Where the order API listens.
    #[arg(long, env = "ORDER_SERVICE_LISTEN", default_value = "127.0.0.1:3001")]
    listen: SocketAddr,
    /// The Kafka topic of "order placed" messages.
    #[arg(long, env = "ORDER_SERVICE_TOPIC", default_value = "orders")]
    topic: String,
}

#[derive(Clone)]
struct AppState {
    pool: MySqlPool,
    topic: String,
}

#[derive(Debug, Deserialize)]
struct NewOrder {
    order_id: String,
    customer: String,
    amount_cents: i64,
    /// Makes the transaction fail after writing the order and its message,
    /// to show that a rollback takes the message with it.
    #[serde(default)]
    fail: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();

    let pool = MySqlPool::connect(&args.database_url).await?;
    // At start-up, never inside a business transaction: DDL commits it.
    outbox::create_table(&pool).await?;
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

    let app = Router::new()
        .route("/orders", post(place_order))
        .route("/orders/{id}", get(show_order))
        .with_state(AppState {
            pool,
            topic: args.topic,
        });
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "order service listening");
    axum::serve(listener, app).await?;
    Ok(())
}

type Answer = (StatusCode, Json<Value>);

fn answer(status: StatusCode, body: Value) -> Answer {
    (status, Json(body))
}

/// The order and its message, in one transaction.
async fn place_order(State(st): State<AppState>, Json(order): Json<NewOrder>) -> Answer {
    let id = order.order_id.clone();
    let message = Message::new(
        id.clone(),
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

    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(order_id = %id, error = %e, "placing the order failed");
        answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"order_id": id, "message": "database error; nothing was written"}),
        )
    };
    let mut tx = match st.pool.begin().await {
        Ok(tx) => tx,
        Err(e) => return failed(&e),
    };
    let inserted = sqlx::query("INSERT INTO orders (id, customer, amount_cents) VALUES (?, ?, ?)")
        .bind(&id)
        .bind(&order.customer)
        .bind(order.amount_cents)
        .execute(&mut *tx)
        .await;
    match inserted {
        Ok(_) => {}
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return answer(
                StatusCode::CONFLICT,
                json!({"order_id": id, "message": "order already placed"}),
            );
        }
        Err(e) => return failed(&e),
    }
    // The message is a row of this transaction: committed with the order,
    // or gone with it.
    let row = match outbox::enqueue(&mut tx, &message).await {
        Ok(row) => row,
        Err(EnqueueError::Duplicate { message_key, .. }) => {
            return answer(
                StatusCode::CONFLICT,
                json!({"order_id": id, "message": format!("message {message_key} already enqueued")}),
            );
        }
        Err(EnqueueError::Invalid { code, message }) => {
            return answer(
                StatusCode::BAD_REQUEST,
                json!({"order_id": id, "code": code, "message": message}),
            );
        }
        Err(e) => return failed(&e),
    };
    if order.fail {
        // Dropping `tx` would roll back as well; this says so.
        if let Err(e) = tx.rollback().await {
            return failed(&e);
        }
        return answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"order_id": id, "message": "payment declined (\"fail\": true): order and message rolled back"}),
        );
    }
    if let Err(e) = tx.commit().await {
        return failed(&e);
    }
    answer(
        StatusCode::CREATED,
        json!({"order_id": id, "outbox_row": row, "message": "order and its message committed; trustmsg relays it"}),
    )
}

/// The order and where its message is.
async fn show_order(State(st): State<AppState>, Path(id): Path<String>) -> Answer {
    let order: Result<Option<(String, i64)>, sqlx::Error> =
        sqlx::query_as("SELECT customer, amount_cents FROM orders WHERE id = ?")
            .bind(&id)
            .fetch_optional(&st.pool)
            .await;
    let row: Result<Option<(i64, Option<String>)>, sqlx::Error> = sqlx::query_as(
        "SELECT CAST(status AS SIGNED), fail_reason FROM trustmsg_outbox WHERE message_key = ?",
    )
    .bind(&id)
    .fetch_optional(&st.pool)
    .await;
    let (order, row) = match (order, row) {
        (Ok(order), Ok(row)) => (order, row),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "reading the order");
            return answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"message": "database error"}),
            );
        }
    };
    let Some((customer, amount_cents)) = order else {
        return answer(
            StatusCode::NOT_FOUND,
            json!({"order_id": id, "message": "no such order"}),
        );
    };
    let message = row.map(|(status, fail_reason)| {
        let status = match status {
            0 => "pending",
            2 => "relayed",
            3 => "failed",
            4 => "given_up",
            _ => "unknown",
        };
        json!({"status": status, "fail_reason": fail_reason})
    });
    answer(
        StatusCode::OK,
        json!({
            "order_id": id,
            "order": {"customer": customer, "amount_cents": amount_cents},
            "message": message,
        }),
    )
}
