//! Messages across several MySQL/MariaDB databases, one [`crate::store::Store`] to the
//! rest of the service (issue 32; docs/scaling.md).
//!
//! - **Routing.** A message lives on the shard of its slot ([`route::slot_of`]
//!   of its biz_id and message key, or of its order key when its producer is
//!   ordered, so that one key's messages share a shard and its order). The
//!   slot map is the first database's (`shard_slots`), read at start-up.
//!   Ids carry the shard they were created on ([`route::ID_BITS`]), so a call
//!   that names an id goes straight to it; one that finds nothing there asks
//!   the others (a message whose slot was moved, or an ordered one looked up
//!   by its message key).
//! - **The first database** also holds the registry (producers, consumer
//!   groups), which every shard keeps a copy of for its own queries (written
//!   through on every change, copied whole at start-up), and the flow
//!   minutes. Alerts stay on the shard whose change raised them: the alert
//!   and the change commit together (`sql/alerts.rs`).
//! - **Fan-out.** Claims take a share of their limit on every shard, the
//!   larger shares turning from claim to claim, so a backlog on one shard
//!   does not starve the others; a shard that fails is left out of that
//!   claim (logged, counted in `trustmsg_shard_errors_total`) and the others
//!   are claimed as usual. Counts and summaries add the shards up; lists go
//!   by id, shard by shard.
//! - **A shard down** fails only the calls that need it: its keys' calls
//!   (the API answers 503 with Retry-After), its share of each claim. `ping`
//!   answers while any shard does; [`LifecycleStore::degraded`] names the others.
//!
//! One file per concern, one `impl` of a [`crate::store`] sub-trait in
//! each; this file holds the store, its opening and the routing (which
//! shard a key or an id lives on); `fanout.rs` the ways a call goes to
//! several shards and how their answers add up; `health.rs` which shards
//! are up and the read replicas; `route.rs` and `setup.rs` the slots and
//! the shard list's checks.

mod alerts;
mod fanout;
mod health;
mod housekeeping;
mod ledger;
mod lifecycle;
mod messages;
mod operator;
mod outbox;
mod registry;
mod route;
mod sends;
mod setup;
mod verifies;
mod waiting;

use std::sync::atomic::{AtomicBool, AtomicUsize};

pub use route::{id_floor, shard_of_id, slot_of, ID_BITS, MAX_SHARDS, SLOTS};
pub use setup::Refused;

use crate::store::mysql::MySqlStore;
use crate::store::{Backend, DatabaseUrl, LifecycleStore, NewMessage, StoreResult};

/// One message database.
struct Shard {
    store: MySqlStore,
    /// Its URL with the password redacted, for logs, `/readyz` and errors.
    name: String,
    /// Whether it answered its last ping and no call since found it
    /// unreachable. The workers' fan-outs leave a shard that is not up
    /// out, instead of waiting on it each round; the shard watch's pings
    /// ([`LifecycleStore::ping`]) bring it back.
    up: AtomicBool,
    /// Its read replica, for the operator views that read much.
    replica: Option<MySqlStore>,
}

/// Several message databases as one store; see the module docs.
pub struct ShardedStore {
    shards: Vec<Shard>,
    /// Slot → shard.
    slots: Vec<u16>,
    /// Which shard takes the larger share of the next fan-out claim.
    turn: AtomicUsize,
}

impl ShardedStore {
    /// Connects to every database of `urls` (the first holds the registry
    /// and the slot map) and to `replicas[i]` as the read replica of
    /// `urls[i]`, with `migrate` first creating and migrating each database
    /// and recording what a new shard needs, and checks the list against
    /// what the databases say ([`setup::check`]). Every database must answer
    /// now.
    pub async fn open(
        urls: &[DatabaseUrl],
        replicas: &[DatabaseUrl],
        migrate: bool,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        anyhow::ensure!(!urls.is_empty(), "no --database-url given");
        anyhow::ensure!(
            replicas.len() <= urls.len(),
            "{} --replica-url for {} --database-url: each replica copies the database listed \
             in its place",
            replicas.len(),
            urls.len()
        );
        anyhow::ensure!(
            urls.len() <= MAX_SHARDS,
            "{} databases listed; at most {MAX_SHARDS} shards",
            urls.len()
        );
        // Before anything is created or connected: a list that cannot be
        // opened leaves no database behind.
        if let Some(url) = urls
            .iter()
            .chain(replicas)
            .find(|url| url.backend() == Backend::Postgres)
        {
            anyhow::bail!(
                "{url} is PostgreSQL, and shards (several --database-url) and read replicas \
                 (--replica-url) are MySQL/MariaDB-only for now: the slot routing and its map \
                 are written for MySQL. A PostgreSQL store is one --database-url, alone"
            );
        }
        let mut shards = Vec::with_capacity(urls.len());
        for url in urls {
            anyhow::ensure!(
                url.backend() == Backend::MySql,
                "several --database-url need MySQL or MariaDB databases, not {url}"
            );
            let name = url.to_string();
            if migrate {
                crate::store::create_database_if_missing(url)
                    .await
                    .with_context(|| format!("creating the database at {name}"))?;
            }
            let store = MySqlStore::connect(url)
                .await
                .with_context(|| format!("connecting to {name}"))?;
            if migrate {
                store
                    .migrate()
                    .await
                    .with_context(|| format!("applying migrations to {name}"))?;
            }
            shards.push(Shard {
                store,
                name,
                up: AtomicBool::new(true),
                replica: None,
            });
        }
        for (shard, url) in shards.iter_mut().zip(replicas) {
            anyhow::ensure!(
                url.backend() == Backend::MySql,
                "--replica-url must name a MySQL or MariaDB database, not {url}"
            );
            let replica = MySqlStore::connect(url)
                .await
                .with_context(|| format!("connecting to the replica {url}"))?;
            shard.replica = Some(replica);
        }
        let pools: Vec<_> = shards.iter().map(|s| s.store.pool().clone()).collect();
        let mut slots = setup::check(&pools, urls, migrate).await?;
        if slots.is_empty() {
            // One database that was never sharded (opened here for its
            // replica): every slot is its.
            slots = vec![0; usize::from(SLOTS)];
        }
        let store = Self {
            shards,
            slots,
            turn: AtomicUsize::new(0),
        };
        // Best effort: a copy that fails (another instance copying at the
        // same moment won a lock) leaves that shard's copy as the last
        // writer left it, and the next change or start writes it again.
        for (i, shard) in store.shards.iter().enumerate().skip(1) {
            if let Err(e) = setup::copy_registry(&store.shards[0].store, shard.store.pool()).await {
                store.left_out(i, "copying the registry", &e);
            }
        }
        Ok(store)
    }

    /// For a deployment given one MySQL database: refuses it when it is a
    /// shard of several (listing one of them would route every key to it).
    pub async fn refuse_if_sharded(store: &MySqlStore, url: &DatabaseUrl) -> anyhow::Result<()> {
        setup::check(
            std::slice::from_ref(store.pool()),
            std::slice::from_ref(url),
            false,
        )
        .await
        .map(|_| ())
    }

    fn first(&self) -> &MySqlStore {
        &self.shards[0].store
    }

    fn shard_index(&self, biz_id: &str, key: &[u8]) -> usize {
        usize::from(self.slots[usize::from(slot_of(biz_id, key))])
    }

    /// The shard a new message goes to: by its order key when it has one
    /// (one key's messages keep their order on one shard), else by its key.
    fn home_of_new(&self, m: &NewMessage) -> usize {
        match &m.order_key {
            Some(order) => self.shard_index(&m.biz_id, order),
            None => self.shard_index(&m.biz_id, m.message_key.as_bytes()),
        }
    }

    /// The shard an id was created on (the last, for an id beyond them all:
    /// it finds nothing there).
    fn home_of_id(&self, id: u64) -> usize {
        shard_of_id(id).min(self.shards.len() - 1)
    }

    /// The shards other than `home`, in order.
    fn others(&self, home: usize) -> impl Iterator<Item = &MySqlStore> {
        self.shards
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i != home)
            .map(|(_, s)| &s.store)
    }

    /// The shard other than `home` that holds message `id` (a moved
    /// slot's message), if any.
    async fn elsewhere(&self, home: usize, id: u64) -> StoreResult<Option<&MySqlStore>> {
        for other in self.others(home) {
            if holds(other, id).await? {
                return Ok(Some(other));
            }
        }
        Ok(None)
    }

    /// The shard holding message `id`: its home, or, when the home has no
    /// such row, whichever other shard has it.
    async fn holder_of(&self, id: u64) -> StoreResult<&MySqlStore> {
        let home = self.home_of_id(id);
        let store = &self.shards[home].store;
        if self.shards.len() == 1 || holds(store, id).await? {
            return Ok(store);
        }
        Ok(self.elsewhere(home, id).await?.unwrap_or(store))
    }

    /// `op` on the shard id `id` was created on; when that finds no such
    /// row (`missed`), on whichever other shard holds it (a moved slot's
    /// message), if any. One statement in the usual case.
    async fn by_id<'a, T, F, Fut>(
        &'a self,
        id: u64,
        op: F,
        missed: fn(&T) -> bool,
    ) -> StoreResult<T>
    where
        F: Fn(&'a MySqlStore) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let home = self.home_of_id(id);
        let answer = op(&self.shards[home].store).await?;
        if !missed(&answer) || self.shards.len() == 1 {
            return Ok(answer);
        }
        match self.elsewhere(home, id).await? {
            Some(holder) => op(holder).await,
            None => Ok(answer),
        }
    }
}

/// Whether `store` has message `id` (the row's primary key only: a row it
/// cannot decode is still there, for the call to quarantine or refuse).
async fn holds(store: &MySqlStore, id: u64) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar::<_, u64>("SELECT id FROM messages WHERE id = ?")
            .bind(id)
            .fetch_optional(store.pool())
            .await?
            .is_some(),
    )
}
