//! `docs/openapi.json` must be exactly what the code serves at `/openapi.json`.
//! Regenerate with `UPDATE_OPENAPI=1 cargo test -p trustmsg --test it openapi`.

use utoipa::OpenApi;

#[test]
fn committed_openapi_document_matches_the_code() {
    let generated = trustmsg::api::openapi::ApiDoc::openapi()
        .to_pretty_json()
        .expect("serialisable");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, format!("{generated}\n")).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        committed.trim_end(),
        generated,
        "docs/openapi.json is stale: run UPDATE_OPENAPI=1 cargo test -p trustmsg --test it openapi"
    );
}
