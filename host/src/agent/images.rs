//! Images from the user: a file named with `latch run --image`, `/image PATH`
//! or `@path` in a message becomes an immutable [`MediaRef`] artifact in the
//! user's message. History keeps only the reference, so resume and rotation
//! replay the exact captured bytes, never the file's current contents; the
//! dimensions read from the header price it (see
//! [`latch_engine_sdk::estimate::image_tokens`]).

use super::{Agent, AgentError};
use latch_engine_sdk::types::{MediaRef, Part};
use latch_kernel::StoreError;
use latch_kernel::store::image_info;
use std::path::{Path, PathBuf};

/// Largest image accepted, in bytes: the providers' common per-image limit.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// File endings an `@path` mention is taken as an image for.
pub const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];

/// Why an image could not be attached.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The file could not be read.
    #[error("cannot read image {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The bytes are not a PNG, JPEG, GIF or WebP image.
    #[error("{path} is not a PNG, JPEG, GIF or WebP image; attach one of those")]
    NotAnImage {
        /// The file.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_IMAGE_BYTES`].
    #[error(
        "{path} is {bytes} bytes; images of at most {MAX_IMAGE_BYTES} bytes are accepted, \
         so scale it down first"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// Storing the artifact failed.
    #[error("storing the image: {0}")]
    Store(#[from] StoreError),
}

/// Read `path` and store it as an image artifact of `store`.
pub fn store_image(store: &latch_kernel::Store, path: &Path) -> Result<MediaRef, ImageError> {
    let meta = std::fs::metadata(path).map_err(|source| ImageError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| ImageError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    store_image_bytes(store, &bytes, path)
}

/// Check `bytes` (an image from `what`: a path, or a name for an image an
/// editor sent) and store them as an image artifact of `store`.
pub fn store_image_bytes(
    store: &latch_kernel::Store,
    bytes: &[u8],
    what: &Path,
) -> Result<MediaRef, ImageError> {
    check_image_bytes(bytes, what)?;
    Ok(store.put_artifact(bytes, None)?)
}

/// Refuse `bytes` (from `what`) unless they are a PNG, JPEG, GIF or WebP
/// image of at most [`MAX_IMAGE_BYTES`].
pub fn check_image_bytes(bytes: &[u8], what: &Path) -> Result<(), ImageError> {
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            path: what.to_path_buf(),
            bytes: bytes.len() as u64,
        });
    }
    if image_info(bytes).is_none() {
        return Err(ImageError::NotAnImage {
            path: what.to_path_buf(),
        });
    }
    Ok(())
}

/// The `@path` mentions of `text` that name image files (by their ending),
/// in order, without the `@` and trailing punctuation.
pub fn image_mentions(text: &str) -> Vec<&str> {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix('@'))
        .map(|w| w.trim_end_matches([',', '.', ';', ':', ')', '!', '?']))
        .filter(|w| {
            Path::new(w)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        })
        .collect()
}

impl Agent {
    /// Attach the image at `path` (relative to the workspace unless
    /// absolute) to the next user message; returns its reference.
    pub fn attach_image(&mut self, path: &Path) -> Result<MediaRef, ImageError> {
        let media = store_image(&self.store, &self.workspace.join(path))?;
        if !self.pending_images.iter().any(|m| m.sha256 == media.sha256) {
            self.pending_images.push(media.clone());
        }
        Ok(media)
    }

    /// Attach an image's `bytes` (from `what`, e.g. an editor's prompt) to
    /// the next user message; returns its reference.
    pub fn attach_image_bytes(
        &mut self,
        bytes: &[u8],
        what: &Path,
    ) -> Result<MediaRef, ImageError> {
        let media = store_image_bytes(&self.store, bytes, what)?;
        if !self.pending_images.iter().any(|m| m.sha256 == media.sha256) {
            self.pending_images.push(media.clone());
        }
        Ok(media)
    }

    /// Images attached for the next user message.
    pub fn pending_images(&self) -> &[MediaRef] {
        &self.pending_images
    }

    /// The parts of a user message: its text, the attached images, then the
    /// images its `@path` mentions name. A mention of a missing or bad image
    /// is an error, so nothing is sent without it.
    pub(super) fn user_parts(&mut self, input: &str) -> Result<Vec<Part>, AgentError> {
        let mut images = self.pending_images.clone();
        for mention in image_mentions(input) {
            let media = store_image(&self.store, &self.workspace.join(mention))?;
            if !images.iter().any(|m| m.sha256 == media.sha256) {
                images.push(media);
            }
        }
        self.pending_images.clear();
        let mut parts = vec![Part::Text(input.to_string())];
        parts.extend(images.into_iter().map(Part::Image));
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::image_mentions;

    #[test]
    fn mentions_are_image_paths_only() {
        assert_eq!(
            image_mentions("see @shot.png, and @docs/a.JPG. not @src/main.rs or a@b.png"),
            vec!["shot.png", "docs/a.JPG"]
        );
    }
}
