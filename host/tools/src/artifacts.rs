//! `read_artifact`: a stored artifact of this session's tree (a tool output
//! too long to show whole names its artifact), read with line numbers page
//! by page through the same [`Pager`] and bounds as `read_file`.

use crate::args::Args;
use crate::error::ToolError;
use crate::page::{Pager, page_lines};
use crate::{Reply, ToolContext};

/// Bytes inspected for NUL to tell binary artifacts from text.
const SNIFF_BYTES: usize = 8192;

/// `read_artifact {id, offset?, limit?}`.
pub(crate) fn read_artifact(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let raw = args.str("id").trim();
    let id = raw
        .strip_prefix("artifact")
        .unwrap_or(raw)
        .trim()
        .to_ascii_lowercase();
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(args.invalid(format!(
            "`id` must be an artifact's SHA-256 (64 hex digits) as a tool result names it \
             (`artifact <sha256>`), not `{raw}`"
        )));
    }
    if args.opt_u64("limit") == Some(0) {
        return Err(args.invalid("`limit` must be at least 1"));
    }
    let unknown = || {
        ToolError::Failed(format!(
            "artifact `{id}` is not an artifact of this session: read_artifact reads what this \
             session and its agents stored (a tool output too long to show whole names its \
             artifact); check the id against that result"
        ))
    };
    let Some(media) = ctx.store().tree_artifact(ctx.session(), &id)? else {
        return Err(unknown());
    };
    let Some(bytes) = ctx.store().artifact_bytes(&id)? else {
        return Err(unknown());
    };
    let name = format!("artifact {id}");
    let size = bytes.len() as u64;
    if media.mime_type.starts_with("image/") || bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0) {
        return Ok(Reply::ok(format!(
            "[{name} is {} ({size} bytes); its contents are not shown]",
            media.mime_type
        )));
    }
    let mut pager = Pager::new(
        ctx.profile(),
        args.opt_u64("offset").unwrap_or(1),
        args.opt_u64("limit"),
    );
    page_lines(&mut pager, &mut std::io::Cursor::new(&bytes[..]))
        .map_err(|e| ToolError::io(&name, e))?;
    Ok(Reply::ok(pager.finish(&name, size, |_| String::new())))
}
