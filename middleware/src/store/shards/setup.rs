//! What a shard list must be before anything is routed by it: each database
//! the shard it was first listed as, of this deployment; the slot map
//! naming only listed shards; each shard's ids starting at its floor; and
//! the registry (producers, consumer groups) copied from the first.

use sqlx::{MySqlPool, Row};

use super::route::{self, SLOTS};
use crate::store::{DatabaseUrl, Store, StoreError, StoreResult};

/// A shard list refused at start-up, in words an operator can act on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Who a database says it is.
struct Identity {
    deployment: String,
    shard: usize,
}

/// Whether `e` says a table does not exist (MySQL error 1146): a database
/// not migrated to shards yet (migration 0017), which was never a shard.
fn no_such_table(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|m| m.number() == 1146))
}

async fn identity(pool: &MySqlPool) -> StoreResult<Option<Identity>> {
    let row = match sqlx::query("SELECT deployment, shard FROM shard_identity WHERE id = 1")
        .fetch_optional(pool)
        .await
    {
        Err(e) if no_such_table(&e) => return Ok(None),
        row => row?,
    };
    row.map(|r| {
        Ok(Identity {
            deployment: r.try_get("deployment")?,
            shard: usize::from(r.try_get::<u16, _>("shard")?),
        })
    })
    .transpose()
}

/// Records that `pool` is shard `shard` of `deployment` unless it says
/// something already (another instance starting at the same moment got
/// there first); returns what it says now.
async fn write_identity(pool: &MySqlPool, deployment: &str, shard: usize) -> StoreResult<Identity> {
    sqlx::query(
        "INSERT IGNORE INTO shard_identity (id, deployment, shard, created_at) \
         VALUES (1, ?, ?, UTC_TIMESTAMP(3))",
    )
    .bind(deployment)
    .bind(u16::try_from(shard).expect("at most MAX_SHARDS"))
    .execute(pool)
    .await?;
    identity(pool)
        .await?
        .ok_or(StoreError::Vanished("the shard identity just written"))
}

async fn holds_messages(pool: &MySqlPool) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar::<_, u64>("SELECT id FROM messages LIMIT 1")
            .fetch_optional(pool)
            .await?
            .is_some(),
    )
}

/// The slot map as the first database holds it (empty: never written).
pub(super) async fn slot_map(pool: &MySqlPool) -> StoreResult<Vec<u16>> {
    let rows: Vec<(u16, u16)> =
        match sqlx::query_as("SELECT slot, shard FROM shard_slots ORDER BY slot")
            .fetch_all(pool)
            .await
        {
            Err(e) if no_such_table(&e) => return Ok(Vec::new()),
            rows => rows?,
        };
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    if rows.len() != usize::from(SLOTS)
        || rows.iter().enumerate().any(|(i, r)| usize::from(r.0) != i)
    {
        return Err(StoreError::Corrupt(format!(
            "shard_slots holds {} rows, not one for each of the {SLOTS} slots",
            rows.len()
        )));
    }
    Ok(rows.into_iter().map(|(_, shard)| shard).collect())
}

/// Writes the slot map unless another instance starting at the same moment
/// wrote one first; returns the map as the first database holds it now.
async fn write_slot_map(pool: &MySqlPool, map: &[u16]) -> StoreResult<Vec<u16>> {
    let mut q =
        sqlx::QueryBuilder::<sqlx::MySql>::new("INSERT IGNORE INTO shard_slots (slot, shard) ");
    q.push_values(map.iter().enumerate(), |mut row, (slot, shard)| {
        row.push_bind(u16::try_from(slot).expect("slots fit u16"))
            .push_bind(*shard);
    });
    q.build().execute(pool).await?;
    slot_map(pool).await
}

/// Sets the AUTO_INCREMENT of the tables whose ids are routed (messages,
/// alerts, waiting commits) to `floor` where they are below it. Only on a
/// shard that holds no row below its floor: the ALTER is instant, and
/// InnoDB keeps the counter across restarts (MariaDB ≥ 10.2.4, MySQL 8).
/// The time partitions are made ready for the floor's period.
async fn raise_id_floor(pool: &MySqlPool, floor: u64) -> StoreResult<()> {
    for table in ["messages", "alerts", "submit_waiting"] {
        let top: Option<u64> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT MAX(id) FROM {table}")))
                .fetch_one(pool)
                .await?;
        if top.unwrap_or(0) < floor {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "ALTER TABLE {table} AUTO_INCREMENT = {floor}"
            )))
            .execute(pool)
            .await?;
        }
    }
    // The messages' time partitions from the floor's period on: the new
    // ids have a partition before the first message takes one.
    crate::store::sql::make_ready::<sqlx::MySql>(pool, floor).await
}

/// Checks the shard list (`urls[i]` is shard i) against what the
/// databases say, and with `write` (migrating) records what a new
/// deployment or a newly listed shard needs: identities, id floors, the
/// slot map. Returns the slot map to route by.
///
/// Refused: a database that is another shard of this deployment, or a
/// shard of another deployment; a slot map naming a shard the list does
/// not have (fewer databases than before); a database that holds messages
/// but was never a shard, listed after the first; and, without `write`, a
/// list the databases have not been migrated for.
pub(super) async fn check(
    pools: &[MySqlPool],
    urls: &[DatabaseUrl],
    write: bool,
) -> Result<Vec<u16>, anyhow::Error> {
    let first = &pools[0];
    let mine = identity(first).await?;
    let map = slot_map(first).await?;
    // One database, never sharded: exactly as before sharding existed.
    if pools.len() == 1 && map.is_empty() && mine.as_ref().is_none_or(|i| i.shard == 0) {
        return Ok(Vec::new());
    }
    let deployment = match mine {
        Some(i) if i.shard != 0 => {
            return Err(Refused(format!(
                "{} is shard {} of its deployment, not its first: keep the order the shards \
                 were first listed in (the first holds the registry and the slot map)",
                urls[0], i.shard
            ))
            .into())
        }
        Some(i) => i.deployment,
        None if write => {
            let deployment = hex::encode(rand::random::<[u8; 16]>());
            write_identity(first, &deployment, 0).await?.deployment
        }
        None => return Err(not_migrated(urls).into()),
    };
    let mut fresh = Vec::new();
    for (shard, (pool, url)) in pools.iter().zip(urls).enumerate().skip(1) {
        match identity(pool).await? {
            Some(i) if i.deployment != deployment => {
                return Err(Refused(format!(
                    "{} is a shard of another deployment (its first database is not {}): \
                     a database belongs to one deployment",
                    url, urls[0]
                ))
                .into())
            }
            Some(i) if i.shard != shard => {
                return Err(Refused(format!(
                    "{} is shard {} of this deployment but is listed as shard {shard} \
                     (--database-url number {}): keep the order the shards were first listed in, \
                     or keys would be looked for on databases that do not hold them",
                    url,
                    i.shard,
                    shard + 1
                ))
                .into())
            }
            Some(_) => {}
            None if !write => return Err(not_migrated(urls).into()),
            None if holds_messages(pool).await? => {
                return Err(Refused(format!(
                    "{} holds messages but was never a shard of this deployment: a new shard \
                     starts empty (docs/scaling.md, adding a shard)",
                    url
                ))
                .into())
            }
            None => {
                raise_id_floor(pool, route::id_floor(shard)).await?;
                let stored = write_identity(pool, &deployment, shard).await?;
                if stored.deployment != deployment || stored.shard != shard {
                    return Err(Refused(format!(
                        "{} was made shard {} of another list while this one started: \
                         start again with one list",
                        url, stored.shard
                    ))
                    .into());
                }
                fresh.push(shard);
            }
        }
    }
    let map = if map.is_empty() {
        if !write {
            return Err(not_migrated(urls).into());
        }
        // A deployment that already has messages keeps them where they
        // are: every slot on the first database, until slots are moved.
        let map = if holds_messages(first).await? {
            tracing::warn!(
                shards = pools.len(),
                "the first database holds messages: every slot stays on it; move slots to the \
                 new shards as docs/scaling.md says"
            );
            vec![0; usize::from(SLOTS)]
        } else {
            route::spread(pools.len())
        };
        write_slot_map(first, &map).await?
    } else {
        map
    };
    if let Some(far) = map
        .iter()
        .map(|&s| usize::from(s))
        .max()
        .filter(|&s| s >= pools.len())
    {
        return Err(Refused(format!(
            "the slot map puts slots on shard {far} but only {} databases are listed: list every \
             shard (a shard is removed by moving its slots away first, docs/scaling.md)",
            pools.len()
        ))
        .into());
    }
    for shard in fresh {
        if !map.iter().any(|&s| usize::from(s) == shard) {
            tracing::warn!(
                shard,
                url = %urls[shard],
                "a new shard holds no slots yet: move slots to it as docs/scaling.md says"
            );
        }
    }
    Ok(map)
}

fn not_migrated(urls: &[DatabaseUrl]) -> Refused {
    Refused(format!(
        "the {} databases are not set up as shards of one deployment yet: run `trustmsg migrate` \
         (or serve with --auto-migrate) with the same --database-url list first",
        urls.len()
    ))
}

/// Copies the registry (producers and consumer groups, as the first
/// database holds them, tokens and times included) to `to`, whose own
/// copy the message queries there read (a check-back claim's timeouts, a
/// stuck consumption's group). Rows the first no longer has go.
pub(super) async fn copy_registry(from: &dyn Store, to: &MySqlPool) -> StoreResult<()> {
    let producers = from.list_producers().await?;
    let groups = from.list_consumer_groups().await?;
    let mut tx = to.begin().await?;
    sqlx::query("DELETE FROM producers")
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM consumer_groups")
        .execute(&mut *tx)
        .await?;
    for p in &producers {
        put_producer(&mut tx, p).await?;
    }
    for g in &groups {
        put_group(&mut tx, g).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Writes `p` as it is (times included) to a shard's registry copy.
pub(super) async fn put_producer(
    conn: &mut sqlx::MySqlConnection,
    p: &crate::store::Producer,
) -> StoreResult<()> {
    let topics = p
        .topics
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    sqlx::query(
        "REPLACE INTO producers (biz_id, verify_url, verify_timeout_ms, first_verify_after_ms, \
         max_verify_attempts, token_hash, signing_secret, topics, ordered, created_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&p.biz_id)
    .bind(&p.verify_url)
    .bind(p.verify_timeout_ms)
    .bind(p.first_verify_after_ms)
    .bind(p.max_verify_attempts)
    .bind(&p.token_hash)
    .bind(&p.signing_secret)
    .bind(topics)
    .bind(p.ordered)
    .bind(p.created_at)
    .bind(p.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes `g` as it is (times included) to a shard's registry copy.
pub(super) async fn put_group(
    conn: &mut sqlx::MySqlConnection,
    g: &crate::store::ConsumerGroup,
) -> StoreResult<()> {
    let topics =
        serde_json::to_string(&g.topics).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    sqlx::query(
        "REPLACE INTO consumer_groups (group_name, topics, token_hash, max_failures, \
         in_progress_timeout_ms, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&g.name)
    .bind(topics)
    .bind(&g.token_hash)
    .bind(g.max_failures)
    .bind(g.in_progress_timeout_ms)
    .bind(g.created_at)
    .bind(g.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}
