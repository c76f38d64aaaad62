//! The transaction helper: prepare → local transaction → commit or rollback.
//!
//! The order matters. The message is prepared *before* the local transaction,
//! so a crash at any later point leaves a PREPARED message that check-back
//! resolves; a crash before prepare leaves nothing to resolve. The decision is
//! sent *after* the local transaction, and when it cannot be delivered the
//! helper says so in its [`TxOutcome`] instead of turning it into an error that
//! would hide that the local change was made: trustmsg will ask the producer's
//! check endpoint, which must then answer from the local database (see
//! [`barrier`](crate::barrier) for an exact answer).
//!
//! The helpers work with either way in to trustmsg ([`TxProducer`]): the HTTP
//! [`Producer`], whose calls return once trustmsg has applied them, and (cargo
//! feature `kafka`) the `Submitter`, whose calls return once Kafka has
//! acknowledged the record, before trustmsg has applied it. With the
//! `Submitter` a decision can be refused only later, in the dead-letter
//! topic: its outcomes are never `CommitRejected` or `RollbackRejected`, and
//! a record Kafka did not acknowledge is left to check-back like an HTTP call
//! that could not be delivered.

use std::future::Future;

use std::sync::Arc;

use trustmsg_verify_api::{MessageStatus, MessageView};

use crate::{Error, Message, Producer};

mod sealed {
    /// Only this crate's ways in implement [`super::TxProducer`]: its
    /// methods may grow without breaking anyone.
    #[allow(unreachable_pub)]
    pub trait Sealed {}
}

/// A way in to trustmsg the transaction helpers can prepare, commit and roll
/// back through: [`Producer`] (HTTP) and, with the `kafka` cargo feature,
/// `submit::Submitter` (records to the submit topic). Implemented by this
/// crate only.
///
/// ```
/// use trustmsg_client::{MessageView, Producer, TxProducer};
///
/// fn takes_any_way_in<P: TxProducer>(p: &P) -> &str {
///     p.biz_id()
/// }
/// let p = Producer::new("http://127.0.0.1:8080", "shop", "token").unwrap();
/// assert_eq!(takes_any_way_in(&p), "shop");
/// // Over HTTP an accepted call returns the message's view.
/// let _: Option<<Producer as TxProducer>::Receipt> = None::<MessageView>;
/// ```
pub trait TxProducer: sealed::Sealed + Sync {
    /// What an accepted prepare, commit or rollback returns: the message's
    /// view over HTTP (trustmsg applied it); the record's place in the submit
    /// topic over Kafka (Kafka stored it, trustmsg will apply it).
    type Receipt: Send;

    /// The producer's id.
    fn biz_id(&self) -> &str;

    /// Prepares `message`.
    fn prepare(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send;

    /// Commits the message `message_key`.
    fn commit(
        &self,
        message_key: &str,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send;

    /// Rolls back the message `message_key`.
    fn rollback(
        &self,
        message_key: &str,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send;

    /// The message's status an accepted call answered, when the way in
    /// answers one (over HTTP; a Kafka receipt only says where the record is).
    fn status(receipt: &Self::Receipt) -> Option<MessageStatus>;

    /// The message's id an accepted call answered, when the way in answers one.
    fn message_id(receipt: &Self::Receipt) -> Option<u64>;
}

impl sealed::Sealed for Producer {}

impl TxProducer for Producer {
    type Receipt = MessageView;

    fn biz_id(&self) -> &str {
        Producer::biz_id(self)
    }

    fn prepare(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<MessageView, Error>> + Send {
        Producer::prepare(self, message)
    }

    fn commit(&self, message_key: &str) -> impl Future<Output = Result<MessageView, Error>> + Send {
        Producer::commit(self, message_key)
    }

    fn rollback(
        &self,
        message_key: &str,
    ) -> impl Future<Output = Result<MessageView, Error>> + Send {
        Producer::rollback(self, message_key)
    }

    fn status(receipt: &MessageView) -> Option<MessageStatus> {
        Some(receipt.status)
    }

    fn message_id(receipt: &MessageView) -> Option<u64> {
        Some(receipt.id)
    }
}

#[cfg(feature = "kafka")]
impl sealed::Sealed for crate::submit::Submitter {}

#[cfg(feature = "kafka")]
impl TxProducer for crate::submit::Submitter {
    type Receipt = crate::submit::Submitted;

    fn biz_id(&self) -> &str {
        crate::submit::Submitter::biz_id(self)
    }

    fn prepare(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send {
        crate::submit::Submitter::prepare(self, message)
    }

    fn commit(
        &self,
        message_key: &str,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send {
        crate::submit::Submitter::commit(self, message_key)
    }

    fn rollback(
        &self,
        message_key: &str,
    ) -> impl Future<Output = Result<Self::Receipt, Error>> + Send {
        crate::submit::Submitter::rollback(self, message_key)
    }

    fn status(_: &Self::Receipt) -> Option<MessageStatus> {
        None
    }

    fn message_id(_: &Self::Receipt) -> Option<u64> {
        None
    }
}

/// What happened to the local transaction and to the message, when the
/// helper ran the local work.
///
/// What needs someone's attention is an `Err` of the helper, never an
/// outcome to read: a message decided before (the local work did not run:
/// [`Error::AlreadyRolledBack`], [`Error::AlreadyCommitted`],
/// [`Error::NotPrepared`]), a commit trustmsg refused after the local
/// commit ([`Error::CommitRejected`]), a rollback it refused after the local
/// transaction failed ([`Error::RollbackRejected`]).
///
/// `R` is what the way in returns for an accepted call
/// ([`TxProducer::Receipt`]): the message's view over HTTP (the default), the
/// record's place in the submit topic with the `Submitter`.
///
/// ```
/// use trustmsg_client::TxOutcome;
///
/// fn report(o: &TxOutcome<u64, String>) -> String {
///     match o {
///         TxOutcome::Committed { value, message } => format!("order {value} -> message {}", message.id),
///         TxOutcome::CommitLeftToCheckBack { value, .. } => format!("order {value}; check-back will commit"),
///         TxOutcome::RolledBack { error } => format!("failed: {error}"),
///         TxOutcome::RollbackLeftToCheckBack { error, .. } => format!("failed: {error}; check-back will roll back"),
///         TxOutcome::LeftToCheckBack { .. } => "check-back decides".to_string(),
///     }
/// }
/// let o: TxOutcome<u64, String> = TxOutcome::RolledBack { error: "out of stock".into() };
/// assert_eq!(report(&o), "failed: out of stock");
/// assert!(!o.local_committed());
/// ```
// The message view is returned by value as it always was (boxing it would
// break every match on the outcome); an outcome is made once per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum TxOutcome<T, E, R = MessageView> {
    /// The local transaction committed and so did the message (with the
    /// `Submitter`: Kafka acknowledged the commit record).
    Committed {
        /// What the local transaction returned.
        value: T,
        /// The committed message's view (with the `Submitter`: where the
        /// commit record is).
        message: R,
    },
    /// The local transaction committed but the commit call could not be
    /// delivered (trustmsg unreachable after the retries). The message stays
    /// PREPARED until check-back asks; the check endpoint must answer commit.
    CommitLeftToCheckBack {
        /// What the local transaction returned.
        value: T,
        /// The last delivery error ([`Error::Unavailable`], or
        /// [`Error::NotAcknowledged`] with the `Submitter`).
        error: Error,
    },
    /// The local transaction failed and the message was rolled back.
    RolledBack {
        /// The local transaction's error.
        error: E,
    },
    /// The local transaction failed and the rollback call could not be
    /// delivered. The message stays PREPARED until check-back asks; the check
    /// endpoint must answer rollback.
    RollbackLeftToCheckBack {
        /// The local transaction's error.
        error: E,
        /// The last delivery error ([`Error::Unavailable`], or
        /// [`Error::NotAcknowledged`] with the `Submitter`).
        rollback_error: Error,
    },
    /// The helper could not send the right decision, so check-back makes
    /// it: [`barrier::transaction`](crate::barrier::transaction) returns
    /// this when the local COMMIT's outcome is unknown (the barrier could not
    /// be read either), or when the barrier showed an earlier commit and the
    /// commit it then sent could not be delivered.
    LeftToCheckBack {
        /// Why no decision was sent.
        error: E,
    },
}

impl<T, E, R> TxOutcome<T, E, R> {
    /// True when the local transaction committed (whatever became of the message).
    ///
    /// ```
    /// use trustmsg_client::{Error, TxOutcome};
    /// let o: TxOutcome<(), ()> = TxOutcome::CommitLeftToCheckBack {
    ///     value: (),
    ///     error: Error::Unavailable { attempts: 6, status: None, code: None, message: "refused".into() },
    /// };
    /// assert!(o.local_committed());
    /// assert!(o.left_to_check_back());
    /// ```
    pub fn local_committed(&self) -> bool {
        matches!(
            self,
            Self::Committed { .. } | Self::CommitLeftToCheckBack { .. }
        )
    }

    /// True when the decision was not delivered and check-back will make it.
    ///
    /// ```
    /// use trustmsg_client::TxOutcome;
    /// let o: TxOutcome<(), &str> = TxOutcome::LeftToCheckBack { error: "lost connection" };
    /// assert!(o.left_to_check_back());
    /// ```
    pub fn left_to_check_back(&self) -> bool {
        matches!(
            self,
            Self::CommitLeftToCheckBack { .. }
                | Self::RollbackLeftToCheckBack { .. }
                | Self::LeftToCheckBack { .. }
        )
    }

    /// The local transaction's value, if it committed.
    ///
    /// ```
    /// use trustmsg_client::TxOutcome;
    /// let o: TxOutcome<u32, ()> = TxOutcome::RolledBack { error: () };
    /// assert_eq!(o.into_value(), None);
    /// ```
    pub fn into_value(self) -> Option<T> {
        match self {
            Self::Committed { value, .. } | Self::CommitLeftToCheckBack { value, .. } => {
                Some(value)
            }
            _ => None,
        }
    }
}

/// The hook a test stops at: right after the local COMMIT, before the decision.
type Hook = Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// Options of the transaction helpers ([`transaction_with`],
/// [`barrier::transaction_with`](crate::barrier::transaction_with)).
///
/// `after_local_commit` is the crash point for your own tests: it is
/// called with the message key right after the local transaction
/// committed and before the commit call. Return `Err` and the helper sends
/// no decision and returns [`Error::StoppedAfterLocalCommit`] (as if the
/// process had died there: check-back, or the client's retry, decides); or
/// end the process in it (`std::process::exit`) to test a real crash.
///
/// ```
/// use trustmsg_client::TxOptions;
///
/// let crash_here = TxOptions::new().after_local_commit(|key| Err(format!("test: crash after {key}")));
/// # let _ = crash_here;
/// ```
#[derive(Clone, Default)]
pub struct TxOptions {
    after_local_commit: Option<Hook>,
}

impl std::fmt::Debug for TxOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxOptions")
            .field("after_local_commit", &self.after_local_commit.is_some())
            .finish()
    }
}

impl TxOptions {
    /// No hook.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `hook` after the local COMMIT and before the decision (see above).
    pub fn after_local_commit(
        mut self,
        hook: impl Fn(&str) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.after_local_commit = Some(Arc::new(hook));
        self
    }

    fn stop_after_local_commit(&self, message_key: &str) -> Result<(), Error> {
        match &self.after_local_commit {
            Some(hook) => hook(message_key).map_err(|reason| {
                tracing::warn!(%message_key, %reason, "stopped after the local commit; no decision sent");
                Error::StoppedAfterLocalCommit {
                    message_key: message_key.to_string(),
                    reason,
                }
            }),
            None => Ok(()),
        }
    }
}

/// Prepare `message`, run `local` (the producer's local transaction), then
/// commit the message if `local` returned `Ok` or roll it back if it returned `Err`.
///
/// `producer` is either way in ([`TxProducer`]): a [`Producer`] (HTTP), or
/// with the `kafka` feature a `submit::Submitter`, whose receipts say where
/// the records are in the submit topic; `local` gets prepare's receipt.
///
/// `local` runs only when prepare answered PREPARED. A retry of a request
/// whose message was decided before gets an `Err` and runs nothing:
/// [`Error::AlreadyRolledBack`] (its business step failed before: refuse
/// the request), [`Error::AlreadyCommitted`] (it went through before:
/// answer "already done"), [`Error::NotPrepared`] (VERIFY_FAILED). Also an
/// `Err`: prepare failing (then `local` never ran; if it failed as
/// [`Error::Unavailable`] or [`Error::NotAcknowledged`] the message may still
/// have been stored, and its check-back must answer rollback, which the
/// [`barrier`](crate::barrier) does), a commit refused after the local
/// commit ([`Error::CommitRejected`]), a rollback refused after the local
/// failure ([`Error::RollbackRejected`]). Everything else is reported in the
/// [`TxOutcome`].
///
/// `local` must return `Err` only when its transaction did **not** commit. If
/// the outcome of its COMMIT can be unknown, or a retry can find its commit
/// (a crash between the local COMMIT and the commit call), use
/// [`barrier::transaction`](crate::barrier::transaction), which finds out.
///
/// ```no_run
/// use trustmsg_client::{transaction, Error, Message, Producer, TxOutcome};
///
/// # async fn run(producer: Producer, pool: sqlx::MySqlPool) -> Result<(), trustmsg_client::Error> {
/// let placed = transaction(&producer, Message::new("order-42", "orders", "{}"), |_view| async {
///     sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&pool).await?;
///     Ok::<_, sqlx::Error>(42)
/// })
/// .await;
/// match placed {
///     Ok(TxOutcome::Committed { value, .. }) => println!("order {value} placed"),
///     Ok(other) if other.left_to_check_back() => println!("check-back will decide"),
///     Ok(other) => println!("not placed: {other:?}"),
///     Err(Error::AlreadyCommitted { .. }) => println!("placed before"),
///     Err(Error::AlreadyRolledBack { .. }) => println!("refused before: use a new order"),
///     Err(e) => eprintln!("needs attention: {e}"),
/// }
/// # Ok(())
/// # }
/// ```
pub async fn transaction<P, T, E, F, Fut>(
    producer: &P,
    message: Message,
    local: F,
) -> Result<TxOutcome<T, E, P::Receipt>, Error>
where
    P: TxProducer,
    E: std::fmt::Display,
    F: FnOnce(P::Receipt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    transaction_with(producer, message, &TxOptions::new(), local).await
}

/// [`transaction`] with [`TxOptions`] (the test hook after the local commit).
///
/// ```no_run
/// use trustmsg_client::{transaction_with, Error, Message, Producer, TxOptions};
///
/// # async fn run(producer: Producer) {
/// let crash = TxOptions::new().after_local_commit(|_| Err("crash".into()));
/// let r = transaction_with(&producer, Message::new("order-42", "orders", "{}"), &crash, |_view| async {
///     Ok::<_, String>(42)
/// })
/// .await;
/// assert!(matches!(r, Err(Error::StoppedAfterLocalCommit { .. })));
/// # }
/// ```
pub async fn transaction_with<P, T, E, F, Fut>(
    producer: &P,
    message: Message,
    options: &TxOptions,
    local: F,
) -> Result<TxOutcome<T, E, P::Receipt>, Error>
where
    P: TxProducer,
    E: std::fmt::Display,
    F: FnOnce(P::Receipt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    run(producer, message, options, local, |_| Known::NotDecided).await
}

/// What a local error says about a decision made before.
pub(crate) enum Known {
    /// Nothing: the local work failed, roll back.
    NotDecided,
    /// An earlier run committed (the barrier's `commit` marker): commit.
    Committed,
    /// The message was rolled back before (the barrier's `rollback` marker).
    RolledBack,
    /// Nobody can say yet (the COMMIT's outcome is unknown): check-back decides.
    Unknown,
}

/// The helper, with a way to read what a local error knows of an earlier
/// decision.
pub(crate) async fn run<P, T, E, F, Fut>(
    producer: &P,
    message: Message,
    options: &TxOptions,
    local: F,
    known: impl Fn(&E) -> Known,
) -> Result<TxOutcome<T, E, P::Receipt>, Error>
where
    P: TxProducer,
    E: std::fmt::Display,
    F: FnOnce(P::Receipt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let key = message.message_key().to_string();
    let view = match producer.prepare(&message).await {
        Ok(view) => view,
        Err(Error::Conflict { code, .. })
            if code == "already_rolled_back" || code == "rolled_back" =>
        {
            return Err(Error::AlreadyRolledBack { message_key: key });
        }
        Err(e) => return Err(e),
    };
    match P::status(&view) {
        None | Some(MessageStatus::Prepared) => {}
        Some(MessageStatus::Committed) => {
            return Err(Error::AlreadyCommitted {
                message_key: key,
                message_id: P::message_id(&view),
            })
        }
        Some(MessageStatus::RolledBack) => {
            return Err(Error::AlreadyRolledBack { message_key: key })
        }
        Some(status) => {
            return Err(Error::NotPrepared {
                message_key: key,
                status,
            })
        }
    }
    match local(view).await {
        Ok(value) => {
            options.stop_after_local_commit(&key)?;
            match producer.commit(&key).await {
                Ok(message) => Ok(TxOutcome::Committed { value, message }),
                Err(error) if error.is_unavailable() => {
                    tracing::warn!(message_key = %key, %error, "commit not delivered; check-back will decide");
                    Ok(TxOutcome::CommitLeftToCheckBack { value, error })
                }
                Err(error) => {
                    tracing::error!(message_key = %key, %error, "local transaction committed but trustmsg refused the commit");
                    Err(Error::CommitRejected {
                        message_key: key,
                        source: Box::new(error),
                    })
                }
            }
        }
        Err(error) => match known(&error) {
            Known::Unknown => {
                tracing::warn!(message_key = %key, %error, "local COMMIT outcome unknown; no decision sent; check-back will decide");
                Ok(TxOutcome::LeftToCheckBack { error })
            }
            Known::Committed => {
                // A retry of a request whose first run committed locally and
                // stopped before its commit call: send it now (commit is
                // idempotent) instead of waiting for check-back.
                match producer.commit(&key).await {
                    Ok(receipt) => Err(Error::AlreadyCommitted {
                        message_key: key,
                        message_id: P::message_id(&receipt),
                    }),
                    Err(commit_error) if commit_error.is_unavailable() => {
                        tracing::warn!(message_key = %key, %commit_error, "an earlier local commit found; its commit not delivered; check-back will decide");
                        Ok(TxOutcome::LeftToCheckBack { error })
                    }
                    Err(commit_error) => {
                        tracing::error!(message_key = %key, %commit_error, "an earlier local commit found but trustmsg refused the commit");
                        Err(Error::CommitRejected {
                            message_key: key,
                            source: Box::new(commit_error),
                        })
                    }
                }
            }
            Known::RolledBack => {
                // Check-back (or an earlier run) wrote the rollback marker;
                // the rollback is idempotent and settles a message still
                // PREPARED at once.
                if let Err(e) = producer.rollback(&key).await {
                    tracing::warn!(message_key = %key, error = %e, "rollback after the barrier's rollback marker not delivered");
                }
                Err(Error::AlreadyRolledBack { message_key: key })
            }
            Known::NotDecided => match producer.rollback(&key).await {
                Ok(_) => Ok(TxOutcome::RolledBack { error }),
                Err(rollback_error) if rollback_error.is_unavailable() => {
                    tracing::warn!(message_key = %key, %rollback_error, "rollback not delivered; check-back will decide");
                    Ok(TxOutcome::RollbackLeftToCheckBack {
                        error,
                        rollback_error,
                    })
                }
                Err(rollback_error) => {
                    tracing::error!(message_key = %key, %rollback_error, "local transaction failed but trustmsg refused the rollback");
                    Err(Error::RollbackRejected {
                        message_key: key,
                        local_error: error.to_string(),
                        source: Box::new(rollback_error),
                    })
                }
            },
        },
    }
}
