//! Shell command policy: the hard-deny list of clearly destructive commands,
//! and the conservative read-only allowlist of commands that may run without
//! committing a possible mutation first.
//!
//! Both work on a small shell lexer: the command line is split into simple
//! commands at `;`, `&`, `|`, newlines, parentheses and command
//! substitutions, quotes are removed, and `sh -c '...'` / `eval '...'` are
//! looked into. This is a guard against accidents, not a sandbox.

use regex::Regex;
use std::sync::OnceLock;

/// A hard-deny rule a command matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenyRule {
    /// Stable rule name, e.g. `rm-root-or-home`.
    pub rule: &'static str,
    /// What the rule protects against.
    pub description: &'static str,
}

/// Directories whose recursive removal or permission change is denied.
const CRITICAL_DIRS: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
    "/sbin", "/srv", "/sys", "/usr", "/var", "~", "$HOME", "${HOME}",
];

/// The hard-deny rule `command` matches, if any.
pub fn hard_deny(command: &str) -> Option<DenyRule> {
    let compact: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&compact) {
        return Some(DenyRule {
            rule: "fork-bomb",
            description: "a fork bomb exhausts the machine's processes",
        });
    }
    if block_device_redirect().is_match(command) {
        return Some(DenyRule {
            rule: "write-block-device",
            description: "writing to a disk device destroys its file systems",
        });
    }
    for words in simple_commands(command) {
        if let Some(rule) = deny_simple(&words) {
            return Some(rule);
        }
    }
    None
}

fn block_device_redirect() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r">\s*/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|dm-\d|md\d)")
            .expect("valid regex")
    })
}

fn is_fork_bomb(compact: &str) -> bool {
    static DEF: OnceLock<Regex> = OnceLock::new();
    let def = DEF.get_or_init(|| {
        Regex::new(r"(?:function)?([A-Za-z_:.][A-Za-z0-9_:.]*)\(\)\{").expect("valid regex")
    });
    def.captures_iter(compact).any(|c| {
        let name = &c[1];
        compact.contains(&format!("{{{name}|{name}&"))
            || compact.contains(&format!("{{{name}&|{name}"))
    })
}

/// Words that run the following words as a command.
const PREFIXES: &[&str] = &[
    "sudo", "doas", "env", "nohup", "exec", "command", "time", "nice", "ionice", "xargs",
    "timeout", "builtin", "busybox", "stdbuf", "setsid", "chroot",
];

/// The command name and its arguments, past prefixes such as `sudo` and
/// `VAR=value` assignments.
fn command_words(words: &[String]) -> &[String] {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let base = basename(w);
        if is_assignment(w) {
            i += 1;
        } else if PREFIXES.contains(&base) {
            i += 1;
            // Their options and option values (`-u root`, `-n 10`, `5s`).
            while i < words.len() {
                let w = words[i].as_str();
                if w.starts_with('-')
                    || is_assignment(w)
                    || w.chars().next().is_some_and(|c| c.is_ascii_digit())
                {
                    i += 1;
                } else {
                    break;
                }
            }
        } else {
            break;
        }
    }
    &words[i..]
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

fn is_critical_target(arg: &str) -> bool {
    let trimmed = arg.trim_end_matches("/*").trim_end_matches("/.");
    let trimmed = if trimmed.len() > 1 {
        trimmed.trim_end_matches('/')
    } else {
        trimmed
    };
    if arg == "/*" || (!arg.is_empty() && trimmed.is_empty()) {
        return true;
    }
    if CRITICAL_DIRS.contains(&trimmed) {
        return true;
    }
    std::env::var("HOME")
        .ok()
        .filter(|h| h.len() > 1)
        .is_some_and(|h| trimmed == h.trim_end_matches('/'))
}

fn has_short_flag(args: &[String], flag: char) -> bool {
    args.iter()
        .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].chars().any(|c| c == flag))
}

const RM_ROOT: DenyRule = DenyRule {
    rule: "rm-root-or-home",
    description: "recursive removal of the root, a system directory or the home directory",
};
const PERMISSIONS_ROOT: DenyRule = DenyRule {
    rule: "recursive-permissions-of-root",
    description: "recursive permission or ownership change of the root, a system directory or \
                  the home directory",
};
const DD_DEVICE: DenyRule = DenyRule {
    rule: "dd-to-device",
    description: "dd onto a device overwrites a disk",
};
const POWER_OFF: DenyRule = DenyRule {
    rule: "power-off",
    description: "shutting down or rebooting the machine",
};
const FORCE_PUSH: DenyRule = DenyRule {
    rule: "git-force-push",
    description: "a force push overwrites the remote's history",
};
const MKFS: DenyRule = DenyRule {
    rule: "mkfs",
    description: "creating a file system erases a disk",
};

fn dd_to_device(args: &[String]) -> bool {
    args.iter().any(|a| {
        a.strip_prefix("of=/dev/").is_some_and(|dev| {
            !matches!(dev, "null" | "zero" | "stdout" | "stderr" | "tty") && !dev.starts_with("fd/")
        })
    })
}

fn force_push(args: &[String]) -> bool {
    let Some(sub) = args.iter().position(|a| a == "push") else {
        return false;
    };
    let push_args = &args[sub + 1..];
    push_args.iter().any(|a| a == "--force" || a == "--mirror")
        || has_short_flag(push_args, 'f')
        || push_args.iter().any(|a| a.starts_with('+') && a.len() > 1)
}

fn deny_simple(words: &[String]) -> Option<DenyRule> {
    let words = command_words(words);
    let (name, args) = words.split_first()?;
    let name = basename(name);
    let recursive = || {
        has_short_flag(args, 'r')
            || has_short_flag(args, 'R')
            || args.iter().any(|a| a == "--recursive")
    };
    let critical_target = || {
        args.iter()
            .filter(|a| !a.starts_with('-'))
            .any(|a| is_critical_target(a))
    };
    let rule = match name {
        "rm" if args.iter().any(|a| a == "--no-preserve-root")
            || (recursive() && critical_target()) =>
        {
            RM_ROOT
        }
        "chmod" | "chown" | "chgrp" if recursive() && critical_target() => PERMISSIONS_ROOT,
        "dd" if dd_to_device(args) => DD_DEVICE,
        "shutdown" | "reboot" | "halt" | "poweroff" => POWER_OFF,
        "init" | "telinit" if args.first().is_some_and(|a| a == "0" || a == "6") => POWER_OFF,
        "systemctl"
            if args
                .iter()
                .any(|a| matches!(a.as_str(), "poweroff" | "reboot" | "halt" | "kexec")) =>
        {
            POWER_OFF
        }
        "git" if force_push(args) => FORCE_PUSH,
        _ if name.starts_with("mkfs") || matches!(name, "mke2fs" | "wipefs") => MKFS,
        _ => return None,
    };
    Some(rule)
}

/// True when `command` certainly does not change the workspace, so no
/// mutation needs to be committed before it runs. Conservative: anything
/// with an output redirection, a command substitution, a variable
/// assignment, or a command outside a short list of readers is not.
pub fn is_read_only(command: &str) -> bool {
    let mut rest = command.to_string();
    for harmless in [
        "2>&1",
        "2>/dev/null",
        "2> /dev/null",
        ">/dev/null",
        "> /dev/null",
    ] {
        rest = rest.replace(harmless, " ");
    }
    if rest.contains('>')
        || rest.contains('`')
        || rest.contains("$(")
        || rest.contains("<(")
        || rest.contains('\\')
    {
        return false;
    }
    let commands = simple_commands(&rest);
    !commands.is_empty() && commands.iter().all(|w| read_only_simple(w))
}

fn read_only_simple(words: &[String]) -> bool {
    let Some((name, args)) = words.split_first() else {
        return false;
    };
    let no = |bad: &[&str]| {
        !args.iter().any(|a| {
            bad.iter()
                .any(|b| a == b || a.starts_with(&format!("{b}=")))
        })
    };
    match name.as_str() {
        "ls" | "cat" | "head" | "tail" | "wc" | "pwd" | "echo" | "grep" | "egrep" | "fgrep"
        | "stat" | "du" | "df" | "which" | "diff" | "cmp" | "true" | "test" | "[" => true,
        "rg" => no(&["--pre"]),
        // `-o FILE` in any cluster (`-uo`, `-oFILE`), `--output` and
        // `--compress-program` however abbreviated (getopt takes prefixes).
        "sort" => !args.iter().any(|a| {
            short_cluster_has(a, 'o')
                || long_prefix_of(a, "--output", 3)
                || long_prefix_of(a, "--compress-program", 4)
        }),
        // `tree -o FILE` writes its listing.
        "tree" => !args
            .iter()
            .any(|a| short_cluster_has(a, 'o') || long_prefix_of(a, "--output", 3)),
        // `file -C` compiles a magic file and writes it.
        "file" => !args
            .iter()
            .any(|a| short_cluster_has(a, 'C') || long_prefix_of(a, "--compile", 4)),
        "find" => no(&[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ]),
        "git" => {
            let Some(sub) = args.first() else {
                return false;
            };
            let safe = matches!(
                sub.as_str(),
                "status" | "diff" | "log" | "show" | "ls-files" | "rev-parse" | "blame"
            ) || (sub == "branch"
                && args[1..].iter().all(|a| {
                    matches!(
                        a.as_str(),
                        "-a" | "-v" | "-vv" | "-r" | "--list" | "--show-current"
                    )
                }));
            safe && no(&["-o"]) && !args.iter().any(|a| long_prefix_of(a, "--output", 4))
        }
        _ => false,
    }
}

/// True when `arg` is a cluster of short options (`-uo`) holding `letter`.
fn short_cluster_has(arg: &str, letter: char) -> bool {
    arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(letter)
}

/// True when `arg` (before any `=`) abbreviates the long option `long`
/// with at least `min` characters, as getopt accepts (`--out=x` for
/// `--output`).
fn long_prefix_of(arg: &str, long: &str, min: usize) -> bool {
    let name = arg.split('=').next().unwrap_or(arg);
    name.len() >= min && name.starts_with("--") && long.starts_with(name)
}

/// The simple commands of a command line, each as its words with quotes
/// removed. `sh -c '...'`, `bash -c "..."` and `eval '...'` contribute the
/// commands of their argument too.
pub(crate) fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect(line, 0, &mut out);
    out
}

fn collect(line: &str, depth: usize, out: &mut Vec<Vec<String>>) {
    for words in lex(line) {
        if depth < 4 {
            let cmd = command_words(&words);
            if let Some((name, args)) = cmd.split_first() {
                let base = basename(name);
                if matches!(base, "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash")
                    && let Some(i) = args.iter().position(|a| {
                        a == "-c"
                            || (a.starts_with('-') && a.ends_with('c') && !a.starts_with("--"))
                    })
                    && let Some(inner) = args.get(i + 1)
                {
                    collect(inner, depth + 1, out);
                } else if base == "eval" {
                    collect(&args.join(" "), depth + 1, out);
                }
            }
        }
        out.push(words);
    }
}

/// Split a command line into simple commands of unquoted words.
fn lex(line: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next().filter(|n| *n != '\n') {
                    in_word = true;
                    word.push(n);
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' | '`' | '{' | '}' => {
                end_word(&mut word, &mut in_word, &mut words);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            '$' if chars.peek() == Some(&'{') => {
                in_word = true;
                word.push(c);
                for q in chars.by_ref() {
                    word.push(q);
                    if q == '}' {
                        break;
                    }
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                end_word(&mut word, &mut in_word, &mut words);
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destructive_commands_are_denied() {
        let denied = [
            ("rm -rf /", "rm-root-or-home"),
            ("rm -rf /*", "rm-root-or-home"),
            ("rm -rf ~", "rm-root-or-home"),
            ("rm -fr ~/", "rm-root-or-home"),
            ("sudo rm -r -f /usr", "rm-root-or-home"),
            ("cd /tmp && rm --recursive --force $HOME", "rm-root-or-home"),
            ("rm -rf ${HOME}/*", "rm-root-or-home"),
            ("rm -rf --no-preserve-root /", "rm-root-or-home"),
            ("bash -c 'rm -rf /'", "rm-root-or-home"),
            ("mkfs.ext4 /dev/sda1", "mkfs"),
            ("dd if=/dev/zero of=/dev/sda bs=1M", "dd-to-device"),
            (":(){ :|:& };:", "fork-bomb"),
            ("bomb() { bomb | bomb & }; bomb", "fork-bomb"),
            ("shutdown -h now", "power-off"),
            ("sudo reboot", "power-off"),
            ("chmod -R 777 /", "recursive-permissions-of-root"),
            ("git push --force origin main", "git-force-push"),
            ("git push -f", "git-force-push"),
            ("echo x > /dev/sda", "write-block-device"),
        ];
        for (cmd, rule) in denied {
            assert_eq!(hard_deny(cmd).map(|r| r.rule), Some(rule), "{cmd}");
        }
    }

    #[test]
    fn ordinary_commands_are_allowed() {
        for cmd in [
            "rm -rf target",
            "rm -rf ./build/*",
            "rm -f /tmp/x.log",
            "cargo test",
            "dd if=/dev/zero of=/dev/null count=1",
            "git push origin main",
            "git push --force-with-lease origin topic",
            "grep -r shutdown src",
            "chmod +x script.sh",
            "echo 'rm -rf /' is dangerous > notes.txt",
        ] {
            assert_eq!(hard_deny(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn read_only_allowlist_is_conservative() {
        for cmd in [
            "ls -la",
            "cat src/main.rs | head -n 20",
            "git status && git diff",
            "grep -rn foo src 2>/dev/null",
            "rg TODO",
            "find . -name '*.rs'",
            "git log --oneline",
            "sort -u -k 2 notes.txt",
            "tree -L 2 -a",
            "file src/main.rs",
        ] {
            assert!(is_read_only(cmd), "{cmd}");
        }
        for cmd in [
            "echo hi > f",
            "cat a >> b",
            "find . -delete",
            "git commit -m x",
            "sed -i s/a/b/ f",
            "ls $(touch x)",
            "X=1 ls",
            "cargo test",
            "git diff --output=patch",
            "sort -o out in",
            "sort -uo out in",
            "sort -oout in",
            "sort --output=out in",
            "sort --outp=out in",
            "sort --output out in",
            "sort --compress-program=sh in",
            "tree -o out",
            "tree -oout .",
            "file -C -m magic",
            "git log --out=patch",
            "find . -fprint out",
            "find . -fprintf out %p",
            "find . -fls out",
            "find . -exec rm {} ;",
            "find . -execdir rm {} ;",
            "find . -ok rm {} ;",
            "sed -i s/a/b/ f",
            "sed --in-place s/a/b/ f",
            "ls > listing.txt",
            "cat a 1> b",
            "tree . >| out",
            "git branch -D main",
            "",
        ] {
            assert!(!is_read_only(cmd), "{cmd}");
        }
    }
}
