//! What a claim takes and what comes back of it: the claimed rows, the
//! rows set aside as unreadable, the payload room a send claim may fill
//! (its arithmetic: which rows fit), and Kafka's acknowledgement of a send.

use chrono::{DateTime, Utc};

use super::{Message, OrderPos};

/// What a claim took (`claim_due_sends`, `claim_due_verifies`): the rows it
/// could read, and the rows it set aside because it could not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The claimed rows, in id order; each carries the claim's version.
    pub messages: Vec<Message>,
    /// Rows the claim could not read, now quarantined: out of the scan that
    /// found them, with the reason in `last_error` and an audit row. The
    /// caller alerts once for each.
    pub quarantined: Vec<Quarantined>,
    /// When the claim was taken, by the database clock (None when it took
    /// nothing): each row's claim lasts from then to its due column, which
    /// tells a claimer how long it holds each row.
    pub claimed_at: Option<DateTime<Utc>>,
    /// A send claim stopped before its limit because the next due row's
    /// payload did not fit its [`PayloadRoom`]: more is due, and waits for
    /// room.
    pub out_of_room: bool,
}

impl Claimed {
    /// Rows the claim took, readable or not: the number to compare with the
    /// limit asked for.
    pub fn taken(&self) -> usize {
        self.messages.len() + self.quarantined.len()
    }
}

/// A row a claim found due but could not read (an unknown value, headers
/// that are not JSON, …), and set aside: its due column is NULL, so no scan
/// takes it again until a person repairs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub id: u64,
    /// As far as it can be read (invalid UTF-8 replaced; empty if unreadable).
    pub biz_id: String,
    /// As far as it can be read, like `biz_id`.
    pub message_key: String,
    /// What is now in `last_error`: `quarantined: unreadable row: <why>`.
    pub reason: String,
}

/// How much payload a send claim may read ([`crate::store::SendStore::claim_due_sends`]):
/// it takes rows in due order while their payloads, by the length the
/// prepare recorded (`payload_bytes`), fit in `bytes`. A row from before
/// that column counts as `unknown` bytes (the largest a payload may be).
/// A claim's rows are read whole, so this is what bounds the memory a claim
/// takes, whatever the payloads turn out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadRoom {
    /// Payload bytes the claim may read.
    pub bytes: u64,
    /// What a row of unknown length counts for.
    pub unknown: u64,
}

impl PayloadRoom {
    /// Room for any number of rows of any size.
    pub const UNBOUNDED: Self = Self {
        bytes: u64::MAX,
        unknown: 0,
    };

    /// Whether `limit` rows fit whatever their lengths: the claim need not
    /// look at them first.
    pub fn fits_any(self, limit: u32) -> bool {
        u64::from(limit).saturating_mul(self.unknown) <= self.bytes
    }

    /// How many of `lengths` (in due order; None: unknown) fit, from the
    /// first on.
    pub fn prefix(self, lengths: impl IntoIterator<Item = Option<u64>>) -> usize {
        let mut used = 0u64;
        lengths
            .into_iter()
            .take_while(|len| {
                used = used.saturating_add(len.unwrap_or(self.unknown));
                used <= self.bytes
            })
            .count()
    }
}

/// Kafka's acknowledgement of one record, to be written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentMark {
    pub id: u64,
    /// The version the claim left on the row.
    pub version: u64,
    pub partition: i32,
    pub offset: i64,
    /// The message's place in its key when it is ordered ([`Message::order_pos`]):
    /// its SENT mark then also makes the key's next message due.
    pub order: Option<OrderPos>,
}

/// A claimed message's next attempt (`reschedule_send`, `postpone_send`,
/// `reschedule_verify`): the claim it was tried under (`id`, `version`: the
/// guard), why the attempt decided nothing, and how long until the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reschedule {
    pub id: u64,
    pub version: u64,
    pub error: String,
    pub delay: std::time::Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_room_fits_rows_in_order_until_the_next_would_overflow() {
        let room = PayloadRoom {
            bytes: 100,
            unknown: 60,
        };
        assert_eq!(room.prefix([Some(40), Some(60), Some(1)]), 2);
        assert_eq!(room.prefix([Some(41), None]), 1, "unknown counts as 60");
        // In order: a small row after one that does not fit waits too.
        assert_eq!(room.prefix([Some(101), Some(1)]), 0);
        assert_eq!(room.prefix([None, Some(40)]), 2);
        assert!(room.fits_any(1) && !room.fits_any(2));
        assert!(PayloadRoom::UNBOUNDED.fits_any(u32::MAX));
        assert_eq!(PayloadRoom::UNBOUNDED.prefix([Some(u64::MAX), None]), 2);
    }
}

/// An exactly-once forwarder's name for itself (`serve --instance-id`),
/// which is also its Kafka `transactional.id`: its send claims carry it
/// (`claimed_by`), so that its successor under the same name takes them
/// back at once, and no other instance takes one before it has fenced
/// this one in Kafka. Letters, digits, `.`, `_` and `-`, at most 100: a
/// name that is safe in SQL text and in a Kafka transactional id alike.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SendOwner(String);

impl SendOwner {
    /// The longest name the `claimed_by` column holds.
    pub const MAX_LEN: usize = 100;

    /// `name` as an owner, or why it cannot be one.
    pub fn new(name: &str) -> Result<Self, String> {
        if name.is_empty() || name.len() > Self::MAX_LEN {
            return Err(format!(
                "an instance id is 1 to {} characters long; {name:?} has {}",
                Self::MAX_LEN,
                name.len()
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(format!(
                "an instance id holds only letters, digits, '.', '_' and '-'; {name:?} holds {c:?}"
            ));
        }
        Ok(Self(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an SQL string literal: safe as it is, by what
    /// [`SendOwner::new`] lets through.
    pub(crate) fn literal(&self) -> String {
        format!("'{}'", self.0)
    }
}

impl std::fmt::Display for SendOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
