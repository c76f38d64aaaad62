//! The OpenAPI document, generated from the handlers (served at `/openapi.json`,
//! committed as `docs/openapi.json`; a test keeps the two equal).

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The trustmsg HTTP API.
#[derive(OpenApi)]
#[openapi(
    info(title = "trustmsg", description = "Reliable messages to Kafka: prepare, commit or rollback, check-back."),
    paths(
        crate::api::messages::prepare,
        crate::api::messages::commit,
        crate::api::messages::rollback,
        crate::api::messages::get_message,
        crate::api::producers::put_producer,
        crate::api::producers::get_producer,
        crate::api::producers::delete_producer,
        crate::api::producers::rotate_token,
        crate::api::producers::list_producers,
        crate::api::admin::read::list_messages,
        crate::api::admin::read::get_message,
        crate::api::admin::read::summary,
        crate::api::admin::act::resolve,
        crate::api::admin::act::reverify,
        crate::api::admin::act::redeliver,
        crate::api::admin::act::bulk_reverify,
        crate::api::admin::act::bulk_redeliver,
    ),
    components(schemas(
        trustmsg_verify_api::CheckRequest,
        trustmsg_verify_api::CheckResponse,
    )),
    modifiers(&Security),
    tags((name = "messages", description = "Producer API"), (name = "producers", description = "Producer registry (admin token)"), (name = "admin", description = "What operators read (admin token)"))
)]
pub struct ApiDoc;

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "admin",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}
