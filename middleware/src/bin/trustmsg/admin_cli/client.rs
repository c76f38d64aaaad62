//! The admin API over HTTP: one request, its errors as the server said
//! them, and a successful answer turned into JSON and a table.

use std::time::Duration;

use anyhow::{bail, Context};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;
use trustmsg::config::Secret;
use trustmsg_verify_api::ErrorBody;

use super::AdminArgs;

pub(super) struct Client {
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
pub(super) struct Answer(bytes::Bytes);

impl Answer {
    /// The answer as JSON (for `--json`, unchanged) and as the table `render`
    /// makes of its typed view; an answer that is not a `T` is an error that
    /// says so, never a table of blanks.
    pub(super) fn render<T: DeserializeOwned>(
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
    pub(super) fn new(args: &AdminArgs) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            base: args.url.expose().as_str().trim_end_matches('/').to_string(),
            shown: args.url.to_string().trim_end_matches('/').to_string(),
            token: args
                .admin_token
                .clone()
                .context("no admin token: pass --admin-token (or TRUSTMSG_ADMIN_TOKEN)")?,
            operator: args.operator.clone(),
        })
    }

    pub(super) async fn call(
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
