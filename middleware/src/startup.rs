//! Start-up wiring, in one place that `main` and the tests both call: build the
//! store, the registry, the workers and the HTTP server, bind the listener
//! (port 0 works) and hand back the address.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::alert::Alerter;
use crate::api::{self, auth::AuthConfig, AppState, ProducerDefaults};
use crate::config::ServeArgs;
use crate::forwarder::kafka::{KafkaSettings, KafkaSink};
use crate::forwarder::{CommitListener, Forwarder, ForwarderConfig, NoForwarder};
use crate::metrics_setup;
use crate::registry::Registry;
use crate::store::{self, DynStore};
use crate::verifier::{self, Verifier, VerifierConfig};

/// A running trustmsg service.
pub struct Application {
    addr: SocketAddr,
    shutdown: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
    workers: Vec<JoinHandle<()>>,
    store: DynStore,
}

impl Application {
    /// Connects, optionally migrates, starts the workers and binds the API.
    pub async fn build(cfg: ServeArgs) -> anyhow::Result<Self> {
        metrics_setup::install();
        if cfg.insecure_no_auth {
            tracing::warn!(
                "!!! --insecure-no-auth: every request is accepted without a token. \
                 Never run this way outside local development. !!!"
            );
        } else if cfg.admin_token.is_none() {
            anyhow::bail!(
                "no admin token: pass --admin-token (or TRUSTMSG_ADMIN_TOKEN), \
                 or --insecure-no-auth for local development"
            );
        }
        let url = cfg.database.database_url.expose();
        if cfg.auto_migrate {
            store::create_database_if_missing(url)
                .await
                .context("creating the database")?;
        }
        let store = store::connect(url)
            .await
            .with_context(|| format!("connecting to {}", store::redact_url(url)))?;
        if cfg.auto_migrate {
            store.migrate().await.context("applying migrations")?;
        }
        let registry = Registry::new(store.clone(), cfg.producer_cache_ttl);
        let address_policy = Arc::new(verifier::address_policy(&cfg.verifier));
        let shutdown = CancellationToken::new();
        let mut workers = Vec::new();
        let alerter = Alerter::new(cfg.alerts.alert_webhook.clone());
        let commits: Arc<dyn CommitListener> = match build_forwarder(&cfg, &store, &alerter)? {
            Some(forwarder) => {
                let (handle, task) = forwarder.spawn(shutdown.clone());
                workers.push(task);
                Arc::new(handle)
            }
            None => Arc::new(NoForwarder),
        };

        if !cfg.verifier.no_verifier {
            let verifier = Verifier::new(
                store.clone(),
                registry.clone(),
                address_policy.clone(),
                alerter.clone(),
                commits.clone(),
                VerifierConfig::from_args(&cfg),
            );
            workers.push(verifier.spawn(shutdown.clone()));
        }

        let writes = crate::coalesce::Coalescer::start(
            store.clone(),
            cfg.write_workers,
            cfg.write_batch,
            cfg.forwarder.send_lease,
        );
        let state = AppState {
            writes,
            store: store.clone(),
            registry,
            auth: AuthConfig {
                admin_token: cfg.admin_token.clone(),
                insecure: cfg.insecure_no_auth,
            },
            max_payload_bytes: cfg.max_payload_bytes,
            send_lease: cfg.forwarder.send_lease,
            producer_defaults: ProducerDefaults {
                first_verify_after: cfg.verifier.first_verify_after,
                verify_timeout: cfg.verifier.verify_timeout,
                max_verify_attempts: cfg.verifier.max_verify_attempts,
            },
            commits,
            address_policy,
        };

        let listener = TcpListener::bind(cfg.listen)
            .await
            .with_context(|| format!("binding {}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let app = api::router(state).layer(TraceLayer::new_for_http());
        let stop = shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        });
        tracing::info!(%addr, "trustmsg listening");
        Ok(Self {
            addr,
            shutdown,
            server,
            workers,
            store,
        })
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.addr
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

/// The forwarder this instance runs, if any. Checked before anything starts:
/// a claim must outlive the longest send, or a second instance could claim
/// and send a row whose first send is still in flight.
fn build_forwarder(
    cfg: &ServeArgs,
    store: &DynStore,
    alerter: &Alerter,
) -> anyhow::Result<Option<Forwarder>> {
    let f = &cfg.forwarder;
    let Some(brokers) = f.kafka_brokers.clone().filter(|b| !b.trim().is_empty()) else {
        tracing::warn!(
            "no --kafka-brokers: this instance sends nothing; committed messages wait for a forwarder"
        );
        return Ok(None);
    };
    if f.no_forwarder {
        tracing::info!("--no-forwarder: this instance sends nothing");
        return Ok(None);
    }
    if f.send_lease <= f.kafka_message_timeout {
        anyhow::bail!(
            "--send-lease ({}) must be longer than --kafka-message-timeout ({}): otherwise a \
             claim can expire while its send is still in flight",
            humantime::format_duration(f.send_lease),
            humantime::format_duration(f.kafka_message_timeout)
        );
    }
    if f.max_send_attempts == 0 || f.sweep_batch == 0 || f.send_concurrency == 0 {
        anyhow::bail!(
            "--max-send-attempts, --sweep-batch and --send-concurrency must be at least 1"
        );
    }
    let sink = KafkaSink::new(KafkaSettings {
        brokers,
        extra: KafkaSettings::parse_extra(&f.kafka_config)?,
        message_timeout: f.kafka_message_timeout,
    })?;
    Ok(Some(Forwarder::new(
        store.clone(),
        sink,
        ForwarderConfig {
            send_lease: f.send_lease,
            sweep_interval: f.sweep_interval,
            sweep_batch: f.sweep_batch,
            backoff_base: f.send_backoff_base,
            backoff_max: f.send_backoff_max,
            max_send_attempts: f.max_send_attempts,
            concurrency: f.send_concurrency,
            shutdown_grace: cfg.shutdown_grace,
        },
        alerter.clone(),
    )))
}
