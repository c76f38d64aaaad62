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

use trustmsg_verify_api::MessageView;

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
}

/// What happened to the local transaction and to the message.
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
///         TxOutcome::CommitRejected { error, .. } => format!("ALERT: commit refused: {error}"),
///         TxOutcome::RolledBack { error } => format!("failed: {error}"),
///         TxOutcome::RollbackLeftToCheckBack { error, .. } => format!("failed: {error}; check-back will roll back"),
///         TxOutcome::RollbackRejected { rollback_error, .. } => format!("ALERT: rollback refused: {rollback_error}"),
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
    /// The local transaction committed but trustmsg refused the commit (e.g.
    /// `already_rolled_back` because a check-back answered rollback, or an
    /// operator decided). Local state and message disagree: alert someone.
    CommitRejected {
        /// What the local transaction returned.
        value: T,
        /// trustmsg's answer.
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
    /// The local transaction failed and trustmsg refused the rollback (e.g.
    /// `already_committed`). Local state and message disagree: alert someone.
    RollbackRejected {
        /// The local transaction's error.
        error: E,
        /// trustmsg's answer.
        rollback_error: Error,
    },
    /// The helper could not know the right decision, so it sent none:
    /// [`barrier::transaction`](crate::barrier::transaction) returns this when
    /// the local COMMIT's outcome is unknown, or when an earlier run of the
    /// same key had already committed. Check-back decides from the local
    /// database.
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
            Self::Committed { .. }
                | Self::CommitLeftToCheckBack { .. }
                | Self::CommitRejected { .. }
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
            Self::Committed { value, .. }
            | Self::CommitLeftToCheckBack { value, .. }
            | Self::CommitRejected { value, .. } => Some(value),
            _ => None,
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
/// Returns `Err` only when prepare fails; then `local` never ran. (If prepare
/// failed as [`Error::Unavailable`] or [`Error::NotAcknowledged`] the message
/// may still have been stored; its check-back must then answer rollback,
/// which the [`barrier`](crate::barrier) does.) Everything after prepare is
/// reported in the [`TxOutcome`].
///
/// `local` must return `Err` only when its transaction did **not** commit. If
/// the outcome of its COMMIT is unknown, use
/// [`barrier::transaction`](crate::barrier::transaction), which finds out.
///
/// ```no_run
/// use trustmsg_client::{transaction, Message, Producer, TxOutcome};
///
/// # async fn run(producer: Producer, pool: sqlx::MySqlPool) -> Result<(), trustmsg_client::Error> {
/// let outcome = transaction(&producer, Message::new("order-42", "orders", "{}"), |_view| async {
///     sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&pool).await?;
///     Ok::<_, sqlx::Error>(42)
/// })
/// .await?;
/// match outcome {
///     TxOutcome::Committed { value, .. } => println!("order {value} placed"),
///     other if other.left_to_check_back() => println!("check-back will decide"),
///     other => eprintln!("needs attention: {other:?}"),
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
    F: FnOnce(P::Receipt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    run(producer, message, local, |_| false).await
}

/// [`transaction`] with a way to say that a local error leaves the outcome
/// no decision should be sent, in which case check-back decides.
pub(crate) async fn run<P, T, E, F, Fut>(
    producer: &P,
    message: Message,
    local: F,
    leave_to_check_back: impl Fn(&E) -> bool,
) -> Result<TxOutcome<T, E, P::Receipt>, Error>
where
    P: TxProducer,
    F: FnOnce(P::Receipt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let key = message.message_key().to_string();
    let view = producer.prepare(&message).await?;
    match local(view).await {
        Ok(value) => Ok(match producer.commit(&key).await {
            Ok(message) => TxOutcome::Committed { value, message },
            Err(error) if error.is_unavailable() => {
                tracing::warn!(message_key = %key, %error, "commit not delivered; check-back will decide");
                TxOutcome::CommitLeftToCheckBack { value, error }
            }
            Err(error) => {
                tracing::error!(message_key = %key, %error, "local transaction committed but trustmsg refused the commit");
                TxOutcome::CommitRejected { value, error }
            }
        }),
        Err(error) if leave_to_check_back(&error) => {
            tracing::warn!(message_key = %key, "no decision sent; check-back will decide");
            Ok(TxOutcome::LeftToCheckBack { error })
        }
        Err(error) => Ok(match producer.rollback(&key).await {
            Ok(_) => TxOutcome::RolledBack { error },
            Err(rollback_error) if rollback_error.is_unavailable() => {
                tracing::warn!(message_key = %key, %rollback_error, "rollback not delivered; check-back will decide");
                TxOutcome::RollbackLeftToCheckBack {
                    error,
                    rollback_error,
                }
            }
            Err(rollback_error) => {
                tracing::error!(message_key = %key, %rollback_error, "local transaction failed but trustmsg refused the rollback");
                TxOutcome::RollbackRejected {
                    error,
                    rollback_error,
                }
            }
        }),
    }
}
