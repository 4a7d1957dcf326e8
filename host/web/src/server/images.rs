//! Images on the page: the ones a message uploads (base64 in its JSON
//! body, decoded here and checked by the backend as `latch run --image`
//! checks a file) and the ones the transcript shows, served from the
//! store's artifacts — only those a user message of the session holds.

use super::AppState;
use super::api::{ApiError, ApiResult, blocking, known};
use crate::backend::Upload;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use base64::Engine as _;
use latch_engine_sdk::types::{MediaRef, Part};
use latch_kernel::{EventKind, StoredEvent};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Largest body a message may have: a few images of the providers'
/// per-image limit (5 MiB), base64-encoded.
pub const MAX_MESSAGE_BODY: usize = 48 << 20;

/// One image of a message body.
#[derive(Debug, Deserialize)]
pub struct ImageBody {
    /// The file's name.
    #[serde(default)]
    pub name: String,
    /// Its bytes, base64 (a `data:…;base64,` prefix is allowed).
    pub data: String,
}

/// The refusal of a message body that is not the JSON the route takes.
pub(crate) fn body_refused(e: JsonRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the message is larger than {} MiB: send fewer or smaller images (each at most \
                 5 MiB)",
                MAX_MESSAGE_BODY >> 20
            ),
        );
    }
    ApiError(
        StatusCode::BAD_REQUEST,
        format!(
            "the body must be JSON like {{\"text\": \"...\", \"images\": [{{\"name\": \
             \"shot.png\", \"data\": \"<base64>\"}}]}}: {e}"
        ),
    )
}

/// The uploads of a message body, decoded (not yet checked as images).
pub(crate) fn decode(images: &[ImageBody]) -> Result<Vec<Upload>, ApiError> {
    images
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let name = if i.name.trim().is_empty() {
                format!("image {}", n + 1)
            } else {
                i.name.clone()
            };
            let data = match i.data.split_once(";base64,") {
                Some((head, rest)) if head.starts_with("data:") => rest,
                _ => i.data.as_str(),
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| {
                    ApiError(
                        StatusCode::BAD_REQUEST,
                        format!("{name}: its `data` is not base64 ({e}); send the file's bytes base64-encoded"),
                    )
                })?;
            Ok(Upload { name, bytes })
        })
        .collect()
}

/// The images of each user message of `session` among `events`, by the
/// message's sequence number.
pub fn user_images(events: &[StoredEvent], session: &str) -> BTreeMap<u64, Vec<MediaRef>> {
    events
        .iter()
        .filter(|e| e.session == session)
        .filter_map(|e| match &e.kind {
            EventKind::UserMessage { parts } => {
                let images: Vec<MediaRef> = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Image(m) => Some(m.clone()),
                        _ => None,
                    })
                    .collect();
                (!images.is_empty()).then_some((e.seq, images))
            }
            _ => None,
        })
        .collect()
}

/// The images by user message as the page's state carries them:
/// `{"<seq>": [{sha256, mime_type, byte_len, width, height}]}`.
pub fn images_json(images: &BTreeMap<u64, Vec<MediaRef>>) -> Value {
    let map: serde_json::Map<String, Value> = images
        .iter()
        .map(|(seq, list)| {
            let list: Vec<Value> = list
                .iter()
                .map(|m| {
                    json!({
                        "sha256": m.sha256, "mime_type": m.mime_type, "byte_len": m.byte_len,
                        "width": m.width, "height": m.height,
                    })
                })
                .collect();
            (seq.to_string(), Value::Array(list))
        })
        .collect();
    Value::Object(map)
}

/// `GET /api/sessions/{id}/images/{sha256}`: the bytes of an image a user
/// message of the session holds (404 for any other artifact).
pub async fn show(
    State(state): State<Arc<AppState>>,
    Path((id, sha)): Path<(String, String)>,
) -> ApiResult {
    let st = state.clone();
    let (mime, bytes) = blocking(move || {
        known(&st, &id)?;
        let store = st.backend.store();
        let events = store.all_events(&id)?;
        let sha = sha.to_ascii_lowercase();
        let not_found = || {
            ApiError(
                StatusCode::NOT_FOUND,
                format!("no image {sha} in a user message of session {id}"),
            )
        };
        let media = user_images(&events, &id)
            .into_values()
            .flatten()
            .find(|m| m.sha256 == sha)
            .ok_or_else(not_found)?;
        let bytes = store.artifact_bytes(&sha)?.ok_or_else(not_found)?;
        Ok((media.mime_type, bytes))
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, mime),
            (header::CACHE_CONTROL, "private, max-age=86400".to_string()),
        ],
        bytes,
    )
        .into_response())
}
