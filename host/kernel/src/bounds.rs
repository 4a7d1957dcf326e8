//! Byte and token bounds on what tools store: only a bounded result ever
//! reaches the log, so replay and recall can never recover an unbounded read.

use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;

/// Most bytes a stored `read_file` / `read_artifact` / tool result may hold.
pub const READ_MAX_BYTES: usize = 24 * 1024;
/// Most estimated tokens a stored tool result may hold.
pub const READ_MAX_TOKENS: u32 = 8000;
/// Files up to this size are observed with a whole-file SHA-256; larger ones
/// carry no hash.
pub const FILE_HASH_MAX_BYTES: usize = 64 * 1024;

fn fits(text: &str, profile: EstimatorProfile) -> bool {
    text.len() <= READ_MAX_BYTES && estimate(profile, text) <= READ_MAX_TOKENS
}

/// The longest prefix of `text` (on a character boundary) whose size is at
/// most `max_bytes` and whose estimate is at most `max_tokens`.
fn prefix_within(text: &str, profile: EstimatorProfile, max_bytes: usize, max_tokens: u32) -> &str {
    let mut hi = text.len().min(max_bytes);
    while !text.is_char_boundary(hi) {
        hi -= 1;
    }
    if estimate(profile, &text[..hi]) <= max_tokens {
        return &text[..hi];
    }
    // The estimate is monotone in the prefix length: binary search.
    let mut lo = 0usize;
    while lo < hi {
        let mut mid = lo + (hi - lo).div_ceil(2);
        while !text.is_char_boundary(mid) {
            mid -= 1;
        }
        if mid <= lo {
            break;
        }
        if estimate(profile, &text[..mid]) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
            while !text.is_char_boundary(hi) {
                hi -= 1;
            }
        }
    }
    &text[..lo]
}

/// The mirror of [`prefix_within`]: the longest suffix within both bounds.
fn suffix_within(text: &str, profile: EstimatorProfile, max_bytes: usize, max_tokens: u32) -> &str {
    let mut start = text.len().saturating_sub(max_bytes);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    if estimate(profile, &text[start..]) <= max_tokens {
        return &text[start..];
    }
    let (mut lo, mut hi) = (start, text.len());
    // Find the smallest start whose suffix fits.
    while lo < hi {
        let mut mid = lo + (hi - lo) / 2;
        while !text.is_char_boundary(mid) {
            mid += 1;
        }
        if mid >= hi {
            break;
        }
        if estimate(profile, &text[mid..]) <= max_tokens {
            hi = mid;
        } else {
            lo = mid + 1;
            while lo < text.len() && !text.is_char_boundary(lo) {
                lo += 1;
            }
        }
    }
    &text[hi..]
}

/// The longest prefix of `text` within [`READ_MAX_BYTES`] and
/// [`READ_MAX_TOKENS`]: a file page. The caller reports where the page ends so
/// the model can continue from there.
pub fn bound_head(text: &str, profile: EstimatorProfile) -> &str {
    prefix_within(text, profile, READ_MAX_BYTES, READ_MAX_TOKENS)
}

/// True when `text` is within [`READ_MAX_BYTES`] and [`READ_MAX_TOKENS`]
/// under `profile`: a tool output that is stored and shown whole.
pub fn fits_tool_output(text: &str, profile: EstimatorProfile) -> bool {
    fits(text, profile)
}

/// Bound a tool's output to [`READ_MAX_BYTES`] and [`READ_MAX_TOKENS`] under
/// `profile`. Output within both bounds is returned unchanged; longer output
/// keeps its head (about two thirds) and its tail with a marker between them
/// saying how much was left out. The result always fits both bounds.
pub fn bound_tool_output(text: &str, profile: EstimatorProfile) -> String {
    bound_with_marker(text, profile, 96, 48, |omitted, len| {
        format!("[... {omitted} of {len} bytes omitted ...]")
    })
}

/// [`bound_tool_output`] for an output whose whole text is stored as the
/// artifact `sha256`: the marker names the artifact and how to read it
/// (`read_artifact`, page by page).
pub fn bound_tool_output_stored(text: &str, profile: EstimatorProfile, sha256: &str) -> String {
    bound_with_marker(text, profile, 320, 200, |omitted, len| {
        format!(
            "[... {omitted} of {len} bytes omitted; the whole output is artifact {sha256}: \
             read it page by page with read_artifact {{\"id\": \"{sha256}\"}} ...]"
        )
    })
}

/// Head, marker and tail within both bounds; `marker(omitted, len)` must fit
/// in `reserve_bytes` and `reserve_tokens`.
fn bound_with_marker(
    text: &str,
    profile: EstimatorProfile,
    reserve_bytes: usize,
    reserve_tokens: u32,
    marker: impl Fn(usize, usize) -> String,
) -> String {
    if fits(text, profile) {
        return text.to_string();
    }
    let bytes = READ_MAX_BYTES - reserve_bytes;
    let tokens = READ_MAX_TOKENS - reserve_tokens;
    let head = prefix_within(text, profile, bytes * 2 / 3, tokens * 2 / 3);
    let rest = &text[head.len()..];
    let tail = suffix_within(
        rest,
        profile,
        bytes - head.len(),
        tokens - estimate(profile, head),
    );
    let omitted = text.len() - head.len() - tail.len();
    let out = format!("{head}\n{}\n{tail}", marker(omitted, text.len()));
    debug_assert!(fits(&out, profile), "bounded output must fit");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const OA: EstimatorProfile = EstimatorProfile::Openai;

    #[test]
    fn a_stored_output_names_its_artifact_within_the_bounds() {
        let sha = "ab".repeat(32);
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let out = bound_tool_output_stored(&text, OA, &sha);
        assert!(fits_tool_output(&out, OA));
        assert!(out.starts_with("line 0\n") && out.ends_with("line 9999\n"));
        assert!(out.contains(&format!("the whole output is artifact {sha}")));
        assert!(out.contains(&format!("read_artifact {{\"id\": \"{sha}\"}}")));
        let punct = "{}".repeat(10 * 1024);
        assert!(fits_tool_output(
            &bound_tool_output_stored(&punct, OA, &sha),
            OA
        ));
        assert_eq!(bound_tool_output_stored("ok", OA, &sha), "ok");
    }

    #[test]
    fn short_output_is_unchanged() {
        assert_eq!(bound_tool_output("ok", OA), "ok");
        assert_eq!(bound_head("ok", OA), "ok");
    }

    #[test]
    fn long_ascii_output_is_cut_to_the_byte_bound() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let out = bound_tool_output(&text, OA);
        assert!(out.len() <= READ_MAX_BYTES);
        assert!(estimate(OA, &out) <= READ_MAX_TOKENS);
        assert!(out.starts_with("line 0\n"));
        assert!(out.ends_with("line 9999\n"));
        assert!(out.contains("bytes omitted"));
    }

    #[test]
    fn punctuation_and_wide_text_is_cut_to_the_token_bound() {
        // 20 KiB of punctuation is ≈ 10k tokens: within bytes, over tokens.
        let text = "{}".repeat(10 * 1024);
        let out = bound_tool_output(&text, OA);
        assert!(
            estimate(OA, &out) <= READ_MAX_TOKENS,
            "{}",
            estimate(OA, &out)
        );
        let cjk = "日本語".repeat(3000);
        for profile in [OA, EstimatorProfile::CjkOptimized] {
            let out = bound_tool_output(&cjk, profile);
            assert!(out.len() <= READ_MAX_BYTES);
            assert!(estimate(profile, &out) <= READ_MAX_TOKENS);
            let head = bound_head(&cjk, profile);
            assert!(head.len() <= READ_MAX_BYTES && estimate(profile, head) <= READ_MAX_TOKENS);
            assert!(cjk.starts_with(head));
        }
    }
}
