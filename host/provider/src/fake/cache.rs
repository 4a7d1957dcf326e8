//! The fake server's simulated prompt cache.
//!
//! A request is cut into canonical segments: each tool, each system block
//! and each message content block (Anthropic) or each message (OpenAI),
//! serialized as compact JSON with any `cache_control` removed. The cache
//! remembers the previous request's segments; a new request reads the
//! longest common prefix, counted in whole segments and priced with the
//! canonical estimator. For Anthropic only the part up to the request's last
//! `cache_control` breakpoint is cacheable (and written); without a
//! breakpoint nothing is read or written. OpenAI caches the whole prompt
//! automatically. Minimum cacheable lengths are not simulated.

use latch_engine_sdk::estimate::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use serde_json::{Value, json};

use super::script::WireUsage;

/// The last request's cacheable segments, per wire format.
#[derive(Debug, Default)]
pub(crate) struct CacheSim {
    anthropic: Vec<String>,
    openai: Vec<String>,
    responses: Vec<String>,
}

fn strip(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cache_control");
    }
    v
}

fn has_breakpoint(v: &Value) -> bool {
    v.get("cache_control").is_some_and(|c| !c.is_null())
}

fn tokens(profile: EstimatorProfile, segs: &[String]) -> u64 {
    segs.iter().map(|s| estimate(profile, s) as u64).sum()
}

fn common_prefix(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Segments of an Anthropic body and the index after its last breakpoint.
fn anthropic_segments(body: &Value) -> (Vec<String>, usize) {
    let mut segs = Vec::new();
    let mut cacheable = 0;
    let mut add = |v: &Value, segs: &mut Vec<String>| {
        segs.push(strip(v).to_string());
        if has_breakpoint(v) {
            cacheable = segs.len();
        }
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        add(t, &mut segs);
    }
    match &body["system"] {
        Value::String(s) => segs.push(json!({"system": s}).to_string()),
        Value::Array(blocks) => blocks.iter().for_each(|b| add(b, &mut segs)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("");
        match &m["content"] {
            Value::String(s) => segs.push(json!({"role": role, "text": s}).to_string()),
            Value::Array(blocks) => {
                for b in blocks {
                    let seg = json!({"role": role, "block": strip(b)}).to_string();
                    segs.push(seg);
                    if has_breakpoint(b) {
                        cacheable = segs.len();
                    }
                }
            }
            _ => {}
        }
    }
    (segs, cacheable)
}

fn openai_segments(body: &Value) -> Vec<String> {
    let mut segs: Vec<String> = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        segs.push(t.to_string());
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        segs.push(m.to_string());
    }
    segs
}

fn responses_segments(body: &Value) -> Vec<String> {
    let mut segs: Vec<String> = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        segs.push(t.to_string());
    }
    if let Some(i) = body["instructions"].as_str() {
        segs.push(json!({"instructions": i}).to_string());
    }
    for item in body["input"].as_array().into_iter().flatten() {
        segs.push(item.to_string());
    }
    segs
}

impl CacheSim {
    /// Usage of a Responses request; remembers the whole prompt.
    pub(crate) fn responses(&mut self, body: &Value, output_tokens: u64) -> WireUsage {
        let p = EstimatorProfile::Openai;
        let segs = responses_segments(body);
        let hit = common_prefix(&segs, &self.responses);
        let read = tokens(p, &segs[..hit]);
        let total = tokens(p, &segs);
        self.responses = segs;
        WireUsage {
            input_tokens: Some(total),
            output_tokens: Some(output_tokens),
            cache_read_tokens: Some(read),
            cache_creation_tokens: None,
            reasoning_tokens: None,
        }
    }

    /// Usage of an Anthropic request; remembers its cacheable prefix.
    pub(crate) fn anthropic(&mut self, body: &Value, output_tokens: u64) -> WireUsage {
        let p = EstimatorProfile::Anthropic;
        let (segs, cacheable) = anthropic_segments(body);
        let hit = common_prefix(&segs, &self.anthropic).min(cacheable);
        let read = tokens(p, &segs[..hit]);
        let creation = tokens(p, &segs[hit..cacheable]);
        let input = tokens(p, &segs[cacheable..]);
        self.anthropic = segs[..cacheable].to_vec();
        WireUsage {
            input_tokens: Some(input),
            output_tokens: Some(output_tokens),
            cache_read_tokens: Some(read),
            cache_creation_tokens: Some(creation),
            reasoning_tokens: None,
        }
    }

    /// Usage of an OpenAI request; remembers the whole prompt.
    pub(crate) fn openai(&mut self, body: &Value, output_tokens: u64) -> WireUsage {
        let p = EstimatorProfile::Openai;
        let segs = openai_segments(body);
        let hit = common_prefix(&segs, &self.openai);
        let read = tokens(p, &segs[..hit]);
        let total = tokens(p, &segs);
        self.openai = segs;
        WireUsage {
            input_tokens: Some(total),
            output_tokens: Some(output_tokens),
            cache_read_tokens: Some(read),
            cache_creation_tokens: None,
            reasoning_tokens: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic_body(messages: &[&str], mark_last: bool) -> Value {
        let n = messages.len();
        let msgs: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut block = json!({"type": "text", "text": t});
                if mark_last && i + 1 == n {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": [block]})
            })
            .collect();
        json!({
            "system": [{"type": "text", "text": "You are Latch.", "cache_control": {"type": "ephemeral"}}],
            "messages": msgs,
        })
    }

    #[test]
    fn appending_reads_the_previous_prefix_and_rewriting_does_not() {
        let mut sim = CacheSim::default();
        let first = sim.anthropic(&anthropic_body(&["hello there"], true), 1);
        assert_eq!(first.cache_read_tokens, Some(0));
        assert!(first.cache_creation_tokens.unwrap() > 0);
        assert_eq!(first.input_tokens, Some(0));
        let second = sim.anthropic(&anthropic_body(&["hello there", "hi", "next"], true), 1);
        assert_eq!(
            second.cache_read_tokens,
            Some(first.cache_creation_tokens.unwrap()),
            "the whole previous prefix is read"
        );
        let rewritten = sim.anthropic(&anthropic_body(&["HELLO", "hi", "next"], true), 1);
        let system_only = tokens(
            EstimatorProfile::Anthropic,
            &[json!({"type": "text", "text": "You are Latch."}).to_string()],
        );
        assert_eq!(rewritten.cache_read_tokens, Some(system_only));
    }

    #[test]
    fn without_breakpoints_anthropic_caches_nothing() {
        let mut sim = CacheSim::default();
        let mut body = anthropic_body(&["a"], false);
        body["system"][0]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        sim.anthropic(&body, 1);
        let u = sim.anthropic(&body, 1);
        assert_eq!(u.cache_read_tokens, Some(0));
        assert_eq!(u.cache_creation_tokens, Some(0));
        assert!(u.input_tokens.unwrap() > 0);
    }
}
