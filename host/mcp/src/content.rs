//! A `tools/call` result as Latch keeps it: the text parts in order, images
//! decoded (they become artifacts), resource links and embedded resources
//! written as text, and the error flag.

use base64::Engine as _;
use serde_json::Value;

/// An image a tool returned.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// The decoded bytes.
    pub bytes: Vec<u8>,
    /// Its MIME type.
    pub mime_type: String,
}

/// What one call returned.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutcome {
    /// The text the model reads: every content block in order (an image as
    /// a one-line placeholder).
    pub text: String,
    /// The images, in order.
    pub images: Vec<Image>,
    /// True when the server flagged the result as an error.
    pub is_error: bool,
}

/// Read a `CallToolResult` (as JSON).
pub fn outcome_of(result: &Value) -> CallOutcome {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for block in &blocks {
        let str_of = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        match str_of("type") {
            "text" => parts.push(str_of("text").to_string()),
            "image" => {
                let mime = str_of("mimeType").to_string();
                match base64::engine::general_purpose::STANDARD.decode(str_of("data")) {
                    Ok(bytes) => {
                        parts.push(format!(
                            "[image {}: {mime}, {} bytes]",
                            images.len() + 1,
                            bytes.len()
                        ));
                        images.push(Image {
                            bytes,
                            mime_type: mime,
                        });
                    }
                    Err(e) => {
                        parts.push(format!("[an image ({mime}) that is not valid base64: {e}]"))
                    }
                }
            }
            "audio" => parts.push(format!(
                "[audio ({}) not shown: Latch passes text and images only]",
                str_of("mimeType")
            )),
            "resource_link" => {
                let mut line = format!("[resource link] {}: {}", str_of("name"), str_of("uri"));
                if let Some(m) = block.get("mimeType").and_then(Value::as_str) {
                    line.push_str(&format!(" ({m})"));
                }
                if let Some(d) = block.get("description").and_then(Value::as_str) {
                    line.push_str(&format!(" — {d}"));
                }
                parts.push(line);
            }
            "resource" => {
                let r = block.get("resource").cloned().unwrap_or_default();
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                if let Some(text) = r.get("text").and_then(Value::as_str) {
                    parts.push(format!("[resource {uri}]\n{text}"));
                } else {
                    let mime = r
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("binary");
                    let len = r
                        .get("blob")
                        .and_then(Value::as_str)
                        .map_or(0, |b| b.len() / 4 * 3);
                    parts.push(format!(
                        "[resource {uri}: {mime}, about {len} bytes of binary data, not shown]"
                    ));
                }
            }
            _ => parts.push(block.to_string()),
        }
    }
    if blocks.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    CallOutcome {
        text: parts.join("\n"),
        images,
        is_error: result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_become_text_and_images() {
        let out = outcome_of(&json!({
            "content": [
                {"type": "text", "text": "Echo: hi"},
                {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}}
            ],
            "isError": true
        }));
        assert!(out.is_error);
        assert_eq!(out.images.len(), 1);
        assert_eq!(out.images[0].mime_type, "image/png");
        assert_eq!(out.images[0].bytes, vec![0x89, b'P', b'N', b'G']);
        assert_eq!(
            out.text,
            "Echo: hi\n[image 1: image/png, 4 bytes]\n[resource link] a: file:///a (text/plain)\n[resource mem://x]\ninside"
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_blocks() {
        let out = outcome_of(&json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(out.text, r#"{"sum":3}"#);
        assert!(!out.is_error);
    }
}
