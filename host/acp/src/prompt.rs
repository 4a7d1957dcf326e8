//! An editor's prompt (content blocks) as the user's message Latch commits:
//! text as written, a linked file as `@path` (the agent reads it with its
//! own tools, so the file is read, observed and bounded like any other),
//! an embedded text resource quoted with where it came from, and images as
//! their bytes (the binary stores each as an immutable artifact of the
//! message). What Latch cannot take from an editor (audio, binary
//! resources; the `initialize` answer says so) is refused with the reason,
//! never dropped.

use crate::wire::{ContentBlock, INVALID_PARAMS, RpcError};
use base64::Engine as _;
use std::path::Path;

/// The user's message an editor's prompt becomes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserPrompt {
    /// The text, with file links as `@path` mentions.
    pub text: String,
    /// The images' bytes, in order (checked and stored by the binary).
    pub images: Vec<Vec<u8>>,
}

/// The text of the user's message for `blocks`, with file links relative
/// to `workspace` where they are inside it.
pub fn user_text(blocks: &[ContentBlock], workspace: &Path) -> Result<String, RpcError> {
    Ok(user_prompt(blocks, workspace)?.text)
}

/// The user's message for `blocks`: its text (file links relative to
/// `workspace` where they are inside it) and its images.
pub fn user_prompt(blocks: &[ContentBlock], workspace: &Path) -> Result<UserPrompt, RpcError> {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::ResourceLink { uri, .. } => {
                separate(&mut text);
                text.push('@');
                text.push_str(&link_target(uri, workspace));
            }
            ContentBlock::Resource { resource } => {
                let Some(body) = &resource.text else {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        format!(
                            "the prompt embeds a binary resource ({}); Latch takes text \
                             resources and links to files, so link the file instead",
                            resource.uri
                        ),
                    ));
                };
                separate(&mut text);
                let from = link_target(&resource.uri, workspace);
                let fence = if body.contains("```") { "~~~~" } else { "```" };
                text.push_str(&format!("Contents of {from}:\n{fence}\n{body}"));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(fence);
                text.push('\n');
            }
            ContentBlock::Image { data, mime_type } => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| {
                        RpcError::new(
                            INVALID_PARAMS,
                            format!("the prompt's {mime_type} image is not valid base64: {e}"),
                        )
                    })?;
                images.push(bytes);
            }
            ContentBlock::Audio { .. } => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "the prompt carries audio, which Latch does not take (its `initialize` \
                     answer says promptCapabilities.audio = false)",
                ));
            }
        }
    }
    if text.trim().is_empty() {
        return Err(RpcError::new(
            INVALID_PARAMS,
            "the prompt has no text: send at least one text block (with the images, if any)",
        ));
    }
    Ok(UserPrompt { text, images })
}

/// A space before a mention unless the text already ends with whitespace.
fn separate(text: &mut String) {
    if !text.is_empty() && !text.ends_with(char::is_whitespace) {
        text.push(' ');
    }
}

/// A `file://` URI as a path relative to `workspace` (absolute when
/// outside it); any other URI as written.
fn link_target(uri: &str, workspace: &Path) -> String {
    let Some(path) = uri.strip_prefix("file://") else {
        return uri.to_string();
    };
    let path = percent_decode(path);
    match Path::new(&path).strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .map_err(|_| ())
                .and_then(|h| u8::from_str_radix(h, 16).map_err(|_| ()))
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::EmbeddedResource;

    #[test]
    fn links_become_mentions_relative_to_the_workspace() {
        let blocks = vec![
            ContentBlock::text("fix"),
            ContentBlock::ResourceLink {
                uri: "file:///repo/src/my%20lib.rs".into(),
                name: "my lib.rs".into(),
            },
            ContentBlock::text(" please"),
        ];
        assert_eq!(
            user_text(&blocks, Path::new("/repo")).unwrap(),
            "fix @src/my lib.rs please"
        );
    }

    #[test]
    fn embedded_text_is_quoted_and_images_are_decoded() {
        let blocks = vec![
            ContentBlock::text("explain this"),
            ContentBlock::Resource {
                resource: EmbeddedResource {
                    uri: "file:///repo/a.txt".into(),
                    text: Some("one\ntwo".into()),
                    blob: None,
                },
            },
        ];
        let text = user_text(&blocks, Path::new("/repo")).unwrap();
        assert_eq!(
            text,
            "explain this Contents of a.txt:\n```\none\ntwo\n```\n"
        );
        let image = vec![
            ContentBlock::text("what is this?"),
            ContentBlock::Image {
                data: "iVBORw0K".into(),
                mime_type: "image/png".into(),
            },
        ];
        let prompt = user_prompt(&image, Path::new("/repo")).unwrap();
        assert_eq!(prompt.images, vec![b"\x89PNG\r\n".to_vec()]);
        let bad = vec![ContentBlock::Image {
            data: "not base64!".into(),
            mime_type: "image/png".into(),
        }];
        let err = user_prompt(&bad, Path::new("/repo")).unwrap_err();
        assert!(err.message.contains("base64"), "{err}");
        assert!(user_text(&[ContentBlock::text("  ")], Path::new("/r")).is_err());
    }
}
