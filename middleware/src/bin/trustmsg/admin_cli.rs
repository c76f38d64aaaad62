//! `trustmsg admin …`: the operator API from a terminal. Tables by default
//! (aligned columns, ages like `3m12s`), `--json` for scripts (the server's
//! JSON as it came). Any error exits non-zero with the server's code and
//! message on stderr.

use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use comfy_table::Table;
use reqwest::Method;
use serde_json::{json, Value};

/// Where the service is and who asks.
#[derive(Debug, Args)]
pub(crate) struct AdminArgs {
    /// The service's base URL.
    #[arg(long, env = "TRUSTMSG_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The admin token.
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
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
    /// Per producer: counts by state and the oldest waiting messages.
    Summary,
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
    /// Creates or updates a registration (a new one prints its token once).
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
    },
    /// Issues a new token (printed once); the old one stops working.
    RotateToken { biz_id: String },
    /// Deletes a registration.
    Delete { biz_id: String },
}

/// Runs one admin command; an error is the server's (or the connection's).
pub(crate) async fn run(args: AdminArgs) -> anyhow::Result<()> {
    let client = Client::new(&args)?;
    let json_out = args.json;
    let (value, render): (Value, fn(&Value) -> String) = match args.command {
        AdminCommand::Summary => (
            client.call(Method::GET, "/v1/admin/summary", None).await?,
            summary_table,
        ),
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
            (client.call(Method::GET, &path, None).await?, messages_table)
        }
        AdminCommand::Messages(MessagesCommand::Show { id }) => (
            client
                .call(Method::GET, &format!("/v1/admin/messages/{id}"), None)
                .await?,
            message_detail,
        ),
        AdminCommand::Messages(MessagesCommand::Resolve {
            id,
            decision,
            reason,
        }) => {
            let decision = match decision {
                DecisionArg::Commit => "commit",
                DecisionArg::Rollback => "rollback",
            };
            let body = json!({"decision": decision, "reason": reason});
            (
                client
                    .call(
                        Method::POST,
                        &format!("/v1/admin/messages/{id}/resolve"),
                        Some(body),
                    )
                    .await?,
                view_line,
            )
        }
        AdminCommand::Messages(MessagesCommand::Reverify { id, reason }) => (
            client
                .call(
                    Method::POST,
                    &format!("/v1/admin/messages/{id}/reverify"),
                    Some(json!({"reason": reason})),
                )
                .await?,
            view_line,
        ),
        AdminCommand::Messages(MessagesCommand::Redeliver { id, reason }) => (
            client
                .call(
                    Method::POST,
                    &format!("/v1/admin/messages/{id}/redeliver"),
                    Some(json!({"reason": reason})),
                )
                .await?,
            view_line,
        ),
        AdminCommand::Producers(ProducersCommand::List) => (
            client.call(Method::GET, "/v1/producers", None).await?,
            producers_table,
        ),
        AdminCommand::Producers(ProducersCommand::Show { biz_id }) => (
            client
                .call(Method::GET, &format!("/v1/producers/{biz_id}"), None)
                .await?,
            producer_detail,
        ),
        AdminCommand::Producers(ProducersCommand::Put {
            biz_id,
            verify_url,
            verify_timeout_ms,
            first_verify_after_ms,
            max_verify_attempts,
        }) => {
            let mut body = json!({"verify_url": verify_url});
            for (k, v) in [
                ("verify_timeout_ms", verify_timeout_ms),
                ("first_verify_after_ms", first_verify_after_ms),
                ("max_verify_attempts", max_verify_attempts),
            ] {
                if let Some(v) = v {
                    body[k] = json!(v);
                }
            }
            (
                client
                    .call(Method::PUT, &format!("/v1/producers/{biz_id}"), Some(body))
                    .await?,
                producer_detail,
            )
        }
        AdminCommand::Producers(ProducersCommand::RotateToken { biz_id }) => (
            client
                .call(
                    Method::POST,
                    &format!("/v1/producers/{biz_id}/rotate-token"),
                    None,
                )
                .await?,
            producer_detail,
        ),
        AdminCommand::Producers(ProducersCommand::Delete { biz_id }) => {
            client
                .call(Method::DELETE, &format!("/v1/producers/{biz_id}"), None)
                .await?;
            (json!({"deleted": biz_id}), |v| {
                format!("deleted {}", text(&v["deleted"]))
            })
        }
    };
    if json_out {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{}", render(&value));
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
    base: String,
    token: String,
    operator: Option<String>,
}

impl Client {
    fn new(args: &AdminArgs) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            base: args.url.trim_end_matches('/').to_string(),
            token: args.admin_token.clone(),
            operator: args.operator.clone(),
        })
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(op) = &self.operator {
            req = req.header("x-trustmsg-operator", op);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req
            .send()
            .await
            .with_context(|| format!("cannot reach trustmsg at {}", self.base))?;
        let status = res.status();
        let bytes = res.bytes().await.context("reading the answer")?;
        if status.is_success() {
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&bytes).context("the answer is not JSON");
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v["error"]["code"].is_string() => bail!(
                "{} {}: {}",
                status.as_u16(),
                text(&v["error"]["code"]),
                text(&v["error"]["message"])
            ),
            _ => bail!("{status}: {}", String::from_utf8_lossy(&bytes)),
        }
    }
}

/// A JSON value as a cell: strings bare, null as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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

fn age_cell(v: &Value) -> String {
    v.as_u64().map_or_else(|| "-".into(), age)
}

fn summary_table(v: &Value) -> String {
    let mut t = table(&[
        "producer",
        "prepared",
        "committed",
        "rolled back",
        "verify failed",
        "pending",
        "sent",
        "send failed",
        "oldest prepared",
        "oldest pending",
    ]);
    let producers = v["producers"].as_array().cloned().unwrap_or_default();
    for p in &producers {
        let n = |m: &str, k: &str| p[m][k].as_u64().unwrap_or(0).to_string();
        t.add_row(vec![
            text(&p["biz_id"]),
            n("by_status", "PREPARED"),
            n("by_status", "COMMITTED"),
            n("by_status", "ROLLED_BACK"),
            n("by_status", "VERIFY_FAILED"),
            n("by_send_status", "PENDING"),
            n("by_send_status", "SENT"),
            n("by_send_status", "SEND_FAILED"),
            age_cell(&p["oldest_prepared_age_ms"]),
            age_cell(&p["oldest_pending_send_age_ms"]),
        ]);
    }
    if producers.is_empty() {
        return "no messages yet".into();
    }
    t.to_string()
}

fn messages_table(v: &Value) -> String {
    let items = v["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
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
        "last error",
    ]);
    for m in &items {
        let mut err = text(&m["last_error"]);
        if err.len() > 60 {
            let mut end = 60;
            while !err.is_char_boundary(end) {
                end -= 1;
            }
            err.truncate(end);
            err.push('…');
        }
        t.add_row(vec![
            text(&m["id"]),
            text(&m["biz_id"]),
            text(&m["message_key"]),
            text(&m["topic"]),
            text(&m["status"]),
            text(&m["send_status"]),
            format!(
                "{}/{}",
                text(&m["verify_attempts"]),
                text(&m["send_attempts"])
            ),
            text(&m["created_at"]),
            err,
        ]);
    }
    match v["next_cursor"].as_str() {
        Some(c) => format!("{t}\nmore: --cursor {c}"),
        None => t.to_string(),
    }
}

fn view_line(m: &Value) -> String {
    format!(
        "message {}: {} / {} ({} {})",
        text(&m["id"]),
        text(&m["status"]),
        text(&m["send_status"]),
        text(&m["biz_id"]),
        text(&m["message_key"])
    )
}

fn message_detail(d: &Value) -> String {
    let m = &d["message"];
    let mut out = vec![view_line(m)];
    for (k, f) in [
        ("topic", "topic"),
        ("key", "key"),
        ("check-back attempts", "verify_attempts"),
        ("send attempts", "send_attempts"),
        ("last error", "last_error"),
        ("created", "created_at"),
        ("decided", "decided_at"),
        ("sent", "sent_at"),
        ("partition", "kafka_partition"),
        ("offset", "kafka_offset"),
    ] {
        out.push(format!("{k:>20}: {}", text(&m[f])));
    }
    out.push(format!(
        "{:>20}: ({}) {}",
        "payload",
        text(&d["payload_encoding"]),
        text(&d["payload"])
    ));
    if let Some(h) = d["headers"].as_object() {
        for (k, v) in h {
            out.push(format!("{:>20}: {k}: {}", "header", text(v)));
        }
    }
    let mut audit = table(&["at", "actor", "action", "status", "send", "reason"]);
    for a in d["audit"].as_array().cloned().unwrap_or_default() {
        audit.add_row(vec![
            text(&a["at"]),
            text(&a["actor"]),
            text(&a["action"]),
            format!("{} → {}", text(&a["from_status"]), text(&a["to_status"])),
            format!(
                "{} → {}",
                text(&a["from_send_status"]),
                text(&a["to_send_status"])
            ),
            text(&a["reason"]),
        ]);
    }
    out.push(format!("audit trail:\n{audit}"));
    let calls = d["check_attempts"].as_array().cloned().unwrap_or_default();
    if !calls.is_empty() {
        let mut t = table(&["#", "at", "took", "http", "outcome", "error"]);
        for c in &calls {
            t.add_row(vec![
                text(&c["attempt"]),
                text(&c["at"]),
                format!("{} ms", text(&c["duration_ms"])),
                text(&c["http_status"]),
                text(&c["outcome"]),
                text(&c["error"]),
            ]);
        }
        out.push(format!("check-back calls:\n{t}"));
    }
    out.join("\n")
}

fn producers_table(v: &Value) -> String {
    let items = v["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "no producer is registered".into();
    }
    let mut t = table(&[
        "producer",
        "check-back url",
        "timeout",
        "first check",
        "max attempts",
    ]);
    for p in &items {
        t.add_row(vec![
            text(&p["biz_id"]),
            text(&p["verify_url"]),
            format!("{} ms", text(&p["verify_timeout_ms"])),
            format!("{} ms", text(&p["first_verify_after_ms"])),
            text(&p["max_verify_attempts"]),
        ]);
    }
    t.to_string()
}

fn producer_detail(p: &Value) -> String {
    let mut out = vec![format!("producer {}", text(&p["biz_id"]))];
    for (k, f) in [
        ("check-back url", "verify_url"),
        ("timeout ms", "verify_timeout_ms"),
        ("first check ms", "first_verify_after_ms"),
        ("max attempts", "max_verify_attempts"),
        ("signing secret", "signing_secret"),
    ] {
        out.push(format!("{k:>16}: {}", text(&p[f])));
    }
    if let Some(token) = p["token"].as_str() {
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
