//! The archive of what retention deletes (`--archive URL`): finished
//! messages with their audit trail, check-back calls and ledger rows,
//! written as gzip'd JSON Lines ([`format`]) to a directory or an object
//! store (the `object_store` crate: the local file system, S3, GCS and
//! Azure alike), one object per batch, named by what it holds ([`name`]).
//!
//! What it guarantees: [`Archive::write_checked`] returns Ok only once the
//! object is written whole (one PUT, which a store applies atomically) and
//! read back as it was meant: the same number of lines, the same digest of
//! the text, the same ids in the same order. Only then may the caller
//! delete the batch ([`crate::store::HousekeepingStore::delete_archived`]).
//! Anything else (a write error, a read-back that differs, a store out of
//! reach) is an [`ArchiveError`] and the caller deletes nothing. A batch
//! written again (a round cut off between its write and its deletion) has
//! the name it had and overwrites its own object.
//!
//! Finding a message ([`Archive::find_by_id`], [`Archive::find_by_key`])
//! reads the names first and only the objects that may hold it.

pub mod format;
pub mod name;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use crate::store::{FinishedMessage, FinishedRange, HousekeepingStore, StoreError};
pub use format::ArchivedMessage;
pub use name::ObjectName;

/// What can go wrong with the archive. Every variant is transient for the
/// caller: keep the batch, try again later.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The URL is not one the archive can open (start-up refuses it).
    #[error("archive URL {url}: {reason}")]
    Url { url: String, reason: String },
    /// The store refused or could not be reached.
    #[error("archive store: {0}")]
    Store(#[from] object_store::Error),
    /// The object read back is not what was written.
    #[error("archive object {object} read back wrong: {why}")]
    Mismatch { object: String, why: String },
    /// The write and its read-back took longer than the caller allows.
    #[error("archive {url}: no answer within {secs} s")]
    TimedOut { url: String, secs: u64 },
    /// The database could not be read (not the archive's fault).
    #[error(transparent)]
    Database(#[from] StoreError),
}

/// An object written and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Its path in the store.
    pub object: String,
    /// Messages (lines) in it.
    pub messages: usize,
    /// Its size, compressed.
    pub bytes: usize,
}

/// A message found in the archive, and the object it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The object, as the archive's URL and the name under it
    /// (`s3://bucket/prefix/trustmsg/messages/….jsonl.gz`).
    pub object: String,
    pub message: ArchivedMessage,
}

/// One archive: a store and the prefix in it.
#[derive(Debug, Clone)]
pub struct Archive {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// The URL as given, for log lines (it holds no secret: credentials
    /// come from the environment).
    url: String,
}

impl Archive {
    /// Opens the archive at `url`: `file:///dir`, `s3://bucket/prefix`,
    /// `gs://bucket/prefix`, `az://container/prefix` (and the other forms
    /// `object_store::parse_url_opts` knows). Credentials, region and
    /// endpoint come from the environment, as each cloud's own tools read
    /// them (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
    /// `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, …). Nothing
    /// is written or read here: a store out of reach shows on the first
    /// write.
    pub fn open(url: &str) -> Result<Self, ArchiveError> {
        let refused = |reason: String| ArchiveError::Url {
            url: url.to_string(),
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| refused(e.to_string()))?;
        if parsed.scheme() == "file" && parsed.host_str().is_some_and(|h| !h.is_empty()) {
            return Err(refused(
                "a file URL names no host: file:///absolute/dir".into(),
            ));
        }
        let (store, prefix) = object_store::parse_url_opts(&parsed, std::env::vars())
            .map_err(|e| refused(e.to_string()))?;
        Ok(Self {
            store: Arc::from(store),
            prefix,
            url: url.to_string(),
        })
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Writes `batch` (finished messages, lowest id first, not empty) as one
    /// object and reads it back: Ok only when the object holds exactly the
    /// batch. See the module docs.
    pub async fn write_checked(&self, batch: &[FinishedMessage]) -> Result<Written, ArchiveError> {
        let encoded = format::encode(batch);
        let path = name::folder(&self.prefix).join(ObjectName::of(batch).file_name());
        let bytes = encoded.gz.len();
        self.store
            .put(&path, PutPayload::from(encoded.gz.clone()))
            .await?;
        let back = self.store.get(&path).await?.bytes().await?;
        let mismatch = |why: String| ArchiveError::Mismatch {
            object: path.to_string(),
            why,
        };
        let decoded = format::decode(&back).map_err(mismatch)?;
        if decoded.lines.len() != encoded.lines {
            return Err(mismatch(format!(
                "{} lines, {} written",
                decoded.lines.len(),
                encoded.lines
            )));
        }
        if decoded.digest != encoded.digest {
            return Err(mismatch("its text's SHA-256 differs".into()));
        }
        if !decoded
            .lines
            .iter()
            .map(|l| l.message.id)
            .eq(encoded.ids.iter().copied())
        {
            return Err(mismatch("its ids differ".into()));
        }
        Ok(Written {
            object: path.to_string(),
            messages: encoded.lines,
            bytes,
        })
    }

    /// Reads the next batch of `range` from `store` and writes it to the
    /// archive, checked. None when `range` has no finished message left;
    /// otherwise the batch, for the caller to delete
    /// ([`HousekeepingStore::delete_archived`]) or to go on after its last
    /// id (`range.ids.start = last + 1`). Archiving a range whose messages
    /// leave another way (a partition dropped whole) is this, batch after
    /// batch, until None.
    pub async fn archive_next(
        &self,
        store: &(impl HousekeepingStore + ?Sized),
        range: &FinishedRange,
    ) -> Result<Option<(Vec<FinishedMessage>, Written)>, ArchiveError> {
        let batch = store.finished_messages(range).await?;
        if batch.is_empty() {
            return Ok(None);
        }
        let written = self.write_checked(&batch).await?;
        Ok(Some((batch, written)))
    }

    /// Every object of the archive, by path, lowest last id first.
    pub async fn objects(&self) -> Result<Vec<(String, ObjectName)>, ArchiveError> {
        let mut names = self.names(None).await?;
        names.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(names.into_iter().map(|(p, n)| (p.to_string(), n)).collect())
    }

    /// Every line of the object at `path` (as [`Archive::objects`] names it).
    pub async fn lines(&self, path: &str) -> Result<Vec<ArchivedMessage>, ArchiveError> {
        let path = Path::parse(path).map_err(|e| ArchiveError::Store(e.into()))?;
        self.read(&path).await
    }

    /// Where `path` is, for a person: the archive's URL and the name under
    /// its prefix.
    fn shown(&self, path: &Path) -> String {
        let under: Vec<_> = path
            .prefix_match(&self.prefix)
            .map(|parts| parts.map(|p| p.as_ref().to_string()).collect())
            .unwrap_or_default();
        format!("{}/{}", self.url.trim_end_matches('/'), under.join("/"))
    }

    /// The objects' names, each with its path, in no particular order.
    async fn names(&self, after: Option<&Path>) -> Result<Vec<(Path, ObjectName)>, ArchiveError> {
        let folder = name::folder(&self.prefix);
        let listing = match after {
            Some(offset) => self.store.list_with_offset(Some(&folder), offset),
            None => self.store.list(Some(&folder)),
        };
        let metas: Vec<_> = listing.try_collect().await?;
        Ok(metas
            .into_iter()
            .filter_map(|meta| {
                let parsed = ObjectName::parse(meta.location.filename()?)?;
                Some((meta.location, parsed))
            })
            .collect())
    }

    /// The lines of one object.
    async fn read(&self, path: &Path) -> Result<Vec<ArchivedMessage>, ArchiveError> {
        let bytes = self.store.get(path).await?.bytes().await?;
        format::decode(&bytes)
            .map(|d| d.lines)
            .map_err(|why| ArchiveError::Mismatch {
                object: path.to_string(),
                why,
            })
    }

    /// Message `id`: the names are listed from `id` on (the last id leads
    /// the name; S3 and GCS start the listing there), and only the objects
    /// whose id range covers `id` are read, usually one. When a message was
    /// archived twice (it changed after its first archive, which kept it in
    /// the database), the later copy ([`ArchivedMessage::as_of`]) is the
    /// one found.
    pub async fn find_by_id(&self, id: u64) -> Result<Option<Found>, ArchiveError> {
        let offset = name::folder(&self.prefix).join(name::padded(id.saturating_sub(1)));
        let mut best: Option<Found> = None;
        for (path, object) in self.names(Some(&offset)).await? {
            if !object.covers(id) {
                continue;
            }
            for line in self.read(&path).await? {
                if line.message.id == id
                    && best
                        .as_ref()
                        .is_none_or(|b| b.message.as_of() < line.as_of())
                {
                    best = Some(Found {
                        object: self.shown(&path),
                        message: line,
                    });
                }
            }
        }
        Ok(best)
    }

    /// The message holding (`biz_id`, `message_key`): a scan. The names are
    /// listed, then the objects read newest first (by last id), skipping
    /// those whose newest message was created before `since`, until one
    /// holds the key. Cost: one GET per object read, so bound it with
    /// `since` on a large archive.
    pub async fn find_by_key(
        &self,
        biz_id: &str,
        message_key: &str,
        since: Option<DateTime<Utc>>,
    ) -> Result<Option<Found>, ArchiveError> {
        let mut names = self.names(None).await?;
        names.retain(|(_, n)| since.is_none_or(|s| n.newest_created >= s));
        names.sort_by_key(|(_, n)| std::cmp::Reverse(n.last_id));
        for (path, _) in names {
            let hit = self.read(&path).await?.into_iter().find(|line| {
                line.message.biz_id == biz_id && line.message.message_key == message_key
            });
            if let Some(message) = hit {
                return Ok(Some(Found {
                    object: self.shown(&path),
                    message,
                }));
            }
        }
        Ok(None)
    }
}
