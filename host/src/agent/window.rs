//! When a request cannot fit the model's window: the refusal names the
//! window, the reserve and what fits, in the host's own figures, so a user
//! of a small local model knows which setting to change.

use latch_engine_sdk::types::ContextBudget;

/// The room a request needs beyond its fixed part before the window is
/// called large enough: a few turns of conversation.
pub const CONVERSATION_ROOM_TOKENS: u64 = 2_048;

/// Why a request did not fit the model's window, with the host's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowShortfall {
    /// The model.
    pub model: String,
    /// The configured (or assumed) context window.
    pub window: u64,
    /// Tokens reserved for the answer.
    pub reserve: u64,
    /// What a request may use: window − reserve, divided by the
    /// calibration when the provider counts more than Latch's estimate.
    pub limit: u64,
    /// The provider-to-estimate ratio that tightened the limit, when it did.
    pub calibration: Option<f64>,
    /// The system prompt and session context (≈ tokens).
    pub instructions: u64,
    /// The tool schemas (≈ tokens) and how many tools there are.
    pub tools: u64,
    /// How many tools the model is offered.
    pub tool_count: usize,
    /// Extension context such as the skill list (≈ tokens).
    pub extensions: u64,
    /// The engine's own words, when the fixed part fits and the
    /// conversation does not.
    pub engine_message: Option<String>,
}

impl WindowShortfall {
    /// The part every request pays: instructions, tools, extensions.
    pub fn fixed(&self) -> u64 {
        self.instructions + self.tools + self.extensions
    }

    /// The smallest window in which the fixed part and a few turns fit,
    /// in the provider's tokens (the calibration applied).
    pub fn minimum_window(&self) -> u64 {
        let factor = self.calibration.unwrap_or(1.0).max(1.0);
        let need = ((self.fixed() + CONVERSATION_ROOM_TOKENS) as f64 * factor).ceil() as u64;
        round_up(need + self.reserve, 1_024)
    }

    /// The most the tool schemas may take in this window, leaving room for
    /// the instructions, extensions and a few turns.
    pub fn tools_room(&self) -> u64 {
        self.limit
            .saturating_sub(self.instructions + self.extensions + CONVERSATION_ROOM_TOKENS)
    }
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

fn n(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl std::fmt::Display for WindowShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.model;
        write!(
            f,
            "the request does not fit model `{m}`'s context window: the window is {} tokens \
             and {} of it are reserved for the answer ([models.{m}] reserve_tokens), so a request \
             may use {}",
            n(self.window),
            n(self.reserve),
            n(self.limit)
        )?;
        if let Some(c) = self.calibration.filter(|c| *c > 1.0) {
            write!(
                f,
                " of Latch's estimated tokens (the provider counts {c:.2}× Latch's estimate)"
            )?;
        }
        let tools = format!(
            "{} tool schema{} (≈{})",
            self.tool_count,
            if self.tool_count == 1 { "" } else { "s" },
            n(self.tools),
        );
        let fixed = if self.extensions > 0 {
            format!(
                "the instructions (≈{}), {tools} and the skill list (≈{})",
                n(self.instructions),
                n(self.extensions)
            )
        } else {
            format!("the instructions (≈{}) and {tools}", n(self.instructions))
        };
        match &self.engine_message {
            None => write!(
                f,
                ", but {fixed} alone need ≈{}. What fits: a window of at least {} tokens \
                 ([models.{m}] context_window_tokens, with the server started with that context \
                 size), or fewer tools: in this window the tool schemas may take ≈{}, so offer \
                 only the tools you need with [tools] allow = [\"read_file\", \"edit_file\", \
                 \"shell\", ...] (or [tools] deny), and turn MCP servers off \
                 ([mcp.servers.NAME] enabled = false)",
                n(self.fixed()),
                n(self.minimum_window()),
                n(self.tools_room()),
            )?,
            Some(engine) => write!(
                f,
                "; {fixed} take ≈{} of it, and the engine could not fit the rest ({engine}). \
                 A larger window ([models.{m}] context_window_tokens, at least {} tokens) or \
                 fewer tools ([tools] allow) leaves more room",
                n(self.fixed()),
                n(self.minimum_window()),
            )?,
        }
        write!(
            f,
            ". Nothing was sent to the provider and nothing committed is lost"
        )
    }
}

/// The host's figures for `budget` (already tightened by the calibration).
pub fn shortfall(
    model: &str,
    budget: &ContextBudget,
    untightened_window: u64,
    calibration: Option<f64>,
    instructions: u64,
    tool_count: usize,
    engine_message: Option<String>,
) -> WindowShortfall {
    WindowShortfall {
        model: model.to_string(),
        window: untightened_window,
        reserve: budget.reserve_tokens,
        limit: budget
            .context_window_tokens
            .saturating_sub(budget.reserve_tokens),
        calibration,
        instructions,
        tools: budget.tools_tokens,
        tool_count,
        extensions: budget.extension_tokens,
        engine_message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four_k() -> WindowShortfall {
        WindowShortfall {
            model: "gemma".into(),
            window: 4_096,
            reserve: 1_024,
            limit: 3_072,
            calibration: None,
            instructions: 1_100,
            tools: 4_700,
            tool_count: 38,
            extensions: 0,
            engine_message: None,
        }
    }

    #[test]
    fn the_refusal_names_the_window_the_reserve_and_what_fits() {
        let s = four_k();
        let text = s.to_string();
        for want in [
            "window is 4,096 tokens",
            "1,024 of it are reserved",
            "[models.gemma] reserve_tokens",
            "may use 3,072",
            "the instructions (≈1,100) and 38 tool schemas (≈4,700) alone",
            "alone need ≈5,800",
            "at least 9,216 tokens",
            "[models.gemma] context_window_tokens",
            "[tools] allow",
            "Nothing was sent",
        ] {
            assert!(text.contains(want), "{want:?} missing from: {text}");
        }
        // 5,800 + 2,048 + 1,024 = 8,872, rounded up to whole KiB of tokens.
        assert_eq!(s.minimum_window(), 9_216);
        assert_eq!(s.tools_room(), 0);
        let calibrated = WindowShortfall {
            calibration: Some(1.5),
            ..s.clone()
        };
        assert!(calibrated.to_string().contains("1.50×"));
        assert!(calibrated.minimum_window() > s.minimum_window());
        let eight_k = WindowShortfall {
            window: 8_192,
            limit: 7_168,
            engine_message: Some("could not fit the newest unit".into()),
            ..s
        };
        let text = eight_k.to_string();
        assert!(text.contains("could not fit the newest unit"), "{text}");
        assert_eq!(eight_k.tools_room(), 7_168 - 1_100 - 2_048);
    }
}
