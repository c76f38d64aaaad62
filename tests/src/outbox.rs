//! A producer's own outbox table (the local message table way): the table
//! `trustmsg outbox schema --dialect mysql` prints, in a database of its
//! own on the test server (a [`TestDb`], so named and dropped like one),
//! and the rows a producer would write to it; [`PgOutboxTable`] the same on
//! PostgreSQL.

use sqlx::{MySqlPool, PgPool};
use trustmsg::outbox::schema::{schema, SchemaDialect, DEFAULT_TABLE};

use crate::db::TestDb;
use crate::pg::PgTestDb;

/// A producer's database holding an empty `trustmsg_outbox` table.
pub struct OutboxTable {
    /// Its database; [`OutboxTable::finish`] drops it.
    pub db: TestDb,
    /// A pool on it, for the producer's writes and the tests' reads.
    pub pool: MySqlPool,
}

impl OutboxTable {
    /// Creates the database and the table.
    pub async fn create() -> Self {
        Self::with_connections(2).await
    }

    /// [`OutboxTable::create`] with a pool of up to `connections`, for
    /// tests whose producers write concurrently.
    pub async fn with_connections(connections: u32) -> Self {
        let db = TestDb::create().await;
        let pool = with_table(db.pool_of(connections).await, SchemaDialect::Mysql).await;
        Self { db, pool }
    }

    /// `--outbox-source`'s value relaying this table for `biz_id`.
    pub fn source(&self, biz_id: &str) -> String {
        format!("{biz_id}={}", self.db.url)
    }

    /// Writes a row as a producer would (only the required columns);
    /// returns its id.
    pub async fn insert(&self, message_key: &str, topic: &str, payload: &str) -> u64 {
        sqlx::query("INSERT INTO trustmsg_outbox (message_key, topic, payload) VALUES (?, ?, ?)")
            .bind(message_key)
            .bind(topic)
            .bind(payload.as_bytes())
            .execute(&self.pool)
            .await
            .expect("insert an outbox row")
            .last_insert_id()
    }

    /// A row's status (0 pending, 2 relayed, 3 failed, 4 given up).
    pub async fn status(&self, id: u64) -> i64 {
        sqlx::query_scalar("SELECT CAST(status AS SIGNED) FROM trustmsg_outbox WHERE id = ?")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .expect("read an outbox row's status")
    }

    /// Changes a row's topic, as a producer fixing a refused row would.
    pub async fn set_topic(&self, id: u64, topic: &str) {
        sqlx::query("UPDATE trustmsg_outbox SET topic = ? WHERE id = ?")
            .bind(topic)
            .bind(id)
            .execute(&self.pool)
            .await
            .expect("update an outbox row");
    }

    /// Closes the pool and drops the database.
    pub async fn finish(self) {
        self.pool.close().await;
        self.db.drop_db().await;
    }
}

/// [`OutboxTable`] on PostgreSQL: a database of its own on the server at
/// `TRUSTMSG_TEST_POSTGRES_URL` (a [`PgTestDb`]) holding the table
/// `trustmsg outbox schema --dialect postgres` prints.
pub struct PgOutboxTable {
    /// Its database; [`PgOutboxTable::finish`] drops it.
    pub db: PgTestDb,
    /// A pool on it, for the producer's writes and the tests' reads.
    pub pool: PgPool,
}

impl PgOutboxTable {
    /// Creates the database and the table, with a pool of up to
    /// `connections`.
    pub async fn with_connections(connections: u32) -> Self {
        let db = PgTestDb::create().await;
        let pool = with_table(db.pool_of(connections).await, SchemaDialect::Postgres).await;
        Self { db, pool }
    }

    /// [`OutboxTable::source`].
    pub fn source(&self, biz_id: &str) -> String {
        format!("{biz_id}={}", self.db.url)
    }

    /// [`OutboxTable::insert`]: the row's id.
    pub async fn insert(&self, message_key: &str, topic: &str, payload: &str) -> u64 {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO trustmsg_outbox (message_key, topic, payload) VALUES ($1, $2, $3) \
             RETURNING id",
        )
        .bind(message_key)
        .bind(topic)
        .bind(payload.as_bytes())
        .fetch_one(&self.pool)
        .await
        .expect("insert an outbox row");
        id as u64
    }

    /// [`OutboxTable::status`].
    pub async fn status(&self, id: u64) -> i64 {
        sqlx::query_scalar("SELECT status::bigint FROM trustmsg_outbox WHERE id = $1")
            .bind(id as i64)
            .fetch_one(&self.pool)
            .await
            .expect("read an outbox row's status")
    }

    /// Closes the pool and drops the database.
    pub async fn finish(self) {
        self.pool.close().await;
        self.db.drop_db().await;
    }
}

/// `pool` once it holds the empty outbox table of `dialect`.
async fn with_table<DB: sqlx::Database>(
    pool: sqlx::Pool<DB>,
    dialect: SchemaDialect,
) -> sqlx::Pool<DB>
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    sqlx::raw_sql(sqlx::AssertSqlSafe(schema(dialect, DEFAULT_TABLE)))
        .execute(&pool)
        .await
        .expect("create the outbox table");
    pool
}
