//! The producer campaign's order service (`client-sdk/conformance/campaign.md`):
//! the whole producer side in one file, on MariaDB/MySQL or PostgreSQL.
//!
//! An order and its "order created" message go through
//! [`barrier::transaction_with`]; the check endpoint answers from the
//! barrier; a retried order is answered from what the helper says of its
//! earlier runs, and `crash_after_local_commit` uses the helper's test hook
//! to die right after the local COMMIT.
//!
//! ```text
//! TRUSTMSG_URL=… TRUSTMSG_BIZ_ID=… TRUSTMSG_TOKEN=… TRUSTMSG_SIGNING_SECRET=whsec_… \
//! DATABASE_URL=mysql://root@127.0.0.1:3306/shop ORDERS_TOPIC=orders PORT=3000 \
//!     cargo run -p trustmsg-client --example campaign_service
//! ```

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sqlx::{MySqlPool, PgPool};
use trustmsg_client::barrier::{self, BoxFuture, RunError};
use trustmsg_client::{check_router, Decision, Error, Message, Producer, TxOptions, TxOutcome};

#[derive(Clone)]
enum Db {
    MySql(MySqlPool),
    Postgres(PgPool),
}

#[derive(Clone)]
struct App {
    db: Db,
    producer: Producer,
    topic: String,
}

#[derive(Debug, Deserialize)]
struct NewOrder {
    order_id: String,
    amount_cents: i64,
    #[serde(default)]
    fail: bool,
    #[serde(default)]
    crash_after_local_commit: bool,
    #[serde(default)]
    crash_before_answer: bool,
}

/// Dies at once: no answer, no cleanup (as a kill -9 would).
fn crash() -> ! {
    std::process::exit(137)
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let url = env("DATABASE_URL");
    let db = if url.starts_with("postgres") {
        let pool = PgPool::connect(&url).await?;
        barrier::create_table(&pool).await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)")
            .execute(&pool)
            .await?;
        Db::Postgres(pool)
    } else {
        let pool = MySqlPool::connect(&url).await?;
        barrier::create_table(&pool).await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS orders (order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)")
            .execute(&pool)
            .await?;
        Db::MySql(pool)
    };
    let producer = Producer::new(
        &env("TRUSTMSG_URL"),
        env("TRUSTMSG_BIZ_ID"),
        env("TRUSTMSG_TOKEN"),
    )?;
    let checked = db.clone();
    let check = check_router(env("TRUSTMSG_SIGNING_SECRET"), move |req| {
        let db = checked.clone();
        async move {
            match &db {
                Db::MySql(p) => barrier::check(p, &req.biz_id, &req.message_key).await,
                Db::Postgres(p) => barrier::check(p, &req.biz_id, &req.message_key).await,
            }
        }
    });
    let app = Router::new()
        .route("/orders", post(place_order))
        .route("/health", get(|| async { "ok" }))
        .with_state(App {
            db,
            producer,
            topic: env("ORDERS_TOPIC"),
        })
        .merge(check);
    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", env("PORT").parse::<u16>()?)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

async fn place_order(
    State(app): State<App>,
    Json(order): Json<NewOrder>,
) -> (StatusCode, Json<Value>) {
    let payload = json!({"order_id": order.order_id, "amount_cents": order.amount_cents});
    let message = Message::new(
        format!("order-{}", order.order_id),
        app.topic.clone(),
        payload.to_string(),
    )
    .key(order.order_id.clone());
    let options = if order.crash_after_local_commit {
        TxOptions::new().after_local_commit(|_| crash())
    } else {
        TxOptions::new()
    };
    let (id, amount, fail) = (order.order_id.clone(), order.amount_cents, order.fail);
    // The order row and the business step, in the barrier's transaction;
    // the same in both dialects but for the placeholders.
    macro_rules! place {
        ($pool:expr, $insert:literal) => {
            barrier::transaction_with(&app.producer, $pool, message, &options, move |conn| {
                Box::pin(async move {
                    sqlx::query($insert)
                        .bind(&id)
                        .bind(amount)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    business_step(fail)
                }) as BoxFuture<'_, Result<(), String>>
            })
            .await
            .map(erase)
        };
    }
    let placed = match &app.db {
        Db::MySql(pool) => place!(
            pool,
            "INSERT INTO orders (order_id, amount_cents) VALUES (?, ?)"
        ),
        Db::Postgres(pool) => place!(
            pool,
            "INSERT INTO orders (order_id, amount_cents) VALUES ($1, $2)"
        ),
    };
    if order.crash_before_answer {
        crash();
    }
    answer(placed)
}

/// The pretend payment: fails when asked to.
fn business_step(fail: bool) -> Result<(), String> {
    if fail {
        Err("payment declined".into())
    } else {
        Ok(())
    }
}

/// The outcome with the view's id only, whatever database ran it.
fn erase(o: TxOutcome<(), RunError<String>>) -> TxOutcome<(), RunError<String>, Option<u64>> {
    match o {
        TxOutcome::Committed { value, message } => TxOutcome::Committed {
            value,
            message: Some(message.id),
        },
        TxOutcome::CommitLeftToCheckBack { value, error } => {
            TxOutcome::CommitLeftToCheckBack { value, error }
        }
        TxOutcome::RolledBack { error } => TxOutcome::RolledBack { error },
        TxOutcome::RollbackLeftToCheckBack {
            error,
            rollback_error,
        } => TxOutcome::RollbackLeftToCheckBack {
            error,
            rollback_error,
        },
        TxOutcome::LeftToCheckBack { error } => TxOutcome::LeftToCheckBack { error },
    }
}

/// The campaign contract's answers.
fn answer(
    placed: Result<TxOutcome<(), RunError<String>, Option<u64>>, Error>,
) -> (StatusCode, Json<Value>) {
    let reply = |status: StatusCode, body: Value| (status, Json(body));
    match placed {
        Ok(TxOutcome::Committed { message, .. }) => reply(
            StatusCode::CREATED,
            json!({"status": "placed", "message_id": message}),
        ),
        // Stored now; check-back commits it (the barrier holds the commit marker).
        Ok(TxOutcome::CommitLeftToCheckBack { .. }) => {
            reply(StatusCode::CREATED, json!({"status": "placed"}))
        }
        // Stored by an earlier request; its commit could not be sent now.
        Ok(TxOutcome::LeftToCheckBack {
            error: RunError::AlreadyDecided(Decision::Commit),
        }) => reply(StatusCode::OK, json!({"status": "already_placed"})),
        Ok(TxOutcome::RolledBack {
            error: RunError::Local(_),
        })
        | Ok(TxOutcome::RollbackLeftToCheckBack {
            error: RunError::Local(_),
            ..
        }) => reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "failed"}),
        ),
        // The database failed before anything was stored: the client asks again.
        Ok(TxOutcome::RolledBack { .. }) | Ok(TxOutcome::RollbackLeftToCheckBack { .. }) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unavailable"}),
        ),
        // The local COMMIT's outcome is unknown: the client asks again.
        Ok(TxOutcome::LeftToCheckBack { .. }) => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unknown"}),
        ),
        Err(Error::AlreadyCommitted { .. }) => {
            reply(StatusCode::OK, json!({"status": "already_placed"}))
        }
        Err(Error::AlreadyRolledBack { .. }) => {
            reply(StatusCode::CONFLICT, json!({"status": "refused"}))
        }
        Err(e) if e.is_unavailable() => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "unavailable", "error": e.to_string()}),
        ),
        Err(e) => {
            tracing::error!(error = %e, "order needs attention");
            reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"status": "error", "error": e.to_string()}),
            )
        }
    }
}
