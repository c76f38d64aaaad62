//! The load generator: HTTP producers doing prepare + commit, closed loop
//! (lifecycle) and open loop (fixed arrival rate), and the wait for every
//! committed message to come out of Kafka.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::Mutex;
use trustmsg_kafka_mock as kafka;
use trustmsg_verify_api::{ProducerSettings, ProducerView};

use super::open_loop::OpenLoop;
use super::percentiles::Percentiles;
use super::report::LoadResult;
use super::server::Db;
use super::wait::{await_consumed, wait_until};
use super::*;

/// A tiny HTTP client for the producer and registry API. The hot calls'
/// addresses are parsed once and their bodies built without a JSON tree: the
/// load generator shares the machine with what it measures.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    admin_token: String,
    prepare_url: reqwest::Url,
    commit_url: reqwest::Url,
    payload: Arc<str>,
    /// Register every producer `ordered` (`--ordered`).
    ordered: bool,
    /// `--trace`: every prepare carries a `traceparent` of its own trace.
    trace: bool,
}

/// A prepare's body.
#[derive(serde::Serialize)]
struct Prepare<'a> {
    biz_id: &'a str,
    message_key: &'a str,
    topic: &'a str,
    key: &'a str,
    payload: &'a str,
}

/// A commit's body.
#[derive(serde::Serialize)]
struct Commit<'a> {
    biz_id: &'a str,
    message_key: &'a str,
}

/// The one field of a prepare's answer the bench needs.
#[derive(serde::Deserialize)]
struct Prepared {
    id: u64,
}

impl Client {
    pub(crate) fn new(
        base: &str,
        admin_token: &str,
        concurrency: usize,
        ordered: bool,
        trace: bool,
    ) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency * 2)
            .build()
            .expect("static client configuration");
        let url = |path: &str| {
            reqwest::Url::parse(&format!("{base}{path}")).expect("the service's own address")
        };
        Self {
            http,
            base: base.to_string(),
            admin_token: admin_token.to_string(),
            prepare_url: url("/v1/messages/prepare"),
            commit_url: url("/v1/messages/commit"),
            payload: "x".repeat(PAYLOAD_BYTES).into(),
            ordered,
            trace,
        }
    }

    pub(crate) async fn register(
        &self,
        biz_id: &str,
        verify_url: &str,
        first_verify_ms: u32,
    ) -> anyhow::Result<String> {
        let view = self
            .registration(biz_id, verify_url, first_verify_ms)
            .await?;
        // An existing registration keeps its token, which the answer does not show.
        Ok(view.token.unwrap_or_else(|| self.admin_token.clone()))
    }

    /// Registers `biz_id` and returns the answer: its token and signing
    /// secret when the registration is new.
    pub(crate) async fn registration(
        &self,
        biz_id: &str,
        verify_url: &str,
        first_verify_ms: u32,
    ) -> anyhow::Result<ProducerView> {
        let res = self
            .http
            .put(format!("{}/v1/producers/{biz_id}", self.base))
            .bearer_auth(&self.admin_token)
            .json(&ProducerSettings {
                verify_url: verify_url.to_string(),
                first_verify_after_ms: Some(first_verify_ms),
                verify_timeout_ms: None,
                max_verify_attempts: None,
                topics: None,
                ordered: self.ordered,
            })
            .send()
            .await?;
        let status = res.status();
        let body = res.bytes().await?;
        anyhow::ensure!(
            status.is_success(),
            "register {biz_id}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        serde_json::from_slice(&body).context("the registration answer")
    }

    /// The service's `/metrics`, Prometheus text.
    pub(crate) async fn metrics(&self) -> anyhow::Result<String> {
        let res = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "/metrics: {}", res.status());
        Ok(res.text().await?)
    }

    /// prepare + commit of one message; returns (prepare, commit) latency, the
    /// message id and when the commit call started.
    pub(crate) async fn prepare_commit(
        &self,
        token: &str,
        key: &str,
    ) -> anyhow::Result<(Duration, Duration, u64, Instant)> {
        let t0 = Instant::now();
        let mut req = self.http.post(self.prepare_url.clone()).bearer_auth(token);
        if self.trace {
            let (trace, span) = (rand::random::<u128>() | 1, rand::random::<u64>() | 1);
            req = req.header("traceparent", format!("00-{trace:032x}-{span:016x}-01"));
        }
        let res = req
            .json(&Prepare {
                biz_id: "bench",
                message_key: key,
                topic: TOPIC,
                key,
                payload: &self.payload,
            })
            .send()
            .await?;
        if res.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE {
            return Err(Shed("prepare").into());
        }
        anyhow::ensure!(res.status().is_success(), "prepare: {}", res.status());
        let id = res
            .json::<Prepared>()
            .await
            .context("prepare answer without id")?
            .id;
        let t1 = Instant::now();
        let res = self
            .http
            .post(self.commit_url.clone())
            .bearer_auth(token)
            .json(&Commit {
                biz_id: "bench",
                message_key: key,
            })
            .send()
            .await?;
        if res.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE {
            return Err(Shed("commit").into());
        }
        anyhow::ensure!(res.status().is_success(), "commit: {}", res.status());
        let t2 = Instant::now();
        Ok((t1 - t0, t2 - t1, id, t1))
    }
}

/// A call the service refused with 503 (its load shedder, or a database
/// it could not reach in time): the open loop counts these and goes on.
#[derive(Debug, thiserror::Error)]
#[error("{0}: 503 Service Unavailable")]
pub(crate) struct Shed(&'static str);

#[derive(Default)]
pub(crate) struct Samples {
    /// Messages whose prepare or commit was answered 503.
    shed: usize,
    prepare: Vec<Duration>,
    commit: Vec<Duration>,
    /// When each message's commit call started.
    committed_at: HashMap<u64, Instant>,
    /// When each message's commit call was answered.
    answered_at: HashMap<u64, Instant>,
}

pub(crate) async fn lifecycle(
    client: &Client,
    token: &str,
    pools: &[Db],
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<LoadResult> {
    let samples = Arc::new(Mutex::new(Samples::default()));
    let start = Instant::now();
    let end = start + duration;
    let workers = (0..concurrency).map(|w| {
        let client = client.clone();
        let token = token.to_string();
        let samples = samples.clone();
        tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < end {
                let (p, c, id, at) = client.prepare_commit(&token, &format!("l{w}-{i}")).await?;
                let mut s = samples.lock().await;
                s.prepare.push(p);
                s.commit.push(c);
                s.committed_at.insert(id, at);
                s.answered_at.insert(id, at + c);
                i += 1;
            }
            anyhow::Ok(())
        })
    });
    for w in futures::future::join_all(workers).await {
        w??;
    }
    let samples = std::mem::take(&mut *samples.lock().await);
    let result = load_result(samples, consumed, start).await?;
    // A message counts only once its row is SENT as well (each one's
    // commit was answered: none is left PREPARED), on every shard.
    for pool in pools {
        wait_until(
            pool,
            "SELECT COUNT(*) FROM messages WHERE status = 'COMMITTED' AND send_status = 'PENDING' \
             AND biz_id = 'bench'",
            0,
        )
        .await?;
    }
    Ok(result)
}

/// Waits for every committed message of `samples` to reach Kafka and sums up.
pub(crate) async fn load_result(
    samples: Samples,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    start: Instant,
) -> anyhow::Result<LoadResult> {
    let (read_at, last) =
        await_consumed(consumed, &samples.committed_at, Duration::from_secs(120)).await?;
    let since = |from: &HashMap<u64, Instant>| -> Vec<Duration> {
        from.iter()
            .map(|(id, t)| read_at[id].saturating_duration_since(*t))
            .collect()
    };
    let (to_kafka, answer_to_kafka) = (since(&samples.committed_at), since(&samples.answered_at));
    let n = samples.committed_at.len();
    Ok(LoadResult {
        throughput_per_s: n as f64 / last.duration_since(start).as_secs_f64(),
        messages: n,
        shed: samples.shed,
        prepare: Percentiles::of(samples.prepare),
        commit: Percentiles::of(samples.commit),
        commit_to_kafka: Percentiles::of(to_kafka),
        answer_to_kafka: Percentiles::of(answer_to_kafka),
    })
}

/// One producer, `n` prepare + commit pairs one after the other: the latency
/// of the pair with nothing else going on. Waits for the records too, so the
/// next phase starts with an empty pipeline.
pub(crate) async fn one_at_a_time(
    client: &Client,
    token: &str,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    n: usize,
) -> anyhow::Result<Percentiles> {
    let mut pairs = Vec::with_capacity(n);
    let mut committed_at = HashMap::with_capacity(n);
    for i in 0..n {
        let (p, c, id, at) = client.prepare_commit(token, &format!("one-{i}")).await?;
        pairs.push(p + c);
        committed_at.insert(id, at);
    }
    await_consumed(consumed, &committed_at, Duration::from_secs(60)).await?;
    Ok(Percentiles::of(pairs))
}

/// One arrival of an open loop, as its producer saw it: each time charged
/// from the arrival's intended start.
pub(crate) struct Arrival {
    /// The prepare's latency, with the time the call waited to be sent.
    pub(crate) prepare: Duration,
    /// The commit's latency.
    pub(crate) commit: Duration,
    /// The message's id.
    pub(crate) id: u64,
    /// When the commit call started.
    pub(crate) committed_at: Instant,
    /// When the commit was answered.
    pub(crate) answered_at: Instant,
}

/// The prepare + commit of message `key`, meant to start at `intended`;
/// None when the service shed it (503), which a fixed arrival rate
/// outrunning a stalled service meets: counted, as a user would see it,
/// rather than ending the run.
pub(crate) async fn arrival(
    client: &Client,
    token: &str,
    key: &str,
    intended: Instant,
) -> anyhow::Result<Option<Arrival>> {
    let (p, c, id, _) = match client.prepare_commit(token, key).await {
        Err(e) if e.is::<Shed>() => return Ok(None),
        answer => answer?,
    };
    // Charged from the intended start: time spent waiting to be sent counts.
    let queued = Instant::now().saturating_duration_since(intended) - p - c;
    Ok(Some(Arrival {
        prepare: queued + p,
        commit: c,
        id,
        committed_at: intended + queued + p,
        answered_at: intended + queued + p + c,
    }))
}

pub(crate) async fn open_loop(
    client: &Client,
    token: &str,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    rate: f64,
    duration: Duration,
) -> anyhow::Result<LoadResult> {
    anyhow::ensure!(rate > 0.0, "open loop needs a positive rate");
    let samples = Arc::new(Mutex::new(Samples::default()));
    let mut schedule = OpenLoop::new(Duration::from_secs_f64(1.0 / rate), duration);
    let start = schedule.start;
    let mut tasks = Vec::new();
    while let Some((i, intended)) = schedule.next().await {
        let client = client.clone();
        let token = token.to_string();
        let samples = samples.clone();
        tasks.push(tokio::spawn(async move {
            let Some(a) = arrival(&client, &token, &format!("o-{i}"), intended).await? else {
                samples.lock().await.shed += 1;
                return Ok(());
            };
            let mut s = samples.lock().await;
            s.prepare.push(a.prepare);
            s.commit.push(a.commit);
            s.committed_at.insert(a.id, a.committed_at);
            s.answered_at.insert(a.id, a.answered_at);
            anyhow::Ok(())
        }));
    }
    for t in futures::future::join_all(tasks).await {
        t??;
    }
    let samples = std::mem::take(&mut *samples.lock().await);
    load_result(samples, consumed, start).await
}
