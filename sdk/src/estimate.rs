//! The canonical token estimator.
//!
//! Budgets are tokens, not bytes. Text is priced per character class, in quarter
//! tokens, and rounded up to whole tokens, so the estimate is conservative:
//!
//! | class | price |
//! | --- | --- |
//! | ASCII letters, digits, whitespace | ¼ token (≈ 4 characters a token) |
//! | ASCII punctuation and symbols | ½ token (≈ 2 characters a token) |
//! | narrow non-ASCII (accented Latin, Cyrillic, ...) | ½ token |
//! | wide non-ASCII (CJK, full-width forms, emoji) | 2 tokens (OpenAI, Anthropic), 1 token (CJK-optimized) |
//!
//! Images are priced from pixel dimensions, never from their encoded size.

use crate::types::EstimatorProfile;

const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// The ASCII punctuation ranges (`!`..=`/`, `:`..=`@`, `[`..=`` ` ``,
/// `{`..=`~`) as the word constants of [`punctuation`]: adding `GE` sets a
/// byte's high bit when it is at least the range's first byte, adding `GT`
/// when it is past the last one.
const RANGES: [(u64, u64); 4] = [
    (splat(0x80 - b'!'), splat(0x7f - b'/')),
    (splat(0x80 - b':'), splat(0x7f - b'@')),
    (splat(0x80 - b'['), splat(0x7f - b'`')),
    (splat(0x80 - b'{'), splat(0x7f - b'~')),
];

/// High bits of the bytes of `word` that are ASCII punctuation.
#[inline]
fn punctuation(word: u64) -> u64 {
    // Seven-bit bytes: no sum below carries into the next byte.
    let low = word & LOW7;
    let mut hit = 0;
    for (ge, gt) in RANGES {
        hit |= low.wrapping_add(ge) & !low.wrapping_add(gt);
    }
    hit & !word & HIGH
}

/// Estimated tokens of `text` under `profile`. Empty text costs 0.
///
/// ASCII bytes are classified eight at a time in a machine word; each
/// non-ASCII character is priced once, at its leading byte. The result equals
/// the character-by-character rule in the module docs (pinned by the tests).
pub fn estimate(profile: EstimatorProfile, text: &str) -> u32 {
    let wide = match profile {
        EstimatorProfile::Openai | EstimatorProfile::Anthropic => 8u64,
        EstimatorProfile::CjkOptimized => 4u64,
    };
    // A non-ASCII character is priced once, at its leading byte (`>= 0xC0`;
    // continuation bytes are `0x80..=0xBF`).
    let other = |at: usize| match text[at..].chars().next() {
        Some(c) if is_wide(c) => wide,
        _ => 2,
    };
    let bytes = text.as_bytes();
    let mut quarters = 0u64;
    let mut at = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let word = u64::from_le_bytes(w);
        // One quarter per ASCII byte, one more per punctuation byte.
        quarters += u64::from((!word & HIGH).count_ones());
        quarters += u64::from(punctuation(word).count_ones());
        if word & HIGH != 0 {
            for (i, &b) in chunk.iter().enumerate() {
                if b >= 0xC0 {
                    quarters += other(at + i);
                }
            }
        }
        at += 8;
    }
    for (i, &b) in bytes[at..].iter().enumerate() {
        if b < 0x80 {
            quarters += if b.is_ascii_punctuation() { 2 } else { 1 };
        } else if b >= 0xC0 {
            quarters += other(at + i);
        }
    }
    quarters.div_ceil(4).min(u32::MAX as u64) as u32
}

/// The character-by-character statement of the rule, which [`estimate`]
/// must equal.
/// Quarter tokens of one character, exactly as the canonical estimator counts.
pub fn char_quarters(profile: EstimatorProfile, c: char) -> u64 {
    if c.is_ascii() {
        if c.is_ascii_punctuation() { 2 } else { 1 }
    } else if is_wide(c) {
        match profile {
            EstimatorProfile::CjkOptimized => 4,
            _ => 8,
        }
    } else {
        2
    }
}

#[cfg(test)]
fn reference_estimate(profile: EstimatorProfile, text: &str) -> u32 {
    let wide = match profile {
        EstimatorProfile::Openai | EstimatorProfile::Anthropic => 8u64,
        EstimatorProfile::CjkOptimized => 4u64,
    };
    let mut quarters: u64 = 0;
    for b in text.bytes() {
        // Fast path for ASCII; continuation bytes of multi-byte characters are
        // skipped here and priced once per character below.
        if b < 0x80 {
            quarters += if b.is_ascii_punctuation() { 2 } else { 1 };
        }
    }
    if !text.is_ascii() {
        for c in text.chars() {
            if !c.is_ascii() {
                quarters += if is_wide(c) { wide } else { 2 };
            }
        }
    }
    quarters.div_ceil(4).min(u32::MAX as u64) as u32
}

/// Estimates for many strings at once, in order.
pub fn estimate_many<S: AsRef<str>>(profile: EstimatorProfile, texts: &[S]) -> Vec<u32> {
    texts
        .iter()
        .map(|t| estimate(profile, t.as_ref()))
        .collect()
}

/// Tokens assumed for an image whose dimensions are unknown: the most a
/// provider charges for one image after its own downscaling.
pub const UNKNOWN_IMAGE_TOKENS: u32 = 1_600;

/// Estimated visual tokens of an image of `width` × `height` pixels.
///
/// Providers downscale large images (long side ≤ 1568 px, ≤ 1.15 megapixels) and
/// charge about one token per 750 pixels; unknown dimensions use the
/// conservative [`UNKNOWN_IMAGE_TOKENS`], never zero.
pub fn image_tokens(width: Option<u32>, height: Option<u32>) -> u32 {
    let (Some(w), Some(h)) = (width, height) else {
        return UNKNOWN_IMAGE_TOKENS;
    };
    if w == 0 || h == 0 {
        return UNKNOWN_IMAGE_TOKENS;
    }
    let (mut w, mut h) = (w as f64, h as f64);
    let long = w.max(h);
    if long > 1568.0 {
        let s = 1568.0 / long;
        w *= s;
        h *= s;
    }
    let area = w * h;
    if area > 1_150_000.0 {
        let s = (1_150_000.0 / area).sqrt();
        w *= s;
        h *= s;
    }
    let tokens = ((w.floor() * h.floor()) / 750.0).ceil() as u32;
    tokens.clamp(1, UNKNOWN_IMAGE_TOKENS)
}

/// True for characters rendered two columns wide: CJK ideographs and syllables,
/// kana, Hangul, full-width forms and emoji.
pub fn is_wide(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xA960..=0xA97F
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE10..=0xFE19
        | 0xFE30..=0xFE6F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F000..=0x1FAFF
        | 0x20000..=0x2FFFD
        | 0x30000..=0x3FFFD)
}

/// Fixed tokens charged per message for role and framing.
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Fixed tokens charged per tool call or tool result part for framing.
pub const TOOL_PART_OVERHEAD_TOKENS: u64 = 4;

/// Estimated tokens of one part under `profile`.
pub fn part_tokens(profile: EstimatorProfile, part: &crate::types::Part) -> u64 {
    use crate::types::Part;
    match part {
        Part::Text(t) => estimate(profile, t) as u64,
        Part::Image(m) => image_tokens(m.width, m.height) as u64,
        Part::ToolCall(c) => {
            TOOL_PART_OVERHEAD_TOKENS
                + estimate(profile, &c.id) as u64
                + estimate(profile, &c.name) as u64
                + estimate(profile, &c.arguments_json) as u64
        }
        Part::ToolResult(r) => tool_result_tokens(profile, r),
    }
}

/// Estimated tokens of a tool-result part under `profile`.
fn tool_result_tokens(profile: EstimatorProfile, r: &crate::types::ToolResult) -> u64 {
    TOOL_PART_OVERHEAD_TOKENS
        + estimate(profile, &r.call_id) as u64
        + estimate(profile, &r.content) as u64
        + r.images
            .iter()
            .map(|m| image_tokens(m.width, m.height) as u64)
            .sum::<u64>()
}

/// Estimated tokens of one provider-visible message: its parts plus
/// [`MESSAGE_OVERHEAD_TOKENS`]. A kernel-context message is priced as the
/// provider receives it: its text inside the host's frame
/// ([`crate::validate::canon::frame_kernel_text`]), so the frame counts
/// toward the hard budget. This is the canonical price the host checks.
pub fn message_tokens(profile: EstimatorProfile, message: &crate::types::Message) -> u64 {
    use crate::types::Part;
    MESSAGE_OVERHEAD_TOKENS
        + message
            .parts
            .iter()
            .map(|p| match (&message.kernel, p) {
                (Some(tag), Part::Text(t)) => {
                    estimate(profile, &crate::frame::frame_kernel_text(tag.kind, t)) as u64
                }
                _ => part_tokens(profile, p),
            })
            .sum::<u64>()
}

/// The canonical price of the provider-visible message a conversation event
/// renders (the same figure as [`message_tokens`] of
/// [`Event::to_message`](crate::types::Event::to_message)) without building
/// it; 0 for events that render none. The `tokens` of an outlined event.
pub fn event_tokens(profile: EstimatorProfile, body: &crate::types::EventBody) -> u64 {
    use crate::types::EventBody;
    match body {
        EventBody::UserMessage(parts) | EventBody::AssistantMessage(parts) => {
            MESSAGE_OVERHEAD_TOKENS + parts.iter().map(|p| part_tokens(profile, p)).sum::<u64>()
        }
        EventBody::ToolResult(r) => MESSAGE_OVERHEAD_TOKENS + tool_result_tokens(profile, r),
        EventBody::Notification(t) => MESSAGE_OVERHEAD_TOKENS + estimate(profile, t) as u64,
        _ => 0,
    }
}

/// Estimated visual tokens of the images in a message (a part of its price).
pub fn message_image_tokens(message: &crate::types::Message) -> (u32, u64) {
    use crate::types::Part;
    let mut count = 0u32;
    let mut tokens = 0u64;
    for p in &message.parts {
        let images: &[crate::types::MediaRef] = match p {
            Part::Image(m) => std::slice::from_ref(m),
            Part::ToolResult(r) => &r.images,
            _ => &[],
        };
        for m in images {
            count += 1;
            tokens += image_tokens(m.width, m.height) as u64;
        }
    }
    (count, tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OA: EstimatorProfile = EstimatorProfile::Openai;

    const PROFILES: [EstimatorProfile; 3] = [
        EstimatorProfile::Openai,
        EstimatorProfile::Anthropic,
        EstimatorProfile::CjkOptimized,
    ];

    fn same(text: &str) {
        for p in PROFILES {
            assert_eq!(
                estimate(p, text),
                reference_estimate(p, text),
                "{p:?} {text:?}"
            );
        }
    }

    #[test]
    fn every_ascii_byte_at_every_offset() {
        for b in 0u8..0x80 {
            let c = b as char;
            for len in 0..20 {
                let mut s = "a".repeat(len);
                s.push(c);
                s.push_str(&"b".repeat(len % 9));
                same(&s);
                same(&c.to_string().repeat(len));
            }
        }
    }

    #[test]
    fn mixed_wide_and_generated_text() {
        same("");
        same("héllo, wörld! — ½ «quoted» 日本語のテキスト 한국어 😀🎉 ｆｕｌｌ");
        same("日本語");
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let alphabet: Vec<char> =
            "abcXYZ019 \n\t!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~é日😀ß\u{7f}\u{1}ｆ"
                .chars()
                .collect();
        for n in 0..400 {
            let mut s = String::new();
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            same(&s);
        }
    }

    #[test]
    fn empty_text_is_free() {
        assert_eq!(estimate(OA, ""), 0);
    }

    #[test]
    fn ascii_words_cost_a_quarter_token_a_character() {
        assert_eq!(estimate(OA, "abcd"), 1);
        assert_eq!(estimate(OA, "abcde"), 2, "rounds up: conservative");
        assert_eq!(estimate(OA, &"a".repeat(400)), 100);
    }

    #[test]
    fn punctuation_costs_half_a_token() {
        assert_eq!(estimate(OA, "{}"), 1);
        assert_eq!(estimate(OA, "{}[]"), 2);
    }

    #[test]
    fn wide_characters_depend_on_profile() {
        let text = "日本語のテキスト"; // 8 wide characters
        assert_eq!(estimate(EstimatorProfile::Openai, text), 16);
        assert_eq!(estimate(EstimatorProfile::Anthropic, text), 16);
        assert_eq!(estimate(EstimatorProfile::CjkOptimized, text), 8);
        assert_eq!(estimate(OA, "😀"), 2);
    }

    #[test]
    fn narrow_non_ascii_costs_half_a_token() {
        assert_eq!(estimate(OA, "éé"), 1);
        assert_eq!(estimate(OA, "привет"), 3);
    }

    #[test]
    fn images_are_priced_from_dimensions() {
        assert_eq!(image_tokens(Some(750), Some(1)), 1);
        assert_eq!(image_tokens(Some(1000), Some(750)), 1000);
        // Downscaled to the provider's bound, so a huge image is capped.
        assert!(image_tokens(Some(8000), Some(8000)) <= UNKNOWN_IMAGE_TOKENS);
        assert_eq!(image_tokens(None, Some(10)), UNKNOWN_IMAGE_TOKENS);
        assert_eq!(image_tokens(Some(0), Some(10)), UNKNOWN_IMAGE_TOKENS);
    }

    #[test]
    fn batch_matches_single() {
        let texts = ["a", "日本", "x{y}"];
        let batch = estimate_many(OA, &texts);
        let single: Vec<u32> = texts.iter().map(|t| estimate(OA, t)).collect();
        assert_eq!(batch, single);
    }
}
