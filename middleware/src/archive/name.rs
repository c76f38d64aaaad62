//! What an archive object is called. The name says which messages it
//! holds, so a reader finds a message by id from the names alone, and a
//! batch written again (a round cut off after its write, before its
//! deletion) gets the name it had, overwriting itself instead of adding a
//! second copy:
//!
//! `<prefix>/trustmsg/messages/<last id>-<first id>-<newest created>-<digest>.jsonl.gz`
//!
//! - ids are zero-padded to 20 digits, so names sort as ids do; the last id
//!   comes first, so a listing that starts after `<id - 1>` (S3's
//!   `start-after`) begins with the objects that may hold `id`;
//! - `<newest created>` is the `created_at` of its newest message
//!   (`YYYYMMDDTHHMMSSZ`): a search by key may skip older objects;
//! - `<digest>` is 16 hex digits of SHA-256 over the (id, version) pairs
//!   it holds: the same batch has the same name, and two batches with the
//!   same first and last ids but other messages between them (one held
//!   back by a change, archived again later) never overwrite each other.

use chrono::{DateTime, NaiveDateTime, Utc};
use object_store::path::Path;
use sha2::{Digest, Sha256};

use crate::store::FinishedMessage;

/// The folder under the archive's prefix that holds the message objects.
pub const MESSAGES: &str = "trustmsg/messages";

/// The time format of `<newest created>`.
const TIME: &str = "%Y%m%dT%H%M%SZ";

/// What a name says about its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectName {
    pub first_id: u64,
    pub last_id: u64,
    pub newest_created: DateTime<Utc>,
    pub digest: String,
}

impl ObjectName {
    /// The name of the object holding `batch` (not empty, lowest id first).
    pub fn of(batch: &[FinishedMessage]) -> Self {
        let mut h = Sha256::new();
        for f in batch {
            h.update(f.message.id.to_be_bytes());
            h.update(f.message.version.to_be_bytes());
        }
        Self {
            first_id: batch.first().map_or(0, |f| f.message.id),
            last_id: batch.last().map_or(0, |f| f.message.id),
            newest_created: batch
                .iter()
                .map(|f| f.message.created_at)
                .max()
                .unwrap_or_default(),
            digest: hex::encode(&h.finalize()[..8]),
        }
    }

    /// The file name (the last part of the path).
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}-{}-{}.jsonl.gz",
            padded(self.last_id),
            padded(self.first_id),
            self.newest_created.format(TIME),
            self.digest
        )
    }

    /// Reads a file name written by [`ObjectName::file_name`]; None for
    /// any other file.
    pub fn parse(file_name: &str) -> Option<Self> {
        let stem = file_name.strip_suffix(".jsonl.gz")?;
        let mut parts = stem.split('-');
        let last_id = parts.next()?.parse().ok()?;
        let first_id = parts.next()?.parse().ok()?;
        let newest = NaiveDateTime::parse_from_str(parts.next()?, TIME).ok()?;
        let digest = parts.next()?.to_string();
        if parts.next().is_some() || first_id > last_id {
            return None;
        }
        Some(Self {
            first_id,
            last_id,
            newest_created: newest.and_utc(),
            digest,
        })
    }

    /// Whether the object may hold message `id`.
    pub fn covers(&self, id: u64) -> bool {
        (self.first_id..=self.last_id).contains(&id)
    }
}

/// `id` zero-padded to 20 digits (every u64 fits).
pub fn padded(id: u64) -> String {
    format!("{id:020}")
}

/// The folder of the message objects under `prefix`.
pub fn folder(prefix: &Path) -> Path {
    MESSAGES
        .split('/')
        .fold(prefix.clone(), |p, part| p.clone().join(part))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_name_reads_back_as_what_it_says_and_sorts_by_last_id() {
        let name = ObjectName {
            first_id: 7,
            last_id: 1234,
            newest_created: Utc.with_ymd_and_hms(2026, 11, 29, 9, 15, 0).unwrap(),
            digest: "0123456789abcdef".into(),
        };
        let file = name.file_name();
        assert_eq!(
            file,
            "00000000000000001234-00000000000000000007-20261129T091500Z-0123456789abcdef.jsonl.gz"
        );
        assert_eq!(ObjectName::parse(&file), Some(name));
        assert!(ObjectName::parse("notes.txt").is_none());
        assert!(padded(999) < padded(1000));
    }
}
