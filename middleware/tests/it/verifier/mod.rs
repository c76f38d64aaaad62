//! Verifier tests: the real service (or a stepped verifier) over a fresh
//! MariaDB database, with check endpoints that are real local HTTP servers
//! (the kit's scripted `CheckServer`). Nothing here dials outside 127.0.0.0/8.

mod support;

mod concurrency;
mod decisions;
mod garbage;
mod quarantine;
mod registry;
mod ssrf;
mod ssrf_corpus;
mod timing;
