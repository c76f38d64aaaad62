//! `GET /v1/admin/storage`: the large tables' rows and bytes and the
//! oldest message's age, as `/metrics` shows them
//! (`crate::workers::table_sizes`), for the console's storage panel.
//! Nothing here changes anything.

use std::time::Duration;

use axum::extract::State;
use trustmsg_verify_api::admin::{PartitionView, StorageView, TableSizeView};
use trustmsg_verify_api::ErrorBody;

use super::read::SharedView;
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::store::Storage;
use crate::workers::table_sizes::oldest_age_seconds;

/// How long one reading is served: the catalog changes slowly, and
/// MySQL's `information_schema` is not free.
const STORAGE_MAX_AGE: Duration = Duration::from_secs(10);

/// The storage view, shared for [`STORAGE_MAX_AGE`].
pub(crate) type StorageCache = SharedView<StorageView>;

impl Default for StorageCache {
    fn default() -> Self {
        Self::new(STORAGE_MAX_AGE)
    }
}

fn view(s: Storage, retention: Option<Duration>) -> StorageView {
    StorageView {
        oldest_message_age_secs: oldest_age_seconds(&s),
        tables: s
            .tables
            .into_iter()
            .map(|t| TableSizeView {
                table: t.table,
                rows: t.rows,
                bytes: t.bytes,
            })
            .collect(),
        oldest_message_at: s.oldest_message_at,
        oldest_partition: s.oldest_partition.map(|p| PartitionView {
            name: format!("p{}", p.period),
            from: p.from,
            to: p.to.unwrap_or(s.at),
        }),
        retention_secs: retention.map(|r| r.as_secs()),
        at: s.at,
    }
}

/// The large tables' sizes, read at most every 10 s.
#[utoipa::path(get, path = "/v1/admin/storage", tag = "admin",
    responses(
        (status = 200, description = "The large tables' rows (the database's estimate) and bytes, and the oldest message's age", body = StorageView),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn storage(
    State(state): State<AppState>,
) -> Result<axum::Json<StorageView>, ApiError> {
    let (store, retention) = (state.store.clone(), state.retention);
    let storage = state
        .storage
        .get(async move { Ok(view(store.storage().await?, retention)) })
        .await?;
    Ok(axum::Json(StorageView::clone(&storage)))
}
