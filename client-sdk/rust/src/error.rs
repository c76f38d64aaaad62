//! The one error type of the client: every failure a caller may need to tell
//! apart is its own variant, carrying trustmsg's `code` and `message`.

use trustmsg_verify_api::MessageStatus;

/// Why a [`Producer`](crate::Producer) call failed.
///
/// 4xx answers are final and map to their own variants (never retried);
/// network errors and 5xx are retried and, once the retries are used up,
/// become [`Error::Unavailable`].
///
/// ```
/// use trustmsg_client::Error;
///
/// fn explain(e: &Error) -> &'static str {
///     match e {
///         Error::Conflict { .. } => "the message was already decided the other way",
///         Error::NotFound { .. } => "trustmsg does not know this message",
///         Error::Invalid { .. } => "fix the request",
///         Error::Unauthorized { .. } | Error::Forbidden { .. } => "check the token",
///         Error::Unavailable { .. } => "trustmsg could not be reached; try later",
///         _ => "unexpected",
///     }
/// }
/// let e = Error::Conflict { code: "already_committed".into(), message: "…".into() };
/// assert_eq!(e.code(), Some("already_committed"));
/// assert_eq!(explain(&e), "the message was already decided the other way");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 409: e.g. `prepare_conflict` (same key, different content), `rolled_back`
    /// (prepare after a rollback), `already_committed`, `already_rolled_back`.
    #[error("conflict ({code}): {message}")]
    Conflict {
        /// trustmsg's error code.
        code: String,
        /// trustmsg's explanation.
        message: String,
    },
    /// 404: e.g. `message_not_found` on commit or get of an unknown message.
    #[error("not found ({code}): {message}")]
    NotFound {
        /// trustmsg's error code.
        code: String,
        /// trustmsg's explanation.
        message: String,
    },
    /// 400, 413 or 415: the request is invalid and will stay invalid. The
    /// `Submitter` (feature `kafka`) refuses what it cannot sign or what
    /// trustmsg would dead-letter as invalid before sending anything, as this
    /// with status 400 and the HTTP API's code.
    #[error("invalid request, HTTP {status} ({code}): {message}")]
    Invalid {
        /// The HTTP status (400, 413 or 415).
        status: u16,
        /// trustmsg's error code, e.g. `invalid_topic`, `payload_too_large`.
        code: String,
        /// trustmsg's explanation.
        message: String,
    },
    /// 401: the token is missing or wrong.
    #[error("unauthorized ({code}): {message}")]
    Unauthorized {
        /// trustmsg's error code.
        code: String,
        /// trustmsg's explanation.
        message: String,
    },
    /// 403: the token belongs to another producer.
    #[error("forbidden ({code}): {message}")]
    Forbidden {
        /// trustmsg's error code.
        code: String,
        /// trustmsg's explanation.
        message: String,
    },
    /// Network errors or 5xx on every attempt. The request may or may not have
    /// reached trustmsg; every producer call is idempotent, so repeating it is safe.
    #[error("trustmsg unavailable after {attempts} attempts: {message}")]
    Unavailable {
        /// How many requests were made.
        attempts: u32,
        /// The HTTP status of the last attempt, if it got an answer at all.
        status: Option<u16>,
        /// trustmsg's error code of the last attempt, if it sent one.
        code: Option<String>,
        /// What went wrong on the last attempt.
        message: String,
    },
    /// Any other answer: an unexpected status, or a 2xx whose body is not a message view.
    #[error("unexpected answer, HTTP {status}: {message}")]
    Unexpected {
        /// The HTTP status.
        status: u16,
        /// trustmsg's error code, if the body had one.
        code: Option<String>,
        /// What was wrong.
        message: String,
    },
    /// The client could not be built (bad base URL, TLS setup, Kafka
    /// settings, a signing secret that is not `whsec_<base64>`).
    #[error("client configuration: {0}")]
    Config(String),
    /// A transaction helper ran no local work because the message was
    /// rolled back before: prepare was refused `already_rolled_back` (or
    /// `rolled_back`: a rollback came before any prepare), or the barrier
    /// holds the `rollback` marker. A client's retry of a request whose
    /// business step failed meets this: the order must not be placed under
    /// this message key (answer it as refused, never "try again").
    #[error("message {message_key:?} was rolled back before; the local work did not run")]
    AlreadyRolledBack {
        /// The message's key.
        message_key: String,
    },
    /// A transaction helper ran no local work because the message's local
    /// transaction committed before: prepare answered COMMITTED (a retry
    /// after the whole request went through), or the barrier holds the
    /// `commit` marker (a retry after a crash between the local COMMIT and
    /// the commit call; the helper then sent the commit itself). Answer it
    /// as "already done".
    #[error("message {message_key:?} was committed before; the local work did not run")]
    AlreadyCommitted {
        /// The message's key.
        message_key: String,
        /// The message's id, when trustmsg answered with its view.
        message_id: Option<u64>,
    },
    /// A transaction helper ran no local work because prepare answered a
    /// status that lets nobody run it (`VERIFY_FAILED`: an operator decides).
    #[error("message {message_key:?} is {}, not PREPARED; the local work did not run", status.as_str())]
    NotPrepared {
        /// The message's key.
        message_key: String,
        /// The status prepare answered.
        status: MessageStatus,
    },
    /// The local transaction **committed** but trustmsg refused the commit
    /// (e.g. `already_rolled_back`: an operator or a check-back decided
    /// first). The local change is made and its message will never be sent:
    /// alert someone.
    #[error("message {message_key:?}: the local transaction committed but trustmsg refused the commit: {source}")]
    CommitRejected {
        /// The message's key.
        message_key: String,
        /// trustmsg's answer.
        source: Box<Error>,
    },
    /// The local transaction failed (rolled back) but trustmsg refused the
    /// rollback (e.g. `already_committed`): alert someone.
    #[error("message {message_key:?}: the local transaction failed ({local_error}) but trustmsg refused the rollback: {source}")]
    RollbackRejected {
        /// The message's key.
        message_key: String,
        /// The local transaction's error, as text.
        local_error: String,
        /// trustmsg's answer.
        source: Box<Error>,
    },
    /// The `after_local_commit` hook ([`TxOptions`](crate::TxOptions))
    /// stopped the helper after the local COMMIT: no decision was sent (as if
    /// the process had died there); check-back or a retry decides.
    #[error("message {message_key:?}: stopped after the local commit, no decision sent: {reason}")]
    StoppedAfterLocalCommit {
        /// The message's key.
        message_key: String,
        /// What the hook said.
        reason: String,
    },
    /// A record submitted to trustmsg's submit topic (feature `kafka`) was
    /// not acknowledged by Kafka within `message.timeout.ms`: brokers
    /// unreachable, the topic missing or not writable. It may still have been
    /// written; every submitted operation is idempotent, so repeating it is
    /// safe, and [`Error::is_unavailable`] is true for it.
    #[error("Kafka did not acknowledge the record: {message}")]
    NotAcknowledged {
        /// librdkafka's error.
        message: String,
    },
}

impl Error {
    /// trustmsg's error code, when the server sent one.
    ///
    /// ```
    /// let e = trustmsg_client::Error::NotFound {
    ///     code: "message_not_found".into(),
    ///     message: "no such message".into(),
    /// };
    /// assert_eq!(e.code(), Some("message_not_found"));
    /// ```
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Conflict { code, .. }
            | Self::NotFound { code, .. }
            | Self::Invalid { code, .. }
            | Self::Unauthorized { code, .. }
            | Self::Forbidden { code, .. } => Some(code),
            Self::Unavailable { code, .. } | Self::Unexpected { code, .. } => code.as_deref(),
            Self::CommitRejected { source, .. } | Self::RollbackRejected { source, .. } => {
                source.code()
            }
            Self::Config(_)
            | Self::NotAcknowledged { .. }
            | Self::AlreadyRolledBack { .. }
            | Self::AlreadyCommitted { .. }
            | Self::NotPrepared { .. }
            | Self::StoppedAfterLocalCommit { .. } => None,
        }
    }

    /// The HTTP status of the (last) answer, when there was one.
    ///
    /// ```
    /// let e = trustmsg_client::Error::Forbidden { code: "forbidden".into(), message: "".into() };
    /// assert_eq!(e.status(), Some(403));
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Conflict { .. } => Some(409),
            Self::NotFound { .. } => Some(404),
            Self::Invalid { status, .. } | Self::Unexpected { status, .. } => Some(*status),
            Self::Unauthorized { .. } => Some(401),
            Self::Forbidden { .. } => Some(403),
            Self::Unavailable { status, .. } => *status,
            Self::CommitRejected { source, .. } | Self::RollbackRejected { source, .. } => {
                source.status()
            }
            Self::Config(_)
            | Self::NotAcknowledged { .. }
            | Self::AlreadyRolledBack { .. }
            | Self::AlreadyCommitted { .. }
            | Self::NotPrepared { .. }
            | Self::StoppedAfterLocalCommit { .. } => None,
        }
    }

    /// True for [`Error::Unavailable`] and [`Error::NotAcknowledged`]: the
    /// call may have reached trustmsg (or Kafka) or not, and repeating it
    /// later is safe.
    ///
    /// ```
    /// let e = trustmsg_client::Error::Unavailable {
    ///     attempts: 4, status: Some(503), code: None, message: "down".into(),
    /// };
    /// assert!(e.is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Unavailable { .. } | Self::NotAcknowledged { .. }
        )
    }

    /// Maps a final (non-retryable) error answer to its variant.
    pub(crate) fn from_status(status: u16, code: Option<String>, message: String) -> Self {
        let code_or = |default: &str| code.clone().unwrap_or_else(|| default.to_string());
        match status {
            400 | 413 | 415 => Self::Invalid {
                status,
                code: code_or("invalid"),
                message,
            },
            401 => Self::Unauthorized {
                code: code_or("unauthorized"),
                message,
            },
            403 => Self::Forbidden {
                code: code_or("forbidden"),
                message,
            },
            404 => Self::NotFound {
                code: code_or("not_found"),
                message,
            },
            409 => Self::Conflict {
                code: code_or("conflict"),
                message,
            },
            _ => Self::Unexpected {
                status,
                code,
                message,
            },
        }
    }
}
