//! A real browser for the console tests: Debian's `chromium`, headless,
//! driven over WebDriver by `chromedriver` (both from Debian's packages;
//! `.ci/run` installs them when missing), one private driver process and
//! one fresh profile per test.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use trustmsg_tests::process::free_port;

/// How long a page may take to show what a test waits for.
const PAGE: Duration = Duration::from_secs(15);

fn find(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{program} is not installed: the console tests need Debian's `chromium` and \
                 `chromium-driver` (apt-get install chromium chromium-driver; .ci/run does)"
            )
        })
}

/// A headless Chromium session; [`Browser::finish`] ends it.
pub(crate) struct Browser {
    pub(crate) client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium through it,
    /// with a window of `width` × `height`.
    pub(crate) async fn start(width: u32, height: u32) -> Self {
        let port = free_port();
        let driver = Command::new(find("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({
            "goog:chromeOptions": {
                "binary": find("chromium"),
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }
        });
        let caps = caps.as_object().unwrap().clone();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) => {
                    assert!(Instant::now() < deadline, "no WebDriver session: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        Self {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Opens `url`.
    pub(crate) async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Runs `script` in the page; what it returns.
    pub(crate) async fn execute(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Waits for the element `css` to appear and returns it.
    pub(crate) async fn element(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(PAGE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} did not appear: {e}"))
    }

    /// Waits until the page's text contains `text`; returns the whole text.
    pub(crate) async fn until_text(&self, text: &str) -> String {
        let deadline = Instant::now() + PAGE;
        loop {
            let body = self.page_text().await;
            if body.contains(text) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "the page never showed {text:?}; it shows:\n{body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The text of the whole page.
    pub(crate) async fn page_text(&self) -> String {
        match self.client.find(Locator::Css("body")).await {
            Ok(body) => body.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Types `text` into the field `css` (cleared first).
    pub(crate) async fn fill(&self, css: &str, text: &str) {
        let field = self.element(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Clicks the element `css` once it is there.
    pub(crate) async fn click(&self, css: &str) {
        self.element(css).await.click().await.unwrap();
    }

    /// Saves a PNG of the window to `path`.
    pub(crate) async fn screenshot(&self, path: &std::path::Path) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Ends the browser session and the driver.
    pub(crate) async fn finish(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
