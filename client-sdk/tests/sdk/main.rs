//! Integration tests of the producer SDK: the client against the real trustmsg
//! service and against a local server that fails on purpose, the check-back
//! router over real HTTP, and the barrier on the real MariaDB/MySQL server.
//! The service, the databases and the local servers come from the test kit
//! (`trustmsg-tests`).

mod barrier;
mod check_router;
mod client;
mod retry;
mod transaction;
