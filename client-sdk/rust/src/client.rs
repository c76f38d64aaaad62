//! The HTTP client for trustmsg's producer API.
//!
//! Every producer call is idempotent on the server (the same prepare twice is a
//! 200 with the same view, the same decision twice is a 200), so a call whose
//! answer was lost can be repeated safely. That is why network errors and 5xx
//! are retried with exponential backoff and jitter; 4xx answers are final and
//! never retried, because repeating them cannot change the answer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use base64::Engine;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use trustmsg_verify_api::{
    DecisionRequest, ErrorBody, MessageView, PayloadEncoding, PrepareRequest,
};

use crate::Error;

/// How often and how patiently failed calls are repeated.
///
/// Delays grow exponentially from `min_delay` (doubling) up to `max_delay`,
/// with random jitter so many producers do not retry in lockstep.
///
/// ```
/// use std::time::Duration;
/// use trustmsg_client::RetryPolicy;
///
/// let patient = RetryPolicy {
///     max_retries: 10,
///     min_delay: Duration::from_millis(200),
///     max_delay: Duration::from_secs(10),
/// };
/// assert_eq!(RetryPolicy::none().max_retries, 0);
/// assert_eq!(RetryPolicy::default().max_retries, 5);
/// # let _ = patient;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = try once).
    pub max_retries: usize,
    /// The delay before the first retry.
    pub min_delay: Duration,
    /// The largest delay between two attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 5 retries, 100 ms doubling up to 5 s: about 3 s of patience in total.
    fn default() -> Self {
        Self {
            max_retries: 5,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// Try once, never retry.
    ///
    /// ```
    /// let p = trustmsg_client::RetryPolicy::none();
    /// assert_eq!(p.max_retries, 0);
    /// ```
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_factor(2.0)
            .with_max_times(self.max_retries)
            .with_jitter()
    }
}

/// A message to prepare: key, topic, payload and optional record key/headers.
///
/// ```
/// use trustmsg_client::Message;
///
/// let m = Message::new("order-42", "orders", r#"{"order":42}"#)
///     .key("customer-7")
///     .header("content-type", "application/json");
/// assert_eq!(m.message_key(), "order-42");
/// let req = m.to_request("shop");
/// assert_eq!(req.biz_id, "shop");
/// assert_eq!(req.key.as_deref(), Some("customer-7"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    message_key: String,
    pub(crate) topic: String,
    pub(crate) key: Option<String>,
    payload: String,
    encoding: Option<PayloadEncoding>,
    pub(crate) headers: BTreeMap<String, String>,
    traceparent: Option<String>,
    tracestate: Option<String>,
    pub(crate) deliver: Option<Deliver>,
}

/// When a message may be sent at the earliest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Deliver {
    At(chrono::DateTime<chrono::Utc>),
    After(Duration),
}

impl Message {
    /// A message whose record value is the UTF-8 bytes of `payload`.
    ///
    /// ```
    /// let m = trustmsg_client::Message::new("order-1", "orders", "hello");
    /// assert_eq!(m.to_request("shop").payload, "hello");
    /// ```
    pub fn new(
        message_key: impl Into<String>,
        topic: impl Into<String>,
        payload: impl Into<String>,
    ) -> Self {
        Self {
            message_key: message_key.into(),
            topic: topic.into(),
            key: None,
            payload: payload.into(),
            encoding: None,
            headers: BTreeMap::new(),
            deliver: None,
            traceparent: None,
            tracestate: None,
        }
    }

    /// A message whose record value is arbitrary bytes (sent base64-encoded).
    ///
    /// ```
    /// use trustmsg_client::{api::PayloadEncoding, Message};
    ///
    /// let req = Message::from_bytes("order-1", "orders", &[0, 159, 146, 150]).to_request("shop");
    /// assert_eq!(req.payload, "AJ+Slg==");
    /// assert_eq!(req.payload_encoding, Some(PayloadEncoding::Base64));
    /// ```
    pub fn from_bytes(
        message_key: impl Into<String>,
        topic: impl Into<String>,
        payload: &[u8],
    ) -> Self {
        let mut m = Self::new(
            message_key,
            topic,
            base64::engine::general_purpose::STANDARD.encode(payload),
        );
        m.encoding = Some(PayloadEncoding::Base64);
        m
    }

    /// Sets the Kafka record key (without one, Kafka's default partitioner picks).
    ///
    /// ```
    /// let m = trustmsg_client::Message::new("order-1", "orders", "{}").key("customer-7");
    /// assert_eq!(m.to_request("shop").key.as_deref(), Some("customer-7"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Adds a Kafka record header (names starting with `trustmsg-` are reserved).
    ///
    /// ```
    /// let m = trustmsg_client::Message::new("order-1", "orders", "{}").header("source", "shop");
    /// assert_eq!(m.to_request("shop").headers.unwrap()["source"], "shop");
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sends it no earlier than `delay` after the prepare (measured by
    /// trustmsg's database clock): committed earlier, it waits; committed
    /// later, it goes at once. At most 7 days
    /// ([`api::MAX_DELIVERY_DELAY_MS`](crate::api::MAX_DELIVERY_DELAY_MS));
    /// sub-millisecond parts are dropped. Replaces an earlier
    /// [`Message::deliver_at`].
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let m = trustmsg_client::Message::new("reminder-1", "reminders", "{}")
    ///     .deliver_after(Duration::from_secs(3600));
    /// assert_eq!(m.to_request("shop").deliver_after_ms, Some(3_600_000));
    /// ```
    pub fn deliver_after(mut self, delay: Duration) -> Self {
        self.deliver = Some(Deliver::After(delay));
        self
    }

    /// Sends it no earlier than `at`: committed earlier, it waits;
    /// committed later (or `at` is past), it goes at once. At most 7 days
    /// ahead; millisecond precision. Replaces an earlier
    /// [`Message::deliver_after`].
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    ///
    /// let at = Utc.with_ymd_and_hms(2030, 1, 1, 9, 0, 0).unwrap();
    /// let m = trustmsg_client::Message::new("reminder-1", "reminders", "{}").deliver_at(at);
    /// assert_eq!(
    ///     m.to_request("shop").deliver_at.as_deref(),
    ///     Some("2030-01-01T09:00:00.000Z")
    /// );
    /// ```
    pub fn deliver_at(mut self, at: chrono::DateTime<chrono::Utc>) -> Self {
        self.deliver = Some(Deliver::At(at));
        self
    }

    /// The W3C trace context to prepare under: sent as the `traceparent`
    /// and `tracestate` headers of the prepare request. trustmsg stores it
    /// and sends it on with check-back calls and as headers of the Kafka
    /// record, so the consumer continues the producer's trace. An invalid
    /// `traceparent` is ignored by the service (never refused). Without
    /// this, the `opentelemetry` feature takes the current OpenTelemetry
    /// context's span.
    ///
    /// ```
    /// let m = trustmsg_client::Message::new("order-1", "orders", "{}").trace_context(
    ///     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ///     Some("shop=t61rcWkgMzE"),
    /// );
    /// assert_eq!(m.traceparent(), Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    /// ```
    pub fn trace_context(
        mut self,
        traceparent: impl Into<String>,
        tracestate: Option<impl Into<String>>,
    ) -> Self {
        self.traceparent = Some(traceparent.into());
        self.tracestate = tracestate.map(Into::into);
        self
    }

    /// The explicit `traceparent` given with [`Message::trace_context`].
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }

    /// The trace headers prepare sends: the explicit ones, else (feature
    /// `opentelemetry`) the current OpenTelemetry span's, else none.
    pub(crate) fn trace_headers(&self) -> Vec<(&'static str, String)> {
        use trustmsg_verify_api::trace_context::{TRACEPARENT, TRACESTATE};
        if let Some(tp) = &self.traceparent {
            let mut h = vec![(TRACEPARENT, tp.clone())];
            if let Some(ts) = &self.tracestate {
                h.push((TRACESTATE, ts.clone()));
            }
            return h;
        }
        #[cfg(feature = "opentelemetry")]
        let current = crate::otel::current_trace_headers();
        #[cfg(not(feature = "opentelemetry"))]
        let current = Vec::new();
        current
    }

    /// The producer's key for this message.
    ///
    /// ```
    /// assert_eq!(trustmsg_client::Message::new("k", "t", "").message_key(), "k");
    /// ```
    pub fn message_key(&self) -> &str {
        &self.message_key
    }

    /// The record value's bytes: the payload as given to [`Message::new`]
    /// or [`Message::from_bytes`] (decoded again from the base64 the HTTP
    /// request carries).
    pub(crate) fn payload_bytes(&self) -> Vec<u8> {
        match self.encoding {
            Some(PayloadEncoding::Base64) => base64::engine::general_purpose::STANDARD
                .decode(&self.payload)
                .expect("from_bytes encoded it"),
            _ => self.payload.as_bytes().to_vec(),
        }
    }

    /// The prepare request body for producer `biz_id`.
    ///
    /// ```
    /// let req = trustmsg_client::Message::new("k", "orders", "{}").to_request("shop");
    /// assert_eq!((req.biz_id.as_str(), req.topic.as_str()), ("shop", "orders"));
    /// ```
    pub fn to_request(&self, biz_id: &str) -> PrepareRequest {
        PrepareRequest {
            biz_id: biz_id.to_string(),
            message_key: self.message_key.clone(),
            topic: self.topic.clone(),
            key: self.key.clone(),
            payload: self.payload.clone(),
            payload_encoding: self.encoding,
            headers: (!self.headers.is_empty()).then(|| self.headers.clone()),
            deliver_at: match self.deliver {
                Some(Deliver::At(at)) => {
                    Some(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                }
                _ => None,
            },
            deliver_after_ms: match self.deliver {
                Some(Deliver::After(d)) => Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                _ => None,
            },
        }
    }
}

/// A trustmsg producer: its biz_id, its bearer token and the service's address.
///
/// Cheap to clone (the HTTP connection pool is shared). Each call is retried
/// per its [`RetryPolicy`] on network errors and 5xx, never on 4xx; a 5xx
/// with `Retry-After: <seconds>` (trustmsg sends one with every 503) is not
/// retried sooner than that (at most 60 s).
///
/// ```no_run
/// use trustmsg_client::{Message, Producer};
///
/// # async fn run() -> Result<(), trustmsg_client::Error> {
/// let producer = Producer::new("http://127.0.0.1:8080", "shop", "producer-token")?;
/// producer.prepare(&Message::new("order-42", "orders", r#"{"order":42}"#)).await?;
/// // ... the local transaction ...
/// let view = producer.commit("order-42").await?;
/// println!("message {} is {:?}", view.id, view.status);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Producer {
    http: reqwest::Client,
    base: Url,
    biz_id: String,
    token: String,
    retry: RetryPolicy,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("base", &self.base.as_str())
            .field("biz_id", &self.biz_id)
            .field("token", &"***")
            .field("retry", &self.retry)
            .finish()
    }
}

/// One attempt's failure: worth another try, or final.
enum Attempt {
    Transient {
        status: Option<u16>,
        code: Option<String>,
        message: String,
        /// The server's `Retry-After`, when it sent one (in seconds).
        retry_after: Option<Duration>,
    },
    Final(Error),
}

/// The longest `Retry-After` honoured: a server (or a proxy in front of it)
/// asking for more does not park the producer longer than this per retry.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The delay before the next try: the policy's, but never sooner than the
/// server asked (`Retry-After`, capped at [`MAX_RETRY_AFTER`]).
fn next_delay(e: &Attempt, policy: Option<Duration>) -> Option<Duration> {
    match e {
        Attempt::Transient {
            retry_after: Some(asked),
            ..
        } => policy.map(|d| d.max((*asked).min(MAX_RETRY_AFTER))),
        _ => policy,
    }
}

/// The default client: 10 s per request, no redirects (the token must not
/// travel elsewhere), and what `builder` adds.
fn default_client(builder: reqwest::ClientBuilder) -> Result<reqwest::Client, Error> {
    // rustls with ring (the workspace's Cargo.toml says why); an
    // application that installed another provider keeps it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    builder
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Error::Config(e.to_string()))
}

/// `e` and each of its sources, `: `-separated.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl Producer {
    /// A producer talking to trustmsg at `base_url` (e.g. `http://127.0.0.1:8080`,
    /// a path prefix is kept) as `biz_id` with its bearer `token`.
    ///
    /// The default HTTP client has a 10 s request timeout and follows no
    /// redirects (the token must not travel elsewhere).
    ///
    /// ```
    /// let p = trustmsg_client::Producer::new("http://127.0.0.1:8080", "shop", "token").unwrap();
    /// assert_eq!(p.biz_id(), "shop");
    /// assert!(trustmsg_client::Producer::new("not a url", "shop", "token").is_err());
    /// ```
    pub fn new(
        base_url: &str,
        biz_id: impl Into<String>,
        token: impl Into<String>,
    ) -> Result<Self, Error> {
        let base = Url::parse(base_url).map_err(|e| Error::Config(format!("{base_url}: {e}")))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "{base_url}: not an http(s) base URL"
            )));
        }
        Ok(Self {
            http: default_client(reqwest::Client::builder())?,
            base,
            biz_id: biz_id.into(),
            token: token.into(),
            retry: RetryPolicy::default(),
        })
    }

    /// Replaces the retry policy.
    ///
    /// ```
    /// use trustmsg_client::{Producer, RetryPolicy};
    /// let p = Producer::new("http://127.0.0.1:8080", "shop", "token")
    ///     .unwrap()
    ///     .with_retry(RetryPolicy::none());
    /// # let _ = p;
    /// ```
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Trusts only the CA certificates in `pem` (PEM, one or more
    /// `CERTIFICATE` blocks) for an `https://` base URL: for a trustmsg
    /// whose certificate a private CA signed. Without it, HTTPS is verified
    /// against the system's trusted roots. Replaces the HTTP client with the
    /// default one (10 s timeout, no redirects) trusting these.
    ///
    /// ```no_run
    /// let ca = std::fs::read("/etc/trustmsg/ca.pem").unwrap();
    /// let p = trustmsg_client::Producer::new("https://trustmsg.internal:8443", "shop", "token")
    ///     .unwrap()
    ///     .with_ca_certificates(&ca)
    ///     .unwrap();
    /// # let _ = p;
    /// ```
    ///
    /// A file without a certificate is refused:
    ///
    /// ```
    /// let p = trustmsg_client::Producer::new("https://127.0.0.1:8443", "shop", "token").unwrap();
    /// assert!(p.with_ca_certificates(b"not a certificate").is_err());
    /// ```
    pub fn with_ca_certificates(mut self, pem: &[u8]) -> Result<Self, Error> {
        let roots = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| Error::Config(format!("CA certificates: {e}")))?;
        if roots.is_empty() {
            return Err(Error::Config(
                "CA certificates: no PEM `CERTIFICATE` block found".into(),
            ));
        }
        self.http = default_client(reqwest::Client::builder().tls_certs_only(roots))?;
        Ok(self)
    }

    /// Replaces the HTTP client (timeouts, TLS roots, proxies). Prefer one
    /// that follows no redirects. `Producer::new` installs ring as rustls's
    /// crypto provider when none is; a client built before it needs one
    /// installed (reqwest's default features bring their own).
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = trustmsg_client::Producer::new("http://127.0.0.1:8080", "shop", "token").unwrap();
    /// let http = reqwest::Client::builder()
    ///     .timeout(Duration::from_secs(2))
    ///     .redirect(reqwest::redirect::Policy::none())
    ///     .build()
    ///     .unwrap();
    /// let p = p.with_http_client(http);
    /// # let _ = p;
    /// ```
    pub fn with_http_client(mut self, http: reqwest::Client) -> Self {
        self.http = http;
        self
    }

    /// The producer's id.
    ///
    /// ```
    /// let p = trustmsg_client::Producer::new("http://127.0.0.1:8080", "shop", "t").unwrap();
    /// assert_eq!(p.biz_id(), "shop");
    /// ```
    pub fn biz_id(&self) -> &str {
        &self.biz_id
    }

    /// `POST /v1/messages/prepare`: stores the message as PREPARED. Repeating
    /// it with identical content returns the same view; different content
    /// under the same key is [`Error::Conflict`] (`prepare_conflict`), and so is
    /// a prepare after a rollback (`rolled_back`).
    ///
    /// ```no_run
    /// # async fn run(producer: trustmsg_client::Producer) -> Result<(), trustmsg_client::Error> {
    /// use trustmsg_client::{Message, MessageStatus};
    /// let view = producer.prepare(&Message::new("order-42", "orders", "{}")).await?;
    /// assert_eq!(view.status, MessageStatus::Prepared);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn prepare(&self, message: &Message) -> Result<MessageView, Error> {
        let body = serde_json::to_vec(&message.to_request(&self.biz_id))
            .map_err(|e| Error::Config(format!("encoding the prepare request: {e}")))?;
        self.call_with(
            Method::POST,
            self.url(&["v1", "messages", "prepare"])?,
            Some(body),
            &message.trace_headers(),
        )
        .await
    }

    /// `POST /v1/messages/commit`: decides for delivery. Repeating it is a 200;
    /// after a rollback it is [`Error::Conflict`] (`already_rolled_back`); for
    /// an unknown message [`Error::NotFound`].
    ///
    /// ```no_run
    /// # async fn run(producer: trustmsg_client::Producer) -> Result<(), trustmsg_client::Error> {
    /// let view = producer.commit("order-42").await?;
    /// assert_eq!(view.status, trustmsg_client::MessageStatus::Committed);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn commit(&self, message_key: &str) -> Result<MessageView, Error> {
        self.decide("commit", message_key).await
    }

    /// `POST /v1/messages/rollback`: decides against delivery. Repeating it is
    /// a 200; after a commit it is [`Error::Conflict`] (`already_committed`);
    /// for an unknown message it leaves a tombstone so a late prepare is refused.
    ///
    /// ```no_run
    /// # async fn run(producer: trustmsg_client::Producer) -> Result<(), trustmsg_client::Error> {
    /// let view = producer.rollback("order-42").await?;
    /// assert_eq!(view.status, trustmsg_client::MessageStatus::RolledBack);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn rollback(&self, message_key: &str) -> Result<MessageView, Error> {
        self.decide("rollback", message_key).await
    }

    /// `GET /v1/messages/{biz_id}/{message_key}`: the message's current view.
    ///
    /// ```no_run
    /// # async fn run(producer: trustmsg_client::Producer) -> Result<(), trustmsg_client::Error> {
    /// match producer.get("order-42").await {
    ///     Ok(view) => println!("{:?} / {:?}", view.status, view.send_status),
    ///     Err(trustmsg_client::Error::NotFound { .. }) => println!("never prepared"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get(&self, message_key: &str) -> Result<MessageView, Error> {
        let url = self.url(&["v1", "messages", &self.biz_id, message_key])?;
        self.call(Method::GET, url, None).await
    }

    async fn decide(&self, what: &str, message_key: &str) -> Result<MessageView, Error> {
        let body = serde_json::to_vec(&DecisionRequest {
            biz_id: self.biz_id.clone(),
            message_key: message_key.to_string(),
        })
        .map_err(|e| Error::Config(format!("encoding the {what} request: {e}")))?;
        self.call(
            Method::POST,
            self.url(&["v1", "messages", what])?,
            Some(body),
        )
        .await
    }

    /// The base URL with `segments` appended, each percent-encoded.
    fn url(&self, segments: &[&str]) -> Result<Url, Error> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|_| Error::Config(format!("{}: cannot be a base URL", self.base)))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<T, Error> {
        self.call_with(method, url, body, &[]).await
    }

    async fn call_with<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        headers: &[(&'static str, String)],
    ) -> Result<T, Error> {
        let attempts = AtomicU32::new(0);
        let result = (|| async {
            attempts.fetch_add(1, Ordering::Relaxed);
            self.attempt(method.clone(), url.clone(), body.clone(), headers)
                .await
        })
        .retry(self.retry.backoff())
        .when(|e| matches!(e, Attempt::Transient { .. }))
        .adjust(next_delay)
        .notify(|e, after| {
            if let Attempt::Transient { message, .. } = e {
                tracing::warn!(%url, error = %message, retry_in = ?after, "trustmsg call failed; retrying");
            }
        })
        .await;
        result.map_err(|e| match e {
            Attempt::Final(e) => e,
            Attempt::Transient {
                status,
                code,
                message,
                ..
            } => Error::Unavailable {
                attempts: attempts.load(Ordering::Relaxed),
                status,
                code,
                message,
            },
        })
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        headers: &[(&'static str, String)],
    ) -> Result<T, Attempt> {
        let mut req = self.http.request(method, url).bearer_auth(&self.token);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        if let Some(body) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        // With its causes: "error sending request" alone hides a refused
        // connection or an untrusted certificate.
        let transient = |e: reqwest::Error| Attempt::Transient {
            status: None,
            code: None,
            message: with_causes(&e),
            retry_after: None,
        };
        let res = req.send().await.map_err(transient)?;
        let status = res.status();
        let retry_after = res
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // A body cut off mid-way is a network error like any other: retry.
        let bytes = res.bytes().await.map_err(transient)?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|e| {
                Attempt::Final(Error::Unexpected {
                    status: status.as_u16(),
                    code: None,
                    message: format!("the answer is not a message view: {e}"),
                })
            });
        }
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(b) => (Some(b.error.code), b.error.message),
            Err(_) => (None, describe(status, &bytes)),
        };
        if status.is_server_error() {
            Err(Attempt::Transient {
                status: Some(status.as_u16()),
                code,
                message,
                retry_after,
            })
        } else {
            Err(Attempt::Final(Error::from_status(
                status.as_u16(),
                code,
                message,
            )))
        }
    }
}

/// A readable message for an error answer without trustmsg's JSON body (a proxy's page).
fn describe(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    if text.trim().is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {}", text.trim())
    }
}
