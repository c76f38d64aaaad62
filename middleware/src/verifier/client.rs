//! One check-back call: a signed POST whose answer is trusted only when it is
//! exactly what the check-back contract (`docs/check-back.md`) says.
//!
//! A producer's endpoint may be slow, broken or hostile, so the call:
//! - dials only addresses the [`AddressPolicy`] allows: IP-literal URLs are
//!   checked here, hostnames go through the policy as the client's DNS
//!   resolver (so the check is on the address actually dialled), no proxy is
//!   used, and redirects are never followed;
//! - has a deadline covering connect, headers and body;
//! - reads at most [`MAX_RESPONSE_BYTES`] of the body, chunk by chunk, and
//!   drops the connection past that, so a huge answer costs no memory;
//! - decides only on a 2xx whose JSON body echoes the message id with a known
//!   decision. Anything else is a [`CheckFailure`] with a reason an operator
//!   can read in `last_error`.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use trustmsg_verify_api::trace_context::{TRACEPARENT, TRACESTATE};
use trustmsg_verify_api::webhook::{self, MAX_RESPONSE_BYTES};
use trustmsg_verify_api::{signature, CheckRequest, CheckResponse, Decision};

use reqwest::StatusCode;

use super::limit::Load;
use crate::net::address_policy::{self, AddressPolicy, Refusal};

/// Why a check-back call decided nothing. The text goes to `last_error`, so
/// it says what an operator should look at on the producer's side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CheckFailure {
    /// The producer is not registered (any more): there is nobody to ask.
    #[error("producer {0:?} is not registered; there is nobody to ask")]
    NotRegistered(String),
    /// The registered `verify_url` does not parse.
    #[error("verify_url {url:?} is not a URL: {error}")]
    BadUrl {
        /// The registered URL.
        url: String,
        /// The parser's complaint.
        error: String,
    },
    /// The address policy refused the URL or every address it resolves to.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The request could not be signed (a malformed signing secret).
    #[error("cannot sign the request: {0}")]
    Sign(String),
    /// No complete answer within the producer's timeout.
    #[error("no complete answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// Connecting or sending failed; the causes, outermost first.
    #[error("{0}")]
    Transport(String),
    /// A 3xx: check-back never follows redirects.
    #[error(
        "redirect (HTTP {status}) to {location:?} not followed: check-back never follows redirects"
    )]
    Redirect {
        /// The status received.
        status: StatusCode,
        /// Its `Location`, or `?`.
        location: String,
    },
    /// A status other than 2xx or 3xx.
    #[error("HTTP {0} (only a 2xx answer can decide)")]
    Status(StatusCode),
    /// The body is over [`MAX_RESPONSE_BYTES`].
    #[error("{0}")]
    TooLarge(String),
    /// A 2xx with nothing in it.
    #[error("HTTP {0} with an empty body")]
    EmptyBody(StatusCode),
    /// The body is not a check-back answer.
    #[error("{0}")]
    BadBody(String),
    /// The answer names another message.
    #[error("answer is for message {got}, not {expected}")]
    WrongMessage {
        /// The id in the answer.
        got: u64,
        /// The id asked about.
        expected: u64,
    },
}

impl CheckFailure {
    /// What the failure says about the endpoint's load: a timeout, a failed
    /// connection, 429 or a 5xx mean back off; the rest say nothing.
    pub(crate) fn load(&self) -> Load {
        match self {
            CheckFailure::Timeout(_) | CheckFailure::Transport(_) => Load::Overloaded,
            CheckFailure::Status(s)
                if *s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() =>
            {
                Load::Overloaded
            }
            _ => Load::Unknown,
        }
    }
}

/// Where and how to call one producer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoint<'a> {
    /// The registered `verify_url`.
    pub(crate) url: &'a str,
    /// The `whsec_…` signing secret.
    pub(crate) secret: &'a str,
    /// Deadline of the whole call.
    pub(crate) timeout: Duration,
}

/// The trace context a check-back call carries (W3C `traceparent`,
/// `tracestate`): none for a message prepared without one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Trace<'a> {
    /// Our check-back span when spans are exported, else the stored value.
    pub(crate) traceparent: Option<&'a str>,
    /// The stored `tracestate`, sent only with a `traceparent`.
    pub(crate) tracestate: Option<&'a str>,
}

/// The check-back HTTP client (cheap to clone; connections are pooled).
#[derive(Clone)]
pub(crate) struct CheckClient {
    http: reqwest::Client,
    policy: Arc<AddressPolicy>,
}

impl std::fmt::Debug for CheckClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckClient")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl CheckClient {
    /// A client that dials only what `policy` allows.
    pub(crate) fn new(policy: Arc<AddressPolicy>) -> Self {
        let http = address_policy::client_builder(policy.clone())
            .user_agent(concat!("trustmsg-verifier/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("static reqwest configuration");
        Self { http, policy }
    }

    /// POSTs the signed check-back request and returns the producer's
    /// decision, with the HTTP status of its answer when one came.
    pub(crate) async fn check(
        &self,
        endpoint: Endpoint<'_>,
        req: &CheckRequest,
        trace: Trace<'_>,
    ) -> (Option<StatusCode>, Result<Decision, CheckFailure>) {
        match self.call(endpoint, req, trace).await {
            Ok((status, answer)) => (Some(status), answer),
            Err(failure) => (None, Err(failure)),
        }
    }

    /// The call: Err when no answer came, else the status and what it decides.
    async fn call(
        &self,
        endpoint: Endpoint<'_>,
        req: &CheckRequest,
        trace: Trace<'_>,
    ) -> Result<(StatusCode, Result<Decision, CheckFailure>), CheckFailure> {
        let url = url::Url::parse(endpoint.url).map_err(|e| CheckFailure::BadUrl {
            url: endpoint.url.to_string(),
            error: e.to_string(),
        })?;
        self.policy.check_literal(&url)?;
        let body = serde_json::to_vec(req).expect("CheckRequest serialises");
        let id = format!("chk_{}_{}", req.message_id, req.attempt);
        let ts = chrono::Utc::now().timestamp();
        let sig = signature::sign(endpoint.secret, &id, ts, &body)
            .map_err(|e| CheckFailure::Sign(e.to_string()))?;
        let call = async {
            let mut post = self
                .http
                .post(url.clone())
                .timeout(endpoint.timeout)
                .header(CONTENT_TYPE, "application/json")
                .header(webhook::ID, &id)
                .header(webhook::TIMESTAMP, ts.to_string())
                .header(webhook::SIGNATURE, sig);
            if let Some(tp) = trace.traceparent {
                post = post.header(TRACEPARENT, tp);
                if let Some(state) = trace.tracestate {
                    post = post.header(TRACESTATE, state);
                }
            }
            let resp = post
                .body(body)
                .send()
                .await
                .map_err(|e| describe(&e, endpoint.timeout))?;
            let status = resp.status();
            Ok((
                status,
                interpret(resp, req.message_id, endpoint.timeout).await,
            ))
        };
        // reqwest's timeout covers the body too; this one also bounds our own reads.
        match tokio::time::timeout(endpoint.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(CheckFailure::Timeout(endpoint.timeout)),
        }
    }
}

/// A reqwest error with its causes, which is where "address denied" lives.
fn describe(e: &reqwest::Error, timeout: Duration) -> CheckFailure {
    if e.is_timeout() {
        return CheckFailure::Timeout(timeout);
    }
    let head = if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let text = address_policy::with_causes(head.to_string(), e);
    CheckFailure::Transport(text)
}

/// A short, printable prefix of a body, to show what came back.
fn snippet(text: &str) -> String {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}", &text[..end])
}

async fn interpret(
    mut resp: reqwest::Response,
    message_id: u64,
    timeout: Duration,
) -> Result<Decision, CheckFailure> {
    let status = resp.status();
    if status.is_redirection() {
        let to = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        return Err(CheckFailure::Redirect {
            status,
            location: to.to_string(),
        });
    }
    if !status.is_success() {
        return Err(CheckFailure::Status(status));
    }
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_RESPONSE_BYTES as u64) {
        return Err(CheckFailure::TooLarge(format!(
            "answer of {} bytes is over the {MAX_RESPONSE_BYTES}-byte limit",
            declared.unwrap_or_default()
        )));
    }
    let mut body = Vec::with_capacity(1024);
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(CheckFailure::TooLarge(format!(
                        "answer is over the {MAX_RESPONSE_BYTES}-byte limit (stopped reading)"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(CheckFailure::Transport(format!(
                    "reading the answer: {}",
                    describe(&e, timeout)
                )))
            }
        }
    }
    parse_answer(status, &body, message_id)
}

/// What a complete 2xx answer body decides: only JSON that echoes
/// `message_id` with a known decision decides anything.
fn parse_answer(
    status: StatusCode,
    body: &[u8],
    message_id: u64,
) -> Result<Decision, CheckFailure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(CheckFailure::EmptyBody(status));
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(CheckFailure::BadBody("answer is not valid UTF-8".into()));
    };
    let answer: CheckResponse = match serde_json::from_str(text) {
        Ok(a) => a,
        Err(e) => {
            return Err(CheckFailure::BadBody(format!(
            "answer is not {{\"message_id\", \"decision\": commit|rollback|unknown}}: {e}; got {}",
            snippet(text)
        )))
        }
    };
    if answer.message_id != message_id {
        return Err(CheckFailure::WrongMessage {
            got: answer.message_id,
            expected: message_id,
        });
    }
    Ok(answer.decision)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ID: u64 = 4242;

    /// A body and what it must decide (None: nothing).
    fn answers() -> impl Strategy<Value = (Vec<u8>, Option<Decision>)> {
        let decision = prop_oneof![
            Just(Decision::Commit),
            Just(Decision::Rollback),
            Just(Decision::Unknown)
        ];
        let word = |d: Decision| match d {
            Decision::Commit => "commit",
            Decision::Rollback => "rollback",
            Decision::Unknown => "unknown",
        };
        let ws = "[ \t\r\n]{0,3}";
        let valid = (decision.clone(), ws, ws, any::<bool>(), any::<bool>()).prop_map(
            move |(d, a, b, swap, extra)| {
                let id = format!("\"message_id\":{a}{ID}");
                let dec = format!("\"decision\":{b}\"{}\"", word(d));
                let (x, y) = if swap { (dec, id) } else { (id, dec) };
                let more = if extra {
                    ",\"note\":[1,{\"a\":null}]"
                } else {
                    ""
                };
                (format!("{a}{{{x},{y}{more}}}{b}").into_bytes(), Some(d))
            },
        );
        let wrong_id = (
            decision.clone(),
            any::<u64>().prop_filter("not the id", |i| *i != ID),
        )
            .prop_map(move |(d, id)| {
                (
                    format!("{{\"message_id\":{id},\"decision\":\"{}\"}}", word(d)).into_bytes(),
                    None,
                )
            });
        let bad_decision = prop_oneof![
            Just("\"COMMIT\"".to_string()),
            Just("\"Commit\"".to_string()),
            Just("\"yes\"".to_string()),
            Just("1".to_string()),
            Just("true".to_string()),
            Just("null".to_string()),
            Just("[\"commit\"]".to_string()),
            "\"[a-z]{0,10}\"".prop_filter("not a decision", |w| {
                !["\"commit\"", "\"rollback\"", "\"unknown\""].contains(&w.as_str())
            }),
        ]
        .prop_map(|d| {
            (
                format!("{{\"message_id\":{ID},\"decision\":{d}}}").into_bytes(),
                None,
            )
        });
        let bad_id = prop_oneof![
            Just(format!("\"{ID}\"")),
            Just(format!("{ID}.0")),
            Just(format!("-{ID}")),
            Just("18446744073709551616".to_string()),
            Just("null".to_string()),
        ]
        .prop_map(|id| {
            (
                format!("{{\"message_id\":{id},\"decision\":\"commit\"}}").into_bytes(),
                None,
            )
        });
        let cut = (decision, 0usize..40).prop_map(move |(d, n)| {
            let full = format!("{{\"message_id\":{ID},\"decision\":\"{}\"}}", word(d));
            let n = n.min(full.len() - 1);
            (full.as_bytes()[..n].to_vec(), None)
        });
        let wrapped = Just((
            format!("[{{\"message_id\":{ID},\"decision\":\"commit\"}}]").into_bytes(),
            None,
        ));
        let noise = proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| (b, None));
        prop_oneof![3 => valid, 1 => wrong_id, 1 => bad_decision, 1 => bad_id, 1 => cut, 1 => wrapped, 2 => noise]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// Whatever a producer's endpoint answers, the verifier neither
        /// panics nor decides, unless the answer echoes the message id with
        /// a known decision: then exactly that decision.
        #[test]
        fn only_an_answer_echoing_the_id_with_a_known_decision_decides((body, expected) in answers()) {
            let got = parse_answer(StatusCode::OK, &body, ID);
            match expected {
                Some(d) => prop_assert_eq!(got, Ok(d)),
                None => prop_assert!(got.is_err(), "{:?} decided {:?}", String::from_utf8_lossy(&body), got),
            }
        }
    }
}
