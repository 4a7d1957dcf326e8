//! Content-addressed artifacts: bytes stored once under their SHA-256, with a
//! MIME type and, for images, pixel dimensions read from the header. History
//! holds only the [`MediaRef`], so replay sees the exact captured bytes.

use super::{Result, Store, StoreError, now_ms};
use crate::event::sha256_hex;
use latch_engine_sdk::types::{EstimatorProfile, MediaRef};
use rusqlite::{OptionalExtension, params};

/// What the header of an image says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// MIME type.
    pub mime: &'static str,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?) as u32)
}
fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u32)
}
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(s[0] as u32 | (s[1] as u32) << 8 | (s[2] as u32) << 16)
}

/// Read the type and pixel dimensions of a PNG, JPEG, GIF or WebP image from
/// its header bytes. `None` for anything else (or a truncated header).
pub fn image_info(b: &[u8]) -> Option<ImageInfo> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") && b.get(12..16) == Some(b"IHDR") {
        return Some(ImageInfo {
            mime: "image/png",
            width: be32(b, 16)?,
            height: be32(b, 20)?,
        });
    }
    if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        return Some(ImageInfo {
            mime: "image/gif",
            width: le16(b, 6)?,
            height: le16(b, 8)?,
        });
    }
    if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        let (width, height) = match b.get(12..16)? {
            b"VP8X" => (le24(b, 24)? + 1, le24(b, 27)? + 1),
            b"VP8L" => {
                let v = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
                ((v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1)
            }
            b"VP8 " => (le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF),
            _ => return None,
        };
        return Some(ImageInfo {
            mime: "image/webp",
            width,
            height,
        });
    }
    if b.starts_with(&[0xFF, 0xD8]) {
        // Walk the JPEG segments to the first start-of-frame marker.
        let mut i = 2;
        while i + 4 <= b.len() {
            if b[i] != 0xFF {
                return None;
            }
            let marker = b[i + 1];
            if marker == 0xFF {
                i += 1;
                continue;
            }
            if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
                i += 2;
                continue;
            }
            let len = be16(b, i + 2)? as usize;
            let sof = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
            if sof {
                return Some(ImageInfo {
                    mime: "image/jpeg",
                    height: be16(b, i + 5)?,
                    width: be16(b, i + 7)?,
                });
            }
            if len < 2 {
                return None;
            }
            i += 2 + len;
        }
    }
    None
}

fn media_ref(row: &rusqlite::Row<'_>) -> rusqlite::Result<MediaRef> {
    Ok(MediaRef {
        sha256: row.get(0)?,
        mime_type: row.get(1)?,
        byte_len: row.get(2)?,
        width: row.get(3)?,
        height: row.get(4)?,
    })
}

impl Store {
    /// Store `bytes` once under their SHA-256 and return the reference.
    ///
    /// The MIME type is sniffed from image headers when the bytes are an image
    /// (and then wins over `mime`); otherwise `mime` is used, defaulting to
    /// `application/octet-stream`.
    pub fn put_artifact(&self, bytes: &[u8], mime: Option<&str>) -> Result<MediaRef> {
        let sha256 = sha256_hex(bytes);
        let info = image_info(bytes);
        let mime_type = match (info, mime) {
            (Some(i), _) => i.mime.to_string(),
            (None, Some(m)) => m.to_string(),
            (None, None) => "application/octet-stream".to_string(),
        };
        let media = MediaRef {
            sha256,
            mime_type,
            byte_len: bytes.len() as u64,
            width: info.map(|i| i.width),
            height: info.map(|i| i.height),
        };
        self.conn().execute(
            "INSERT OR IGNORE INTO artifacts (sha256, mime, byte_len, width, height, bytes, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                media.sha256,
                media.mime_type,
                media.byte_len,
                media.width,
                media.height,
                bytes,
                now_ms()
            ],
        )?;
        // An artifact stored earlier keeps its first metadata.
        Ok(self.artifact(&media.sha256)?.unwrap_or(media))
    }

    /// Metadata of an artifact, or `None` when the store has no such artifact.
    pub fn artifact(&self, sha256: &str) -> Result<Option<MediaRef>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT sha256, mime, byte_len, width, height FROM artifacts WHERE sha256 = ?1",
                [sha256.to_ascii_lowercase()],
                media_ref,
            )
            .optional()?)
    }

    /// A tool's output within the read bounds (see
    /// [`crate::bound_tool_output`]). An output too long to show whole is
    /// stored whole as a text artifact first, and the bounded result names
    /// it so `read_artifact` can page through it; if storing fails, it is
    /// bounded alone.
    pub fn bound_and_store_output(&self, text: &str, profile: EstimatorProfile) -> String {
        if crate::bounds::fits_tool_output(text, profile) {
            return text.to_string();
        }
        match self.put_artifact(text.as_bytes(), Some("text/plain; charset=utf-8")) {
            Ok(media) => crate::bounds::bound_tool_output_stored(text, profile, &media.sha256),
            Err(_) => crate::bounds::bound_tool_output(text, profile),
        }
    }

    /// Metadata of artifact `sha256` when it belongs to `session`'s tree:
    /// an event of the tree (its root session and every descendant) names
    /// it, as a tool output stored whole, an image, or a checkpoint does.
    /// `None` when the store has no such artifact or only other sessions
    /// name it.
    pub fn tree_artifact(&self, session: &str, sha256: &str) -> Result<Option<MediaRef>> {
        let sha256 = sha256.to_ascii_lowercase();
        let Some(media) = self.artifact(&sha256)? else {
            return Ok(None);
        };
        let named: bool = self.conn().query_row(
            "WITH RECURSIVE
                 up(id, parent) AS (
                     SELECT id, parent FROM sessions WHERE id = ?1
                     UNION SELECT s.id, s.parent FROM sessions s JOIN up ON s.id = up.parent),
                 tree(id) AS (
                     SELECT id FROM up WHERE parent IS NULL
                     UNION SELECT s.id FROM sessions s JOIN tree ON s.parent = tree.id)
             SELECT EXISTS (
                 SELECT 1 FROM events
                 WHERE session IN (SELECT id FROM tree) AND instr(body, ?2) > 0)",
            params![session, sha256],
            |r| r.get(0),
        )?;
        Ok(named.then_some(media))
    }

    /// The bytes of an artifact, verified against its hash.
    pub fn artifact_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        let sha256 = sha256.to_ascii_lowercase();
        let bytes: Option<Vec<u8>> = self
            .conn()
            .query_row(
                "SELECT bytes FROM artifacts WHERE sha256 = ?1",
                [&sha256],
                |r| r.get(0),
            )
            .optional()?;
        match bytes {
            Some(b) => {
                let actual = sha256_hex(&b);
                if actual != sha256 {
                    return Err(StoreError::CorruptArtifact { sha256, actual });
                }
                Ok(Some(b))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_png_gif_jpeg_and_webp_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(
            image_info(&png),
            Some(ImageInfo {
                mime: "image/png",
                width: 640,
                height: 480
            })
        );
        let gif = b"GIF89a\x20\x03\x58\x02rest";
        assert_eq!(
            image_info(gif).map(|i| (i.width, i.height)),
            Some((800, 600))
        );
        // SOI, an APP0 segment of length 4, then SOF0 with height 100, width 200.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00,
            0x64, 0x00, 0xC8, 0x03,
        ];
        assert_eq!(
            image_info(&jpeg),
            Some(ImageInfo {
                mime: "image/jpeg",
                width: 200,
                height: 100
            })
        );
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
        webp.extend_from_slice(&[0; 8]);
        webp.extend_from_slice(&[0x1F, 0x00, 0x00, 0x0F, 0x00, 0x00]);
        assert_eq!(
            image_info(&webp).map(|i| (i.width, i.height)),
            Some((32, 16))
        );
        assert_eq!(image_info(b"plain text"), None);
        assert_eq!(image_info(&png[..18]), None, "truncated header");
    }
}
