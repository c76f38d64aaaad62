//! The archive's format: gzip'd JSON Lines, one line per message, one
//! object per batch. A line is an [`ArchivedMessage`]; docs/operations.md
//! ("Archive") describes it for `zcat` and `jq`.
//!
//! An object's bytes depend only on what it holds (the gzip header carries
//! no time or name), so writing the same batch again writes the same bytes.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use trustmsg_verify_api::admin::{AuditView, CheckAttemptView, MessageDetail};
use trustmsg_verify_api::consumers::ConsumptionView;
use trustmsg_verify_api::{MessageView, PayloadEncoding};

use crate::store::FinishedMessage;

/// The `format` of every line this version writes.
pub const FORMAT: u32 = 1;

/// One line of an archive object: a finished message as it was when it
/// was archived, with everything retention deleted with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedMessage {
    /// [`FORMAT`].
    pub format: u32,
    /// The message as `GET /v1/admin/messages/{id}` shows it (`message`).
    pub message: MessageView,
    /// The payload exactly as produced, base64 (standard, padded).
    pub payload_base64: String,
    /// The record headers as produced.
    pub headers: BTreeMap<String, String>,
    /// The row's version (bumped by every change).
    pub version: u64,
    /// True for a ROLLED_BACK row created by a rollback of an unknown message.
    pub tombstone: bool,
    /// SHA-256 of the content, hex (what a repeated prepare is compared with).
    pub content_digest: Option<String>,
    /// The prepare's W3C `traceparent`.
    pub traceparent: Option<String>,
    /// The prepare's W3C `tracestate`.
    pub tracestate: Option<String>,
    /// The audit trail, oldest first, as the admin view shows it.
    pub audit: Vec<AuditView>,
    /// The recorded check-back calls, oldest first.
    pub check_attempts: Vec<CheckAttemptView>,
    /// The consumption-ledger rows, by group.
    pub consumptions: Vec<ConsumptionView>,
}

impl ArchivedMessage {
    /// The line of `f`.
    pub fn of(f: &FinishedMessage) -> Self {
        let m = &f.message;
        Self {
            format: FORMAT,
            message: m.view(),
            payload_base64: STANDARD.encode(&m.payload),
            headers: m.headers.clone(),
            version: m.version,
            tombstone: m.tombstone,
            content_digest: m.content_digest.as_deref().map(hex::encode),
            traceparent: m.traceparent.clone(),
            tracestate: m.tracestate.clone(),
            audit: f.audit.iter().cloned().map(|a| a.view()).collect(),
            check_attempts: f.check_attempts.iter().cloned().map(|c| c.view()).collect(),
            consumptions: f.consumptions.iter().cloned().map(|c| c.view()).collect(),
        }
    }

    /// Which of two copies of one message is the later: its version, then
    /// its newest ledger row (a consumer group's begin or finish changes
    /// no version).
    pub fn as_of(&self) -> (u64, Option<chrono::DateTime<chrono::Utc>>) {
        let ledger = self.consumptions.iter().map(|c| c.updated_at).max();
        (self.version, ledger)
    }

    /// The payload's bytes.
    pub fn payload(&self) -> Result<Vec<u8>, base64::DecodeError> {
        STANDARD.decode(&self.payload_base64)
    }

    /// The admin view of the message (`trustmsg admin messages show`'s).
    pub fn detail(&self) -> MessageDetail {
        let bytes = self.payload().unwrap_or_default();
        let (payload, payload_encoding) = match String::from_utf8(bytes) {
            Ok(text) => (text, PayloadEncoding::Utf8),
            Err(_) => (self.payload_base64.clone(), PayloadEncoding::Base64),
        };
        MessageDetail {
            message: self.message.clone(),
            payload,
            payload_encoding,
            headers: self.headers.clone(),
            audit: self.audit.clone(),
            check_attempts: self.check_attempts.clone(),
            blocked_by: None,
            consumptions: self.consumptions.clone(),
        }
    }
}

/// A batch encoded: the object's bytes, and what its read-back must show.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// The gzip'd JSON Lines.
    pub gz: Vec<u8>,
    /// The lines.
    pub lines: usize,
    /// SHA-256 of the JSON Lines before compression.
    pub digest: [u8; 32],
    /// The messages' ids, in line order.
    pub ids: Vec<u64>,
}

/// `batch` as an object.
pub fn encode(batch: &[FinishedMessage]) -> Encoded {
    let mut text = Vec::new();
    for f in batch {
        serde_json::to_writer(&mut text, &ArchivedMessage::of(f)).expect("a line serialises");
        text.push(b'\n');
    }
    let mut gz = GzEncoder::new(Vec::with_capacity(text.len() / 3), Compression::default());
    gz.write_all(&text).expect("writing to memory");
    Encoded {
        gz: gz.finish().expect("writing to memory"),
        lines: batch.len(),
        digest: Sha256::digest(&text).into(),
        ids: batch.iter().map(|f| f.message.id).collect(),
    }
}

/// What an object's bytes hold, as read back: its lines decoded, and the
/// digest of its uncompressed text.
#[derive(Debug)]
pub struct Decoded {
    pub lines: Vec<ArchivedMessage>,
    pub digest: [u8; 32],
}

/// An object's bytes decoded; an error names the line that is not one.
pub fn decode(gz: &[u8]) -> Result<Decoded, String> {
    let mut text = Vec::new();
    GzDecoder::new(gz)
        .read_to_end(&mut text)
        .map_err(|e| format!("not gzip: {e}"))?;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.map_err(|e| format!("line {}: {e}", i + 1))?;
        lines.push(serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?);
    }
    Ok(Decoded {
        lines,
        digest: Sha256::digest(&text).into(),
    })
}
