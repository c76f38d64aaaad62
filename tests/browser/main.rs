//! The operator console in a real headless Chromium, against the real
//! service on a real database (see `harness` for the browser).

mod console;
mod harness;
