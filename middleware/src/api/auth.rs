//! Authentication: producer bearer tokens, consumer-group tokens (the
//! consumption ledger: `tc_<base64url(group)>.<secret>`, hashed and compared
//! the same way, valid only for begin and finish of its own group) and the
//! admin token.
//!
//! A producer token is `tm_<base64url(biz_id)>.<secret>`: the biz_id it is bound
//! to is readable from the token, so a request for another biz_id is told
//! apart (403) from a bad token (401) without a reverse index. Only the SHA-256
//! of a token is stored, and comparisons are constant-time. The admin token may
//! act on any biz_id. With `--insecure-no-auth` nothing is checked.
//!
//! The token is checked from the request's head, by [`authenticate`] and
//! [`admin_only`] layered on the routes, before any handler reads the body:
//! a caller without a valid token costs no body buffering or parsing, however
//! large a body it announces. Which biz_id a producer acts for is in the
//! body, so that check ([`Authenticated::may_act_for`]) comes after.

use axum::http::header::AUTHORIZATION;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::AppState;
use crate::intake::validate::{self, MAX_BIZ_ID};
use crate::store::{ConsumerGroup, Producer};

/// The caller, as far as the credentials tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Caller {
    /// The admin token (or any caller in insecure mode).
    Admin,
    /// A producer token, bound to this biz_id (checked against the registry later).
    Producer {
        /// The biz_id the token names.
        biz_id: String,
        /// The token as sent.
        token: String,
    },
}

fn bearer(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized("missing `Authorization: Bearer <token>` header".into())
    })?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::unauthorized("the Authorization header must be `Bearer <token>`".into())
        })
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// SHA-256 of a token, as stored.
pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A fresh producer token for `biz_id`.
pub(crate) fn new_producer_token(biz_id: &str) -> String {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    format!(
        "tm_{}.{}",
        URL_SAFE_NO_PAD.encode(biz_id),
        URL_SAFE_NO_PAD.encode(secret)
    )
}

/// The biz_id a producer token names, if it is well-formed and a valid biz_id.
///
/// The biz_id is the caller's to choose, and it is looked up (and a miss
/// cached) next: one that could never be registered is refused here, so a
/// made-up token costs neither a query nor a cache entry.
fn token_biz_id(token: &str) -> Option<String> {
    let rest = token.strip_prefix("tm_")?;
    let (biz, _) = rest.split_once('.')?;
    // Base64 of the longest biz_id; anything longer is not worth decoding.
    if biz.len() > MAX_BIZ_ID.div_ceil(3) * 4 {
        return None;
    }
    let biz_id = String::from_utf8(URL_SAFE_NO_PAD.decode(biz).ok()?).ok()?;
    validate::biz_id(&biz_id).ok()?;
    Some(biz_id)
}

impl AppState {
    /// Identifies the caller from its bearer token (any well-formed one).
    fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        if self.auth.insecure {
            return Ok(Caller::Admin);
        }
        let token = bearer(headers)?;
        if let Some(admin) = &self.auth.admin_token {
            if ct_eq(token.as_bytes(), admin.expose().as_bytes()) {
                return Ok(Caller::Admin);
            }
        }
        if token_group(token).is_some() {
            // Told apart from a bad token, as a producer token is on the
            // admin API: the right kind of credential is what is missing.
            return Err(ApiError::Forbidden(
                "a consumer group's token may only begin and finish consumptions \
                 (/v1/consumptions/…)"
                    .into(),
            ));
        }
        let biz_id =
            token_biz_id(token).ok_or_else(|| ApiError::unauthorized("unknown token".into()))?;
        Ok(Caller::Producer {
            biz_id,
            token: token.to_string(),
        })
    }

    /// Requires the admin token.
    pub(crate) fn require_admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.caller(headers)? {
            Caller::Admin => Ok(()),
            Caller::Producer { .. } => Err(ApiError::Forbidden(
                "this endpoint needs the admin token, not a producer token".into(),
            )),
        }
    }

    /// Checks the token: the admin token, or a producer token that matches
    /// its registration (401 otherwise).
    async fn authenticated(&self, headers: &HeaderMap) -> Result<Authenticated, ApiError> {
        let (token_biz, token) = match self.caller(headers)? {
            Caller::Admin => return Ok(Authenticated::Admin),
            Caller::Producer { biz_id, token } => (biz_id, token),
        };
        self.producer(&token_biz)
            .await?
            .filter(|p| ct_eq(&hash_token(&token), &p.token_hash))
            .map(Authenticated::Producer)
            .ok_or_else(|| ApiError::unauthorized("unknown or revoked token".into()))
    }

    /// The (cached) registration of `biz_id`.
    pub(crate) async fn producer(&self, biz_id: &str) -> Result<Option<Arc<Producer>>, ApiError> {
        Ok(self.registry.get(biz_id).await?)
    }
}

/// A fresh consumer-group token for `group`: `tc_<base64url(group)>.<secret>`,
/// readable like a producer token, so a begin for another group is told
/// apart (403) from a bad token (401).
pub(crate) fn new_group_token(group: &str) -> String {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    format!(
        "tc_{}.{}",
        URL_SAFE_NO_PAD.encode(group),
        URL_SAFE_NO_PAD.encode(secret)
    )
}

/// The group a consumer-group token names, if it is well-formed and a valid
/// group name (so a made-up token costs neither a query nor a cache entry).
fn token_group(token: &str) -> Option<String> {
    let rest = token.strip_prefix("tc_")?;
    let (group, _) = rest.split_once('.')?;
    if group.len() > MAX_BIZ_ID.div_ceil(3) * 4 {
        return None;
    }
    let group = String::from_utf8(URL_SAFE_NO_PAD.decode(group).ok()?).ok()?;
    validate::group(&group).ok()?;
    Some(group)
}

/// Who a consumption-ledger request's token proved to be.
#[derive(Debug, Clone)]
pub(crate) enum Consumer {
    /// The admin token (or any caller in insecure mode): may act for any group.
    Admin,
    /// A consumer group's token, with the registration it was checked against.
    Group(Arc<ConsumerGroup>),
}

impl AppState {
    /// Checks a consumption-ledger request's token: the admin token, or a
    /// group token that matches its registration (401 otherwise).
    async fn consumer(&self, headers: &HeaderMap) -> Result<Consumer, ApiError> {
        if self.auth.insecure {
            return Ok(Consumer::Admin);
        }
        let token = bearer(headers)?;
        if let Some(admin) = &self.auth.admin_token {
            if ct_eq(token.as_bytes(), admin.expose().as_bytes()) {
                return Ok(Consumer::Admin);
            }
        }
        let unknown = || ApiError::unauthorized("unknown or revoked token".into());
        let name = token_group(token).ok_or_else(|| {
            ApiError::unauthorized(
                "unknown token: begin and finish take a consumer group's token (tc_…) or the                  admin token"
                    .into(),
            )
        })?;
        self.groups
            .get(&name)
            .await?
            .filter(|g| ct_eq(&hash_token(token), &g.token_hash))
            .map(Consumer::Group)
            .ok_or_else(unknown)
    }
}

impl Consumer {
    /// The registration of `group` if this caller may act for it: the admin
    /// for any registered group (404 for an unknown one), a group's token for
    /// its own only (403 for another's).
    pub(crate) async fn group(
        &self,
        state: &AppState,
        group: &str,
    ) -> Result<Arc<ConsumerGroup>, ApiError> {
        match self {
            Self::Group(g) if g.name == group => Ok(g.clone()),
            Self::Group(g) => Err(ApiError::Forbidden(format!(
                "this token belongs to consumer group {:?} and cannot act for {group:?}",
                g.name
            ))),
            Self::Admin => state.groups.get(group).await?.ok_or_else(|| {
                ApiError::not_found(
                    "consumer_group_not_found",
                    format!("no consumer group {group:?} is registered"),
                )
            }),
        }
    }
}

/// Middleware for the consumption ledger's begin and finish: refuses a
/// request without a valid token (401) from its head alone, and hands the
/// handlers a [`Consumer`].
pub(crate) async fn authenticate_consumer(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    match state.consumer(req.headers()).await {
        Ok(who) => {
            req.extensions_mut().insert(who);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Who a request's token proved to be; [`authenticate`] puts it in the
/// request's extensions for the handlers.
#[derive(Debug, Clone)]
pub(crate) enum Authenticated {
    /// The admin token (or any caller in insecure mode): may act for any biz_id.
    Admin,
    /// A producer token, with the registration it was checked against.
    Producer(Arc<Producer>),
}

impl Authenticated {
    /// Allows acting for `biz_id` to the admin and to that biz_id's own
    /// producer (403 for another's). A producer yields its registration, so
    /// handlers need not look it up again; the admin yields None.
    pub(crate) fn may_act_for(&self, biz_id: &str) -> Result<Option<Arc<Producer>>, ApiError> {
        match self {
            Self::Admin => Ok(None),
            Self::Producer(p) if p.biz_id == biz_id => Ok(Some(p.clone())),
            Self::Producer(p) => Err(ApiError::Forbidden(format!(
                "this token belongs to biz_id {:?} and cannot act for {biz_id:?}",
                p.biz_id
            ))),
        }
    }
}

/// Middleware for the producer API: refuses a request without a valid token
/// (401) from its head alone, and hands the handlers an [`Authenticated`].
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    match state.authenticated(req.headers()).await {
        Ok(who) => {
            req.extensions_mut().insert(who);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Middleware for the admin API: refuses anything but the admin token (401,
/// or 403 for a producer token) from the request's head alone.
pub(crate) async fn admin_only(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    match state.require_admin(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_names_its_biz_id_and_is_unique() {
        let a = new_producer_token("orders.v1");
        let b = new_producer_token("orders.v1");
        assert_ne!(a, b);
        assert_eq!(token_biz_id(&a).as_deref(), Some("orders.v1"));
        assert_eq!(token_biz_id("tm_!!.x"), None);
        assert_eq!(token_biz_id("garbage"), None);
    }

    #[test]
    fn a_group_token_names_its_group_and_only_a_valid_one() {
        let a = new_group_token("billing");
        assert_ne!(a, new_group_token("billing"));
        assert_eq!(token_group(&a).as_deref(), Some("billing"));
        // A producer token is not a group token, even for the same name.
        assert_eq!(token_group(&new_producer_token("billing")), None);
        let bad = format!("tc_{}.x", URL_SAFE_NO_PAD.encode("bad group"));
        assert_eq!(token_group(&bad), None);
    }

    #[test]
    fn a_token_naming_an_invalid_biz_id_names_none() {
        let longest = "b".repeat(MAX_BIZ_ID);
        assert_eq!(
            token_biz_id(&new_producer_token(&longest)),
            Some(longest.clone())
        );
        for bad in ["", "bad biz", "a/b", &"b".repeat(MAX_BIZ_ID + 1)] {
            let token = format!("tm_{}.x", URL_SAFE_NO_PAD.encode(bad));
            assert_eq!(token_biz_id(&token), None, "{bad:?}");
        }
    }
}
