//! Running a configured hook command: `sh -c` in the session's sandbox and
//! workspace, under the same process-group, lifeline, timeout and
//! interrupt handling as the `shell` tool, with what the hook is about
//! given as `LATCH_*` environment variables set by the script itself (the
//! sandbox does not pass the host's environment through).

use crate::ToolContext;
use crate::run::run_foreground;
use std::time::Duration;

/// Characters of a hook's output that are kept (its end: a failing hook's
/// reason is usually last).
pub const HOOK_OUTPUT_CHARS: usize = 4_000;

/// How one hook run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookRun {
    /// The exit code; `None` when it was killed (timeout, interrupt,
    /// signal) or could not start.
    pub exit_code: Option<i32>,
    /// Its combined stdout and stderr (the last [`HOOK_OUTPUT_CHARS`]), or
    /// why it did not run or finish.
    pub output: String,
}

impl HookRun {
    /// True when it exited with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// `command` with `env` exported before it, each value single-quoted.
fn script(command: &str, env: &[(&str, String)]) -> String {
    let mut s = String::new();
    for (k, v) in env {
        s.push_str(&format!("export {k}='{}'\n", v.replace('\'', "'\\''")));
    }
    s.push_str(command);
    s
}

/// Run the hook `command` with `env` in `ctx`'s sandbox and workspace;
/// killed after `timeout` or when the turn is interrupted.
pub fn run_hook(
    ctx: &ToolContext,
    command: &str,
    env: &[(&str, String)],
    timeout: Duration,
) -> HookRun {
    match run_foreground(
        ctx.workspace(),
        &script(command, env),
        timeout,
        ctx.sandbox(),
        ctx.cancel(),
    ) {
        Ok(run) => {
            let mut output = tail(&run.output, HOOK_OUTPUT_CHARS);
            if run.timed_out {
                output.push_str(&format!(
                    "\n[the hook was killed after {} ms: raise [hooks] timeout_ms or make it faster]",
                    timeout.as_millis()
                ));
            } else if run.interrupted {
                output.push_str("\n[the hook was killed: the user stopped the turn]");
            }
            HookRun {
                exit_code: run.exit_code,
                output: output.trim().to_string(),
            }
        }
        Err(e) => HookRun {
            exit_code: None,
            output: format!("the hook could not start: {e}"),
        },
    }
}

fn tail(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let kept: String = text.chars().skip(n - max).collect();
    format!("[{} characters cut]\n{kept}", n - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_for_the_shell() {
        let s = script("echo \"$X\"", &[("X", "it's $HOME `x`".into())]);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&s)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $HOME `x`\n");
        assert_eq!(tail("abcdef", 3), "[3 characters cut]\ndef");
    }
}
