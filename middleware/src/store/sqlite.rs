//! SQLite backend: the embedded store for `trustmsg dev` and single-instance use.
//! (Placeholder until the SQLite backend lands.)

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    Actor, AuditEntry, Inserted, Message, NewMessage, Producer, ProducerRecord, SentMark, Store,
    StoreError, StoreResult, Transition,
};

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    _pool: sqlx::SqlitePool,
}

fn todo<T>() -> StoreResult<T> {
    Err(StoreError::Config(
        "the sqlite backend is not built yet".into(),
    ))
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url`.
    pub async fn connect(_url: &str) -> StoreResult<Self> {
        todo()
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn migrate(&self) -> StoreResult<()> {
        todo()
    }
    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        todo()
    }
    async fn ping(&self) -> StoreResult<()> {
        todo()
    }
    async fn insert_prepared(&self, _m: &NewMessage) -> StoreResult<Inserted> {
        todo()
    }
    async fn insert_tombstone(
        &self,
        _b: &str,
        _k: &str,
        _a: &Actor,
        _r: &str,
    ) -> StoreResult<Option<Message>> {
        todo()
    }
    async fn find_message(&self, _b: &str, _k: &str) -> StoreResult<Option<Message>> {
        todo()
    }
    async fn find_message_by_id(&self, _id: u64) -> StoreResult<Option<Message>> {
        todo()
    }
    async fn transition(&self, _t: &Transition) -> StoreResult<Option<Message>> {
        todo()
    }
    async fn audit_trail(&self, _id: u64) -> StoreResult<Vec<AuditEntry>> {
        todo()
    }
    async fn claim_due_sends(&self, _l: u32, _d: Duration) -> StoreResult<Vec<Message>> {
        todo()
    }
    async fn mark_sent(&self, _m: &[SentMark]) -> StoreResult<u64> {
        todo()
    }
    async fn reschedule_send(&self, _i: u64, _v: u64, _e: &str, _d: Duration) -> StoreResult<bool> {
        todo()
    }
    async fn mark_send_failed(
        &self,
        _i: u64,
        _v: u64,
        _e: &str,
        _a: &Actor,
    ) -> StoreResult<Option<Message>> {
        todo()
    }
    async fn claim_due_verifies(&self, _l: u32, _d: Duration) -> StoreResult<Vec<Message>> {
        todo()
    }
    async fn reschedule_verify(
        &self,
        _i: u64,
        _v: u64,
        _e: &str,
        _d: Duration,
    ) -> StoreResult<bool> {
        todo()
    }
    async fn release_verify(&self, _i: u64, _v: u64, _d: Duration) -> StoreResult<bool> {
        Err(StoreError::Config("not built yet".into()))
    }
    async fn upsert_producer(&self, _p: &ProducerRecord) -> StoreResult<Producer> {
        todo()
    }
    async fn find_producer(&self, _b: &str) -> StoreResult<Option<Producer>> {
        todo()
    }
    async fn delete_producer(&self, _b: &str) -> StoreResult<bool> {
        todo()
    }
    async fn set_producer_token(&self, _b: &str, _h: &[u8]) -> StoreResult<bool> {
        todo()
    }
}
