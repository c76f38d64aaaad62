//! The operator console's pages come with the headers that keep a hostile
//! payload or a hostile site from using them: a Content-Security-Policy
//! (scripts and styles from this origin only, no inline script, no framing),
//! `X-Frame-Options: DENY` for browsers that predate `frame-ancestors`, and
//! `nosniff` so no asset is run as something it is not.

use std::collections::HashMap;

use trustmsg_tests::TestApp;

/// The policy's directives: name → its sources.
fn directives(csp: &str) -> HashMap<String, Vec<String>> {
    csp.split(';')
        .filter_map(|d| {
            let mut words = d.split_whitespace();
            let name = words.next()?.to_ascii_lowercase();
            Some((name, words.map(str::to_string).collect()))
        })
        .collect()
}

#[tokio::test]
async fn console_pages_carry_a_strict_csp_no_framing_and_nosniff() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    for (path, content_type) in [
        ("/console", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/app.css", "text/css"),
    ] {
        let res = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let header = |name: &str| {
            res.headers()
                .get(name)
                .unwrap_or_else(|| panic!("{path}: no {name} header"))
                .to_str()
                .unwrap()
                .to_string()
        };
        assert!(
            header("content-type").starts_with(content_type),
            "{path}: {}",
            header("content-type")
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");

        let csp = header("content-security-policy");
        let d = directives(&csp);
        let sources = |name: &str| d.get(name).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(sources("default-src"), ["'none'"], "{path}: {csp}");
        assert_eq!(sources("script-src"), ["'self'"], "{path}: {csp}");
        assert_eq!(sources("style-src"), ["'self'"], "{path}: {csp}");
        assert_eq!(sources("connect-src"), ["'self'"], "{path}: {csp}");
        assert_eq!(sources("frame-ancestors"), ["'none'"], "{path}: {csp}");
        assert_eq!(sources("form-action"), ["'none'"], "{path}: {csp}");
        assert_eq!(sources("base-uri"), ["'none'"], "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{path}: {csp}"
        );
    }
    app.finish().await;
}
