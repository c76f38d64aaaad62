//! What trustmsg tells about itself while it runs.
//!
//! - [`trace`]: W3C trace context carried from prepare to check-back and
//!   Kafka, and trustmsg's own spans exported over OTLP;
//! - `prometheus`: the process-wide recorder behind `/metrics`.

pub(crate) mod prometheus;
pub mod trace;
