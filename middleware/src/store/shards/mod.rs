//! Messages across several MySQL/MariaDB databases, one [`Store`] to the
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

mod route;
mod setup;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use trustmsg_verify_api::admin::AlertView;
use trustmsg_verify_api::MessageView;

pub use route::{id_floor, shard_of_id, slot_of, ID_BITS, MAX_SHARDS, SLOTS};
pub use setup::Refused;

use super::mysql::MySqlStore;
use super::prelude::{
    AlertStore, HousekeepingStore, LedgerStore, LifecycleStore, MessageStore, OperatorStore,
    RegistryStore, SendStore, VerifyStore, WaitingStore,
};
use super::{
    Actor, AlertFilter, AuditEntry, Backend, Backlog, Began, CheckAttempt, CheckAttemptEntry,
    Claimed, ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord, Consumption, DatabaseUrl,
    Finished, FlowMinute, Inserted, Message, MessageFilter, NewMessage, NewWaitingCommit, Overdue,
    PayloadMove, PayloadRoom, Producer, ProducerRecord, ProducerSummary, Requeue, RequeuedChunk,
    SentMark, StoreError, StoreResult, StuckConsumption, Transition, VerifyLease, Wait,
    WaitingCommit,
};

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

/// How long a shard's ping may take before it counts as down.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

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
        let mut shards = Vec::with_capacity(urls.len());
        for url in urls {
            anyhow::ensure!(
                url.backend() == Backend::MySql,
                "several --database-url need MySQL or MariaDB databases, not {url}"
            );
            let name = url.to_string();
            if migrate {
                super::create_database_if_missing(url)
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

    /// Counts and logs a shard's failure in a fan-out that goes on without
    /// it; a shard that could not be reached is down until a ping answers.
    fn left_out(&self, shard: usize, what: &str, e: &StoreError) {
        metrics::counter!("trustmsg_shard_errors_total", "shard" => shard.to_string()).increment(1);
        tracing::warn!(shard, db = %self.shards[shard].name, error = %e, "{what}: shard left out");
        if e.is_unreachable() {
            self.set_up(shard, false);
        }
    }

    fn is_up(&self, shard: usize) -> bool {
        self.shards[shard].up.load(Ordering::Relaxed)
    }

    /// Records whether `shard` is up, logging a change once.
    fn set_up(&self, shard: usize, up: bool) {
        metrics::gauge!("trustmsg_shard_up", "shard" => shard.to_string()).set(if up {
            1.0
        } else {
            0.0
        });
        let was = self.shards[shard].up.swap(up, Ordering::Relaxed);
        let db = &self.shards[shard].name;
        match (was, up) {
            (true, false) => tracing::warn!(
                shard,
                %db,
                "shard down: its keys' calls fail, the workers go on with the others"
            ),
            (false, true) => tracing::info!(shard, %db, "shard back"),
            _ => {}
        }
    }

    /// `view` on shard `i`'s replica, or on the shard itself when it has
    /// none or the replica cannot be reached now.
    async fn read_view<'a, T, F, Fut>(&'a self, i: usize, view: F) -> StoreResult<T>
    where
        F: Fn(&'a MySqlStore) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let shard = &self.shards[i];
        if let Some(replica) = &shard.replica {
            match view(replica).await {
                Err(e) if e.is_unreachable() => {
                    metrics::counter!("trustmsg_replica_fallbacks_total", "shard" => i.to_string())
                        .increment(1);
                    tracing::warn!(shard = i, error = %e, "replica unreachable: reading the database itself");
                }
                answer => return answer,
            }
        }
        view(&shard.store).await
    }

    /// The error of a fan-out that found no shard up.
    fn none_up() -> StoreError {
        StoreError::Unavailable("no shard answers".into())
    }

    /// `op` on every shard at once, with the shards' answers in shard order.
    async fn each<'a, T, F, Fut>(&'a self, op: F) -> Vec<StoreResult<T>>
    where
        F: Fn(usize, &'a MySqlStore) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        join_all(self.shards.iter().enumerate().map(|(i, s)| op(i, &s.store))).await
    }

    /// Every shard's answer, or the first error: for what must be whole.
    fn all<T>(results: Vec<StoreResult<T>>) -> StoreResult<Vec<T>> {
        results.into_iter().collect()
    }

    /// The shares of a fan-out claim of `limit` over `parts` shards,
    /// turned from call to call.
    fn shares(&self, limit: u32, parts: usize) -> Vec<u32> {
        let first = self.turn.fetch_add(1, Ordering::Relaxed) % parts.max(1);
        route::shares(limit, parts, first)
    }

    /// Items grouped by the shard `shard_of` names, each with its index in
    /// `items`.
    fn grouped<'i, T>(
        &self,
        items: &'i [T],
        shard_of: impl Fn(&T) -> usize,
    ) -> BTreeMap<usize, Vec<(usize, &'i T)>> {
        let mut groups: BTreeMap<usize, Vec<(usize, &T)>> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            groups.entry(shard_of(item)).or_default().push((i, item));
        }
        groups
    }

    /// The scatter and gather of a batch written shard by shard: `call`
    /// runs on each shard with the positions (in `0..n`) `shard_of` sends
    /// there, all shards at once, and must answer one result per position,
    /// in the order given; the answers come back in position order. The
    /// first shard that fails fails the batch.
    async fn scatter<'a, R, F, Fut>(
        &'a self,
        n: usize,
        shard_of: impl Fn(usize) -> usize,
        call: F,
    ) -> StoreResult<Vec<R>>
    where
        F: Fn(&'a MySqlStore, Vec<usize>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Vec<R>>> + 'a,
    {
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..n {
            groups.entry(shard_of(i)).or_default().push(i);
        }
        let results = join_all(groups.into_iter().map(|(shard, positions)| {
            let answers = call(&self.shards[shard].store, positions.clone());
            async move { Ok::<_, StoreError>(positions.into_iter().zip(answers.await?)) }
        }))
        .await;
        let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
        for part in Self::all(results)? {
            for (i, answer) in part {
                out[i] = Some(answer);
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every shard answers each position it was given"))
            .collect())
    }

    /// A batch of transitions, each on the shard its id names (with the
    /// rows the caller read, when it has them), then each that matched
    /// nothing there because its row moved, where the row lives.
    async fn transitions(
        &self,
        ts: &[Transition],
        seen: Option<&[&Message]>,
    ) -> StoreResult<Vec<Option<Message>>> {
        let mut out = self
            .scatter(
                ts.len(),
                |i| self.home_of_id(ts[i].id),
                |store, is| {
                    let part: Vec<Transition> = is.iter().map(|&i| ts[i].clone()).collect();
                    let rows: Option<Vec<&Message>> =
                        seen.map(|seen| is.iter().map(|&i| seen[i]).collect());
                    async move {
                        match rows {
                            Some(rows) => store.transition_batch_seen(&part, &rows).await,
                            None => store.transition_batch(&part).await,
                        }
                    }
                },
            )
            .await?;
        self.transition_moved(ts, &mut out).await?;
        Ok(out)
    }

    /// After a batch of transitions on the rows' home shards: each guard
    /// that matched nothing there because the row lives elsewhere (its slot
    /// moved) is applied by the shard that holds it.
    async fn transition_moved(
        &self,
        ts: &[Transition],
        out: &mut [Option<Message>],
    ) -> StoreResult<()> {
        if self.shards.len() == 1 {
            return Ok(());
        }
        for (i, t) in ts.iter().enumerate() {
            let home = self.home_of_id(t.id);
            if out[i].is_some() || holds(&self.shards[home].store, t.id).await? {
                continue;
            }
            if let Some(holder) = self.elsewhere(home, t.id).await? {
                out[i] = holder.transition(t).await?;
            }
        }
        Ok(())
    }

    /// A claim spread over the shards: each claims its share of `limit`
    /// through `claim`, all at once; then what is left of `limit` goes, one
    /// shard after another, to the shards that filled their share or had
    /// none (they may have more due), so one busy shard is not held to its
    /// share when the others have nothing, and a claim of fewer rows than
    /// there are shards finds what is due. The claims added up.
    async fn spread<'a, T, F, Fut>(&'a self, what: &str, limit: u32, claim: F) -> StoreResult<T>
    where
        T: Taken,
        F: Fn(&'a MySqlStore, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let up: Vec<usize> = (0..self.shards.len()).filter(|&i| self.is_up(i)).collect();
        if up.is_empty() {
            return Err(Self::none_up());
        }
        let shares = self.shares(limit, up.len());
        let results = join_all(up.iter().zip(&shares).map(|(&i, &share)| {
            let claim = &claim;
            async move {
                if share == 0 {
                    return Ok(T::default());
                }
                claim(&self.shards[i].store, share).await
            }
        }))
        .await;
        let mut total = T::default();
        let mut more = Vec::new();
        let mut first_error = None;
        let mut answered = false;
        for ((&i, share), r) in up.iter().zip(shares).zip(results) {
            match r {
                Ok(c) => {
                    answered = true;
                    if c.taken() >= share {
                        more.push(i);
                    }
                    total.add(c);
                }
                Err(e) => {
                    self.left_out(i, what, &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        if let (false, Some(e)) = (answered, first_error) {
            return Err(e);
        }
        for i in more {
            let left = limit.saturating_sub(total.taken());
            if left == 0 {
                break;
            }
            match claim(&self.shards[i].store, left).await {
                Ok(c) => total.add(c),
                Err(e) => self.left_out(i, what, &e),
            }
        }
        Ok(total)
    }

    /// `op` on one shard after another, starting from a different one each
    /// time, each asked for what `limit` has left, until it is used up: for
    /// the rounds whose caller goes on while a round returns `limit` (so
    /// a shard with much to do is not held to a share, and a round that
    /// returns less than `limit` has emptied every shard that answered).
    async fn up_to<'a, T, F, Fut>(&'a self, what: &str, limit: u32, op: F) -> StoreResult<T>
    where
        T: Taken,
        F: Fn(&'a MySqlStore, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut answers = Vec::with_capacity(self.shards.len());
        let mut taken = 0u32;
        for k in 0..self.shards.len() {
            let i = (first + k) % self.shards.len();
            if taken >= limit {
                break;
            }
            if !self.is_up(i) {
                continue;
            }
            let answer = op(&self.shards[i].store, limit - taken).await;
            if let Ok(t) = &answer {
                taken = taken.saturating_add(t.taken());
            }
            answers.push((i, answer));
        }
        let mut total = T::default();
        let mut first_error = None;
        let mut answered = false;
        for (i, answer) in answers {
            match answer {
                Ok(t) => {
                    answered = true;
                    total.add(t);
                }
                Err(e) => {
                    self.left_out(i, what, &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        match (answered, first_error) {
            (true, _) => Ok(total),
            (false, Some(e)) => Err(e),
            (false, None) if limit == 0 => Ok(total),
            (false, None) => Err(Self::none_up()),
        }
    }

    /// Writes a registry row changed on the first database to every other
    /// shard's copy. A shard that cannot take it now gets the whole registry
    /// at the next start-up; until then its claims read its old copy.
    async fn copy_to_others<F, Fut>(&self, what: &str, put: F)
    where
        F: Fn(sqlx::pool::PoolConnection<sqlx::MySql>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<()>>,
    {
        for (i, shard) in self.shards.iter().enumerate().skip(1) {
            let done = match shard.store.pool().acquire().await {
                Ok(conn) => put(conn).await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = done {
                self.left_out(i, what, &e);
            }
        }
    }

    /// `op` over `items` (each naming a message by `id_of`), one statement
    /// per shard the ids were created on, all at once; how many rows they
    /// matched, added up. When a shard matched fewer than it was given,
    /// the items whose rows it does not hold (a moved slot's) go to the
    /// shard that does, one by one.
    async fn counted_by_ids<'a, T, F, Fut>(
        &'a self,
        items: &'a [T],
        id_of: fn(&T) -> u64,
        op: F,
    ) -> StoreResult<u64>
    where
        T: Copy,
        F: Fn(&'a MySqlStore, Vec<T>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<u64>> + 'a,
    {
        let groups = self.grouped(items, |t| self.home_of_id(id_of(t)));
        let results = join_all(groups.into_iter().map(|(shard, part)| {
            let op = &op;
            async move {
                let part: Vec<T> = part.into_iter().map(|(_, t)| *t).collect();
                let store = &self.shards[shard].store;
                let mut matched = op(store, part.clone()).await?;
                if matched < part.len() as u64 && self.shards.len() > 1 {
                    for t in part {
                        if holds(store, id_of(&t)).await? {
                            continue;
                        }
                        if let Some(holder) = self.elsewhere(shard, id_of(&t)).await? {
                            matched += op(holder, vec![t]).await?;
                        }
                    }
                }
                Ok(matched)
            }
        }))
        .await;
        Ok(Self::all(results)?.into_iter().sum())
    }

    /// Up to `limit` rows with ids below `before`, highest id first:
    /// `page(shard, want)` lists one shard's, and the last shard's ids are
    /// the highest, so shard by shard from the one `before` is on down to
    /// the first, until `limit` are found.
    async fn newest_first<'a, T, F, Fut>(
        &'a self,
        limit: u32,
        before: Option<u64>,
        page: F,
    ) -> StoreResult<Vec<T>>
    where
        F: Fn(usize, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Vec<T>>> + 'a,
    {
        let mut out = Vec::new();
        let last = before.map_or(self.shards.len() - 1, |b| {
            self.home_of_id(b.saturating_sub(1))
        });
        for shard in (0..=last).rev() {
            let want = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            if want == 0 {
                break;
            }
            out.extend(page(shard, want).await?);
        }
        Ok(out)
    }

    /// Copies the registry row `key` (of `kind`, as `read` finds it on the
    /// first database) to every other shard with `put`, or deletes it there
    /// with `delete` (its one `?` bound to `key`) when the first has none.
    async fn copy_row<T, P, PF>(
        &self,
        kind: &str,
        key: &str,
        read: impl std::future::Future<Output = StoreResult<Option<T>>>,
        delete: &'static str,
        put: P,
    ) where
        T: Clone,
        P: Fn(sqlx::pool::PoolConnection<sqlx::MySql>, T) -> PF,
        PF: std::future::Future<Output = StoreResult<()>>,
    {
        match read.await {
            Ok(Some(row)) => {
                self.copy_to_others(&format!("copying a {kind}"), |conn| put(conn, row.clone()))
                    .await
            }
            Ok(None) => {
                self.copy_to_others(&format!("removing a {kind}"), |mut conn| async move {
                    sqlx::query(delete).bind(key).execute(&mut *conn).await?;
                    Ok(())
                })
                .await
            }
            Err(e) => self.left_out(0, &format!("reading a {kind} to copy"), &e),
        }
    }

    async fn copy_producer(&self, biz_id: &str) {
        let read = self.first().find_producer(biz_id);
        self.copy_row(
            "producer",
            biz_id,
            read,
            "DELETE FROM producers WHERE biz_id = ?",
            |mut conn, p| async move { setup::put_producer(&mut conn, &p).await },
        )
        .await
    }

    async fn copy_group(&self, name: &str) {
        let read = self.first().find_consumer_group(name);
        self.copy_row(
            "consumer group",
            name,
            read,
            "DELETE FROM consumer_groups WHERE group_name = ?",
            |mut conn, g| async move { setup::put_group(&mut conn, &g).await },
        )
        .await
    }
}

/// What a round of [`ShardedStore::up_to`] returns: how much it took, and
/// how two shards' answers add up.
trait Taken: Default {
    fn taken(&self) -> u32;
    fn add(&mut self, other: Self);
}

impl Taken for u64 {
    fn taken(&self) -> u32 {
        u32::try_from(*self).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        *self += other;
    }
}

impl Taken for Claimed {
    fn taken(&self) -> u32 {
        u32::try_from(self.messages.len() + self.quarantined.len()).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        merge(self, other);
    }
}

impl<T> Taken for Vec<T> {
    fn taken(&self) -> u32 {
        u32::try_from(self.len()).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        self.extend(other);
    }
}

/// Adds claim `c` to `into`.
fn merge(into: &mut Claimed, c: Claimed) {
    into.messages.extend(c.messages);
    into.quarantined.extend(c.quarantined);
    into.out_of_room |= c.out_of_room;
    into.claimed_at = into.claimed_at.max(c.claimed_at);
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

/// Adds `b` into `a`: counts summed, the oldest of each kind kept.
fn add_summary(a: &mut ProducerSummary, b: ProducerSummary) {
    for (k, v) in b.by_status {
        *a.by_status.entry(k).or_default() += v;
    }
    for (k, v) in b.by_send_status {
        *a.by_send_status.entry(k).or_default() += v;
    }
    a.sent_recently += b.sent_recently;
    a.rolled_back_recently += b.rolled_back_recently;
    a.oldest_prepared_at = earliest(a.oldest_prepared_at, b.oldest_prepared_at);
    a.oldest_pending_send_at = earliest(a.oldest_pending_send_at, b.oldest_pending_send_at);
    a.scheduled += b.scheduled;
}

fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[async_trait]
impl LifecycleStore for ShardedStore {
    async fn migrate(&self) -> StoreResult<()> {
        Self::all(self.each(|_, s| s.migrate()).await).map(|_| ())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        self.first().now().await
    }

    async fn ping(&self) -> StoreResult<()> {
        let results = self
            .each(|_, s| async move {
                tokio::time::timeout(PING_TIMEOUT, s.ping())
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Unavailable("no answer to a ping".into())))
            })
            .await;
        let mut first_error = None;
        for (i, r) in results.into_iter().enumerate() {
            self.set_up(i, r.is_ok());
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) if !(0..self.shards.len()).any(|i| self.is_up(i)) => Err(e),
            _ => Ok(()),
        }
    }

    async fn degraded(&self) -> Vec<String> {
        (0..self.shards.len())
            .filter(|&i| !self.is_up(i))
            .map(|i| format!("shard {i} ({})", self.shards[i].name))
            .collect()
    }

    fn shards(&self) -> usize {
        self.shards.len()
    }

    fn shard_of_new(&self, m: &NewMessage) -> usize {
        self.home_of_new(m)
    }

    fn shard_of_key(&self, biz_id: &str, message_key: &str) -> usize {
        self.shard_index(biz_id, message_key.as_bytes())
    }
}

#[async_trait]
impl MessageStore for ShardedStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let mut answers = self.insert_prepared_batch(std::slice::from_ref(m)).await?;
        Ok(answers.pop().expect("one answer for one message"))
    }

    async fn insert_tombstone(
        &self,
        biz_id: &str,
        message_key: &str,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let home = self.shard_index(biz_id, message_key.as_bytes());
        self.shards[home]
            .store
            .insert_tombstone(biz_id, message_key, actor, reason)
            .await
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        let home = self.shard_index(biz_id, message_key.as_bytes());
        if let Some(m) = self.shards[home]
            .store
            .find_message(biz_id, message_key)
            .await?
        {
            return Ok(Some(m));
        }
        // An ordered message lives by its order key, a moved slot's
        // elsewhere: the other shards, only when the home has none.
        for other in self.others(home) {
            if let Some(m) = other.find_message(biz_id, message_key).await? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        self.by_id(id, |s| s.find_message_by_id(id), Option::is_none)
            .await
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        self.by_id(t.id, |s| s.transition(t), Option::is_none).await
    }

    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        let mut out: Vec<Option<Inserted>> = (0..batch.len()).map(|_| None).collect();
        // An ordered message lives by its order key. A message of the same
        // key may already live elsewhere (its prepare named another record
        // key): that one is the message, for the caller to compare with
        // what it was asked to prepare, as it would on one database. (Two
        // such prepares at the same moment are not told apart across shards.)
        for (i, m) in batch.iter().enumerate() {
            if m.order_key.is_none() || self.shards.len() == 1 {
                continue;
            }
            for other in self.others(self.home_of_new(m)) {
                if let Some(found) = other.find_message(&m.biz_id, &m.message_key).await? {
                    out[i] = Some(Inserted::Existing(found));
                    break;
                }
            }
        }
        let fresh: Vec<usize> = (0..batch.len()).filter(|&i| out[i].is_none()).collect();
        let answers = self
            .scatter(
                fresh.len(),
                |k| self.home_of_new(&batch[fresh[k]]),
                |store, ks| {
                    let part: Vec<NewMessage> =
                        ks.iter().map(|&k| batch[fresh[k]].clone()).collect();
                    async move { store.insert_prepared_batch(&part).await }
                },
            )
            .await?;
        for (k, answer) in answers.into_iter().enumerate() {
            out[fresh[k]] = Some(answer);
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every input answered"))
            .collect())
    }

    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        self.transitions(ts, None).await
    }

    async fn transition_batch_seen(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        self.transitions(ts, Some(seen)).await
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        self.by_id(message_id, |s| s.audit_trail(message_id), Vec::is_empty)
            .await
    }
}

#[async_trait]
impl SendStore for ShardedStore {
    async fn claim_due_sends(
        &self,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed> {
        if room.fits_any(limit) {
            return self
                .spread("claiming sends", limit, |s, share| {
                    s.claim_due_sends(share, room, lease)
                })
                .await;
        }
        // The room bounds what the claims read together: one shard after
        // another, each with the room the ones before it left, starting
        // from a different shard each time.
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut merged = Claimed::default();
        let mut left = room;
        let mut first_error = None;
        let mut answered = false;
        for k in 0..self.shards.len() {
            let i = (first + k) % self.shards.len();
            let taken = u32::try_from(merged.messages.len()).unwrap_or(u32::MAX);
            if taken >= limit {
                break;
            }
            if !self.is_up(i) {
                continue;
            }
            match self.shards[i]
                .store
                .claim_due_sends(limit - taken, left, lease)
                .await
            {
                Ok(c) => {
                    answered = true;
                    let read: u64 = c.messages.iter().map(|m| m.payload.len() as u64).sum();
                    left.bytes = left.bytes.saturating_sub(read);
                    merge(&mut merged, c);
                }
                Err(e) => {
                    self.left_out(i, "claiming sends", &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        match (answered, first_error) {
            (true, _) => Ok(merged),
            (false, Some(e)) => Err(e),
            (false, None) => Err(Self::none_up()),
        }
    }

    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        self.counted_by_ids(
            marks,
            |m| m.id,
            |s, part| async move { s.mark_sent(&part).await },
        )
        .await
    }

    async fn reschedule_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.by_id(
            id,
            |s| s.reschedule_send(id, version, error, delay),
            |done| !done,
        )
        .await
    }

    async fn postpone_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.by_id(
            id,
            |s| s.postpone_send(id, version, error, delay),
            |done| !done,
        )
        .await
    }

    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64> {
        self.counted_by_ids(
            claims,
            |c| c.0,
            |s, part| async move { s.release_sends(&part).await },
        )
        .await
    }

    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.mark_send_failed(id, version, error, actor),
            Option::is_none,
        )
        .await
    }
}

#[async_trait]
impl VerifyStore for ShardedStore {
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed> {
        self.spread("claiming check-backs", limit, |s, share| {
            s.claim_due_verifies(share, lease)
        })
        .await
    }

    async fn reschedule_verify(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.by_id(
            id,
            |s| s.reschedule_verify(id, version, error, delay),
            |done| !done,
        )
        .await
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        self.counted_by_ids(
            claims,
            |c| c.0,
            |s, part| async move { s.release_verifies(&part, delay).await },
        )
        .await
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        let groups = self.grouped(calls, |c| self.home_of_id(c.message_id));
        let results = join_all(groups.into_iter().map(|(shard, items)| async move {
            let part: Vec<CheckAttempt> = items.into_iter().map(|(_, c)| c.clone()).collect();
            self.shards[shard].store.record_check_attempts(&part).await
        }))
        .await;
        Self::all(results).map(|_| ())
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        self.by_id(message_id, |s| s.check_attempts(message_id), Vec::is_empty)
            .await
    }
}

#[async_trait]
impl OperatorStore for ShardedStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.redeliver(id, version, actor, reason),
            Option::is_none,
        )
        .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(m.id, |s| s.skip_blocked(m, actor, reason), Option::is_none)
            .await
    }

    async fn blocked_by(&self, m: &Message) -> StoreResult<Option<u64>> {
        self.holder_of(m.id).await?.blocked_by(m).await
    }

    async fn send_now(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.send_now(id, version, actor, reason),
            Option::is_none,
        )
        .await
    }

    async fn requeue_chunk(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
        after_id: u64,
        limit: u32,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<RequeuedChunk> {
        // By id, so shard by shard: the next chunk is on the shard of the
        // id after `after_id`, or on a later one once that one is done.
        for shard in self.home_of_id(after_id.saturating_add(1))..self.shards.len() {
            let after = after_id.max(id_floor(shard).saturating_sub(1));
            let chunk = self.shards[shard]
                .store
                .requeue_chunk(requeue, filter, after, limit, actor, reason)
                .await?;
            if chunk.last_id.is_some() {
                return Ok(chunk);
            }
        }
        Ok(RequeuedChunk {
            changed: 0,
            last_id: None,
        })
    }

    async fn count_requeueable(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        let counts = self.each(|_, s| s.count_requeueable(requeue, filter)).await;
        Ok(Self::all(counts)?.into_iter().sum())
    }

    async fn list_messages(
        &self,
        filter: &MessageFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<MessageView>> {
        self.newest_first(limit, before, |shard, want| {
            self.read_view(shard, move |s| s.list_messages(filter, want, before))
        })
        .await
    }

    async fn summary(&self, recent: Duration) -> StoreResult<Vec<ProducerSummary>> {
        let results =
            join_all((0..self.shards.len()).map(|i| self.read_view(i, |s| s.summary(recent))))
                .await;
        let mut by_producer: BTreeMap<String, ProducerSummary> = BTreeMap::new();
        for summary in Self::all(results)?.into_iter().flatten() {
            match by_producer.get_mut(&summary.biz_id) {
                Some(sum) => add_summary(sum, summary),
                None => {
                    by_producer.insert(summary.biz_id.clone(), summary);
                }
            }
        }
        Ok(by_producer.into_values().collect())
    }
}

#[async_trait]
impl AlertStore for ShardedStore {
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>> {
        self.spread("claiming alerts", limit, |s, n| {
            s.claim_due_alerts(n, lease)
        })
        .await
    }

    async fn mark_alert_delivered(&self, id: u64) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .mark_alert_delivered(id)
            .await
    }

    async fn retry_alert_later(&self, id: u64, error: &str, delay: Duration) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .retry_alert_later(id, error, delay)
            .await
    }

    async fn settle_alerts_without_webhook(&self, limit: u32) -> StoreResult<u64> {
        self.up_to("settling alerts", limit, |s, n| {
            s.settle_alerts_without_webhook(n)
        })
        .await
    }

    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>> {
        // A message's alerts are on its shard.
        if let Some(id) = filter.message_id {
            return self
                .holder_of(id)
                .await?
                .list_alerts(filter, limit, before)
                .await;
        }
        self.newest_first(limit, before, |shard, want| {
            self.read_view(shard, move |s| s.list_alerts(filter, want, before))
        })
        .await
    }
}

#[async_trait]
impl HousekeepingStore for ShardedStore {
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>> {
        self.up_to("flagging overdue messages", limit, |s, n| {
            s.flag_overdue(wait, older_than, n)
        })
        .await
    }

    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64> {
        self.up_to("purging finished messages", limit, |s, n| {
            s.purge_finished(older_than, n)
        })
        .await
    }

    /// Shard after shard, the limit shared: a shard whose walk is over
    /// takes none of it. A shard that fails leaves the move unfinished (it
    /// is moved on a later call).
    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove> {
        let mut total = PayloadMove::FINISHED;
        let mut first_error = None;
        for (i, shard) in self.shards.iter().enumerate() {
            let left = limit.saturating_sub(u32::try_from(total.walked).unwrap_or(u32::MAX));
            if left == 0 {
                total.finished = false;
                break;
            }
            match shard.store.move_payloads(left).await {
                Ok(chunk) => {
                    total.walked += chunk.walked;
                    total.moved += chunk.moved;
                    total.finished &= chunk.finished;
                }
                Err(e) => {
                    self.left_out(i, "moving payloads", &e);
                    total.finished = false;
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if total.walked == 0 => Err(e),
            _ => Ok(total),
        }
    }

    async fn backlog(&self) -> StoreResult<Backlog> {
        let results =
            join_all((0..self.shards.len()).map(|i| self.read_view(i, |s| s.backlog()))).await;
        let mut sum = Backlog::default();
        let mut counts: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
        for b in Self::all(results)? {
            for (status, send, n) in b.counts {
                *counts.entry((status, send)).or_default() += n;
            }
            sum.oldest_prepared_at = earliest(sum.oldest_prepared_at, b.oldest_prepared_at);
            sum.oldest_pending_send_at =
                earliest(sum.oldest_pending_send_at, b.oldest_pending_send_at);
            sum.scheduled += b.scheduled;
            sum.pending_alerts += b.pending_alerts;
            sum.waiting_commits += b.waiting_commits;
            sum.oldest_pending_alert_at =
                earliest(sum.oldest_pending_alert_at, b.oldest_pending_alert_at);
            sum.at = sum.at.max(b.at);
        }
        sum.counts = counts
            .into_iter()
            .map(|((status, send), n)| (status, send, n))
            .collect();
        Ok(sum)
    }

    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()> {
        self.first().add_flow(f).await
    }

    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>> {
        self.first().flow_since(since).await
    }

    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        self.first().purge_flow(before).await
    }
}

#[async_trait]
impl WaitingStore for ShardedStore {
    async fn park_commit(&self, w: &NewWaitingCommit) -> StoreResult<bool> {
        self.shards[self.shard_index(&w.biz_id, w.message_key.as_bytes())]
            .store
            .park_commit(w)
            .await
    }

    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<WaitingCommit>> {
        self.spread("claiming waiting commits", limit, |s, n| {
            s.claim_waiting_commits(n, lease)
        })
        .await
    }

    async fn retry_waiting_commit(&self, id: u64, delay: Duration) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .retry_waiting_commit(id, delay)
            .await
    }

    async fn unpark_commit(&self, id: u64) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .unpark_commit(id)
            .await
    }

    async fn count_waiting_commits(&self) -> StoreResult<u64> {
        let counts = self.each(|_, s| s.count_waiting_commits()).await;
        Ok(Self::all(counts)?.into_iter().sum())
    }

    async fn list_waiting_commits(
        &self,
        limit: u32,
        after: u64,
    ) -> StoreResult<Vec<WaitingCommit>> {
        // Oldest id first: shard by shard from the one after `after` on.
        let mut out = Vec::new();
        for shard in self.home_of_id(after.saturating_add(1))..self.shards.len() {
            let want = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            if want == 0 {
                break;
            }
            out.extend(
                self.shards[shard]
                    .store
                    .list_waiting_commits(want, after)
                    .await?,
            );
        }
        Ok(out)
    }
}

#[async_trait]
impl RegistryStore for ShardedStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        self.first().list_producers().await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        let stored = self.first().upsert_producer(p).await?;
        self.copy_producer(&p.biz_id).await;
        Ok(stored)
    }

    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>> {
        self.first().find_producer(biz_id).await
    }

    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool> {
        let gone = self.first().delete_producer(biz_id).await?;
        self.copy_producer(biz_id).await;
        Ok(gone)
    }

    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool> {
        let set = self.first().set_producer_token(biz_id, token_hash).await?;
        self.copy_producer(biz_id).await;
        Ok(set)
    }

    async fn upsert_consumer_group(&self, g: &ConsumerGroupRecord) -> StoreResult<ConsumerGroup> {
        let stored = self.first().upsert_consumer_group(g).await?;
        self.copy_group(&g.name).await;
        Ok(stored)
    }

    async fn find_consumer_group(&self, name: &str) -> StoreResult<Option<ConsumerGroup>> {
        self.first().find_consumer_group(name).await
    }

    async fn list_consumer_groups(&self) -> StoreResult<Vec<ConsumerGroup>> {
        self.first().list_consumer_groups().await
    }

    async fn delete_consumer_group(&self, name: &str) -> StoreResult<bool> {
        let gone = self.first().delete_consumer_group(name).await?;
        self.copy_group(name).await;
        Ok(gone)
    }

    async fn set_consumer_group_token(&self, name: &str, token_hash: &[u8]) -> StoreResult<bool> {
        let set = self
            .first()
            .set_consumer_group_token(name, token_hash)
            .await?;
        self.copy_group(name).await;
        Ok(set)
    }
}

#[async_trait]
impl LedgerStore for ShardedStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        self.by_id(
            message_id,
            |s| s.begin_consumption(group, message_id),
            |b| matches!(b, Began::UnknownMessage),
        )
        .await
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        self.by_id(
            message_id,
            |s| s.finish_consumption(group, message_id, ok, error),
            |f| matches!(f, Finished::UnknownMessage),
        )
        .await
    }

    async fn consumptions_of(&self, message_id: u64) -> StoreResult<Vec<Consumption>> {
        self.by_id(message_id, |s| s.consumptions_of(message_id), Vec::is_empty)
            .await
    }

    async fn flag_stuck_consumptions(&self, limit: u32) -> StoreResult<Vec<StuckConsumption>> {
        self.up_to("flagging stuck consumptions", limit, |s, n| {
            s.flag_stuck_consumptions(n)
        })
        .await
    }

    async fn consumer_group_counts(&self) -> StoreResult<Vec<ConsumerGroupCounts>> {
        let results = self.each(|_, s| s.consumer_group_counts()).await;
        let mut by_group: BTreeMap<String, ConsumerGroupCounts> = BTreeMap::new();
        for c in Self::all(results)?.into_iter().flatten() {
            let sum = by_group
                .entry(c.group.clone())
                .or_insert_with(|| ConsumerGroupCounts {
                    group: c.group.clone(),
                    topics: c.topics.clone(),
                    ..Default::default()
                });
            sum.processed += c.processed;
            sum.failing += c.failing;
            sum.in_progress += c.in_progress;
            sum.lag += c.lag;
        }
        Ok(by_group.into_values().collect())
    }
}
