//! What the workers hand each other, below all of them, so that `api`,
//! `verifier` and `forwarder` import none of each other and meet only in
//! [`crate::startup`]:
//!
//! - [`commits`]: a commit made by the API or the verifier, told to whoever
//!   sends it (the forwarder's fast path, or nobody);
//! - `record`: the size of the Kafka record a message becomes, which the
//!   API checks at prepare against the limit the forwarder's producer sets.

pub mod commits;
pub(crate) mod record;

pub use commits::{CommitListener, NoForwarder};
