//! Start-up wiring, in one place that `main` and the tests both call: build the
//! store, the registry, the workers and the HTTP server, bind the listener
//! (port 0 works) and hand back the address. It only wires: every flag was
//! checked and converted by [`crate::config`].

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::api::load_shed::InFlight;
use crate::api::{self, AppState, Shared};
use crate::config::{Forwarding, ServeArgs};
use crate::forwarder::kafka::KafkaSink;
use crate::forwarder::{exactly_once, Forwarder};
use crate::group_commit::producer_writes::Coalescer;
use crate::handoff::{CommitListener, NoForwarder};
use crate::intake::{Intake, Limits};
use crate::net::address_policy::{AddressPolicy, Refusal};
use crate::net::secret::RedactedUrl;
use crate::net::server_tls::{self, Certificates, TlsListener};
use crate::observability::prometheus;
use crate::registry::{GroupRegistry, Registry};
use crate::store::{self, DynStore, PartitionPlan};
use crate::verifier::Verifier;
use crate::workers::alerts::{AlertDelivery, Webhook};
use crate::workers::backlog;
use crate::workers::flow;
use crate::workers::liveness::Liveness;
use crate::workers::overdue;
use crate::workers::periodic;
use crate::workers::retention;
use crate::workers::stuck_consumptions;

/// Opens the store the settings name; the decision is
/// [`crate::store::open`]'s, kept under this name for the callers that
/// boot the service.
pub use crate::store::open as open_store;

/// Logs a warning naming the producers registered without a topic allow-list:
/// they may prepare for any topic, or, under `--require-producer-topics`,
/// for none until an operator gives them a list. Only a log: a store that
/// cannot answer now does not stop the start.
async fn warn_about_producers_without_topics(store: &DynStore, required: bool) {
    let producers = match store.list_producers().await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not list the producers to check their topic allow-lists");
            return;
        }
    };
    let unlisted: Vec<String> = producers
        .into_iter()
        .filter(|p| p.topics.is_none())
        .map(|p| p.biz_id)
        .collect();
    if unlisted.is_empty() {
        return;
    }
    let producers = unlisted.join(", ");
    if required {
        tracing::warn!(
            count = unlisted.len(),
            %producers,
            "--require-producer-topics: these producers have no topic allow-list, so their \
             prepares are refused (403 topic_not_allowed) until an operator gives them one \
             (PUT /v1/producers/<biz_id> with \"topics\")"
        );
    } else {
        tracing::warn!(
            count = unlisted.len(),
            %producers,
            "these producers have no topic allow-list: they may prepare messages for any topic \
             (give them one with PUT /v1/producers/<biz_id> and \"topics\")"
        );
    }
}

/// Says, at start-up, what `--retention 0` costs: every message is kept
/// forever.
fn warn_retention_off() {
    tracing::warn!(
        "--retention 0: finished messages are never deleted, so the messages table and \
         audit_log, check_attempts, consumptions and message_payloads grow without bound \
         (at 1,000 msg/s, 86 M messages a day); turn retention on with --retention 7d \
         (TRUSTMSG_RETENTION), the default"
    );
}

/// The alert webhook, refused at start-up when the address policy refuses
/// its URL (each connection is checked again when it is dialled); warns
/// when its POSTs go unsigned.
async fn alert_webhook(
    url: Option<RedactedUrl>,
    signing_secret: Option<crate::net::secret::Secret>,
    policy: &Arc<AddressPolicy>,
) -> anyhow::Result<Option<Webhook>> {
    let Some(shown) = url else {
        return Ok(None);
    };
    let url = shown.expose().clone();
    match policy.check_url(&url).await {
        Ok(()) => {}
        // DNS may be down for a moment; the connection is checked anyway.
        Err(why @ (Refusal::Unresolvable { .. } | Refusal::NoAddress(_))) => {
            tracing::warn!(webhook = %shown, "--alert-webhook: {why}; alerts wait until it resolves to an allowed address")
        }
        Err(why) => anyhow::bail!(
            "--alert-webhook {shown} is refused by the address policy \
             (--verify-allow-cidr, --verify-deny-cidr, built-in denials): {why}"
        ),
    }
    if signing_secret.is_none() {
        tracing::warn!(
            webhook = %shown,
            "alert webhooks are POSTed unsigned: pass --alert-signing-secret whsec_… \
             so the receiver can tell trustmsg's alerts from forged ones"
        );
    }
    Ok(Some(Webhook {
        url,
        signing_secret,
        policy: policy.clone(),
    }))
}

/// A running trustmsg service.
pub struct Application {
    addr: SocketAddr,
    https: bool,
    shutdown: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
    workers: Vec<JoinHandle<()>>,
    store: DynStore,
    /// The longest a statement at shutdown may take.
    statement_timeout: std::time::Duration,
}

impl Application {
    /// Checks the flags, connects, optionally migrates, starts the workers and
    /// binds the API. A bad flag is refused before anything is touched.
    pub async fn build(args: ServeArgs) -> anyhow::Result<Self> {
        let cfg = args.settings()?;
        // A bad certificate stops the start-up before anything is touched.
        let certificates = cfg.tls.clone().map(Certificates::load).transpose()?;
        prometheus::install();
        crate::observability::trace::describe_metrics();
        if let Some(otlp) = &cfg.otlp {
            crate::observability::trace::install(otlp)?;
        }
        if cfg.auth.insecure {
            tracing::warn!(
                "!!! --insecure-no-auth: every request is accepted without a token. \
                 Never run this way outside local development. !!!"
            );
        }
        let address_policy = Arc::new(cfg.address_policy);
        let webhook =
            alert_webhook(cfg.alert_webhook, cfg.alert_signing_secret, &address_policy).await?;
        let store = store::open(&cfg.database_urls, &cfg.replica_urls, cfg.auto_migrate).await?;
        let registry = Registry::new(store.clone(), cfg.producer_cache_ttl);
        let groups = GroupRegistry::new(store.clone(), cfg.producer_cache_ttl);
        warn_about_producers_without_topics(&store, cfg.require_producer_topics).await;
        let shutdown = CancellationToken::new();
        let mut workers = Vec::new();
        let liveness = Liveness::default();
        let commits: Arc<dyn CommitListener> = match cfg.forwarding {
            Forwarding::Off { why } => {
                tracing::warn!("{why}");
                Arc::new(NoForwarder)
            }
            Forwarding::Kafka { kafka, config } => {
                let eos = config.exactly_once.clone();
                let sink = KafkaSink::new(kafka.clone())?;
                let forwarder = Forwarder::new(store.clone(), sink, config);
                match eos {
                    None => {
                        let (handle, task) = forwarder.spawn(shutdown.clone());
                        workers.push(liveness.watch("forwarder", task, shutdown.clone()));
                        Arc::new(handle)
                    }
                    Some(eos) => {
                        let starting = liveness.starting("forwarder (exactly once: fencing its predecessor and taking back its claims)");
                        let (wake, task) =
                            exactly_once::spawn(forwarder, kafka, *eos, starting, shutdown.clone());
                        workers.push(liveness.watch("forwarder", task, shutdown.clone()));
                        Arc::new(wake)
                    }
                }
            }
        };
        if let Some(verifier) = cfg.verifier {
            let verifier = Verifier::new(
                store.clone(),
                registry.clone(),
                address_policy.clone(),
                commits.clone(),
                verifier,
            );
            let task = verifier.spawn(shutdown.clone());
            workers.push(liveness.watch("verifier", task, shutdown.clone()));
        }
        if let Some(task) = overdue::spawn(
            store.clone(),
            cfg.overdue,
            cfg.request_timeout,
            shutdown.clone(),
        ) {
            workers.push(liveness.watch("overdue watch", task, shutdown.clone()));
        }
        if cfg.retention.is_none() {
            warn_retention_off();
        }
        let task = retention::spawn(
            store.clone(),
            PartitionPlan {
                period: cfg.partition_period,
                retention: cfg.retention,
                ahead: store::PARTITIONS_AHEAD,
                archive: cfg.archive.is_some(),
            },
            cfg.archive,
            cfg.request_timeout,
            shutdown.clone(),
        );
        workers.push(liveness.watch("retention", task, shutdown.clone()));
        // Ends by itself once nothing is left to move: not a worker whose
        // end /readyz reports.
        workers.push(crate::workers::payload_move::spawn(
            store.clone(),
            cfg.request_timeout,
            shutdown.clone(),
        ));
        let task = AlertDelivery::new(store.clone(), webhook, cfg.request_timeout)
            .spawn(shutdown.clone(), cfg.shutdown_grace);
        workers.push(liveness.watch("alert delivery", task, shutdown.clone()));
        let task = periodic::gauges(
            store.clone(),
            cfg.backlog_interval,
            cfg.request_timeout,
            shutdown.clone(),
            backlog::GAUGES,
        );
        workers.push(liveness.watch("backlog", task, shutdown.clone()));
        let task = periodic::gauges(
            store.clone(),
            cfg.table_size_interval,
            cfg.request_timeout,
            shutdown.clone(),
            crate::workers::table_sizes::GAUGES,
        );
        workers.push(liveness.watch("table sizes", task, shutdown.clone()));
        if store.shards() > 1 {
            // `trustmsg_shard_up` per shard, whether or not /readyz is asked.
            let (store, timeout) = (store.clone(), cfg.request_timeout);
            let task = periodic::spawn(cfg.backlog_interval, shutdown.clone(), move || {
                let store = store.clone();
                async move {
                    let _ = tokio::time::timeout(timeout, store.ping()).await;
                }
            });
            workers.push(liveness.watch("shard watch", task, shutdown.clone()));
        }
        let task = stuck_consumptions::spawn_stuck_watch(
            store.clone(),
            cfg.request_timeout,
            shutdown.clone(),
        );
        workers.push(liveness.watch("consumption stuck watch", task, shutdown.clone()));
        let task = periodic::gauges(
            store.clone(),
            cfg.backlog_interval,
            cfg.request_timeout,
            shutdown.clone(),
            stuck_consumptions::GAUGES,
        );
        workers.push(liveness.watch("consumer group gauges", task, shutdown.clone()));
        let task = flow::spawn(
            store.clone(),
            cfg.flow_interval,
            cfg.request_timeout,
            shutdown.clone(),
        );
        workers.push(liveness.watch("flow", task, shutdown.clone()));
        let submit = cfg.submit;
        let outbox = cfg.outbox;
        let sources = crate::outbox::Sources::new(outbox.as_ref())?;
        let intake = Intake {
            store: store.clone(),
            registry: registry.clone(),
            writes: Coalescer::start(store.clone(), cfg.writes, commits.clone()),
            limits: Limits {
                max_payload_bytes: cfg.max_payload_bytes,
                max_record_bytes: cfg.max_record_bytes,
                first_verify_after: cfg.producer_defaults.first_verify_after,
                require_producer_topics: cfg.require_producer_topics,
            },
        };
        let state = AppState::new(Shared {
            intake: intake.clone(),
            store: store.clone(),
            registry,
            auth: cfg.auth,
            producer_defaults: cfg.producer_defaults,
            commits,
            send_lease: cfg.writes.send_lease,
            address_policy,
            in_flight: InFlight::new(cfg.max_concurrent_requests),
            request_timeout: cfg.request_timeout,
            liveness,
            summary: Default::default(),
            storage: Default::default(),
            retention: cfg.retention,
            groups,
            group_counts: Default::default(),
            outbox: sources,
        });

        if let Some(submit) = submit {
            let (consuming, waiting) =
                crate::submit::spawn(intake.clone(), submit, shutdown.clone())?;
            workers.push(
                state
                    .liveness
                    .watch("submit consumer", consuming, shutdown.clone()),
            );
            workers.push(
                state
                    .liveness
                    .watch("waiting commits", waiting, shutdown.clone()),
            );
        }

        if let Some(outbox) = outbox {
            for (name, task) in
                crate::outbox::spawn(intake, &state.outbox, outbox, shutdown.clone())
            {
                // A worker's name lives as long as the process (one per
                // source, made once).
                let name: &'static str = Box::leak(name.into_boxed_str());
                workers.push(state.liveness.watch(name, task, shutdown.clone()));
            }
        }

        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let app = api::router(state).layer(TraceLayer::new_for_http());
        let stop = shutdown.clone();
        let server = match &certificates {
            None => tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }),
            Some(certs) => {
                let listener = TlsListener::new(listener, certs.server_config()?)?;
                workers.push(server_tls::spawn_reloader(certs.clone(), shutdown.clone())?);
                tokio::spawn(async move {
                    axum::serve(listener, app)
                        .with_graceful_shutdown(stop.cancelled_owned())
                        .await
                })
            }
        };
        let https = certificates.is_some();
        tracing::info!(%addr, https, "trustmsg listening");
        Ok(Self {
            addr,
            https,
            shutdown,
            server,
            workers,
            store,
            statement_timeout: cfg.request_timeout,
        })
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<address>`, or `https://` with `--tls-cert`.
    pub fn base_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The store the service uses.
    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// Cancelling this token starts a graceful shutdown.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until the service has shut down (after the token is cancelled).
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let served = self.server.await.context("HTTP server task")?;
        for w in self.workers {
            let _ = w.await;
        }
        // Once nothing counts any more: the last counts outlive the process.
        flow::flush_at_shutdown(&self.store, self.statement_timeout).await;
        crate::observability::trace::shutdown().await;
        served.context("HTTP server")?;
        tracing::info!("trustmsg stopped");
        Ok(())
    }

    /// Starts a graceful shutdown and waits for it.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.run_until_stopped().await
    }
}
