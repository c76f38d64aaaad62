//! The OpenAPI document, generated from the handlers (served at `/openapi.json`,
//! committed as `docs/openapi.json`; a test keeps the two equal).

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, ObjectBuilder, SchemaType, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, Schema};
use utoipa::{Modify, OpenApi};

use super::error::RETRY_AFTER_SECS;

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
        crate::api::producers::reveal_signing_secret,
        crate::api::producers::list_producers,
        crate::api::consumer_groups::put_group,
        crate::api::consumer_groups::get_group,
        crate::api::consumer_groups::delete_group,
        crate::api::consumer_groups::rotate_token,
        crate::api::consumer_groups::list_groups,
        crate::api::consumptions::begin,
        crate::api::consumptions::finish,
        crate::api::admin::read::list_messages,
        crate::api::admin::read::get_message,
        crate::api::admin::read::summary,
        crate::api::admin::read::consumer_groups,
        crate::api::admin::flow::flow,
        crate::api::admin::storage::storage,
        crate::api::admin::alerts::list_alerts,
        crate::api::admin::alerts::list_waiting,
        crate::api::admin::act::resolve,
        crate::api::admin::act::reverify,
        crate::api::admin::act::redeliver,
        crate::api::admin::act::skip,
        crate::api::admin::act::send_now,
        crate::api::admin::act::bulk_reverify,
        crate::api::admin::act::bulk_redeliver,
        crate::api::admin::outbox::list_sources,
        crate::api::admin::outbox::list_rows,
        crate::api::admin::outbox::retry,
        crate::api::admin::outbox::give_up,
    ),
    components(schemas(
        trustmsg_verify_api::CheckRequest,
        trustmsg_verify_api::CheckResponse,
    )),
    modifiers(&Security, &CommonAnswers, &CrossFieldRules),
    tags((name = "messages", description = "Producer API"), (name = "producers", description = "Producer registry (admin token)"), (name = "consumers", description = "The consumption ledger: consumer groups (admin token), begin and finish (a group's token)"), (name = "admin", description = "What operators read (admin token)"))
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
        components.add_security_scheme(
            "consumer_group",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The answers every operation of a kind can give, whatever its handler
/// does, added where the operation does not describe them itself: those of
/// the layers in front of the handlers (tokens, load shedding, the request
/// deadline) and of reading a JSON body. Any operation added later gets
/// them too.
struct CommonAnswers;

fn error_answer(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

impl Modify for CommonAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let retry_after = HeaderBuilder::new()
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            ))
            .description(Some(format!(
                "Seconds to wait before retrying ({RETRY_AFTER_SECS})"
            )))
            .build();
        let unavailable = {
            let mut r = error_answer(
                "Try again later; nothing is wrong with the request: too many requests in \
                 flight (`overloaded`), the message store unavailable (`store_unavailable`) or \
                 no answer within the request deadline (`request_timeout`; a write may or may \
                 not have taken effect, and prepare, commit and rollback are safe to repeat)",
            );
            r.headers
                .insert("Retry-After".into(), retry_after.clone().into());
            r
        };
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ]
            .into_iter()
            .flatten()
            {
                let admin = op
                    .security
                    .iter()
                    .flatten()
                    .any(|s| serde_json::to_value(s).is_ok_and(|v| v.get("admin").is_some()));
                add(op, "401", || {
                    error_answer("No `Authorization: Bearer <token>` header, or a token that is unknown or revoked")
                });
                add(op, "403", || {
                    error_answer(if admin {
                        "Not the admin token (a producer token)"
                    } else {
                        "A producer token of another biz_id"
                    })
                });
                let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
                let has_body = op.request_body.is_some();
                if has_params || has_body {
                    add(op, "400", || {
                        error_answer("A parameter or the body breaks a rule of this document (the message says which)")
                    });
                }
                if has_body {
                    add(op, "413", || {
                        error_answer("The body is over this endpoint's size limit")
                    });
                    add(op, "415", || {
                        error_answer("The body is not sent as `Content-Type: application/json`")
                    });
                }
                add(op, "503", || unavailable.clone());
                // Every 503 carries Retry-After, one an operation describes itself too.
                if let Some(RefOr::T(own)) = op.responses.responses.get_mut("503") {
                    own.headers
                        .entry("Retry-After".into())
                        .or_insert_with(|| retry_after.clone().into());
                }
            }
        }
    }
}

/// Adds the answer for `status` unless the operation describes its own.
fn add(op: &mut Operation, status: &str, answer: impl FnOnce() -> Response) {
    op.responses
        .responses
        .entry(status.to_string())
        .or_insert_with(|| RefOr::T(answer()));
}

/// Standard base64 with padding, as a prepare's `payload` with
/// `payload_encoding: base64` must be: whole groups of four, canonical
/// padding, no stray bits in the last symbol (what the service's decoder
/// accepts, no more and no less).
pub(crate) const BASE64_PATTERN: &str =
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// Rules that tie two fields together, which a field's own schema cannot
/// state: a prepare's payload must be base64 when its encoding says so, and
/// it gives at most one delivery time; a consumption's finish carries an
/// `error` only when it failed.
struct CrossFieldRules;

impl Modify for CrossFieldRules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        if let Some(finish) = components.schemas.remove("FinishRequest") {
            let error_only_when_failed = AnyOfBuilder::new()
                .item(
                    ObjectBuilder::new().property(
                        "ok",
                        ObjectBuilder::new()
                            .schema_type(Type::Boolean)
                            .enum_values(Some([false])),
                    ),
                )
                .item(
                    ObjectBuilder::new()
                        .property("error", ObjectBuilder::new().schema_type(Type::Null)),
                )
                .description(Some("`error` only with `ok: false`."));
            let rules = AllOfBuilder::new()
                .item(finish)
                .item(error_only_when_failed)
                .build();
            components
                .schemas
                .insert("FinishRequest".into(), RefOr::T(Schema::AllOf(rules)));
        }
        let Some(prepare) = components.schemas.remove("PrepareRequest") else {
            return;
        };
        let text = ObjectBuilder::new().property(
            "payload_encoding",
            ObjectBuilder::new()
                .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
                .enum_values(Some([serde_json::json!("utf8"), serde_json::Value::Null])),
        );
        let base64 = ObjectBuilder::new().property(
            "payload",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(BASE64_PATTERN)),
        );
        let encoded = AnyOfBuilder::new()
            .item(text)
            .item(base64)
            .description(Some(
                "With `payload_encoding: base64`, `payload` is standard base64 with padding.",
            ));
        // Null or absent counts as not given.
        let not_given = |field: &str| {
            ObjectBuilder::new().property(field, ObjectBuilder::new().schema_type(Type::Null))
        };
        let one_delivery_time = AnyOfBuilder::new()
            .item(not_given("deliver_at"))
            .item(not_given("deliver_after_ms"))
            .description(Some(
                "At most one of `deliver_at` and `deliver_after_ms` (a time, or a delay).",
            ));
        let rules = AllOfBuilder::new()
            .item(prepare)
            .item(encoded)
            .item(one_delivery_time)
            .build();
        components
            .schemas
            .insert("PrepareRequest".into(), RefOr::T(Schema::AllOf(rules)));
    }
}
