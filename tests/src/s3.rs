//! A real S3-compatible server for a test: `scripts/s3-server` (moto's
//! server mode, in memory) on a free port of 127.0.0.1, in a directory of
//! its own; stopped (that process only, by its pid) when dropped, or once
//! the test process is gone.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A server started by `scripts/s3-server`.
pub struct S3Server {
    own: tempfile::TempDir,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
}

/// The script, from the workspace's `scripts/`.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/s3-server")
}

fn run(args: &[&str]) -> String {
    let out = Command::new(script())
        .args(args)
        .env("TRUSTMSG_S3_OWNER_PID", std::process::id().to_string())
        .output()
        .unwrap_or_else(|e| panic!("scripts/s3-server {args:?}: {e}"));
    assert!(
        out.status.success(),
        "scripts/s3-server {args:?} failed ({}); it needs python3 with venv and, the first \
         time, pip:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

impl S3Server {
    /// A fresh server with no buckets.
    pub fn start() -> Self {
        let own = tempfile::tempdir().expect("a temporary directory");
        let endpoint = run(&["start", &own.path().display().to_string()])
            .trim()
            .to_string();
        Self { own, endpoint }
    }

    /// Creates `bucket` (moto takes an unsigned request).
    pub async fn create_bucket(&self, bucket: &str) {
        let res = crate::http::http_client()
            .put(format!("{}/{bucket}", self.endpoint))
            .send()
            .await
            .expect("create the bucket");
        assert!(res.status().is_success(), "create bucket: {}", res.status());
    }

    /// The environment an S3 client (trustmsg's `--archive s3://…`, the
    /// AWS CLI) reads to reach this server, as (name, value) pairs.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "trustmsg-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "trustmsg-test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        run(&["stop", &self.own.path().display().to_string()]);
    }
}
