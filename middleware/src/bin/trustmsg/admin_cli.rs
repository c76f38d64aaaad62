//! `trustmsg admin …`: the operator API from a terminal. Tables by default
//! (aligned columns, ages like `3m12s`) made from the answers' typed views
//! (`trustmsg_verify_api`), `--json` for scripts (the server's JSON as it
//! came). Any error exits non-zero with the server's code and
//! message on stderr.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand, ValueEnum};
use comfy_table::Table;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use trustmsg::config::{quiet, RedactedUrl, Secret};
use trustmsg_verify_api::admin::{
    ActionRequest, AlertPage, MessageDetail, MessagePage, OperatorDecision, OutboxActionResult,
    OutboxRowAction, OutboxRowPage, OutboxRowView, OutboxSourceList, ResolveRequest, Summary,
};
use trustmsg_verify_api::consumers::{
    ConsumerGroupSettings, ConsumerGroupStatsList, ConsumerGroupView,
};
use trustmsg_verify_api::{
    ErrorBody, MessageStatus, MessageView, PayloadEncoding, ProducerList, ProducerSettings,
    ProducerView, SendStatus, SigningSecret,
};

/// Where the service is and who asks.
#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    /// The service's base URL (a password in it percent-encoded; it is
    /// never shown).
    #[arg(long, env = "TRUSTMSG_URL", hide_env_values = true, default_value = "http://127.0.0.1:8080", value_parser = quiet::<RedactedUrl>())]
    url: RedactedUrl,
    /// The admin token.
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Secret,
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
    Put {
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
    },
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
    Put {
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
    },
    /// Issues a new token (printed once); the old one stops working.
    RotateToken { group: String },
    /// Deletes a group (its token stops working).
    Delete { group: String },
}

/// Runs one admin command; an error is the server's (or the connection's).
pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let client = Client::new(&args)?;
    let json_out = args.json;
    let (value, text): (Value, String) = match args.command {
        AdminCommand::Summary => client
            .call(Method::GET, "/v1/admin/summary", None)
            .await?
            .render(summary_table)?,
        AdminCommand::Messages(MessagesCommand::List {
            status,
            send_status,
            biz_id,
            topic,
            created_after,
            created_before,
            limit,
            cursor,
        }) => {
            let query: Vec<(&str, String)> = [
                ("status", status),
                ("send_status", send_status),
                ("biz_id", biz_id),
                ("topic", topic),
                ("created_after", created_after),
                ("created_before", created_before),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            let path = format!("/v1/admin/messages?{}", serde_urlencoded(&query));
            client
                .call(Method::GET, &path, None)
                .await?
                .render(messages_table)?
        }
        AdminCommand::Alerts {
            state,
            message_id,
            limit,
            cursor,
        } => {
            let query: Vec<(&str, String)> = [
                ("state", state),
                ("message_id", message_id.map(|id| id.to_string())),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            let path = format!("/v1/admin/alerts?{}", serde_urlencoded(&query));
            client
                .call(Method::GET, &path, None)
                .await?
                .render(alerts_table)?
        }
        AdminCommand::OutboxSources => client
            .call(Method::GET, "/v1/admin/outbox-sources", None)
            .await?
            .render(outbox_sources_table)?,
        AdminCommand::OutboxRows {
            biz_id,
            status,
            limit,
            after,
        } => {
            let query: Vec<(&str, String)> = [
                ("status", status),
                ("limit", limit.map(|l| l.to_string())),
                ("after", after.map(|a| a.to_string())),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            let path = format!(
                "/v1/admin/outbox-sources/{biz_id}/rows?{}",
                serde_urlencoded(&query)
            );
            client
                .call(Method::GET, &path, None)
                .await?
                .render(outbox_rows_table)?
        }
        action @ (AdminCommand::OutboxRetry { .. } | AdminCommand::OutboxGiveUp { .. }) => {
            let (path, biz_id, row_id, reason) = match action {
                AdminCommand::OutboxRetry {
                    biz_id,
                    row_id,
                    reason,
                } => ("retry", biz_id, row_id, reason),
                AdminCommand::OutboxGiveUp {
                    biz_id,
                    row_id,
                    reason,
                } => ("give-up", biz_id, row_id, reason),
                _ => unreachable!("the arm matches these two only"),
            };
            client
                .call(
                    Method::POST,
                    &format!("/v1/admin/outbox-sources/{biz_id}/rows/{row_id}/{path}"),
                    Some(serde_json::to_value(ActionRequest {
                        reason: Some(reason),
                    })?),
                )
                .await?
                .render(outbox_action_line)?
        }
        AdminCommand::Messages(MessagesCommand::Show { id }) => client
            .call(Method::GET, &format!("/v1/admin/messages/{id}"), None)
            .await?
            .render(message_detail)?,
        AdminCommand::Messages(MessagesCommand::Resolve {
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
            client
                .call(
                    Method::POST,
                    &format!("/v1/admin/messages/{id}/resolve"),
                    Some(serde_json::to_value(body)?),
                )
                .await?
                .render(view_line)?
        }
        AdminCommand::Messages(
            action @ (MessagesCommand::Reverify { .. }
            | MessagesCommand::Redeliver { .. }
            | MessagesCommand::Skip { .. }
            | MessagesCommand::SendNow { .. }),
        ) => {
            // The one-message actions that take only a reason: one POST each.
            let (path, id, reason) = match action {
                MessagesCommand::Reverify { id, reason } => ("reverify", id, reason),
                MessagesCommand::Redeliver { id, reason } => ("redeliver", id, reason),
                MessagesCommand::Skip { id, reason } => ("skip", id, reason),
                MessagesCommand::SendNow { id, reason } => ("send-now", id, reason),
                _ => unreachable!("the arm matches these four only"),
            };
            client
                .call(
                    Method::POST,
                    &format!("/v1/admin/messages/{id}/{path}"),
                    Some(serde_json::to_value(ActionRequest {
                        reason: Some(reason),
                    })?),
                )
                .await?
                .render(view_line)?
        }
        AdminCommand::ConsumerGroups(GroupsCommand::List) => client
            .call(Method::GET, "/v1/admin/consumer-groups", None)
            .await?
            .render(groups_table)?,
        AdminCommand::ConsumerGroups(GroupsCommand::Show { group }) => client
            .call(Method::GET, &format!("/v1/consumer-groups/{group}"), None)
            .await?
            .render(group_detail)?,
        AdminCommand::ConsumerGroups(GroupsCommand::Put {
            group,
            topics,
            max_failures,
            in_progress_timeout_ms,
        }) => {
            let body = ConsumerGroupSettings {
                topics,
                max_failures,
                in_progress_timeout_ms,
            };
            client
                .call(
                    Method::PUT,
                    &format!("/v1/consumer-groups/{group}"),
                    Some(serde_json::to_value(body)?),
                )
                .await?
                .render(group_detail)?
        }
        AdminCommand::ConsumerGroups(GroupsCommand::RotateToken { group }) => client
            .call(
                Method::POST,
                &format!("/v1/consumer-groups/{group}/rotate-token"),
                None,
            )
            .await?
            .render(group_detail)?,
        AdminCommand::ConsumerGroups(GroupsCommand::Delete { group }) => {
            client
                .call(
                    Method::DELETE,
                    &format!("/v1/consumer-groups/{group}"),
                    None,
                )
                .await?;
            let text = format!("deleted consumer group {group}");
            (json!({ "deleted": group }), text)
        }
        AdminCommand::Producers(ProducersCommand::List) => client
            .call(Method::GET, "/v1/producers", None)
            .await?
            .render(producers_table)?,
        AdminCommand::Producers(ProducersCommand::Show { biz_id }) => client
            .call(Method::GET, &format!("/v1/producers/{biz_id}"), None)
            .await?
            .render(producer_detail)?,
        AdminCommand::Producers(ProducersCommand::Put {
            biz_id,
            verify_url,
            verify_timeout_ms,
            first_verify_after_ms,
            max_verify_attempts,
            topics,
            ordered,
        }) => {
            let body = ProducerSettings {
                verify_url,
                verify_timeout_ms,
                first_verify_after_ms,
                max_verify_attempts,
                topics,
                ordered,
            };
            client
                .call(
                    Method::PUT,
                    &format!("/v1/producers/{biz_id}"),
                    Some(serde_json::to_value(body)?),
                )
                .await?
                .render(producer_detail)?
        }
        AdminCommand::Producers(ProducersCommand::RotateToken { biz_id }) => client
            .call(
                Method::POST,
                &format!("/v1/producers/{biz_id}/rotate-token"),
                None,
            )
            .await?
            .render(producer_detail)?,
        AdminCommand::Producers(ProducersCommand::RevealSigningSecret { biz_id }) => client
            .call(
                Method::POST,
                &format!("/v1/producers/{biz_id}/reveal-signing-secret"),
                None,
            )
            .await?
            .render(|s: &SigningSecret| s.signing_secret.clone())?,
        AdminCommand::Producers(ProducersCommand::Delete { biz_id }) => {
            client
                .call(Method::DELETE, &format!("/v1/producers/{biz_id}"), None)
                .await?;
            let text = format!("deleted {biz_id}");
            (json!({ "deleted": biz_id }), text)
        }
    };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{text}");
    }
    Ok(())
}

/// `k=v&…`, each value percent-encoded.
fn serde_urlencoded(pairs: &[(&str, String)]) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

struct Client {
    http: reqwest::Client,
    /// `--url`, password and all: requests go there (reqwest moves a
    /// password in it to a basic Authorization header).
    base: String,
    /// `--url` with its password as `***`, for messages.
    shown: String,
    token: Secret,
    operator: Option<String>,
}

/// A successful answer's body, as it came.
struct Answer(bytes::Bytes);

impl Answer {
    /// The answer as JSON (for `--json`, unchanged) and as the table `render`
    /// makes of its typed view; an answer that is not a `T` is an error that
    /// says so, never a table of blanks.
    fn render<T: DeserializeOwned>(
        self,
        render: fn(&T) -> String,
    ) -> anyhow::Result<(Value, String)> {
        let json: Value = serde_json::from_slice(&self.0).context("the answer is not JSON")?;
        let typed: T = serde_json::from_slice(&self.0).with_context(|| {
            format!(
                "the answer is not the {} this trustmsg admin expects (is the server another version?)",
                std::any::type_name::<T>().rsplit("::").next().unwrap_or("type")
            )
        })?;
        Ok((json, render(&typed)))
    }
}

impl Client {
    fn new(args: &AdminArgs) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            base: args.url.expose().as_str().trim_end_matches('/').to_string(),
            shown: args.url.to_string().trim_end_matches('/').to_string(),
            token: args.admin_token.clone(),
            operator: args.operator.clone(),
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method, &url)
            .bearer_auth(self.token.expose());
        if let Some(op) = &self.operator {
            req = req.header("x-trustmsg-operator", op);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req
            .send()
            .await
            .with_context(|| format!("cannot reach trustmsg at {}", self.shown))?;
        let status = res.status();
        let bytes = res.bytes().await.context("reading the answer")?;
        if status.is_success() {
            return Ok(Answer(bytes));
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(e) => bail!("{} {}: {}", status.as_u16(), e.error.code, e.error.message),
            _ => bail!("{status}: {}", String::from_utf8_lossy(&bytes)),
        }
    }
}

/// An optional value as a cell: `-` when absent.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A status or send status as a cell.
fn status_cell(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// A time as the server wrote it (RFC 3339, UTC).
fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Milliseconds as `3m12s`, `2h5m`, `4d3h`.
pub(crate) fn age(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.set_header(header.to_vec());
    t
}

fn age_cell(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".into(), age)
}

fn summary_table(v: &Summary) -> String {
    let window = humantime::format_duration(std::time::Duration::from_secs(v.recent_window_secs));
    let mut t = table(&[
        "producer",
        "prepared",
        "verify failed",
        "pending",
        "scheduled",
        "send failed",
        &format!("sent ({window})"),
        &format!("rolled back ({window})"),
        "oldest prepared",
        "oldest pending",
    ]);
    for p in &v.producers {
        let n = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0).to_string();
        t.add_row(vec![
            p.biz_id.clone(),
            n(&p.by_status, MessageStatus::Prepared.as_str()),
            n(&p.by_status, MessageStatus::VerifyFailed.as_str()),
            n(&p.by_send_status, SendStatus::Pending.as_str()),
            p.scheduled.to_string(),
            n(&p.by_send_status, SendStatus::SendFailed.as_str()),
            p.sent_recently.to_string(),
            p.rolled_back_recently.to_string(),
            age_cell(p.oldest_prepared_age_ms),
            age_cell(p.oldest_pending_send_age_ms),
        ]);
    }
    let text = if v.producers.is_empty() {
        "no live or recently finished messages".to_string()
    } else {
        t.to_string()
    };
    let mut text = text;
    if v.submit_waiting > 0 {
        text.push_str(&format!(
            "\n{} commit(s) submitted through Kafka wait for their prepare \
             (GET /v1/admin/submit/waiting lists them)",
            v.submit_waiting
        ));
    }
    if !v.producers_without_topics.is_empty() {
        text.push_str(&format!(
            "\nwarning: no topic allow-list (may publish to any topic): {}",
            v.producers_without_topics.join(", ")
        ));
    }
    text
}

fn messages_table(v: &MessagePage) -> String {
    if v.items.is_empty() {
        return "no message matches".into();
    }
    let mut t = table(&[
        "id",
        "producer",
        "key",
        "topic",
        "status",
        "send",
        "attempts",
        "created",
        "due at",
        "last error",
    ]);
    for m in &v.items {
        t.add_row(vec![
            m.id.to_string(),
            m.biz_id.clone(),
            m.message_key.clone(),
            opt(m.topic.as_deref()),
            m.status.as_str().to_string(),
            status_cell(m.send_status.map(SendStatus::as_str)),
            format!("{}/{}", m.verify_attempts, m.send_attempts),
            time(&m.created_at),
            opt(m.deliver_at.as_ref().map(time)),
            clipped(m.last_error.as_deref()),
        ]);
    }
    with_more(t, v.next_cursor.as_deref())
}

/// A table, and how to get the next page when there is one.
fn with_more(t: Table, next_cursor: Option<&str>) -> String {
    match next_cursor {
        Some(c) => format!("{t}\nmore: --cursor {c}"),
        None => t.to_string(),
    }
}

/// An error as a cell: at most 60 bytes, cut on a character boundary.
fn clipped(e: Option<&str>) -> String {
    let mut err = opt(e);
    if err.len() > 60 {
        let mut end = 60;
        while !err.is_char_boundary(end) {
            end -= 1;
        }
        err.truncate(end);
        err.push('…');
    }
    err
}

fn alerts_table(v: &AlertPage) -> String {
    if v.items.is_empty() {
        return "no alert matches".into();
    }
    let mut t = table(&[
        "alert",
        "kind",
        "message",
        "producer",
        "key",
        "group",
        "state",
        "posts",
        "created",
        "last delivery error",
    ]);
    for a in &v.items {
        t.add_row(vec![
            a.alert_id.to_string(),
            a.kind.as_str().to_string(),
            a.message_id.to_string(),
            a.biz_id.clone(),
            a.message_key.clone(),
            opt(a.group.as_deref()),
            a.state.as_str().to_string(),
            a.delivery_attempts.to_string(),
            time(&a.created_at),
            clipped(a.last_delivery_error.as_deref()),
        ]);
    }
    with_more(t, v.next_cursor.as_deref())
}

fn outbox_sources_table(v: &OutboxSourceList) -> String {
    if v.items.is_empty() {
        return "this instance relays no outbox source (trustmsg serve --outbox-source \
                BIZ_ID=DATABASE_URL starts one)"
            .into();
    }
    let mut t = table(&[
        "producer",
        "state",
        "pending",
        "oldest pending",
        "failed rows",
        "relayed/s",
        "relayed",
        "failed",
        "errors",
        "last relayed",
        "last error",
    ]);
    for s in &v.items {
        t.add_row(vec![
            s.biz_id.clone(),
            s.state.as_str().to_string(),
            opt(s.pending_rows),
            age_cell(s.oldest_pending_age_ms),
            opt(s.failed_rows),
            format!("{:.1}", s.relayed_per_s),
            s.relayed_total.to_string(),
            s.failed_total.to_string(),
            s.errors_total.to_string(),
            opt(s.last_relayed_at.as_ref().map(time)),
            clipped(
                s.last_error
                    .as_ref()
                    .map(|e| match &s.last_error_at {
                        Some(at) => format!("{}: {e}", time(at)),
                        None => e.clone(),
                    })
                    .as_deref(),
            ),
        ]);
    }
    let mut out = vec![t.to_string()];
    for s in &v.items {
        out.push(format!(
            "{}: table {} in {}{}",
            s.biz_id,
            s.table,
            s.database,
            s.stats_at
                .as_ref()
                .map(|at| format!(", rows counted at {}", time(at)))
                .unwrap_or_default()
        ));
    }
    out.push(
        "as this instance sees them: with several instances, one relays each source and the \
         others stand by; `trustmsg admin outbox-rows BIZ_ID` lists a source's failed rows"
            .into(),
    );
    out.join("\n")
}

fn outbox_rows_table(v: &OutboxRowPage) -> String {
    if v.items.is_empty() {
        return "no row matches".into();
    }
    let mut t = table(&[
        "id",
        "key",
        "topic",
        "record key",
        "status",
        "retries",
        "last attempt",
        "created",
        "fail reason",
    ]);
    for r in &v.items {
        t.add_row(vec![
            r.id.to_string(),
            r.message_key.clone(),
            r.topic.clone(),
            opt(r.record_key.as_deref()),
            r.status.as_str().to_string(),
            r.retry_count.to_string(),
            opt(r.last_execute_time.as_ref().map(time)),
            opt(r.created.map(|c| c.format("%Y-%m-%d %H:%M:%S%.3f"))),
            clipped(r.fail_reason.as_deref()),
        ]);
    }
    match v.next_after {
        Some(after) => format!("{t}\nmore: --after {after}"),
        None => t.to_string(),
    }
}

fn outbox_row_line(r: &OutboxRowView) -> String {
    format!(
        "{} (retries: {}), key {}, topic {}",
        r.status.as_str(),
        r.retry_count,
        r.message_key,
        r.topic
    )
}

fn outbox_action_line(v: &OutboxActionResult) -> String {
    let done = match v.action {
        OutboxRowAction::Retry => "retried",
        OutboxRowAction::GiveUp => "given up",
    };
    let now = v.row.as_ref().map_or_else(
        || "already relayed and deleted".to_string(),
        outbox_row_line,
    );
    format!(
        "outbox row {} of {}: {done} by {}; now {now}",
        v.id, v.biz_id, v.actor
    )
}

fn view_line(m: &MessageView) -> String {
    format!(
        "message {}: {} / {} ({} {})",
        m.id,
        m.status.as_str(),
        status_cell(m.send_status.map(SendStatus::as_str)),
        m.biz_id,
        m.message_key
    )
}

fn message_detail(d: &MessageDetail) -> String {
    let m = &d.message;
    let mut out = vec![view_line(m)];
    for (k, v) in [
        ("topic", opt(m.topic.as_deref())),
        ("key", opt(m.key.as_deref())),
        ("check-back attempts", m.verify_attempts.to_string()),
        ("send attempts", m.send_attempts.to_string()),
        ("last error", opt(m.last_error.as_deref())),
        ("created", time(&m.created_at)),
        ("decided", opt(m.decided_at.as_ref().map(time))),
        ("due at", opt(m.deliver_at.as_ref().map(time))),
        ("sent", opt(m.sent_at.as_ref().map(time))),
        ("partition", opt(m.kafka_partition)),
        ("offset", opt(m.kafka_offset)),
        ("trace id", opt(m.trace_id.as_deref())),
    ] {
        out.push(format!("{k:>20}: {v}"));
    }
    if let Some(seq) = m.order_seq {
        out.push(format!("{:>20}: {seq}", "place in its key"));
    }
    if let Some(head) = d.blocked_by {
        out.push(format!(
            "{:>20}: message {head} (sent only after it is SENT or skipped)",
            "blocked by"
        ));
    }
    let encoding = match d.payload_encoding {
        PayloadEncoding::Utf8 => "utf8",
        PayloadEncoding::Base64 => "base64",
    };
    out.push(format!("{:>20}: ({encoding}) {}", "payload", d.payload));
    for (k, v) in &d.headers {
        out.push(format!("{:>20}: {k}: {v}", "header"));
    }
    let mut audit = table(&["at", "actor", "action", "status", "send", "reason"]);
    for a in &d.audit {
        audit.add_row(vec![
            time(&a.at),
            a.actor.clone(),
            a.action.clone(),
            format!(
                "{} → {}",
                opt(a.from_status.as_deref()),
                opt(a.to_status.as_deref())
            ),
            format!(
                "{} → {}",
                opt(a.from_send_status.as_deref()),
                opt(a.to_send_status.as_deref())
            ),
            a.reason.clone(),
        ]);
    }
    out.push(format!("audit trail:\n{audit}"));
    if !d.check_attempts.is_empty() {
        let mut t = table(&["#", "at", "took", "http", "outcome", "error"]);
        for c in &d.check_attempts {
            t.add_row(vec![
                c.attempt.to_string(),
                time(&c.at),
                format!("{} ms", c.duration_ms),
                opt(c.http_status),
                c.outcome.clone(),
                opt(c.error.as_deref()),
            ]);
        }
        out.push(format!("check-back calls:\n{t}"));
    }
    if d.consumptions.is_empty() {
        out.push("consumptions: none recorded".into());
    } else {
        let mut t = table(&[
            "group",
            "state",
            "attempts",
            "first began",
            "last began",
            "finished",
            "last error",
        ]);
        for c in &d.consumptions {
            t.add_row(vec![
                c.group.clone(),
                c.state.as_str().to_string(),
                c.attempts.to_string(),
                time(&c.first_began_at),
                time(&c.last_began_at),
                opt(c.finished_at.as_ref().map(time)),
                opt(c.last_error.as_deref()),
            ]);
        }
        out.push(format!("consumptions:\n{t}"));
    }
    out.join("\n")
}

fn groups_table(v: &ConsumerGroupStatsList) -> String {
    if v.items.is_empty() {
        return "no consumer group is registered".into();
    }
    let mut t = table(&[
        "group",
        "topics",
        "processed",
        "failing",
        "in progress",
        "lag",
    ]);
    for g in &v.items {
        t.add_row(vec![
            g.group.clone(),
            g.topics.join(", "),
            g.processed.to_string(),
            g.failing.to_string(),
            g.in_progress.to_string(),
            g.lag.to_string(),
        ]);
    }
    format!(
        "{t}
as of {}",
        time(&v.at)
    )
}

fn group_detail(g: &ConsumerGroupView) -> String {
    let mut out = vec![format!("consumer group {}", g.group)];
    for (k, v) in [
        ("topics", g.topics.join(", ")),
        ("max failures", g.max_failures.to_string()),
        ("hold ms", g.in_progress_timeout_ms.to_string()),
        ("registered", time(&g.created_at)),
    ] {
        out.push(format!("{k:>16}: {v}"));
    }
    if let Some(token) = &g.token {
        out.push(format!(
            "{:>16}: {token}   (shown once: store it now)",
            "token"
        ));
    }
    out.join("\n")
}

fn producers_table(v: &ProducerList) -> String {
    if v.items.is_empty() {
        return "no producer is registered".into();
    }
    let mut t = table(&[
        "producer",
        "topics",
        "check-back url",
        "timeout",
        "first check",
        "max attempts",
    ]);
    for p in &v.items {
        t.add_row(vec![
            p.biz_id.clone(),
            topics_cell(p),
            p.verify_url.clone(),
            format!("{} ms", p.verify_timeout_ms),
            format!("{} ms", p.first_verify_after_ms),
            p.max_verify_attempts.to_string(),
        ]);
    }
    let unlisted = v.items.iter().filter(|p| p.topics_missing).count();
    if unlisted > 0 {
        format!(
            "{t}\nwarning: {unlisted} producer(s) without a topic allow-list may publish to any \
             topic; give each one with `trustmsg admin producers put <biz_id> … --topics …`"
        )
    } else {
        t.to_string()
    }
}

/// A registration's allow-list as a cell; a missing one says so loudly.
fn topics_cell(p: &ProducerView) -> String {
    match &p.topics {
        Some(list) => list.join(", "),
        None => "ANY (no allow-list)".into(),
    }
}

fn producer_detail(p: &ProducerView) -> String {
    let mut out = vec![format!("producer {}", p.biz_id)];
    for (k, v) in [
        ("check-back url", p.verify_url.clone()),
        ("timeout ms", p.verify_timeout_ms.to_string()),
        ("first check ms", p.first_verify_after_ms.to_string()),
        ("max attempts", p.max_verify_attempts.to_string()),
        ("topics", topics_cell(p)),
        (
            "ordered",
            if p.ordered {
                "yes (in order per key)"
            } else {
                "no"
            }
            .to_string(),
        ),
    ] {
        out.push(format!("{k:>16}: {v}"));
    }
    if p.topics_missing {
        out.push(format!(
            "{:>16}: no topic allow-list: this producer may publish to any topic \
             (set one with --topics)",
            "warning"
        ));
    }
    if let Some(secret) = &p.signing_secret {
        out.push(format!("{:>16}: {secret}", "signing secret"));
    }
    if let Some(token) = &p.token {
        out.push(format!(
            "{:>16}: {token}   (shown once: store it now)",
            "token"
        ));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_a_person_would_write_them() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(7_500_000), "2h5m");
        assert_eq!(age(360_000_000), "4d4h");
    }
}
