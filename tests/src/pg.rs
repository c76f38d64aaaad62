//! A PostgreSQL database that exists for one test, the twin of the MySQL
//! [`TestDb`](crate::TestDb): a fresh, empty database on the server at
//! `TRUSTMSG_TEST_POSTGRES_URL` (by default
//! `postgres://postgres:postgres@127.0.0.1:5432`, as `scripts/services`
//! sets it up). A passing test drops it ([`PgTestDb::drop_db`]); a failing
//! one leaves it behind (`tm_test_…`) for a look at the rows. The shared
//! server is never reconfigured: only databases (and, for the least
//! privilege test, a role) are created and dropped on it.

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

/// The server the tests create their PostgreSQL databases on:
/// `TRUSTMSG_TEST_POSTGRES_URL`, by default
/// `postgres://postgres:postgres@127.0.0.1:5432`, without a trailing slash.
pub fn postgres_server_url() -> String {
    std::env::var("TRUSTMSG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// A PostgreSQL database that exists for one test.
#[derive(Debug)]
pub struct PgTestDb {
    /// The database's name.
    pub name: String,
    /// Its URL (the server's user), for pools and `--outbox-source`.
    pub url: String,
}

impl PgTestDb {
    /// Creates an empty database with a name no other test uses.
    pub async fn create() -> Self {
        let db = Self::named();
        let admin = admin_pool().await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{}\"",
            db.name
        )))
        .execute(&admin)
        .await
        .expect("create test database");
        admin.close().await;
        db
    }

    /// A name (and URL) no other test uses, of a database not created yet:
    /// for a test in which trustmsg creates it (`migrate`, `--auto-migrate`).
    pub fn named() -> Self {
        let name = crate::db::unique_name();
        let url = with_database(&postgres_server_url(), &name);
        Self { name, url }
    }

    /// A fresh database with trustmsg's schema, for trustmsg's own store:
    /// a copy (`CREATE DATABASE … TEMPLATE`) of a template database that
    /// the first test to need it migrates with trustmsg's own migrator, so
    /// each test pays a file copy, not the migrations. The template is named
    /// for the migrations it holds (`tm_template_<hash>`): a changed
    /// migration makes a new one, and a template is never migrated twice.
    pub async fn migrated() -> Self {
        let template = migrated_template().await;
        let db = Self::named();
        let admin = admin_pool().await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{}\" TEMPLATE \"{template}\"",
            db.name
        )))
        .execute(&admin)
        .await
        .expect("create a test database from the migrated template");
        admin.close().await;
        db
    }

    /// [`PgTestDb::url`] as the store takes it.
    pub fn database_url(&self) -> trustmsg::store::DatabaseUrl {
        self.url.parse().expect("a test database's URL parses")
    }

    /// A pool of up to 8 connections on this database.
    pub async fn pool(&self) -> PgPool {
        self.pool_of(8).await
    }

    /// A pool of up to `connections` connections on this database.
    pub async fn pool_of(&self, connections: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(connections)
            .connect(&self.url)
            .await
            .expect("connect to the PostgreSQL test database")
    }

    /// Drops the database (call at the end of a passing test), closing
    /// whatever connections are still on it.
    pub async fn drop_db(self) {
        let admin = admin_pool().await;
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// `server` (a URL without a database) with the database `name`, keeping
/// its query (`?sslmode=…`).
pub fn with_database(server: &str, name: &str) -> String {
    let mut url = reqwest::Url::parse(server).expect("TRUSTMSG_TEST_POSTGRES_URL parses");
    url.set_path(&format!("/{name}"));
    url.to_string()
}

/// The name of the template database holding trustmsg's PostgreSQL
/// schema, made (once per server and schema, whichever test process gets
/// there first; the others wait on an advisory lock) if it is missing.
/// It is built under another name and renamed once migrated and
/// disconnected, so a template that exists is whole.
async fn migrated_template() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/postgres");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("migrations/postgres")
        .map(|e| e.expect("a migrations entry").path())
        .collect();
    files.sort();
    let mut hasher = std::hash::DefaultHasher::new();
    for file in &files {
        std::hash::Hash::hash(&std::fs::read(file).expect("a migration"), &mut hasher);
    }
    let name = format!("tm_template_{:016x}", std::hash::Hasher::finish(&hasher));
    let admin = admin_pool().await;
    let mut conn = admin.acquire().await.expect("an admin connection");
    sqlx::query("SELECT pg_advisory_lock(hashtext($1))")
        .bind(&name)
        .execute(&mut *conn)
        .await
        .expect("the template's lock");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut *conn)
            .await
            .expect("look for the template");
    if !exists {
        let building = format!("{name}_building");
        let url = with_database(&postgres_server_url(), &building);
        for sql in [
            format!("DROP DATABASE IF EXISTS \"{building}\" WITH (FORCE)"),
            format!("CREATE DATABASE \"{building}\""),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *conn)
                .await
                .expect("make the template's database");
        }
        let store = trustmsg::store::open(&[url.parse().expect("template URL")], &[], true)
            .await
            .expect("migrate the template");
        drop(store);
        // The store's pool closes its connections in the background: end
        // them now, or the rename (and every copy) would wait for them.
        for sql in [
            format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = '{building}' AND pid <> pg_backend_pid()"
            ),
            format!("ALTER DATABASE \"{building}\" RENAME TO \"{name}\""),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *conn)
                .await
                .expect("publish the template");
        }
    }
    sqlx::query("SELECT pg_advisory_unlock(hashtext($1))")
        .bind(&name)
        .execute(&mut *conn)
        .await
        .expect("release the template's lock");
    drop(conn);
    admin.close().await;
    name
}

async fn admin_pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&postgres_server_url())
        .await
        .expect("connect to the PostgreSQL server at TRUSTMSG_TEST_POSTGRES_URL")
}
