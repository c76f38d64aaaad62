//! `trustmsg admin …`: the operator API from a terminal. Tables by default
//! (aligned columns, ages like `3m12s`) made from the answers' typed views
//! (`trustmsg_verify_api`), `--json` for scripts (the server's JSON as it
//! came). Any error exits non-zero with the server's code and
//! message on stderr.

mod client;
mod views;

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use trustmsg::config::{quiet, RedactedUrl, Secret};
use trustmsg_verify_api::admin::{ActionRequest, OperatorDecision, ResolveRequest};
use trustmsg_verify_api::consumers::ConsumerGroupSettings;
use trustmsg_verify_api::{ProducerSettings, SigningSecret};

use client::{Answer, Client};
use views::*;

/// Where the service is and who asks.
#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    /// The service's base URL (a password in it percent-encoded; it is
    /// never shown).
    #[arg(long, env = "TRUSTMSG_URL", hide_env_values = true, default_value = "http://127.0.0.1:8080", value_parser = quiet::<RedactedUrl>())]
    url: RedactedUrl,
    /// The admin token (every command but `archive` needs it).
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<Secret>,
    /// Your name, for the audit trail of what you change.
    #[arg(long, env = "TRUSTMSG_OPERATOR")]
    operator: Option<String>,
    /// Print the server's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// What to do.
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Messages: list, show, and act on one.
    #[command(subcommand)]
    Messages(MessagesCommand),
    /// Producer registrations.
    #[command(subcommand)]
    Producers(ProducersCommand),
    /// Consumer groups of the consumption ledger.
    #[command(subcommand, name = "consumer-groups")]
    ConsumerGroups(GroupsCommand),
    /// Per producer: counts by state and the oldest waiting messages.
    Summary,
    /// Alerts, newest first: which reached the webhook and which still wait
    /// (and why their last POST failed).
    Alerts {
        /// pending (not delivered yet), delivered or no_webhook.
        #[arg(long)]
        state: Option<String>,
        /// One message's alerts.
        #[arg(long)]
        message_id: Option<u64>,
        /// Rows (1 to 500).
        #[arg(long)]
        limit: Option<u32>,
        /// The next page (printed under the table).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// The producers' outbox tables the instance answering relays
    /// (`--outbox-source`): its relay's state, the pending and failed rows,
    /// rows relayed, errors and the last one.
    OutboxSources,
    /// One outbox source's rows of a status, lowest id first.
    OutboxRows {
        /// The source's producer.
        biz_id: String,
        /// failed (the default), pending, relayed or given_up.
        #[arg(long)]
        status: Option<String>,
        /// Rows (1 to 1000).
        #[arg(long)]
        limit: Option<u32>,
        /// Rows with ids above this one (the next page: printed under the table).
        #[arg(long)]
        after: Option<u64>,
    },
    /// A failed outbox row is relayed again, as a new attempt: fix what its
    /// fail reason names first.
    OutboxRetry {
        /// The source's producer.
        biz_id: String,
        /// The row's id in the source table.
        row_id: u64,
        #[arg(long)]
        reason: String,
    },
    /// The archive of what retention deleted (`serve --archive`), read
    /// directly from its store: no server is asked, no token needed.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// A failed outbox row is never relayed (status 4).
    OutboxGiveUp {
        /// The source's producer.
        biz_id: String,
        /// The row's id in the source table.
        row_id: u64,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
enum MessagesCommand {
    /// Lists messages, newest first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        send_status: Option<String>,
        #[arg(long)]
        biz_id: Option<String>,
        #[arg(long)]
        topic: Option<String>,
        /// RFC 3339.
        #[arg(long)]
        created_after: Option<String>,
        /// RFC 3339.
        #[arg(long)]
        created_before: Option<String>,
        /// Rows (1 to 500).
        #[arg(long)]
        limit: Option<u32>,
        /// The next page (printed under the table).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// One message: state, payload, headers, audit trail, check-back calls.
    Show { id: u64 },
    /// Commits or rolls back a PREPARED or VERIFY_FAILED message.
    Resolve {
        id: u64,
        #[arg(long, value_enum)]
        decision: DecisionArg,
        #[arg(long)]
        reason: String,
    },
    /// VERIFY_FAILED → PREPARED, checked back again at once.
    Reverify {
        id: u64,
        #[arg(long)]
        reason: String,
    },
    /// SEND_FAILED → PENDING, sent again at once.
    Redeliver {
        id: u64,
        #[arg(long)]
        reason: String,
    },
    /// Gives up on the SEND_FAILED head of an ordered key: it stays
    /// SEND_FAILED, and the messages waiting behind it go, in order.
    Skip {
        id: u64,
        #[arg(long)]
        reason: String,
    },
    /// A committed message waiting for its deliver_at: sent at once instead.
    SendNow {
        id: u64,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
enum ArchiveCommand {
    /// Finds a message in the archive and shows it as `messages show`
    /// does (payload, headers, audit trail, check-back calls, consumptions),
    /// with the object it was read from. By id it reads the one object
    /// whose id range holds it; by key it reads the objects newest first
    /// until one holds it (one GET each: bound it with --since).
    Find(ArchiveFind),
}

/// `archive find`: by id, or by producer and key.
#[derive(Debug, Args)]
struct ArchiveFind {
    /// trustmsg's message id.
    #[arg(long, conflicts_with_all = ["biz_id", "key"], required_unless_present = "biz_id")]
    id: Option<u64>,
    /// The producer (with --key).
    #[arg(long, requires = "key")]
    biz_id: Option<String>,
    /// The message key (with --biz-id).
    #[arg(long, requires = "biz_id")]
    key: Option<String>,
    /// The archive, as `serve --archive` names it (credentials from the
    /// same environment variables).
    #[arg(long, env = "TRUSTMSG_ARCHIVE")]
    archive: String,
    /// By key: only objects holding a message created at or after this
    /// time (RFC 3339) are read.
    #[arg(long)]
    since: Option<chrono::DateTime<chrono::Utc>>,
}

/// `archive find`: prints the message as the archive holds it (`--json`:
/// its archive line) or fails when it is not there.
async fn find_archived(find: ArchiveFind, json_out: bool) -> anyhow::Result<()> {
    let archive = trustmsg::archive::Archive::open(&find.archive)?;
    let found = match (find.id, find.biz_id, find.key) {
        (Some(id), _, _) => archive.find_by_id(id).await?,
        (None, Some(biz_id), Some(key)) => archive.find_by_key(&biz_id, &key, find.since).await?,
        _ => anyhow::bail!("give --id, or --biz-id with --key"),
    };
    let Some(found) = found else {
        anyhow::bail!("not in the archive at {}", archive.url());
    };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&found.message)?);
    } else {
        println!("archived in {}", found.object);
        println!("{}", message_detail(&found.message.detail()));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DecisionArg {
    Commit,
    Rollback,
}

#[derive(Debug, Subcommand)]
enum ProducersCommand {
    /// Every registration.
    List,
    /// One registration.
    Show { biz_id: String },
    /// Creates or updates a registration (a new one prints its token once,
    /// and its signing secret). An update replaces the whole registration:
    /// give every setting you want to keep, `--topics` too.
    Put(ProducerPut),
    /// Issues a new token (printed once, with the signing secret); the old
    /// one stops working.
    RotateToken { biz_id: String },
    /// Prints the producer's check-back signing secret (the service logs
    /// who asked).
    RevealSigningSecret { biz_id: String },
    /// Deletes a registration.
    Delete { biz_id: String },
}

#[derive(Debug, Subcommand)]
enum GroupsCommand {
    /// Every group at a glance: its topics, processed, failing, in
    /// progress and lag (messages sent to its topics since it was
    /// registered that it has not processed).
    List,
    /// One group's registration.
    Show { group: String },
    /// Creates or updates a group (a new one prints its token once). An
    /// update replaces its settings: give every one you want to keep.
    Put(GroupPut),
    /// Issues a new token (printed once); the old one stops working.
    RotateToken { group: String },
    /// Deletes a group (its token stops working).
    Delete { group: String },
}

/// `producers put`: a registration, whole.
#[derive(Debug, Args)]
struct ProducerPut {
    biz_id: String,
    #[arg(long)]
    verify_url: String,
    #[arg(long)]
    verify_timeout_ms: Option<u32>,
    #[arg(long)]
    first_verify_after_ms: Option<u32>,
    #[arg(long)]
    max_verify_attempts: Option<u32>,
    /// The topics it may prepare for, comma-separated: exact names or
    /// prefixes ending in `*` (`orders,shop.*`); `*` allows any topic.
    /// Without it the producer has no allow-list (any topic, flagged).
    #[arg(long, value_delimiter = ',')]
    topics: Option<Vec<String>>,
    /// In order per key: the messages of one (topic, record key) are
    /// sent one after the other, in commit order.
    #[arg(long)]
    ordered: bool,
}

/// `consumer-groups put`: a group's settings, whole.
#[derive(Debug, Args)]
struct GroupPut {
    group: String,
    /// The topics it consumes, comma-separated: exact names or prefixes
    /// ending in `*` (`orders,shop.*`); `*` is every topic.
    #[arg(long, value_delimiter = ',', required = true)]
    topics: Vec<String>,
    /// Failed consumptions of one message before the alert (default 5).
    #[arg(long)]
    max_failures: Option<u32>,
    /// How long a begun consumption holds its message, in ms (default 300000).
    #[arg(long)]
    in_progress_timeout_ms: Option<u32>,
}

/// Runs one admin command; an error is the server's (or the connection's).
pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let json_out = args.json;
    let client = match args.command {
        AdminCommand::Archive(ArchiveCommand::Find(find)) => {
            return find_archived(find, json_out).await
        }
        _ => Client::new(&args)?,
    };
    let call = Call::of(args.command)?;
    let answer = client.call(call.method, &call.path, call.body).await?;
    let (value, text) = (call.show)(answer)?;
    if json_out {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{text}");
    }
    Ok(())
}

/// How a command's answer is shown: as JSON and as text.
type Show = Box<dyn FnOnce(Answer) -> anyhow::Result<(Value, String)>>;

/// What one command asks of the admin API: one request, and how its answer
/// reads.
struct Call {
    method: Method,
    path: String,
    body: Option<Value>,
    show: Show,
}

impl Call {
    /// A request whose answer is a `T`, shown as `render` writes it.
    fn new<T: DeserializeOwned + 'static>(
        method: Method,
        path: String,
        body: Option<Value>,
        render: fn(&T) -> String,
    ) -> Self {
        let show: Show = Box::new(move |answer: Answer| answer.render(render));
        Self {
            method,
            path,
            body,
            show,
        }
    }

    fn get<T: DeserializeOwned + 'static>(path: String, render: fn(&T) -> String) -> Self {
        Self::new(Method::GET, path, None, render)
    }

    /// A listing: `path` with the filters that were given as its query.
    fn list<T: DeserializeOwned + 'static>(
        path: &str,
        filters: &[(&str, Option<String>)],
        render: fn(&T) -> String,
    ) -> Self {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in filters {
            if let Some(v) = v {
                query.append_pair(k, v);
            }
        }
        Self::get(format!("{path}?{}", query.finish()), render)
    }

    /// A POST (or PUT) with `body` as its JSON.
    fn send<T: DeserializeOwned + 'static>(
        method: Method,
        path: String,
        body: impl Serialize,
        render: fn(&T) -> String,
    ) -> anyhow::Result<Self> {
        Ok(Self::new(
            method,
            path,
            Some(serde_json::to_value(body)?),
            render,
        ))
    }

    /// One of the actions that take only a reason.
    fn action<T: DeserializeOwned + 'static>(
        path: String,
        reason: String,
        render: fn(&T) -> String,
    ) -> anyhow::Result<Self> {
        let body = ActionRequest {
            reason: Some(reason),
        };
        Self::send(Method::POST, path, body, render)
    }

    /// A POST without a body.
    fn post<T: DeserializeOwned + 'static>(path: String, render: fn(&T) -> String) -> Self {
        Self::new(Method::POST, path, None, render)
    }

    /// A DELETE of `what`, said as `said`.
    fn delete(path: String, what: String, said: String) -> Self {
        let show: Show = Box::new(move |_| Ok((json!({ "deleted": what }), said)));
        Self {
            method: Method::DELETE,
            path,
            body: None,
            show,
        }
    }

    fn of(command: AdminCommand) -> anyhow::Result<Self> {
        use AdminCommand as A;
        use GroupsCommand as G;
        use MessagesCommand as M;
        use ProducersCommand as P;
        let n = |v: Option<u32>| v.map(|v| v.to_string());
        Ok(match command {
            A::Summary => Self::get("/v1/admin/summary".into(), summary_table),
            A::Messages(M::List {
                status,
                send_status,
                biz_id,
                topic,
                created_after,
                created_before,
                limit,
                cursor,
            }) => {
                let filters = [
                    ("status", status),
                    ("send_status", send_status),
                    ("biz_id", biz_id),
                    ("topic", topic),
                    ("created_after", created_after),
                    ("created_before", created_before),
                    ("limit", n(limit)),
                    ("cursor", cursor),
                ];
                Self::list("/v1/admin/messages", &filters, messages_table)
            }
            A::Alerts {
                state,
                message_id,
                limit,
                cursor,
            } => {
                let filters = [
                    ("state", state),
                    ("message_id", message_id.map(|id| id.to_string())),
                    ("limit", n(limit)),
                    ("cursor", cursor),
                ];
                Self::list("/v1/admin/alerts", &filters, alerts_table)
            }
            A::Archive(_) => unreachable!("archive commands read the archive, not the server"),
            A::OutboxSources => Self::get("/v1/admin/outbox-sources".into(), outbox_sources_table),
            A::OutboxRows {
                biz_id,
                status,
                limit,
                after,
            } => {
                let path = format!("/v1/admin/outbox-sources/{biz_id}/rows");
                let filters = [
                    ("status", status),
                    ("limit", n(limit)),
                    ("after", after.map(|a| a.to_string())),
                ];
                Self::list(&path, &filters, outbox_rows_table)
            }
            A::OutboxRetry {
                biz_id,
                row_id,
                reason,
            } => Self::action(
                format!("/v1/admin/outbox-sources/{biz_id}/rows/{row_id}/retry"),
                reason,
                outbox_action_line,
            )?,
            A::OutboxGiveUp {
                biz_id,
                row_id,
                reason,
            } => Self::action(
                format!("/v1/admin/outbox-sources/{biz_id}/rows/{row_id}/give-up"),
                reason,
                outbox_action_line,
            )?,
            A::Messages(M::Show { id }) => {
                Self::get(format!("/v1/admin/messages/{id}"), message_detail)
            }
            A::Messages(M::Resolve {
                id,
                decision,
                reason,
            }) => {
                let body = ResolveRequest {
                    decision: match decision {
                        DecisionArg::Commit => OperatorDecision::Commit,
                        DecisionArg::Rollback => OperatorDecision::Rollback,
                    },
                    reason: Some(reason),
                };
                let path = format!("/v1/admin/messages/{id}/resolve");
                Self::send(Method::POST, path, body, view_line)?
            }
            // The one-message actions that take only a reason: one POST each.
            A::Messages(M::Reverify { id, reason }) => Self::action(
                format!("/v1/admin/messages/{id}/reverify"),
                reason,
                view_line,
            )?,
            A::Messages(M::Redeliver { id, reason }) => Self::action(
                format!("/v1/admin/messages/{id}/redeliver"),
                reason,
                view_line,
            )?,
            A::Messages(M::Skip { id, reason }) => {
                Self::action(format!("/v1/admin/messages/{id}/skip"), reason, view_line)?
            }
            A::Messages(M::SendNow { id, reason }) => Self::action(
                format!("/v1/admin/messages/{id}/send-now"),
                reason,
                view_line,
            )?,
            A::ConsumerGroups(G::List) => {
                Self::get("/v1/admin/consumer-groups".into(), groups_table)
            }
            A::ConsumerGroups(G::Show { group }) => {
                Self::get(format!("/v1/consumer-groups/{group}"), group_detail)
            }
            A::ConsumerGroups(G::Put(put)) => {
                let path = format!("/v1/consumer-groups/{}", put.group);
                let body = ConsumerGroupSettings {
                    topics: put.topics,
                    max_failures: put.max_failures,
                    in_progress_timeout_ms: put.in_progress_timeout_ms,
                };
                Self::send(Method::PUT, path, body, group_detail)?
            }
            A::ConsumerGroups(G::RotateToken { group }) => Self::post(
                format!("/v1/consumer-groups/{group}/rotate-token"),
                group_detail,
            ),
            A::ConsumerGroups(G::Delete { group }) => Self::delete(
                format!("/v1/consumer-groups/{group}"),
                group.clone(),
                format!("deleted consumer group {group}"),
            ),
            A::Producers(P::List) => Self::get("/v1/producers".into(), producers_table),
            A::Producers(P::Show { biz_id }) => {
                Self::get(format!("/v1/producers/{biz_id}"), producer_detail)
            }
            A::Producers(P::Put(put)) => {
                let path = format!("/v1/producers/{}", put.biz_id);
                let body = ProducerSettings {
                    verify_url: put.verify_url,
                    verify_timeout_ms: put.verify_timeout_ms,
                    first_verify_after_ms: put.first_verify_after_ms,
                    max_verify_attempts: put.max_verify_attempts,
                    topics: put.topics,
                    ordered: put.ordered,
                };
                Self::send(Method::PUT, path, body, producer_detail)?
            }
            A::Producers(P::RotateToken { biz_id }) => Self::post(
                format!("/v1/producers/{biz_id}/rotate-token"),
                producer_detail,
            ),
            A::Producers(P::RevealSigningSecret { biz_id }) => Self::post(
                format!("/v1/producers/{biz_id}/reveal-signing-secret"),
                |s: &SigningSecret| s.signing_secret.clone(),
            ),
            A::Producers(P::Delete { biz_id }) => Self::delete(
                format!("/v1/producers/{biz_id}"),
                biz_id.clone(),
                format!("deleted {biz_id}"),
            ),
        })
    }
}
