//! End-to-end tests for trustmsg live under `tests/`; this crate has no library code.
