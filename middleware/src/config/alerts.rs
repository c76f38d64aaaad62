//! Alerting: the webhook, its signing secret, and when a waiting message is
//! overdue.

use std::time::Duration;

use clap::Args;

use super::parse::duration;
use super::ConfigError;
use crate::net::secret::{quiet, RedactedUrl, Secret};

/// Alerting.
#[derive(Debug, Clone, Args)]
pub struct AlertArgs {
    /// URL that receives a JSON POST for every alert (verify_failed,
    /// send_failed, quarantined, send_overdue, verify_overdue), retried until
    /// it answers 2xx, from whichever instance is running. Without it alerts
    /// are logged and counted only (state no_webhook).
    /// The webhook is dialled under the check-back address rules
    /// (--verify-allow-cidr, --verify-deny-cidr, the built-in denials),
    /// checked at start-up and on every connection.
    #[arg(long, env = "TRUSTMSG_ALERT_WEBHOOK", hide_env_values = true, value_parser = quiet::<RedactedUrl>())]
    pub alert_webhook: Option<RedactedUrl>,

    /// Sign every alert POST the Standard Webhooks way (`webhook-id` = the
    /// alert id, `webhook-timestamp`, `webhook-signature`) with this secret,
    /// `whsec_` followed by the base64 of 24 to 64 random bytes (e.g.
    /// `echo whsec_$(openssl rand -base64 32)`). Without it alerts are POSTed
    /// unsigned and anyone who can reach the webhook can forge one.
    #[arg(long, env = "TRUSTMSG_ALERT_SIGNING_SECRET", hide_env_values = true)]
    pub alert_signing_secret: Option<Secret>,

    /// Alert once for a committed message still not in Kafka this long after
    /// its commit (its sends keep timing out or finding the cluster away,
    /// which counts no attempt). 0 turns this alert off.
    #[arg(long, env = "TRUSTMSG_ALERT_SEND_OVERDUE_AFTER", default_value = "15m", value_parser = duration)]
    pub alert_send_overdue_after: Duration,

    /// Alert once for a message still PREPARED this long after its prepare
    /// (its check-back keeps being put off). 0 turns this alert off.
    #[arg(long, env = "TRUSTMSG_ALERT_VERIFY_OVERDUE_AFTER", default_value = "2h", value_parser = duration)]
    pub alert_verify_overdue_after: Duration,
}

/// `--alert-signing-secret`: `whsec_` and the base64 of a 24- to 64-byte
/// key, as Standard Webhooks libraries expect. Checked here rather than by
/// clap, whose refusals repeat the value: this one never does.
pub(super) fn check_signing_secret(secret: &Secret) -> Result<(), ConfigError> {
    use base64::Engine;
    let prefix = trustmsg_verify_api::webhook::SECRET_PREFIX;
    let refuse = |why: String| {
        Err(ConfigError(format!(
            "--alert-signing-secret (TRUSTMSG_ALERT_SIGNING_SECRET) {why}; \
             make one with: echo whsec_$(openssl rand -base64 32)"
        )))
    };
    let Some(b64) = secret.expose().strip_prefix(prefix) else {
        return refuse(format!("must start with {prefix:?} (whsec_<base64 key>)"));
    };
    let Ok(key) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return refuse(format!("is not {prefix:?} followed by standard base64"));
    };
    if !(24..=64).contains(&key.len()) {
        return refuse(format!(
            "has a key of {} bytes; it must be 24 to 64",
            key.len()
        ));
    }
    Ok(())
}
