//! Group commit: writes that arrive while the store is busy go to the
//! database together, one statement and one durable commit for many callers.
//!
//! - `batcher`: the queue, its workers and one reply per job (generic);
//! - `producer_writes`: what the producer API's prepares and decisions write
//!   in one batch ([`producer_writes::Coalescer`]).

pub(crate) mod batcher;
pub(crate) mod producer_writes;
