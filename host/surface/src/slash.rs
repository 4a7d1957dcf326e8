//! Slash commands, parsed once for every surface: `/context`, `/compact`,
//! `/recall <query>`, `/group`, `/rewind [seq]`, `/image <path>`,
//! `/export [path]`, `/sessions`, `/help`, `/exit`.

/// Every slash command with its one-line help, in the order shown.
pub const SLASH_COMMANDS: &[(&str, &str)] = &[
    ("/context", "the context report for the next request"),
    ("/compact", "reset working memory (nothing is deleted)"),
    (
        "/recall",
        "/recall <query>: original events by full-text search",
    ),
    ("/group", "the agent group's tasks, members and messages"),
    (
        "/rewind",
        "/rewind [seq]: list your messages, or put files back to before one",
    ),
    (
        "/image",
        "/image <path>: attach an image to the next message",
    ),
    (
        "/export",
        "/export [path]: write the session as Markdown (.json: its events)",
    ),
    ("/sessions", "the workspace's sessions"),
    (
        "/agents",
        "the agents users defined (.latch/agents/NAME.md) and where each came from",
    ),
    (
        "/plan",
        "plan mode on or off: nothing changes the workspace until you approve a plan",
    ),
    (
        "/init",
        "ask the model to write a first AGENTS.md for the repository",
    ),
    ("/help", "keys and commands"),
    ("/exit", "leave Latch (the session stays resumable)"),
];

/// What `/init` asks the model.
pub const INIT_PROMPT: &str = "Write a first AGENTS.md for this repository, at its root: the \
instructions a coding agent needs to work here. Explore first (list_files, read the README, the \
build and test configuration, a few central source files). Then write, concisely: what the \
project is; how to build it, run the tests and run one test; the code style and conventions the \
code actually follows; where things live; and anything that surprises a newcomer. If an \
AGENTS.md or CLAUDE.md exists, read it and improve it instead of starting over. Keep it short: \
every line should save a future session a mistake.";

/// A parsed slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    /// `/context`.
    Context,
    /// `/compact`.
    Compact,
    /// `/recall <query>`.
    Recall(String),
    /// `/group`.
    Group,
    /// `/rewind` (list) or `/rewind SEQ` (restore the files to before it).
    Rewind(Option<u64>),
    /// `/image PATH`.
    Image(String),
    /// `/export` (to `latch-SESSION.md` in the workspace) or
    /// `/export PATH`.
    Export(Option<String>),
    /// `/sessions`.
    Sessions,
    /// `/agents`: the agents users defined.
    Agents,
    /// `/plan`: plan mode on, or off again.
    Plan,
    /// `/help`.
    Help,
    /// `/exit` (or `/quit`).
    Exit,
    /// A custom command (see [`crate::commands`]): the prompt it expands to.
    Custom(String),
}

/// Why a line is not a valid slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlashError {
    /// The command is not one Latch knows.
    Unknown(String),
    /// `/recall` without a query.
    MissingQuery,
    /// `/rewind` with something other than a sequence number.
    BadRewind(String),
    /// `/image` without a path.
    MissingImage,
}

impl std::fmt::Display for SlashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlashError::Unknown(c) => {
                let names: Vec<&str> = SLASH_COMMANDS.iter().map(|(n, _)| *n).collect();
                write!(f, "unknown command {c}: try {}", names.join(" "))
            }
            SlashError::MissingQuery => {
                write!(f, "/recall needs a query: /recall E0599 parser")
            }
            SlashError::BadRewind(arg) => write!(
                f,
                "/rewind takes a message's sequence number, not `{arg}`: /rewind lists them"
            ),
            SlashError::MissingImage => write!(f, "/image needs a path: /image shot.png"),
        }
    }
}

impl std::error::Error for SlashError {}

impl Slash {
    /// Parse `line`: `None` when it is not a slash command (a task for the
    /// model), else the command or why it is not one.
    pub fn parse(line: &str) -> Option<Result<Slash, SlashError>> {
        Slash::parse_with(line, &crate::commands::CustomCommands::new())
    }

    /// [`Slash::parse`], knowing the custom commands `custom` too.
    pub fn parse_with(
        line: &str,
        custom: &crate::commands::CustomCommands,
    ) -> Option<Result<Slash, SlashError>> {
        let line = line.trim();
        if !line.starts_with('/') {
            return None;
        }
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        Some(match cmd {
            "/context" => Ok(Slash::Context),
            "/compact" => Ok(Slash::Compact),
            "/recall" if rest.is_empty() => Err(SlashError::MissingQuery),
            "/recall" => Ok(Slash::Recall(rest.to_string())),
            "/group" => Ok(Slash::Group),
            "/rewind" if rest.is_empty() => Ok(Slash::Rewind(None)),
            "/rewind" => rest
                .parse()
                .map(|seq| Slash::Rewind(Some(seq)))
                .map_err(|_| SlashError::BadRewind(rest.to_string())),
            "/image" if rest.is_empty() => Err(SlashError::MissingImage),
            "/image" => Ok(Slash::Image(rest.to_string())),
            "/export" if rest.is_empty() => Ok(Slash::Export(None)),
            "/export" => Ok(Slash::Export(Some(rest.to_string()))),
            "/sessions" => Ok(Slash::Sessions),
            "/agents" => Ok(Slash::Agents),
            "/plan" => Ok(Slash::Plan),
            "/init" => Ok(Slash::Custom(INIT_PROMPT.to_string())),
            "/help" => Ok(Slash::Help),
            "/exit" | "/quit" => Ok(Slash::Exit),
            _ if let Some(prompt) = custom.expand_line(line) => Ok(Slash::Custom(prompt)),
            other => Err(SlashError::Unknown(other.to_string())),
        })
    }
}

/// The commands that complete `prefix` (which starts with `/`), in order.
pub fn complete(prefix: &str) -> Vec<&'static str> {
    if !prefix.starts_with('/') || prefix.contains(char::is_whitespace) {
        return Vec::new();
    }
    SLASH_COMMANDS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_and_names_the_fix_for_bad_ones() {
        assert_eq!(Slash::parse("fix the test"), None);
        assert_eq!(Slash::parse("/context"), Some(Ok(Slash::Context)));
        assert_eq!(
            Slash::parse("/recall  E0599 parser "),
            Some(Ok(Slash::Recall("E0599 parser".into())))
        );
        assert_eq!(Slash::parse("/recall"), Some(Err(SlashError::MissingQuery)));
        let err = Slash::parse("/teleport").unwrap().unwrap_err().to_string();
        assert!(
            err.contains("/teleport") && err.contains("/context"),
            "{err}"
        );
        assert_eq!(Slash::parse("/export"), Some(Ok(Slash::Export(None))));
        assert_eq!(
            Slash::parse("/export  notes/run.json "),
            Some(Ok(Slash::Export(Some("notes/run.json".into()))))
        );
        assert_eq!(complete("/co"), vec!["/context", "/compact"]);
        assert_eq!(complete("/ex"), vec!["/export", "/exit"]);
        assert_eq!(complete("/recall x"), Vec::<&str>::new());
        assert_eq!(
            Slash::parse("/init"),
            Some(Ok(Slash::Custom(INIT_PROMPT.to_string())))
        );
    }
}
