//! The line interface's input: on a terminal a line editor (history, and
//! Tab completing Latch's slash commands and the custom ones); otherwise
//! plain lines from stdin, so piped input reads as before. Also the answer
//! line of a question (an approval, workspace trust, a recorded endpoint):
//! on a terminal only what was typed after the question was shown.

use latch_surface::CustomCommands;
use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{CompletionType, Config, Context, Editor, Helper};
use std::io::{BufRead, IsTerminal, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};

/// The prompt the line interface shows.
pub const PROMPT: &str = "› ";

/// Where the next line comes from.
pub enum LineInput {
    /// A terminal: the line editor.
    Editor(Box<Editor<SlashCompleter, DefaultHistory>>),
    /// Anything else: lines of stdin.
    Plain,
}

impl LineInput {
    /// The input for this process: the editor when stdin and stdout are a
    /// terminal (and the editor starts), plain lines otherwise.
    pub fn new(commands: CustomCommands) -> LineInput {
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return LineInput::Plain;
        }
        let config = Config::builder()
            .completion_type(CompletionType::List)
            .auto_add_history(true)
            .build();
        match Editor::with_config(config) {
            Ok(mut editor) => {
                editor.set_helper(Some(SlashCompleter { commands }));
                LineInput::Editor(Box::new(editor))
            }
            Err(_) => LineInput::Plain,
        }
    }

    /// The next line; `None` at the end of input (Ctrl-D). Ctrl-C on the
    /// editor gives an empty line.
    pub fn read(&mut self) -> std::io::Result<Option<String>> {
        match self {
            LineInput::Editor(editor) => match editor.readline(&format!("\n{PROMPT}")) {
                Ok(line) => Ok(Some(line)),
                Err(ReadlineError::Eof) => Ok(None),
                Err(ReadlineError::Interrupted) => Ok(Some(String::new())),
                Err(ReadlineError::Io(e)) => Err(e),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            },
            LineInput::Plain => {
                print!("\n{PROMPT}");
                std::io::stdout().flush()?;
                let mut line = String::new();
                if std::io::stdin().lock().read_line(&mut line)? == 0 {
                    return Ok(None);
                }
                Ok(Some(line))
            }
        }
    }
}

/// Read the answer to a question just shown (and flushed): one line of
/// standard input; `None` at the end of input. On a terminal, input typed
/// before the question appeared is discarded first (`tcflush`), so a key
/// pressed for something else — or pushed by a program — never answers it,
/// and the line is read straight from the terminal, past any buffer.
/// Piped input is read as it comes (scripts answer ahead).
pub fn read_answer() -> std::io::Result<Option<String>> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        return Ok((stdin.lock().read_line(&mut line)? > 0).then_some(line));
    }
    discard_typeahead(stdin.as_raw_fd());
    // A reader of its own on descriptor 0 (not stdin's shared buffer,
    // which could hold bytes read before the question): one byte at a
    // time up to the end of the line. ManuallyDrop: the descriptor stays
    // open.
    // SAFETY: descriptor 0 is open for the life of the process; the File is
    // never dropped, so it is never closed.
    let tty = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match (&*tty).read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {
                line.push(byte[0]);
                if byte[0] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if line.is_empty() {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

/// Drop what waits unread in the terminal `fd`'s input.
pub fn discard_typeahead(fd: i32) {
    // SAFETY: tcflush takes plain integers; on a descriptor that is no
    // terminal it fails harmlessly.
    unsafe {
        libc::tcflush(fd, libc::TCIFLUSH);
    }
}

/// Tab completion of slash commands for the line editor.
pub struct SlashCompleter {
    commands: CustomCommands,
}

impl Completer for SlashCompleter {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let found = self.commands.complete(&line[..pos]);
        let one = found.len() == 1;
        Ok((
            0,
            found
                .into_iter()
                .map(|name| Pair {
                    replacement: if one {
                        format!("{name} ")
                    } else {
                        name.clone()
                    },
                    display: name,
                })
                .collect(),
        ))
    }
}

impl Hinter for SlashCompleter {
    type Hint = String;
}
impl Highlighter for SlashCompleter {}
impl Validator for SlashCompleter {}
impl Helper for SlashCompleter {}
