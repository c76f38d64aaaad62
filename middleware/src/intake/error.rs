//! Why the intake refused or could not take a producer's message: the
//! reasons every door translates into its own answer (an HTTP status, a
//! dead-letter record, a failed outbox row), each with the machine-readable
//! code all doors share.

use crate::registry::LookupError;
use crate::store::StoreError;

/// A refusal or failure of the intake.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IntakeError {
    /// Bad input, with a specific code (`invalid_topic`, …).
    #[error("{message}")]
    Invalid {
        /// Machine-readable code.
        code: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The payload, or the Kafka record it makes, is over a limit.
    #[error("{0}")]
    TooLarge(String),
    /// The request's credentials (a record's signature) are missing or wrong.
    #[error("{0}")]
    Unauthorized(String),
    /// Valid, but outside what the producer may do (a topic outside its
    /// allow-list), with a code.
    #[error("{message}")]
    NotAllowed {
        /// Machine-readable code, e.g. `topic_not_allowed`.
        code: &'static str,
        /// What is not allowed and what is.
        message: String,
    },
    /// The message is not there (a decision for a message never prepared).
    #[error("{message}")]
    NotFound {
        /// Machine-readable code.
        code: &'static str,
        /// What was not found.
        message: String,
    },
    /// The request contradicts what is stored.
    #[error("{message}")]
    Conflict {
        /// Machine-readable code.
        code: &'static str,
        /// What it conflicts with.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Looking up the producer's registration failed in the store.
    #[error(transparent)]
    Registry(#[from] LookupError),
}

impl IntakeError {
    /// Bad input with `code`.
    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A contradiction with what is stored, with `code`.
    pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::Conflict {
            code,
            message: message.into(),
        }
    }

    /// Nothing there, with `code`.
    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::NotFound {
            code,
            message: message.into(),
        }
    }

    /// The machine-readable code every door answers with.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Invalid { code, .. }
            | Self::NotAllowed { code, .. }
            | Self::NotFound { code, .. }
            | Self::Conflict { code, .. } => code,
            Self::TooLarge(_) => "payload_too_large",
            Self::Unauthorized(_) => "unauthorized",
            // Retrying reads the same unreadable row: not a "retry later".
            Self::Store(StoreError::Corrupt(_)) => "internal",
            Self::Store(_) | Self::Registry(_) => "store_unavailable",
        }
    }

    /// Whether the same request may succeed later unchanged: the store or a
    /// lookup failed (a row that cannot be read is not that).
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Self::Registry(_))
            || matches!(self, Self::Store(e) if !matches!(e, StoreError::Corrupt(_)))
    }
}

impl From<trustmsg_verify_api::rules::Refusal> for IntakeError {
    fn from(r: trustmsg_verify_api::rules::Refusal) -> Self {
        Self::invalid(r.code, r.message)
    }
}
